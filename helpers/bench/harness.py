"""How ``helpers.bench.strategies`` measures one strategy: the same steps, the same tasks, for every
mechanism.

A ``Mechanism`` (one subclass per strategy, in ``helpers.bench.mechanisms``) says how workers
start and how they reach the array; ``measure`` runs the steps, in this order, with the whole run
under ``helpers.measure.memory.track_memory``:

1. start the workers and warm them (one tiny task each): not timed;
2. *idle* window: every worker holds nothing of the array (for strategies whose workers get the
   array at start-up, this is a separate pool started with an 8-item stand-in, then closed);
3. *setup*, timed once: make the array reachable (copy it into a segment, write a file, put it in
   a manager or Ray's store; nothing for the ways that send it with every task);
4. *holding* window: every worker reaches the whole array, reads every page and holds it; the
   tree's PSS and /dev/shm bytes over both windows' steady medians (exact reads) give the memory
   the strategy added;
5. *fan-out*, timed ``repeat`` times after a warm-up: every worker sums the whole array, checked;
6. *round trip*, timed likewise: one worker returns ``array + 1``, a same-size array, that the
   caller receives the mechanism's way (by value, or in a result buffer made before tracking);
7. *teardown*, timed: everything the strategy made is released and its workers shut down.

Times are seconds, memory bytes. Workers signal "holding" with files in a temp folder of ours,
so Ray's workers hold the same way as pool workers.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from helpers.bench import tasks
from helpers.lessons import demos, workers
from helpers.measure.leftovers import TEMP_PREFIX
from helpers.measure.memory import MemoryReport, track_memory
from helpers.measure.timing import Timing, time_it

HOLD_SECONDS = 0.4  # each memory window; the sampler reads PSS exactly at least at its start
SETTLE_SECONDS = 0.1  # after the last worker holds, before the window opens
TASK_TIMEOUT = 600.0  # seconds one task may take (a 1 GiB pickle on a busy 2-core machine is seconds)
READY_TIMEOUT = 300.0
STAND_IN = np.random.default_rng(1).random(8)  # what an idle pool of a start-up strategy holds
CHECK_STRIDE = 4099  # items between the round trip's checked items


@dataclass(frozen=True)
class Needs:
    """Bytes one strategy needs free at once for one array: RAM, /dev/shm and disk."""

    ram: int
    shm: int = 0
    disk: int = 0


class Workers:
    """A started set of workers behind one small interface: ``submit``, ``result``, ``done``."""

    def submit(self, fn: Callable, *args) -> object:
        raise NotImplementedError

    def result(self, token, timeout: float = TASK_TIMEOUT) -> object:
        raise NotImplementedError

    def done(self, token) -> bool:
        raise NotImplementedError

    def run_each(self, fn: Callable, args: list[tuple]) -> list:
        """Run ``fn(*a)`` for every ``a`` at once; wait for every result."""
        tokens = [self.submit(fn, *a) for a in args]
        return [self.result(token) for token in tokens]


class PoolWorkers(Workers):
    """A ``multiprocessing.Pool``; a fan-out is one ``starmap``, as ``Pool.map`` sends tasks."""

    def __init__(self, pool):
        self.pool = pool

    def submit(self, fn, *args):
        return self.pool.apply_async(fn, args)

    def result(self, token, timeout=TASK_TIMEOUT):
        return token.get(timeout)

    def done(self, token):
        return token.ready()

    def run_each(self, fn, args):
        return self.pool.starmap(fn, args, chunksize=1)


class ExecutorWorkers(Workers):
    """A ``concurrent.futures`` executor (here the SharedMemoryExecutor)."""

    def __init__(self, executor):
        self.executor = executor

    def submit(self, fn, *args):
        return self.executor.submit(fn, *args)

    def result(self, token, timeout=TASK_TIMEOUT):
        return token.result(timeout)

    def done(self, token):
        return token.done()


class RayWorkers(Workers):
    """Ray tasks: each function becomes ``ray.remote(fn)`` once; one CPU per task."""

    def __init__(self):
        import ray

        self.ray = ray
        self.remote: dict[Callable, object] = {}

    def submit(self, fn, *args):
        if fn not in self.remote:
            self.remote[fn] = self.ray.remote(fn)
        return self.remote[fn].remote(*args)

    def result(self, token, timeout=TASK_TIMEOUT):
        return self.ray.get(token, timeout=timeout)

    def done(self, token):
        ready, _ = self.ray.wait([token], timeout=0)
        return bool(ready)


def warm(workers_: Workers, n_workers: int) -> None:
    """One tiny task per worker (each sleeps, so that every worker gets one): starts and imports done."""
    workers_.run_each(workers.sleep_then_echo, [(0.2, i) for i in range(n_workers)])


class Mechanism:
    """One strategy's mechanism. Subclasses set ``reach`` and override the steps that differ.

    ``late``: workers get the array when they start, so they start after the setup (and the idle
    window comes from a pool started on ``STAND_IN``). ``setup_is_start``: the setup is that
    start-up itself; its time is the start-up's extra seconds over the stand-in pool's.
    """

    start_method = "spawn"
    late = False
    memory_note = ""  # set when this run's memory figures cannot be trusted (then they are dropped)
    setup_is_start = False
    reach = staticmethod(tasks.reach_argument)
    task_reach = None  # how a reader's task reaches the array, when not as ``reach`` (a writable mapping)
    notes = ""
    own_process = False  # measured in a spawned process of its own (helpers.bench.ray_child), as Ray is

    def __init__(self, array: np.ndarray, n_workers: int, stack: contextlib.ExitStack):
        self.array, self.n_workers, self.stack = array, n_workers, stack

    @classmethod
    def missing(cls) -> str | None:
        """Why this mechanism cannot run on this machine at all (None: it can)."""
        return None

    @classmethod
    def needs(cls, array_bytes: int, n_workers: int) -> Needs:
        """Bytes of RAM, /dev/shm and disk free that a run at this size needs."""
        raise NotImplementedError

    @classmethod
    def too_big(cls, array_bytes: int, n_workers: int) -> str | None:
        """Why this size cannot run for a reason other than free space (None: it can)."""
        return None

    def prepare(self) -> None:
        """Untimed, before memory tracking: make the round trip's result buffer, if any."""

    def start(self, data: np.ndarray, stack: contextlib.ExitStack) -> Workers:
        """Start and warm the workers (``data``: the array, or STAND_IN, for ``late`` mechanisms)."""
        raise NotImplementedError

    def setup(self) -> object:
        """Make the array reachable (timed); return what every task sends to reach it."""
        return self.array

    def round_trip(self, workers_: Workers, arg) -> np.ndarray:
        """One worker returns ``array + 1``; the caller's array (default: sent back by value)."""
        return workers_.result(workers_.submit(tasks.strategy_plus_one, self.reach, arg))

    def hold_extra(self) -> dict[str, float]:
        """Read halfway through each memory window (Ray: its object store's bytes)."""
        return {}


