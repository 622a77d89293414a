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
- a long-lived executor (``ours_burst``): its warm round trip within a burst at most 2x floor (a)
  from 10 MiB, as ``ours_warm``'s; after the burst its pool holds at most its idle cap in
  ``/dev/shm``, and nothing once its idle time has passed, given back within that idle time plus
  ``segment_pool.LENT_LOOK_SECONDS`` of the last call (the thread's clock, not the machine's speed);
- a round trip of an array already in shared memory (executor and both reductions): under 2 ms at
  every size, and flat: its median at the largest size over the smallest under 3; and within 1.5x
  ``floor_shm_name`` (a bare segment name sent over a pipe and attached on both sides,
  ``helpers.measure.trip_floors``). The torch-free reduction's rows can meet that: they send the
  name and the layout as plain fields over the same kind of pipe. Two rows cannot, and the suite
  says why beside them: the executor is a ``ProcessPoolExecutor``, whose own echo of an int
  (``stdlib_tiny``, checked against the same limit) already costs more than 1.5x a bare name's trip
  (its feeder and result threads, a wake-up each way); torch's already-shared way sends torch's
  storage by torch's own reduction (a file descriptor through ``multiprocessing``'s resource
  sharer, a connection per item).

These are what ``make bench`` prints with a verdict (holds / MISSED) for a reader to compare. CI
does not fail on them: a slow or busy machine misses a target that a quiet one meets, and a check
in seconds fails on every slow day. CI's gates (``GATES``, ``check_gates``, run by tests/bench) are
ratios to a floor measured in the same run, each beyond the worst ratio a healthy build has shown
(on quiet and on deliberately slowed machines) times a margin: a real regression (an extra copy, a
pool that no longer keeps warm segments) still crosses them.

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
from sharedarrays.segment_pool import LENT_LOOK_SECONDS

