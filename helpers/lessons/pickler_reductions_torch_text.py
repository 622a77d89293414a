"""The sentences lesson 09 renders from its round trips (the notebook shows them, not the code that
words them).

``round_trips_what_to_see`` words section 3's figure and conclusion from the rows of
``pickler_reductions_torch.round_trip_table``; ``already_shared_spread`` and ``remote_pickle_slowest``
are two comparisons it states that the lesson's check cell asserts; ``already_shared_fastest`` decides
whether (and from which size) it says an already-shared array beat every other trip.
"""

from __future__ import annotations

from helpers.lessons.pickler_reductions_torch import HOWS, WHERES, format_ratio, noise_ratio, within_noise
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
    at least 1/1.05 of the local one (a gap that rounds to 1.0×)."""
    by_key = {(row["how"], row["where"], row["size_bytes"]): row for row in rows}
    sizes = sorted({row["size_bytes"] for row in rows})
    below = [(by_key[how, "local", size]["median_s"] / by_key[how, "remote", size]["median_s"], how, size)
             for how in ("torch", "shared_memory") for size in sizes
             if by_key[how, "remote", size]["median_s"] * 1.05 < by_key[how, "local", size]["median_s"]]
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
    every one lies within the noise band (0.95-1.05×, what the table prints '~1.0×'), else 'under (b)',
    'over (b)' or 'around (b)' (some each side)."""
    ratios = list(cold_ratios)
    if all(within_noise(r) for r in ratios):
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
    pickle_cost = ("The pickle cost "
                   + (f"{pickle_over('a', reused)}, where `malloc` reuses freed memory; from "
                      f"{format_bytes(mmap_threshold)} up, [glibc's `malloc`](https://man7.org/linux/man-pages/"
                      f"man3/mallopt.3.html) gives each new buffer fresh pages, so against (b): "
                      f"{pickle_over('b', new_pages)}." if new_pages and reused
                      else f"{pickle_over('a', sizes)}."))
    remote_floor = "b" if largest >= mmap_threshold else "a"
    remote_key = {"a": "ratio_to_warm_floor", "b": "ratio_to_fresh_floor"}[remote_floor]
    remote_ratio = ratios["pickle", "remote", largest][remote_key]
    pickle_cost += (f" Through a worker the pickle took {format_ratio(remote_ratio)}× ({remote_floor}) at "
                    f"{format_bytes(largest)}.")
    spread = format_ratio(max(already_shared_spread(rows).values()))
    pickle_growth = min(median["pickle", where, largest] / median["pickle", where, smallest]
                        for where in WHERES)
    shared_first = already_shared_fastest(rows)
    shared_from = next((size for size in sizes if all(s in shared_first for s in sizes if s >= size)), None)
    fresh_floor = ratios["pickle", "local", largest]["fresh_floor_s"]  # floor (b) at the largest size
    fresh_runs = ratios["pickle", "local", largest].get("fresh_floor_runs_s", [fresh_floor])
    first = {where: ratios["shared_memory", where, largest]["first_s"] for where in WHERES}
    slowest_shared = max(median[how, "remote", largest] for how in SHARED_WAYS)  # through a worker
    fastest_private = min(median[how, "remote", largest] for how in HOWS if how not in SHARED_WAYS)
    return (
        "*What to see:* the stdlib pickle's time (blue) grows with the array, far above floor (a) (dashed); "
        f"torch's private-array trip (orange) {torch_follows_b(rows)}; the torch-free one "
        "(red), warm, nears (a) as the array grows. The already-shared lines (green, purple) grow at most "
        f"{spread}× over the {largest / smallest:.0f}× sweep, the pickle's {int(pickle_growth)}× or more."
        "\n\n**Conclusion.**\n\n- "
        + pickle_cost
        + "\n- Through a worker, every reduction beat the pickle "
        + ("at every size" if beaten_from == smallest
           else f"from {format_bytes(beaten_from)} up" if beaten_from else "at no size throughout")
        + ("." if shared_from is None else
           ", and an array already shared beat every other trip "
           + ("at every size" if shared_from == smallest else f"from {format_bytes(shared_from)} up")
           + f" (at {format_bytes(largest)}, {format_seconds(slowest_shared)} against "
             f"{format_seconds(fastest_private)} for the fastest private trip).")
        + "\n- Torch's private-array trip took "
          f"{noise_ratio(ratios['torch', 'local', largest]['ratio_to_fresh_floor'])}× (b) locally at "
          f"{format_bytes(largest)}"
        + (f"; locally a pickle beat it at {' and '.join(map(format_bytes, pickle_first))}. " if pickle_first
           else ". ")
        + f"The torch-free trip's first call at {format_bytes(largest)} took "
          f"{format_seconds(first['local'])} locally and {format_seconds(first['remote'])} remote, "
          "against floor (b)'s median "
          f"{format_seconds(fresh_floor)} (its runs {_span(fresh_runs)}): "
          f"{cold_verdict(list(first.values()), fresh_floor, fresh_runs)} "
        + warm_against_a(ratios["shared_memory", "local", largest]["ratio_to_warm_floor"])
        + "\n- " + remote_like_local(rows)
        + remote_below_local(rows))


def warm_against_a(ratio: float) -> str:
    """The warm torch-free trip's median over floor (a), ``ratio``, against the hypothesis's 'about (a)':
    'as predicted' within the noise band (0.95-1.05×, what the table prints '~1.0×'), else which side
    of it the ratio fell."""
    if within_noise(ratio):
        return "Warm, ~1.0× (a), as predicted."
    return f"Warm, {format_ratio(ratio)}× (a): {'over' if ratio > 1 else 'under'} the predicted \"about\"."