@dataclass(frozen=True)
class Measured:
    """What ``measure`` found; every time in seconds, every memory figure in bytes."""

    setup_s: float
    fan_out: Timing
    round_trip: Timing | None
    teardown_s: float
    pss_added: float
    shm_added: float
    peak_pss_added: float
    extra: dict[str, float]


@contextlib.contextmanager
def signal_folder() -> Iterator[Path]:
    """A temp folder of ours for the workers' ready and release files, removed on exit."""
    folder = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}strategy-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def hold(workers_: Workers, mechanism: Mechanism, arg, reach: Callable, report: MemoryReport, label: str,
         folder: Path) -> dict[str, float]:
    """Every worker reaches the array (``reach(arg)``) and holds it while ``label``'s window is marked
    on ``report``; then they are released. Returns ``mechanism.hold_extra()`` read mid-window."""
    tokens = [workers_.submit(tasks.strategy_hold, reach, arg, str(folder), label)
              for _ in range(mechanism.n_workers)]
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while len(list(folder.glob(f"{label}-ready-*"))) < mechanism.n_workers:
            for token in tokens:
                if workers_.done(token):
                    workers_.result(token)  # raises the worker's error
                    raise RuntimeError("a worker stopped holding before it was released")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers did not all hold the array within {READY_TIMEOUT:.0f} s")
            time.sleep(0.01)
        time.sleep(SETTLE_SECONDS)
        extra = demos.hold(report, label, HOLD_SECONDS, during=mechanism.hold_extra)
    finally:
        (folder / f"{label}-release").touch()
    for token in tokens:
        workers_.result(token)
    return extra


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    """(seconds, value) of one call."""
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def time_checked(fn: Callable[[], object], check: Callable[[object], None], repeat: int) -> Timing:
    """One warm-up call, then ``repeat`` timed calls; each value is checked (untimed) and dropped."""
    runs = []
    for run in range(repeat + 1):
        start = time.perf_counter()
        value = fn()
        seconds = time.perf_counter() - start
        check(value)
        del value
        if run:
            runs.append(seconds)
    return Timing(tuple(runs))


def check_sums(sums: list[float], expected: float, n_workers: int) -> None:
    if len(sums) != n_workers or not np.allclose(sums, expected, rtol=1e-9, atol=0):
        raise AssertionError(f"the workers' sums {sums} are not {n_workers} times {expected}")


def check_plus_one(result: np.ndarray, array: np.ndarray) -> None:
    ok = result.shape == array.shape and np.array_equal(result[::CHECK_STRIDE], array[::CHECK_STRIDE] + 1.0)
    if not ok or result[-1] != array[-1] + 1.0:
        raise AssertionError("the round trip's result is not the array plus one")


