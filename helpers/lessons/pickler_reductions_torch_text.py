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
    small = {how: format_seconds(median[how, "remote", smallest]) for how in HOWS}
    pickle_cost = ("The pickle's two copies and its own work cost "
                   + (f"{pickle_over('a', reused)} while `malloc` reuses freed memory; from "
                      f"{format_bytes(mmap_threshold)} up, [glibc's `malloc`](https://man7.org/linux/man-pages/"
                      f"man3/mallopt.3.html) gives each new buffer fresh pages from the kernel, "
                      "so we compare with (b), the nearest floor here: "
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
    return (
        "*What to see:* the stdlib pickle's time (blue) grows with the array, far above floor (a) (dashed) "
        "once it is large; torch's private-array trip (orange) follows floor (b) (dotted: a new segment); "
        "the torch-free one (red), warm, nears (a) as the array grows; the already-shared lines "
        f"(green, purple) grow at most {spread}× over the {largest / smallest:.0f}× sweep, the pickle's "
        f"{int(pickle_growth)}× or more.\n\n**Conclusion.** "
        + (f"Locally a pickle beat torch's private-array trip at "
           f"{' and '.join(map(format_bytes, pickle_first))}: a new storage costs floor (b). " if pickle_first
           else "")
        + "Through a worker, every reduction beat the pickle "
        + ("at every size" if beaten_from == smallest
           else f"from {format_bytes(beaten_from)} up" if beaten_from else "at no size throughout")
        + f" (at {format_bytes(smallest)}: pickle {small['pickle']}; private array: torch {small['torch']}, "
          f"torch-free {small['shared_memory']})"
        + ("." if shared_from is None else
           ", and an array already shared beat every other trip "
           + ("at every size" if shared_from == smallest else f"from {format_bytes(shared_from)} up") + ".")
        + " " + pickle_cost)