def remote_like_local(rows: list[dict]) -> str:
    """A sentence on the private-array trips through a worker against the local ones at the largest size,
    against the hypothesis's 'remote about local': 'about what it cost locally' when every ratio lies
    within the noise band (what the table prints '~1.0×'); else each ratio (torch's, then the torch-free
    one's), which missed 'about' and on which side, and whether the most a remote trip added is under one
    warm copy (a) at that size (then the reply cannot have been copied: it crossed as a description).
    Scoped to the reductions: where the stdlib pickle's remote trip cost more than its local one (beyond
    the noise band), its two medians follow in brackets."""
    by_key, largest = _medians(rows), max(row["size_bytes"] for row in rows)
    warm_floor = next(row["warm_floor_s"] for row in rows if row["size_bytes"] == largest)
    names = {"torch": "torch's", "shared_memory": "the torch-free one's"}
    pairs = {how: (by_key[how, "remote", largest], by_key[how, "local", largest]) for how in names}
    missed = {how: remote / local for how, (remote, local) in pairs.items()
              if not within_noise(remote / local)}
    pickle = ""  # the stdlib pickle's trips, where its remote one cost more: it is not a reduction's
    if ("pickle", "remote", largest) in by_key and ("pickle", "local", largest) in by_key:
        pickle_remote, pickle_local = by_key["pickle", "remote", largest], by_key["pickle", "local", largest]
        if pickle_remote > pickle_local and not within_noise(pickle_remote / pickle_local):
            pickle = (f" (the stdlib pickle's trip: {format_seconds(pickle_remote)} against "
                      f"{format_seconds(pickle_local)}, every byte through the pipe both ways)")
    if not missed:
        return (f"With either reduction, through a worker a private array cost about what it cost locally at "
                f"{format_bytes(largest)}{pickle}: the reply crossed as a description. ")
    cost = " and ".join(f"{noise_ratio(remote / local)}×" for remote, local in pairs.values())
    sides = "; ".join(f"{names[how]} {'over' if value > 1 else 'under'} it" for how, value in missed.items())
    added = max(remote - local for remote, local in pairs.values())
    if added >= warm_floor:
        verdict = (f"; a remote trip added up to {format_seconds(added)}, one copy (a) "
                   f"({format_seconds(warm_floor)}) or more")
    else:
        verdict = (f"; a remote trip added at most {format_seconds(added)}, under one copy (a), "
                   f"{format_seconds(warm_floor)}" if added > 0 else "")
        verdict += ": the reply crossed as a description"
    return (f"With either reduction, through a worker a private array cost {cost} its local trip at "
            f"{format_bytes(largest)}{pickle}, missing the predicted \"about\" ({sides}){verdict}. ")


def cold_verdict(first_calls: list[float], fresh_floor: float, fresh_runs: list[float]) -> str:
    """How the cold torch-free calls compare with floor (b), given its median and runs (seconds). It names
    no cause below every run of (b): the hypothesis gives the expected one (pages reserved in bulk), and
    the lesson times no floor on a segment reserved that way."""
    words = cold_words(value / fresh_floor for value in first_calls)
    if max(first_calls) < min(fresh_runs):
        return f"{words}, below all its runs (one cold call each)."
    if all(0.9 * min(fresh_runs) <= value <= 1.1 * max(fresh_runs) for value in first_calls):
        return f"{words}, within 10% of its runs: one copy into new pages."
    return f"{words}."


def torch_follows_b(rows: list[dict]) -> str:
    """How torch's private-array trip (both places) sits against floor (b) across the sizes: 'follows floor
    (b)' from the smallest size from which every ratio lies within 0.8-1.25×, and above it below that."""
    sizes = sorted({row["size_bytes"] for row in rows})
    near = {size: all(0.8 <= row["ratio_to_fresh_floor"] <= 1.25 for row in rows
                      if row["how"] == "torch" and row["size_bytes"] == size) for size in sizes}
    start = next((size for size in sizes if all(near[s] for s in sizes if s >= size)), None)
    fixed = "its fixed cost"
    if start == sizes[0]:
        return "follows floor (b) (dotted)"
    if start is None:
        return f"stays off floor (b) (dotted) at every size: {fixed} and the copy"
    return f"follows floor (b) (dotted) from {format_bytes(start)} up; below that {fixed} keeps it above (b)"


def pool_map_copies(n_tasks: int, n_workers: int, created: int, reused: int, held_bytes: int) -> str:
    """Section 2's ``Pool.map`` of private slices: the new segments it made, the given-back ones it lent,
    and why the copies sat in ``/dev/shm`` together (its task handler pickles tasks ahead of the
    workers, so segments are lent before earlier ones come back). ``held_bytes``: the segment pool's
    bytes in ``/dev/shm`` after the map, which the lesson's check holds at ``created`` slices or more.
    Ends at 'until sharing stopped', for the lesson to go on."""
    def count(n: int, noun: str) -> str:
        return f"{n} {noun}" + ("" if n == 1 else "s")

    lent = "none given back" if reused == 0 else f"{reused} given-back {'one' if reused == 1 else 'ones'}"
    made = (f"{n_tasks} tasks on {count(n_workers, 'worker')} made {count(created, 'new segment')} "
            f"and lent {lent}")
    if created == 1:
        return f"{made}. Its one segment ({format_bytes(held_bytes)}) sat in `/dev/shm` until sharing stopped"
    return (f"{made}. `Pool.map` pickles tasks ahead of its workers, so {created} copies "
            f"({format_bytes(held_bytes)}) sat in `/dev/shm` at once until sharing stopped")
