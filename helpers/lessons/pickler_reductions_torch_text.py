"""The sentences lesson 09 renders from its round trips (the notebook shows them, not the code that
words them).

``round_trips_what_to_see`` words section 3's figure and conclusion from the rows of
``pickler_reductions_torch.round_trip_table``; ``already_shared_spread`` and ``remote_pickle_slowest``
are two comparisons it states that the lesson's check cell asserts; ``already_shared_fastest`` decides
whether (and from which size) it says an already-shared array beat every other trip.
"""

from __future__ import annotations

from helpers.lessons.pickler_reductions_torch import HOWS, WHERES, format_ratio
from helpers.measure.units import format_bytes, format_seconds

SHARED_WAYS = ("torch_shared", "shared_memory_shared")  # the rows of an array already shared
REDUCTIONS = tuple(how for how in HOWS if how != "pickle")


def _medians(rows: list[dict]) -> dict[tuple[str, str, int], float]:
    """Median seconds of each (how, where, size in bytes)."""
    return {(row["how"], row["where"], row["size_bytes"]): row["median_s"] for row in rows}


def already_shared_spread(rows: list[dict]) -> dict[tuple[str, str], float]:
    """For each already-shared way and place, its slowest size's median over its fastest's."""
    median, sizes = _medians(rows), sorted({row["size_bytes"] for row in rows})
    return {(how, where): max(median[how, where, size] for size in sizes)
            / min(median[how, where, size] for size in sizes) for how in SHARED_WAYS for where in WHERES}


def remote_pickle_slowest(rows: list[dict]) -> list[int]:
    """The sizes (bytes) at which every reduction's median beat the pickle's through a worker."""
    median, sizes = _medians(rows), sorted({row["size_bytes"] for row in rows})
    return [size for size in sizes
            if all(median[how, "remote", size] < median["pickle", "remote", size] for how in REDUCTIONS)]


def already_shared_fastest(rows: list[dict]) -> list[int]:
    """The sizes (bytes) at which both already-shared ways' medians beat every other way's, through a
    worker."""
    median, sizes = _medians(rows), sorted({row["size_bytes"] for row in rows})
    others = [how for how in HOWS if how not in SHARED_WAYS]
    return [size for size in sizes
            if max(median[how, "remote", size] for how in SHARED_WAYS)
            < min(median[how, "remote", size] for how in others)]


def _span(seconds: list[float]) -> str:
    """'20.2–23.2 µs': the least and the most of ``seconds``, in the larger one's unit."""
    low, high = format_seconds(min(seconds)), format_seconds(max(seconds))
    if low == high:
        return high
    unit = high.split()[-1]
    return f"{low.removesuffix(' ' + unit)}–{high}" if low.endswith(" " + unit) else f"{low}–{high}"


def remote_below_local(rows: list[dict]) -> str:
    """A sentence on the private-array row whose trip through a worker (which contains the local trip)
    took the least against the local one, and whether their runs overlap; '' when every remote trip took
    at least the local one."""
    by_key = {(row["how"], row["where"], row["size_bytes"]): row for row in rows}
    sizes = sorted({row["size_bytes"] for row in rows})
    below = [(by_key[how, "local", size]["median_s"] / by_key[how, "remote", size]["median_s"], how, size)
             for how in ("torch", "shared_memory") for size in sizes
             if by_key[how, "remote", size]["median_s"] < by_key[how, "local", size]["median_s"]]
    if not below:
        return ""
    gap, how, size = max(below)
    local, remote = by_key[how, "local", size]["runs_s"], by_key[how, "remote", size]["runs_s"]
    name = {"torch": "torch's", "shared_memory": "the torch-free"}[how]
    return (f"{name.capitalize()} private-array trip at {format_bytes(size)} ran {format_ratio(gap)}× faster "
            "remote than local, though remote contains local: "
            + ("noise, its runs overlap" if min(local) <= max(remote)
               else "its runs do not overlap, so something slowed the local ones")
            + f" (local {_span(local)}, remote {_span(remote)}). ")


def cold_words(cold_ratios) -> str:
    """How the cold torch-free trips compare with floor (b), from their ratios to it: 'about (b)' when
    every one lies within 0.8-1.25×, else 'under (b)', 'over (b)' or 'around (b)' (some each side)."""
    ratios = list(cold_ratios)
    if all(0.8 <= r <= 1.25 for r in ratios):
        return "about (b)"
    if max(ratios) < 1:
        return "under (b)"
    return "over (b)" if min(ratios) > 1 else "around (b)"


