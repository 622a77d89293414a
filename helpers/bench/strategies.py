"""One interface over every way of the course to share an array with workers (lessons 01-10): threads of
this process first, then worker processes.

``NAMES`` lists the strategies in lesson order; ``STRATEGIES[name]`` says what each is (title,
lesson, start method, what the lessons showed it copies) and ``unavailable(array_bytes,
n_workers)`` why it cannot run here now. ``run_strategy(name, array, n_workers)`` measures one,
``run_all`` several, always the same way (``helpers.bench.harness``): set up once (timed), a
fan-out where every worker sums the whole array (timed, checked), a round trip where one worker
returns a same-size array (timed, checked), teardown (timed), and the memory the tree holds while
every worker holds the array. ``floor_seconds`` measures the floors to compare with. Seconds and
bytes throughout; the array is the caller's random float64.

The Ray and Dask strategies run in a spawned process of their own (``helpers.bench.ray_child``),
which measures them the same way and sends the results back: neither runs in this process (Ray's
gRPC threads, Dask's offload thread), so the fork-started strategies may still fork here
afterwards. Where Ray has run in this process anyway
(the user's own ``ray.init()``), a fork-started strategy is skipped with the reason
(``helpers.lessons.ray_session.FORK_AFTER_RAY``) instead of hanging.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from helpers.bench import dask_strategies, mechanisms, ray_child, ray_strategies
from helpers.bench import transport_suite as transport
from helpers.bench.harness import Mechanism, measure
from helpers.bench.joblib_mechanism import Joblib
from helpers.lessons import memmap, ray_session
from helpers.measure import system
from helpers.measure.timing import Timing
from helpers.measure.units import format_bytes

NAMES = ("threads", "pickle", "send_once", "manager", "fork_cow", "sharedctypes", "memmap_disk",
         "memmap_tmpfs", "joblib", "shared_memory", "executor", "reducer_torch", "reducer_shared_memory",
         "ray_by_value", "ray_object_store", "dask_by_value", "dask_scatter")


@dataclass(frozen=True)
class Strategy:
    """What one strategy is, and whether it can run here now."""

    name: str
    title: str
    lesson: str
    start_method: str
    copies: str
    mechanism: type[Mechanism] = field(repr=False, compare=False, default=Mechanism)

    def unavailable(self, array_bytes: int, n_workers: int) -> str | None:
        """None when it can run here now; otherwise one sentence why not (a missing start method or
        library, a fork after Ray has run in this process, or not enough free RAM, /dev/shm or disk
        for this size, checked before anything is written: writing past a full tmpfs kills the
        writer with SIGBUS)."""
        reason = (self.mechanism.missing() or ray_session.fork_refusal(self.start_method)
                  or self.mechanism.too_big(array_bytes, n_workers))
        if reason:
            return reason
        needs = self.mechanism.needs(array_bytes, n_workers)
        size = format_bytes(array_bytes)
        ram = system.available_memory()
        if needs.ram > ram:
            return (f"{self.name} needs about {format_bytes(needs.ram)} of RAM for {size}; "
                    f"{format_bytes(ram)} available")
        shm = system.shm_free()
        if needs.shm and (shm is None or needs.shm > shm):
            return (f"{self.name} needs {format_bytes(needs.shm)} free in /dev/shm for {size}; "
                    f"{format_bytes(shm or 0)} free")
        if needs.disk:
            disk = memmap.free_bytes(memmap.disk_parent())
            if needs.disk > disk:
                return (f"{self.name} needs {format_bytes(needs.disk)} of free disk for {size}; "
                        f"{format_bytes(disk)} free")
        return None


def _strategies() -> dict[str, Strategy]:
    m, r, d = mechanisms, ray_strategies, dask_strategies
    table = [
        ("threads", "threads of this process (ThreadPoolExecutor)", "01",
         "zero-copy: every thread reads the same array", m.Threads),
        ("pickle", "pickle per task (Pool.map)", "02", "one pickled copy per task", m.Pickle),
        ("send_once", "send once per worker (Pool initializer)", "03",
         "one copy per worker, sent at start-up", m.SendOnce),
        ("manager", "Manager proxy (a dict in a server process)", "03",
         "one copy in the manager, one more per read", m.Manager),
        ("fork_cow", "inherit by fork (copy-on-write)", "04", "zero-copy while nobody writes", m.ForkCow),
        ("sharedctypes", "sharedctypes RawArray (given at start-up)", "05",
         "one copy into shared memory; workers map it", m.SharedCtypes),
        ("memmap_disk", "np.memmap of a file on disk", "06",
         "one copy into a file (page cache); workers map it", m.MemmapDisk),
        ("memmap_tmpfs", "np.memmap of a file on tmpfs", "06",
         "one copy into a tmpfs file; workers map it", m.MemmapTmpfs),
        ("joblib", "joblib Parallel, loky backend (auto-memmap)", "06",
         "one dump per call into a file (/dev/shm or the temp folder); workers map it read-only", Joblib),
        ("shared_memory", "SharedNDArray (named shared memory)", "07",
         "zero-copy (maps one segment) after one copy in", m.SharedMemory),
        ("executor", "SharedMemoryExecutor (private array per submit)", "08",
         "one copy per task into a warm pooled segment", m.Executor),
        ("reducer_torch", "pickler reduction: torch shared storage", "09",
         "one copy per task into a new torch storage", m.ReducerTorch),
        ("reducer_shared_memory", "pickler reduction: warm lent segment (no torch)", "09",
         "one copy per task into a warm lent segment", m.ReducerSharedMemory),
        ("ray_by_value", "Ray task argument by value (f.remote(array))", "10",
         "one object-store copy per task, read zero-copy", r.RayByValue),
        ("ray_object_store", "Ray object store (ray.put once)", "10",
         "one object-store copy, read zero-copy", r.RayObjectStore),
        ("dask_by_value", "Dask task argument by value (client.submit(f, array))", "10",
         "one copy per task: in the scheduler and in the worker", d.DaskByValue),
        ("dask_scatter", "Dask scatter once (client.scatter(array, broadcast=True))", "10",
         "one copy per worker, in its data store", d.DaskScatter),
    ]
    return {name: Strategy(name, title, lesson, mechanism.start_method, copies, mechanism)
            for name, title, lesson, copies, mechanism in table}


STRATEGIES: dict[str, Strategy] = _strategies()


def _timing_row(prefix: str, timing: Timing | None) -> dict:
    keys = ("median_s", "iqr_s", "min_s", "max_s", "runs_s")
    if timing is None:
        return {f"{prefix}_{key}": None for key in keys}
    values = (timing.median, timing.iqr, timing.min, timing.max, list(timing.runs))
    return {f"{prefix}_{key}": value for key, value in zip(keys, values, strict=True)}


@dataclass(frozen=True)
class StrategyResult:
    """One strategy measured at one size: seconds and bytes; every measure is None when skipped.

    ``pss_added_bytes``: tree PSS while every worker holds the array minus the idle pool's (steady
    medians, exact reads); ``shm_added_bytes``: /dev/shm bytes added in the same windows;
    ``peak_pss_added_bytes``: the highest polled tree PSS of the whole run above the idle pool's
    (pickles in flight included; a polled sum overshoots a little while processes attach).
    """

    name: str
    title: str
    array_bytes: int
    n_workers: int
    skipped: str | None
    setup_s: float | None = None
    fan_out: Timing | None = None
    round_trip: Timing | None = None
    teardown_s: float | None = None
    pss_added_bytes: float | None = None
    shm_added_bytes: float | None = None
    object_store_bytes: float | None = None
    notes: str = ""
    peak_pss_added_bytes: float | None = None
    traceback: str | None = None  # a reader's task that raised: the worker's traceback, as it came back

    def as_row(self) -> dict:
        """A JSON-ready dict: every field, Timings as ``fan_out_median_s``, ``fan_out_runs_s`` ..."""
        strategy = STRATEGIES[self.name]
        return {"name": self.name, "title": self.title, "lesson": strategy.lesson,
                "start_method": strategy.start_method, "copies": strategy.copies,
                "size_bytes": self.array_bytes, "n_workers": self.n_workers, "skipped": self.skipped,
                "setup_s": self.setup_s, **_timing_row("fan_out", self.fan_out),
                **_timing_row("round_trip", self.round_trip), "teardown_s": self.teardown_s,
                "pss_added_bytes": self.pss_added_bytes, "shm_added_bytes": self.shm_added_bytes,
                "peak_pss_added_bytes": self.peak_pss_added_bytes,
                "object_store_bytes": self.object_store_bytes, "notes": self.notes,
                "traceback": self.traceback}


def _check_array(array: np.ndarray) -> None:
    if not (isinstance(array, np.ndarray) and array.dtype == np.float64 and array.ndim == 1
            and array.flags.c_contiguous and array.size > 0):
        raise ValueError("give a non-empty, contiguous 1-D float64 array (random data, e.g. "
                         "np.random.default_rng(0).random(n))")


def in_own_process(strategy: Strategy) -> bool:
    """Whether ``strategy`` runs in the spawned process of ``helpers.bench.ray_child`` (Ray, Dask: they
    leave threads behind, and this process may fork afterwards)."""
    return strategy.start_method == "ray" or strategy.mechanism.own_process


def run_strategy(name: str, array: np.ndarray, n_workers: int, repeat: int = 3) -> StrategyResult:
    """Set up, fan out, round trip, tear down (``helpers.bench.harness``); ``repeat`` timed runs of
    the fan-out and the round trip, after one warm-up each. A Ray strategy runs in a spawned process
    of its own (``helpers.bench.ray_child``). Never raises for an unavailable strategy (returns
    skipped=reason). Leaves no process, segment, file or Ray instance behind, also on error or Ctrl-C."""
    with ray_child.RayChild(_serve_ray_strategies, array) as child:  # started only for a Ray strategy
        return _run_one(name, array, n_workers, repeat, child)


def _run_one(name: str, array: np.ndarray, n_workers: int, repeat: int,
             child: ray_child.RayChild) -> StrategyResult:
    """``run_strategy``, the Ray strategies in ``child``, the others here."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; choose from {', '.join(NAMES)}")
    if n_workers < 1 or repeat < 1:
        raise ValueError(f"n_workers and repeat must be at least 1, got {n_workers} and {repeat}")
    _check_array(array)
    strategy = STRATEGIES[name]
    reason = strategy.unavailable(array.nbytes, n_workers)
    if reason is not None:
        return StrategyResult(name, strategy.title, array.nbytes, n_workers, skipped=reason)
    if not in_own_process(strategy):
        return measure_here(strategy, array, n_workers, repeat)
    try:
        return child.run(name, n_workers, repeat)
    except ray_child.RayChildFailed as failed:  # it cleaned up (the child, or this side after it)
        return StrategyResult(name, strategy.title, array.nbytes, n_workers, skipped=f"failed here: {failed}")


