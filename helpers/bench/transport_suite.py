"""The transport benchmark: what one round trip of an array costs, against this machine's floors.

Every time is wall-clock seconds; every size is bytes of random float64. Two floors are measured
in the same run, on the same array:

- floor (a), ``floor_warm``, and floor (b), ``floor_fresh_shm``, exactly as
  ``helpers.measure.copy_floors`` defines them (its docstring says what each includes);
  ``floor_fresh_shm_create`` is floor (b) with the segment's creation timed too.

Two more floors are those of a round trip that copies nothing (``helpers.measure.trip_floors``):
``floor_message``, a small message to a started process and back over a pipe (the least a
pool's round trip can cost), and ``floor_shm_name``, a segment's name sent over that pipe and
attached on both sides (the least an array already in shared memory can cost).

The executor rows time ``submit(fn, array).result()`` from submit to result, after the workers
were started and had each run a tiny task (process start-up and module imports excluded), with
``del`` of the result before the next call (so a pooled segment goes back to the pool). Each row
has the median, the IQR as its spread (plus min and max), every run, the first run, and its
ratios to both floors; ``helpers.bench.targets`` checks them against the issue's targets. The
reducer rows come from ``helpers.lessons.pickler_reductions_torch`` (local and remote round trips) on
the same array.

``ours_burst`` is a long-lived executor's day: a burst of warm round trips (timed, as ``ours_warm``),
then no call at all. It records the bytes its pool holds in ``/dev/shm`` after the burst
(``held_after_burst_bytes``, at most the idle cap) and once the pool's idle time has passed
(``held_after_idle_bytes``: 0 when the shared memory was given back), and how long after the last
call that took (``given_back_after_s``). It runs with ``BURST_IDLE_SECONDS`` of idle time, not the
default 5 s, to keep the suite short; the thread that gives memory back is the same.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor

import numpy as np

from helpers.bench import npshmex_echo
from helpers.lessons import pickler_reductions_torch, workers
from helpers.measure import copy_floors, trip_floors
from helpers.measure.quiet_processes import quiet_context
from helpers.measure.timing import Timing, time_it
from helpers.measure.units import MiB
from sharedarrays.executor import SharedMemoryExecutor
from sharedarrays.shm import SharedNDArray

REDUCER_WHAT = {
    "pickle": "multiprocessing's pickler as is: the array's bytes inside the pickle",
    "torch": "sharedarrays.reducers' torch reduction, first share: a copy into a new shared tensor",
    "torch_shared": "torch reduction, array already in a shared tensor: no copy",
    "shared_memory": ("sharedarrays.reducers' torch-free reduction, first share: a copy into a warm "
                      "pooled segment"),
    "shared_memory_shared": "torch-free reduction, array already in a SharedNDArray: no copy",
}
DEFAULT_START_METHOD = "spawn"  # a fresh interpreter per worker, inheriting nothing (macOS's default)
LARGE_BYTES = 256 * MiB  # at and above this size the stdlib baseline runs fewer, unwarmed repeats
BURST_IDLE_SECONDS = 1.0  # ours_burst's idle_seconds (the executor's default is 5 s)
BURST_WAIT_SECONDS = 30.0  # how long ours_burst waits for its pool to give memory back
STDLIB_LARGE_REPEAT = 2
# The command's rows of a round trip that copies nothing (the trip floors, ours_shared, the tiny
# echoes, the reductions' already-shared ways: tens to hundreds of microseconds each) run at least
# this many times: on a shared machine the median of five such short trips moved by 2x between
# sizes of one run, where the trip does not depend on the size.
SHORT_TRIP_REPEAT = 31


def measure_floors(source: np.ndarray, repeat: int = 5) -> dict[str, Timing]:
    """Floors (a) ``warm`` and (b) ``fresh_shm``, plus ``fresh_shm_create``
    (``helpers.measure.copy_floors``)."""
    return copy_floors.measure_floors(source, repeat=repeat).as_dict()


def make_row(name: str, n_bytes: int, timing: Timing, floors: dict[str, Timing], *,
             first_s: float | None = None, what: str = "", **extra) -> dict:
    """One result row (the JSON schema in results/README.md): times in seconds, ratios to floors."""
    median = timing.median
    return {"name": name, "size_bytes": int(n_bytes), "median_s": median, "spread": "iqr",
            "iqr_s": timing.iqr, "min_s": timing.min, "max_s": timing.max, "runs_s": list(timing.runs),
            "first_s": timing.runs[0] if first_s is None else first_s,
            "ratio_to_warm_floor": median / floors["warm"].median,
            "ratio_to_fresh_floor": median / floors["fresh_shm"].median,
            "peak_tree_pss_bytes": None, "peak_shm_bytes": None, "what": what, **extra}


def floor_rows(n_bytes: int, floors: dict[str, Timing]) -> list[dict]:
    """The floors as rows (so they are stored, plotted and compared like every other row)."""
    what = {"warm": "floor (a): np.copyto into memory already mapped and touched",
            "fresh_shm": "floor (b): np.copyto into a just-created shm segment (copy only)",
            "fresh_shm_create": "shm_open + ftruncate + mmap + np.copyto (floor (b) with creation)"}
    return [make_row(f"floor_{key}", n_bytes, floors[key], floors, what=text) for key, text in what.items()]


def trip_floor_rows(source: np.ndarray, floors: dict[str, Timing], repeat: int = 5,
                    start_method: str = DEFAULT_START_METHOD) -> list[dict]:
    """``floor_message`` and ``floor_shm_name`` for an array like ``source`` (``trip_floors``)."""
    trip = trip_floors.measure_trip_floors(source, repeat=repeat, start_method=start_method)
    return [make_row("floor_message", source.nbytes, trip.message, floors, what=(
                "a small message (an int) to a started process and back over a Pipe: the least a "
                "pool's round trip costs")),
            make_row("floor_shm_name", source.nbytes, trip.shm_name, floors, what=(
                "a shared-memory segment's name sent over a Pipe, attached and viewed by the other "
                "process, sent back and attached here: the least an already-shared array's trip costs"))]


def start_workers(executor: Executor, n_workers: int) -> None:
    """Start every worker and run a tiny task in each (imports done), before anything is timed."""
    list(executor.map(workers.sleep_then_echo, [0.2] * n_workers, range(n_workers)))


def _round_trip(executor: Executor, fn: Callable, array: np.ndarray) -> Callable[[], None]:
    def once() -> None:
        result = executor.submit(fn, array).result()
        del result  # a result viewing a pooled segment gives it back to the pool here
    return once


def time_with_first(fn: Callable[[], object], repeat: int, warmup: int = 1) -> tuple[Timing, float]:
    """``warmup`` runs then ``repeat`` timed runs: (Timing of the timed runs, seconds of the very
    first run, warm-up included)."""
    first = time_it(fn, repeat=1, warmup=0).runs[0]
    if warmup == 0:
        rest = time_it(fn, repeat=repeat - 1, warmup=0).runs if repeat > 1 else ()
        return Timing((first, *rest)), first
    return time_it(fn, repeat=repeat, warmup=warmup - 1), first


def time_first_call(source: np.ndarray, n_workers: int, mp_context, repeat: int,
                    ours: type[SharedMemoryExecutor] = SharedMemoryExecutor) -> Timing:
    """Seconds of the first ``echo`` round trip of a fresh ``SharedMemoryExecutor`` (empty pool).

    One fresh executor per run; its workers are started and warmed first (not timed). Timed: from
    ``submit`` to ``result()``: a new pooled segment (shm_open, ftruncate, fallocate, populate),
    the copy into it, the handle's trip to the worker and back, and the parent's view of it.
    """
    runs = []
    for _ in range(repeat):
        with _executor(ours, n_workers, mp_context) as executor:
            start_workers(executor, n_workers)
            runs.append(time_it(_round_trip(executor, workers.echo, source), repeat=1, warmup=0).runs[0])
    return Timing(tuple(runs))


def _executor(kind: type[ProcessPoolExecutor], n_workers: int, context) -> ProcessPoolExecutor:
    return kind(n_workers, mp_context=context)


def _warm_row(kind: type[ProcessPoolExecutor], name: str, fn: Callable, source: np.ndarray, shared: bool,
              floors: dict[str, Timing], repeat: int, n_workers: int, context, what: str,
              tiny: bool = False) -> dict:
    """Round trips of ``fn(array)`` on a started, warmed executor, after one warm-up call per worker
    (a worker's first call with a big array costs more); ``shared``: the array is first put in a
    SharedNDArray (not timed); ``tiny``: ``fn(0)`` instead, no array (the pool's fixed cost; the row
    keeps the source's size, to sit beside the floors of that size). From LARGE_BYTES on, the
    stdlib runs at most STDLIB_LARGE_REPEAT times with no warm-up run (one run of 1000 MiB takes
    seconds)."""
    large = kind is ProcessPoolExecutor and source.nbytes >= LARGE_BYTES and not tiny
    runs, warmup = (min(repeat, STDLIB_LARGE_REPEAT), 0) if large else (repeat, n_workers)
    with _executor(kind, n_workers, context) as executor, contextlib.ExitStack() as stack:
        start_workers(executor, n_workers)
        array = stack.enter_context(SharedNDArray.copy_of(source)).array if shared else source
        argument = 0 if tiny else array
        timing, first = time_with_first(_round_trip(executor, fn, argument), runs, warmup)
        del array, argument
    return make_row(name, source.nbytes, timing, floors, first_s=first, what=what)


def _segments_bytes(names: list[str]) -> int:
    """Bytes in /dev/shm of those of the segments ``names`` that still exist."""
    total = 0
    for name in names:
        with contextlib.suppress(OSError):
            total += os.stat(f"/dev/shm/{name}").st_size
    return total


def burst_row(source: np.ndarray, floors: dict[str, Timing], repeat: int, n_workers: int, context,
              ours: type[SharedMemoryExecutor] = SharedMemoryExecutor) -> dict:
    """``ours_burst``: warm round trips of ``echo(array)`` on one executor (after one warm-up call
    per worker), then idleness; the row's extra fields are bytes and seconds (module docstring)."""
    with ours(n_workers, mp_context=context, idle_seconds=BURST_IDLE_SECONDS) as executor:
        start_workers(executor, n_workers)
        timing, first = time_with_first(_round_trip(executor, workers.echo, source), repeat, n_workers)
        last_call = time.perf_counter()
        pool = executor.segment_pool
        pool.collect()
        names = pool.names()
        held_after_burst = _segments_bytes(names)
        deadline = last_call + BURST_WAIT_SECONDS
        while _segments_bytes(names) and time.perf_counter() < deadline:
            time.sleep(0.01)
        given_back_after = time.perf_counter() - last_call
        held_after_idle = _segments_bytes(names)
        idle_cap = pool.idle_cap_bytes
    return make_row("ours_burst", source.nbytes, timing, floors, first_s=first, what=(
        f"a long-lived executor: a burst of warm echoes (as ours_warm), then no call; its pool gives "
        f"its segments back after {BURST_IDLE_SECONDS:g} s idle (the default is 5 s)"),
        idle_seconds=BURST_IDLE_SECONDS, idle_cap_bytes=idle_cap, held_after_burst_bytes=held_after_burst,
        held_after_idle_bytes=held_after_idle,
        given_back_after_s=given_back_after if not held_after_idle else None)


def executor_measurements(source: np.ndarray, floors: dict[str, Timing], *, repeat: int = 5,
                          n_workers: int = 2, start_method: str = DEFAULT_START_METHOD,
                          stdlib: bool = True, ours: type[SharedMemoryExecutor] = SharedMemoryExecutor,
                          short_repeat: int | None = None) -> list[tuple[str, Callable[[], dict]]]:
    """(label, measure) pairs, each returning one round-trip row: the stdlib baseline (unless
    ``stdlib`` is False) and ours (``ours``: SharedMemoryExecutor or a subclass of it): first call,
    warm, already shared, plus_one; npshmex's echo where that optional extra is installed. Each
    measure starts its own executor with ``n_workers`` workers and ``start_method`` (spawn by
    default). The rows that copy nothing (already shared, tiny) run ``short_repeat`` times (default
    ``repeat``)."""
    context = quiet_context(start_method)
    args = (floors, repeat, n_workers, context)
    short_args = (floors, short_repeat or repeat, n_workers, context)
    measurements = [
        ("ours first", lambda: make_row(
            "ours_first", source.nbytes, time_first_call(source, n_workers, context, repeat, ours), floors,
            what=("SharedMemoryExecutor's first echo (fresh executor, empty pool; workers started and "
                  "warmed, not timed): new segment + copy + round trip"))),
        ("ours warm", lambda: _warm_row(ours, "ours_warm", workers.echo, source, False, *args,
                                        what="echo of a private array, pool warm: one copy into a warm "
                                             "pooled segment, the result comes back as a view of it")),
        ("ours burst", lambda: burst_row(source, floors, repeat, n_workers, context, ours)),
        ("ours shared", lambda: _warm_row(ours, "ours_shared", workers.echo, source, True,
                                          *short_args, what="echo of an array already in a SharedNDArray: a "
                                                      "handle both ways, no copy")),
        ("ours tiny", lambda: _warm_row(
            ours, "ours_tiny", workers.echo, source, False, *short_args, tiny=True, what=(
                "echo of the int 0, no array: the fixed cost of one round trip through the pool"))),
        ("stdlib tiny", lambda: _warm_row(
            ProcessPoolExecutor, "stdlib_tiny", workers.echo, source, False, *short_args, tiny=True, what=(
                "ProcessPoolExecutor, echo of the int 0: the stdlib's own fixed cost of a round trip "
                "(feeder thread, pipe, worker, result thread, future), which ours cannot go below"))),
        ("ours plus_one", lambda: _warm_row(
            ours, "ours_plus_one", workers.plus_one, source, False, *args, what=(
                "plus_one, a same-size new result: warm copy in, the worker's array + 1 (its own fresh "
                "pages: page faults) written into a new segment the parent maps (more page faults)"))),
    ]
    if npshmex_echo.missing() is None:  # the optional extra: a third executor, timed for real
        measurements.append(("npshmex", lambda: npshmex_row(source, floors, repeat, n_workers, start_method)))
    if stdlib:
        measurements.insert(0, ("stdlib", lambda: _warm_row(
            ProcessPoolExecutor, "stdlib_echo", workers.echo, source, False, *args, what=(
                "concurrent.futures.ProcessPoolExecutor, echo: the array pickled both ways (the baseline)"))))
    return measurements


def npshmex_row(source: np.ndarray, floors: dict[str, Timing], repeat: int, n_workers: int,
                start_method: str) -> dict:
    """``npshmex.ProcessPoolExecutor``'s warm echo of an array of the source's size, timed in a
    process of its own (``helpers.bench.npshmex_echo``: importing npshmex patches every Future)."""
    runs, first = npshmex_echo.echo_seconds(source.nbytes, repeat, n_workers, start_method)
    return make_row("npshmex_echo", source.nbytes, Timing(tuple(runs)), floors, first_s=first, what=(
        "npshmex.ProcessPoolExecutor, echo, workers started and warmed: the array copied into a new "
        "segment, the result into another (a fresh interpreter: importing npshmex patches every Future)"))


def reducer_row(source: np.ndarray, how: str, where: str, floors: dict[str, Timing], repeat: int = 5,
                start_method: str = DEFAULT_START_METHOD) -> dict:
    """One ``helpers.lessons.pickler_reductions_torch`` round trip as a row named
    ``reducer_<how>_<where>``: ``where`` is 'local' (ForkingPickler dumps + loads here) or 'remote'
    (through a Pipe to a started echo worker and back; its start is not timed). ``first_s`` is the
    first call (one-time costs: a new segment); the median is over the ``repeat`` calls after it.
    Ways that copy into fresh memory on every call ('pickle', 'torch') run at most
    STDLIB_LARGE_REPEAT times from LARGE_BYTES on."""
    if how in ("pickle", "torch") and source.nbytes >= LARGE_BYTES:
        repeat = min(repeat, STDLIB_LARGE_REPEAT)
    if where == "local":
        trip = pickler_reductions_torch.local_round_trip_seconds(source, how, repeat)
    else:
        trip = pickler_reductions_torch.remote_round_trip_seconds(source, how, repeat,
                                                               quiet_context(start_method))
    return make_row(f"reducer_{how}_{where}", source.nbytes, trip.warm, floors, first_s=trip.first,
                    how=how, where=where, what=REDUCER_WHAT[how] + f", {where} round trip")


def reducer_measurements(source: np.ndarray, floors: dict[str, Timing], *, repeat: int = 5,
                         start_method: str = DEFAULT_START_METHOD,
                         short_repeat: int | None = None) -> list[tuple[str, Callable[[], dict]]]:
    """(label, measure) pairs for every way of ``helpers.lessons.pickler_reductions_torch``, local
    then remote; the already-shared ways (``*_shared``: they copy nothing) run ``short_repeat``
    times (default ``repeat``)."""
    return [(f"{how} {where}", functools.partial(
                reducer_row, source, how, where, floors,
                (short_repeat or repeat) if how.endswith("_shared") else repeat, start_method))
            for how in pickler_reductions_torch.HOWS for where in pickler_reductions_torch.WHERES]


def add_speedups(rows: list[dict]) -> None:
    """Set ``speedup_over_stdlib`` (the stdlib echo's median over the row's) on every executor row
    of a size where the stdlib row exists."""
    baselines = {row["size_bytes"]: row["median_s"] for row in rows if row["name"] == "stdlib_echo"}
    for row in rows:
        if row["size_bytes"] in baselines and (row["name"].startswith(("ours_", "stdlib_"))):
            row["speedup_over_stdlib"] = baselines[row["size_bytes"]] / row["median_s"]
