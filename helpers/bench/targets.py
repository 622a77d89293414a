"""The issue's performance targets, checked against benchmark rows (``helpers.bench.transport_suite``).

- the executor's warm round trip of an array not yet shared: at most 2x floor (a) (one copy into
  warm memory) at 10 MiB and up. Since at 10 MiB floor (a) is under a millisecond, two more targets
  split the round trip where that one misses (a profile drawn from rows of the same run):
  ``ours_warm - stdlib_tiny`` (the stdlib's own fixed cost of a round trip, an echo of an int,
  taken off) and ``ours_warm - ours_shared`` (the fixed cost of a round trip that carries an array
  as a handle, no copy, taken off: what is left is what depends on the size, the copy) are each at
  most 2x floor (a). Where the first target misses and these hold, what remains is a fixed cost
  of the round trip, not the copy;
- every executor round trip, the first call included: at most 1.2x floor (b) (one copy into a
  new shared-memory segment), at every size measured;
- the torch-free reduction's first share with warm segments (its median; the very first call is
  ``first_s``): at most 2x floor (a) at 100 MiB and up, local and remote;
- a round trip of an array already in shared memory (executor and both reductions): under 2 ms at
  every size, and flat: its median at the largest size over the smallest under 3.

Why 2x floor (a) at 10 MiB is out of a drop-in's reach: there floor (a) is half a millisecond to
a millisecond and a half (0.47 ms on the VM of 2026-11-23, 1.6 ms in
results/vm-2026-11-26-transport.json), and a round trip that copies nothing costs a good part of
it: the stdlib's echo of an int (``stdlib_tiny``) took 0.44-0.67 ms on the first, 0.54 ms on the
second; ours with a 10 MiB array as a handle both ways (``ours_shared``) 0.72 ms and 1.21 ms. A
``ProcessPoolExecutor`` subclass pays
the stdlib's queue machinery (its queue-management and feeder threads, a pipe each way, thread
wake-ups on both sides) plus one copy, about 2x floor (a) at 10 MiB, before any work of its own.
results/README.md ("Where a 10 MiB round trip goes") has the profile, stage by stage. The limits
stay the issue's: a miss at 10 MiB is reported as MISSED, with the splits beside it.
"""

from __future__ import annotations

from helpers.measure.units import MiB

# (row, floor, from this size on, limit on the row's median over that floor's median)
RATIO_TARGETS = (
    ("ours_warm", "warm", 10 * MiB, 2.0),
    ("ours_warm", "fresh_shm", 0, 1.2),
    ("ours_first", "fresh_shm", 0, 1.2),
    ("reducer_shared_memory_local", "warm", 100 * MiB, 2.0),
    ("reducer_shared_memory_remote", "warm", 100 * MiB, 2.0),
)
ALREADY_SHARED_ROWS = ("ours_shared", "reducer_torch_shared_local", "reducer_torch_shared_remote",
                       "reducer_shared_memory_shared_local", "reducer_shared_memory_shared_remote")
# (row, row whose median is taken off first, floor, from this size on, limit)
BEYOND_FIXED_TARGETS = (("ours_warm", "stdlib_tiny", "warm", 10 * MiB, 2.0),
                        ("ours_warm", "ours_shared", "warm", 10 * MiB, 2.0))
SHARED_LIMIT_S = 2e-3
SHARED_GROWTH_LIMIT = 3.0


def _check(target: str, n_bytes: int, value: float, limit: float, inclusive: bool) -> dict:
    holds = value <= limit if inclusive else value < limit
    return {"target": target, "size_bytes": n_bytes, "value": value, "limit": limit, "holds": bool(holds)}


def check_targets(rows: list[dict]) -> list[dict]:
    """Each target the rows can tell: {"target", "size_bytes", "value", "limit", "holds"}, where
    ``value`` is a ratio of medians (to the floor measured at the same size) or seconds."""
    found = {(row["name"], row["size_bytes"]): row for row in rows}
    checks = []
    for name, floor, min_bytes, limit in RATIO_TARGETS:
        for (row_name, n_bytes), row in sorted(found.items(), key=lambda item: item[0][1]):
            floor_row = found.get((f"floor_{floor}", n_bytes))
            if row_name == name and n_bytes >= min_bytes and floor_row is not None:
                checks.append(_check(f"{name} <= {limit:g}x floor_{floor}", n_bytes,
                                     row["median_s"] / floor_row["median_s"], limit, inclusive=True))
    for name, fixed, floor, min_bytes, limit in BEYOND_FIXED_TARGETS:
        for (row_name, n_bytes), row in sorted(found.items(), key=lambda item: item[0][1]):
            fixed_row, floor_row = found.get((fixed, n_bytes)), found.get((f"floor_{floor}", n_bytes))
            if row_name == name and n_bytes >= min_bytes and fixed_row is not None and floor_row is not None:
                beyond = (row["median_s"] - fixed_row["median_s"]) / floor_row["median_s"]
                checks.append(_check(f"{name} - {fixed} <= {limit:g}x floor_{floor}", n_bytes, beyond, limit,
                                     inclusive=True))
    for name in ALREADY_SHARED_ROWS:
        medians = sorted((n_bytes, row["median_s"]) for (row_name, n_bytes), row in found.items()
                         if row_name == name)
        for n_bytes, median in medians:
            checks.append(_check(f"{name} < 2 ms", n_bytes, median, SHARED_LIMIT_S, inclusive=False))
        if len(medians) > 1:
            checks.append(_check(f"{name} flat: largest/smallest < {SHARED_GROWTH_LIMIT:g}", medians[-1][0],
                                 medians[-1][1] / medians[0][1], SHARED_GROWTH_LIMIT, inclusive=False))
    return checks