# (row, floor, from this size on, limit on the row's median over that floor's median)
RATIO_TARGETS = (
    ("ours_warm", "warm", 10 * MiB, 2.0),
    ("ours_warm", "fresh_shm", 0, 1.2),
    ("ours_burst", "warm", 10 * MiB, 2.0),
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
SHARED_FLOOR_LIMIT = 1.5  # the already-shared rows over floor_shm_name
# Checked against floor_shm_name beside the already-shared rows: the stdlib's own fixed round trip,
# which no ProcessPoolExecutor subclass goes below (the executor's row cannot meet a limit this misses).
SHARED_FLOOR_CONTEXT_ROWS = ("stdlib_tiny",)

# CI's regression gates (tests/bench, at 100 MiB; the already-shared row at 1 and 100 MiB): (row,
# floor, from this size on, limit on the row's median over the floor's median). Each limit is the
# worst ratio healthy builds showed, quiet and on a machine slowed on purpose (a CFS quota of half a
# CPU beside a CPU-bound process per core: tools/slowed_machine.py), times a margin of 1.5 or more,
# and below what the regression it guards against gives (results/README.md, "CI's gates"):
# - ours_warm: healthy 0.84-1.42 (1000 MiB, which CI does not run: up to 3.8 on a slow day); a pool
#   that lost its warm segments pays a first call, 5.4-7.0;
# - ours_burst: its memory only (bytes, no timing): after the burst at most the idle cap, once idle
#   nothing. Its round trip is ours_warm's, gated there; a second timed gate on the same path would
#   add a second chance of a noisy miss and no regression it alone catches;
# - ours_first: healthy 0.40-1.32 (floor (b) is itself noisy under a CPU quota); an extra copy into
#   new memory adds about one more floor (b);
# - ours_shared over floor_shm_name: healthy 5.1-27.9, the highest on a quiet machine (the pool's
#   queue threads and pipes against one pipe: more wake-ups, each slower from an idle CPU); one copy
#   of 100 MiB on that path: 332-845;
# - the torch-free reduction: healthy 0.74-1.79; an extra copy into new memory adds 3-5.
GATES = (
    ("ours_warm", "warm", 100 * MiB, 2.5),
    ("ours_first", "fresh_shm", 100 * MiB, 2.0),
    ("ours_shared", "shm_name", 0, 60.0),
    ("reducer_shared_memory_local", "warm", 100 * MiB, 2.7),
    ("reducer_shared_memory_remote", "warm", 100 * MiB, 2.7),
)
# ours_shared's median at the largest size over the smallest: healthy 0.57-1.12 (21 runs), one copy
# on the path 15.8-75
GATE_SHARED_GROWTH = 5.0


def _check(target: str, n_bytes: int, value: float, limit: float, inclusive: bool) -> dict:
    holds = value <= limit if inclusive else value < limit
    return {"target": target, "size_bytes": n_bytes, "value": value, "limit": limit, "holds": bool(holds)}


def _ratio_checks(found: dict, ratio_limits, what: str = "") -> list[dict]:
    """One check per (row, floor, from size, limit) and size the rows hold both of."""
    checks = []
    for name, floor, min_bytes, limit in ratio_limits:
        for (row_name, n_bytes), row in sorted(found.items(), key=lambda item: item[0][1]):
            floor_row = found.get((f"floor_{floor}", n_bytes))
            if row_name == name and n_bytes >= min_bytes and floor_row is not None:
                checks.append(_check(f"{what}{name} <= {limit:g}x floor_{floor}", n_bytes,
                                     row["median_s"] / floor_row["median_s"], limit, inclusive=True))
    return checks


def _idle_checks(found: dict, what: str = "", timed: bool = True) -> list[dict]:
    """The ``ours_burst`` rows' memory after the burst (at most the idle cap) and after the idle
    time (none left), in bytes; with ``timed``, how soon it was given back, in seconds."""
    checks = []
    for (row_name, n_bytes), row in sorted(found.items(), key=lambda item: item[0][1]):
        if row_name != "ours_burst":
            continue
        checks.append(_check(f"{what}ours_burst holds <= its idle cap after a burst (bytes)", n_bytes,
                             row["held_after_burst_bytes"], row["idle_cap_bytes"], inclusive=True))
        checks.append(_check(f"{what}ours_burst holds nothing once idle (bytes)", n_bytes,
                             row["held_after_idle_bytes"], 0, inclusive=True))
        if timed and row["given_back_after_s"] is not None:
            limit = row["idle_seconds"] + LENT_LOOK_SECONDS
            checks.append(_check(f"ours_burst gave it back <= {limit:g} s after its last call", n_bytes,
                                 row["given_back_after_s"], limit, inclusive=True))
    return checks


def _growth(found: dict, name: str) -> tuple[int, float] | None:
    """(largest size, the row's median there over its median at the smallest size), or None."""
    medians = sorted((n_bytes, row["median_s"]) for (row_name, n_bytes), row in found.items()
                     if row_name == name)
    return (medians[-1][0], medians[-1][1] / medians[0][1]) if len(medians) > 1 else None


def check_targets(rows: list[dict]) -> list[dict]:
    """Each target the rows can tell: {"target", "size_bytes", "value", "limit", "holds"}, where
    ``value`` is a ratio of medians (to the floor measured at the same size) or seconds."""
    found = {(row["name"], row["size_bytes"]): row for row in rows}
    against_a_bare_name = ALREADY_SHARED_ROWS + SHARED_FLOOR_CONTEXT_ROWS
    checks = _ratio_checks(found, RATIO_TARGETS + tuple(
        (name, "shm_name", 0, SHARED_FLOOR_LIMIT) for name in against_a_bare_name))
    checks += _idle_checks(found)
    for name, fixed, floor, min_bytes, limit in BEYOND_FIXED_TARGETS:
        for (row_name, n_bytes), row in sorted(found.items(), key=lambda item: item[0][1]):
            fixed_row, floor_row = found.get((fixed, n_bytes)), found.get((f"floor_{floor}", n_bytes))
            if row_name == name and n_bytes >= min_bytes and fixed_row is not None and floor_row is not None:
                beyond = (row["median_s"] - fixed_row["median_s"]) / floor_row["median_s"]
                checks.append(_check(f"{name} - {fixed} <= {limit:g}x floor_{floor}", n_bytes, beyond, limit,
                                     inclusive=True))
    for name in ALREADY_SHARED_ROWS:
        for (row_name, n_bytes), row in sorted(found.items(), key=lambda item: item[0][1]):
            if row_name == name:
                checks.append(_check(f"{name} < 2 ms", n_bytes, row["median_s"], SHARED_LIMIT_S,
                                     inclusive=False))
        if (growth := _growth(found, name)) is not None:
            checks.append(_check(f"{name} flat: largest/smallest < {SHARED_GROWTH_LIMIT:g}", *growth,
                                 SHARED_GROWTH_LIMIT, inclusive=False))
    return checks


def check_gates(rows: list[dict]) -> list[dict]:
    """CI's regression gates the rows can tell, as ``check_targets`` gives targets (ratios only)."""
    found = {(row["name"], row["size_bytes"]): row for row in rows}
    checks = _ratio_checks(found, GATES, what="gate: ") + _idle_checks(found, what="gate: ", timed=False)
    if (growth := _growth(found, "ours_shared")) is not None:
        checks.append(_check(f"gate: ours_shared flat: largest/smallest <= {GATE_SHARED_GROWTH:g}", *growth,
                             GATE_SHARED_GROWTH, inclusive=True))
    return checks