def measure_here(strategy: Strategy, array: np.ndarray, n_workers: int, repeat: int,
                 own_task: str | None = None) -> StrategyResult:
    """Measure one available strategy in this process (``harness.measure``; ``own_task``: a reader's
    'module:function' instead of the course's task); a failure (it cleaned up after itself) becomes a
    skipped result saying what happened, with the traceback when it came from a reader's task."""
    name = strategy.name
    mechanism = strategy.mechanism(array, n_workers, contextlib.ExitStack())
    try:
        measured = measure(mechanism, repeat, own_task)
    except Exception as error:  # it cleaned up after itself (measure's ExitStack); say what happened
        trace = "".join(traceback.format_exception(error))[-8000:] if own_task else None
        return StrategyResult(name, strategy.title, array.nbytes, n_workers,
                              skipped=f"failed here: {ray_child.one_line(error)}", traceback=trace)
    memory = {"pss_added_bytes": measured.pss_added, "shm_added_bytes": measured.shm_added,
              "object_store_bytes": measured.extra.get("object_store_bytes"),
              "peak_pss_added_bytes": measured.peak_pss_added}
    if mechanism.memory_note:
        memory = dict.fromkeys(memory)
    notes = "; ".join(note for note in (mechanism.notes, mechanism.memory_note) if note)
    return StrategyResult(
        name, strategy.title, array.nbytes, n_workers, skipped=None, setup_s=measured.setup_s,
        fan_out=measured.fan_out, round_trip=measured.round_trip, teardown_s=measured.teardown_s,
        notes=notes, **memory)