def round_trips_what_to_see(rows: list[dict], mmap_threshold: int) -> str:
    """Section 3's *What to see* and conclusion. ``mmap_threshold`` (bytes): from this size up, glibc's
    ``malloc`` gives each of the pickle's buffers new pages, so its ratio is given to floor (b) there,
    to floor (a) below."""
    median, sizes = _medians(rows), sorted({row["size_bytes"] for row in rows})
    smallest, largest = sizes[0], sizes[-1]
    ratios = {(row["how"], row["where"], row["size_bytes"]): row for row in rows}

    def pickle_over(floor: str, at: list[int]) -> str:  # the local pickle's median over floor (a) or (b)
        key = {"a": "ratio_to_warm_floor", "b": "ratio_to_fresh_floor"}[floor]
        return ", ".join(f"{format_ratio(ratios['pickle', 'local', size][key])}× ({floor}) at "
                         f"{format_bytes(size)}" for size in at)

    beaten = remote_pickle_slowest(rows)
    beaten_from = next((size for size in sizes if all(s in beaten for s in sizes if s >= size)), None)
    pickle_first = [size for size in sizes  # where a local pickle beat torch's private-array trip
                    if median["pickle", "local", size] < median["torch", "local", size]]
    new_pages = [size for size in sizes if size >= mmap_threshold]
    reused = [size for size in sizes if size < mmap_threshold]
    pickle_cost = ("The pickle's two copies and its own work cost "
                   + (f"{pickle_over('a', reused)} while `malloc` reuses freed memory; from "
                      f"{format_bytes(mmap_threshold)} up, [glibc's `malloc`](https://man7.org/linux/man-pages/"
                      f"man3/mallopt.3.html) gives each new buffer fresh pages from the kernel, "
                      "so we compare with (b): "
                      f"{pickle_over('b', new_pages)}." if new_pages and reused
                      else f"{pickle_over('a', sizes)}."))
    remote_floor = "b" if largest >= mmap_threshold else "a"
    remote_key = {"a": "ratio_to_warm_floor", "b": "ratio_to_fresh_floor"}[remote_floor]
    remote_ratio = ratios["pickle", "remote", largest][remote_key]
    pickle_cost += (f" Through a worker the pickle took {format_ratio(remote_ratio)}× ({remote_floor}) at "
                    f"{format_bytes(largest)}: two pickles, two unpickles and 2 × {format_bytes(largest)} "
                    "through the pipe.")
    spread = format_ratio(max(already_shared_spread(rows).values()))
    pickle_growth = min(median["pickle", where, largest] / median["pickle", where, smallest]
                        for where in WHERES)
    shared_first = already_shared_fastest(rows)
    shared_from = next((size for size in sizes if all(s in shared_first for s in sizes if s >= size)), None)
    shared_local = {how: [median[how, "local", size] for size in sizes] for how in SHARED_WAYS}
    fresh_floor = ratios["pickle", "local", largest]["fresh_floor_s"]  # floor (b) at the largest size
    cold = {where: ratios["shared_memory", where, largest]["first_s"] / fresh_floor for where in WHERES}
    return (
        "*What to see:* the stdlib pickle's time (blue) grows with the array, far above floor (a) (dashed); "
        "torch's private-array trip (orange) follows floor (b) (dotted); the torch-free one "
        "(red), warm, nears (a) as the array grows. The already-shared lines (green, purple) grow at most "
        f"{spread}× over the {largest / smallest:.0f}× sweep, the pickle's {int(pickle_growth)}× or more: "
        f"locally torch-free's took {_span(shared_local['shared_memory_shared'])}, torch's "
        f"{_span(shared_local['torch_shared'])} "
        f"({format_ratio(100 * median['torch_shared', 'local', largest] / fresh_floor)}% "
        f"of (b) at {format_bytes(largest)}).\n\n**Conclusion.** "
        + (f"Locally a pickle beat torch's private-array trip at "
           f"{' and '.join(map(format_bytes, pickle_first))}: a new storage costs floor (b). " if pickle_first
           else "")
        + f"Cold, the torch-free trip took {cold_words(cold.values())} at {format_bytes(largest)}: "
          f"{format_ratio(cold['local'])}× locally, {format_ratio(cold['remote'])}× remote "
          "(one cold call each). "
        + remote_below_local(rows)
        + "Through a worker, every reduction beat the pickle "
        + ("at every size" if beaten_from == smallest
           else f"from {format_bytes(beaten_from)} up" if beaten_from else "at no size throughout")
        + ("." if shared_from is None else
           ", and an array already shared beat every other trip "
           + ("at every size" if shared_from == smallest else f"from {format_bytes(shared_from)} up") + ".")
        + " " + pickle_cost)