def _start_late(mechanism: Mechanism, report: MemoryReport, folder: Path) -> tuple[Workers, float, object]:
    """Idle window on a stand-in pool, then the setup and the real pool: (workers, setup_s, arg)."""
    with contextlib.ExitStack() as idle_stack:
        idle_start, idle = timed(lambda: mechanism.start(STAND_IN, idle_stack))
        hold(idle, mechanism, None, tasks.reach_nothing, report, "idle", folder)
    setup_s, arg = timed(mechanism.setup)
    start_s, workers_ = timed(lambda: mechanism.start(mechanism.array, mechanism.stack))
    if mechanism.setup_is_start:
        setup_s += max(0.0, start_s - idle_start)
    return workers_, setup_s, arg


def _run_steps(mechanism: Mechanism, repeat: int, folder: Path, own_task: str | None = None
               ) -> tuple[MemoryReport, float, Timing, Timing | None, dict[str, float]]:
    """Steps 1-6 under the memory sampler: (report, setup_s, fan-out, round trip, hold extras); with
    ``own_task`` ('module:function') the fan-out and round trip are that task's (``_time_own_task``)."""
    array, n_workers = mechanism.array, mechanism.n_workers
    with track_memory(trace_python=False) as report:
        if mechanism.late:
            workers_, setup_s, arg = _start_late(mechanism, report, folder)
        else:
            workers_ = mechanism.start(array, mechanism.stack)
            hold(workers_, mechanism, None, tasks.reach_nothing, report, "idle", folder)
            setup_s, arg = timed(mechanism.setup)
        extra = hold(workers_, mechanism, arg, mechanism.reach, report, "array", folder)
        if own_task is not None:
            fan_out, round_trip = _time_own_task(workers_, mechanism, arg, own_task, repeat)
            return report, setup_s, fan_out, round_trip, extra
        expected = float(np.sum(array))
        each_worker = [(mechanism.reach, arg)] * n_workers
        fan_out = time_it(lambda: check_sums(workers_.run_each(tasks.strategy_sum, each_worker), expected,
                                             n_workers), repeat=repeat, warmup=1)
        round_trip = time_checked(lambda: mechanism.round_trip(workers_, arg),
                                  lambda result: check_plus_one(result, array), repeat)
    return report, setup_s, fan_out, round_trip, extra


def _time_own_task(workers_: Workers, mechanism: Mechanism, arg, spec: str,
                   repeat: int) -> tuple[Timing, Timing | None]:
    """A reader's task (``tasks.strategy_own_task``): the fan-out, every worker ``i`` calling
    ``task(array, i, n_workers)`` with an array value sent back as a digest; then, when it returns an
    array, the round trip: worker 0's call sending its array back whole, the mechanism's usual way
    for a result (pickled back by a pool; Ray's object store). None when it returns no array."""
    n_workers = mechanism.n_workers
    reach = mechanism.task_reach or mechanism.reach
    calls = [(reach, arg, spec, index, n_workers) for index in range(n_workers)]
    values: list[list] = []
    fan_out = time_checked(lambda: workers_.run_each(tasks.strategy_own_task, calls), values.append, repeat)
    if not any(tasks.is_array_digest(value) for value in values[0]):
        return fan_out, None

    def check_array(value) -> None:
        if not isinstance(value, np.ndarray):
            raise AssertionError(f"the task returned an array in the fan-out, then {type(value).__name__}")

    round_trip = time_checked(lambda: workers_.result(workers_.submit(
        tasks.strategy_own_task_whole, reach, arg, spec, 0, n_workers)), check_array, repeat)
    return fan_out, round_trip


def measure(mechanism: Mechanism, repeat: int, own_task: str | None = None) -> Measured:
    """Run every step (module docstring) for one mechanism; release everything it made, also on error.
    The steps run in a function of their own, so that nothing of theirs is alive at teardown.
    ``own_task``: a reader's 'module:function' times the fan-out and round trip instead of the sum and
    ``array + 1`` (the round trip's result buffer is made all the same, and left unused)."""
    with mechanism.stack:
        folder = mechanism.stack.enter_context(signal_folder())
        mechanism.prepare()
        report, setup_s, fan_out, round_trip, extra = _run_steps(mechanism, repeat, folder, own_task)
        teardown_start = time.perf_counter()
    teardown_s = time.perf_counter() - teardown_start
    idle, held = report.steady("idle holding", "idle end"), report.steady("array holding", "array end")
    return Measured(setup_s, fan_out, round_trip, teardown_s, held.pss - idle.pss, held.shm - idle.shm,
                    report.peak_pss - idle.pss, extra)