def _serve_ray_strategies(connection, layout: tuple, share: bool, scratch: str) -> None:
    """Main of the Ray strategies' spawned process (``ray_child.serve``): measures each Ray strategy
    asked for, all on one Ray instance when ``share``."""
    session = ray_strategies.shared_ray_session if share else contextlib.nullcontext
    ray_child.serve(connection, layout, scratch, _run_in_ray_child, session)


def _run_in_ray_child(name: str, array: np.ndarray, n_workers: int, repeat: int) -> StrategyResult:
    """In the Ray strategies' process: measure one (the caller checked sizes and free memory; here Ray
    is imported, and a Ray that does not import is the reason it is skipped)."""
    strategy = STRATEGIES[name]
    reason = strategy.mechanism.missing()
    if reason is not None:
        return StrategyResult(name, strategy.title, array.nbytes, n_workers, skipped=reason)
    return measure_here(strategy, array, n_workers, repeat)


def run_all(names: Iterable[str], array: np.ndarray, n_workers: int, repeat: int = 3,
            progress: Callable[[str, int, int], None] | None = None,
            share_ray_session: bool = False) -> list[StrategyResult]:
    """``run_strategy`` for each name, in order, calling ``progress(name, done, total)`` before each.

    The Ray strategies run in one spawned process of their own, started at the first of them and
    ended after the last (so no later strategy is measured beside Ray). ``share_ray_session``: they
    run on one Ray instance there (one start-up of several seconds saved per strategy); only the
    first of them then reports memory, the others say why (``ray_strategies.shared_ray_session``).
    The benchmark keeps it off."""
    names = list(names)
    _check_array(array)  # bad input is refused before anything starts
    unknown = [name for name in names if name not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategy {unknown[0]!r}; choose from {', '.join(NAMES)}")
    ray_left = sum(in_own_process(STRATEGIES[name]) for name in names)
    results = []
    with ray_child.RayChild(_serve_ray_strategies, array, share=share_ray_session) as child:
        for done, name in enumerate(names):
            if progress is not None:
                progress(name, done, len(names))
            results.append(_run_one(name, array, n_workers, repeat, child))
            if in_own_process(STRATEGIES[name]):
                ray_left -= 1
                if ray_left == 0:
                    child.close()
    return results


def floor_seconds(array: np.ndarray, repeat: int = 5) -> tuple[Timing, Timing]:
    """Floors measured now on ``array``: (a) one copy into warm memory, (b) one copy into a new
    shared-memory segment (``helpers.bench.transport_suite.measure_floors``), seconds."""
    floors = transport.measure_floors(array, repeat=repeat)
    return floors["warm"], floors["fresh_shm"]
