"""NumPy arrays in ``multiprocessing.sharedctypes`` memory, and the workers of lesson 05.

``RawArray`` and ``Array(lock=True)`` allocate from ``multiprocessing.heap``: on Linux an mmap of a
file in ``/dev/shm`` (or the temp folder when ``/dev/shm`` is too small) that is unlinked at once,
so it holds RAM yet has no name. A child reaches it only through inheritance: passed when the child
is created (``Process(args=...)``, a Pool's ``initargs``), never as a task argument. Workers here
keep what their initializer received in a module global, because spawn and forkserver children
import them by name. Sizes are bytes, durations seconds.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from helpers.lessons.exercises import Exercise
from helpers.measure.memory import MemoryReport
from helpers.measure.timing import Timing, time_it

BARRIER_SECONDS = 60.0  # a worker waiting longer than this for its peers raises BrokenBarrierError
RUN_TIMEOUT = 120.0  # seconds a CounterPool run may take before the caller gives up

# What the initializer gave this worker process: "array" (a NumPy view), "barrier" (or None).
_worker: dict[str, object] = {}


def as_array(shared, dtype=None) -> np.ndarray:
    """A NumPy view (no copy) of a ``RawArray``, or of the array inside an ``Array(lock=True)``,
    of the ctypes element type ('d' -> float64) unless ``dtype`` is given; it keeps the memory alive."""
    raw = shared.get_obj() if hasattr(shared, "get_obj") else shared  # a locked Array: the array inside
    return np.frombuffer(raw, dtype=np.dtype(raw._type_) if dtype is None else dtype)


def shared_copy_of(context, array: np.ndarray, lock: bool = False):
    """``(shared, view)``: a new ``context.RawArray`` (``Array`` when ``lock``) to pass to children at
    their creation, and a NumPy view of it with ``array``'s shape and dtype, filled by one ``np.copyto``."""
    ctype, length = ctype_and_length(array)
    shared = context.Array(ctype, length, lock=lock)  # lock=False: a RawArray
    view = as_array(shared, array.dtype).reshape(array.shape)
    np.copyto(view, array)
    return shared, view


def ctype_and_length(array: np.ndarray) -> tuple[type, int]:
    """The ctypes element type and count that hold ``array``: its own type, or bytes for a dtype
    ctypes has none for (fixed-width strings, records: view them with ``as_array(shared, dtype)``).
    Object dtypes raise TypeError."""
    if array.dtype.hasobject:
        raise TypeError(
            f"dtype {array.dtype} holds Python objects: pointers into this process's heap cannot "
            "be shared; convert to a numeric or fixed-width string dtype first"
        )
    try:
        return np.ctypeslib.as_ctypes_type(array.dtype), array.size
    except NotImplementedError:
        return ctypes.c_ubyte, array.nbytes


def time_making(make: Callable[[], object], repeat: int = 3) -> Timing:
    """Seconds ``make()`` takes, what it returns kept until the clock stops: freeing it happens
    untimed, before the next run (a ``RawArray`` dropped at once would time its own release too)."""
    made: list[object] = []
    try:
        return time_it(lambda: made.append(make()), repeat=repeat, setup=made.clear)
    finally:
        made.clear()


def one_mark_per_state(report: MemoryReport) -> MemoryReport:
    """A copy of ``report`` whose plot labels each held state once, where it begins: the
    ``'<state> holding'`` marks renamed ``'<state>'``, the ``'<state> end'`` marks dropped."""
    marks = report.marks.items()
    starts = {label.removesuffix(" holding"): at for label, at in marks if not label.endswith(" end")}
    return replace(report, marks=starts)


def _mappings(pid: int | None) -> list[tuple[str, int, int, int]]:
    """File mappings of a process from /proc/PID/maps: ``(path, inode, start address, bytes)``."""
    found = []
    with open(f"/proc/{pid or os.getpid()}/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6:
                low, high = (int(part, 16) for part in fields[0].split("-"))
                found.append((fields[5].strip(), int(fields[4]), low, high - low))
    return found


def arena_mappings(pid: int | None = None) -> list[tuple[str, int, int, int]]:
    """The sharedctypes arenas a process maps: ``(path, inode, start address, bytes)``.

    Read from /proc/PID/maps. ``multiprocessing.heap`` names its files ``pym-<pid>-<random>`` and
    unlinks them at once, so the path ends in ' (deleted)'. Two processes mapping the same inode
    share the same pages.
    """
    return [mapping for mapping in _mappings(pid) if "/pym-" in mapping[0]]


def named_shm_mapped(pid: int | None = None) -> list[str]:
    """Names in /dev/shm of files a process maps (matched by inode: a name may be a second link).

    A named semaphore of a spawn or forkserver context (``sem.mp-...``) keeps its name until its
    lock is garbage collected; an empty list means this process maps nothing that has a name.
    """
    inodes = {inode for path, inode, *_ in _mappings(pid) if path.startswith("/dev/shm/")}
    try:
        entries = list(os.scandir("/dev/shm"))
    except OSError:
        return []
    return sorted(entry.path for entry in entries if entry.inode() in inodes)


def arena_of(array: np.ndarray) -> tuple[str, int, int]:
    """``(path, inode, bytes)`` of the sharedctypes arena holding ``array``'s first byte in this process.

    Raises LookupError when the array does not live in such an arena.
    """
    address = array.ctypes.data
    for path, inode, start, size in arena_mappings():
        if start <= address < start + size:
            return path, inode, size
    raise LookupError("this array does not live in a multiprocessing.heap arena")


def write_at(shared, index: int, value: float) -> None:
    """Process target: write ``value`` at ``index`` of a RawArray received at creation."""
    as_array(shared)[index] = value


# --- Fan-out workers: the initializer receives the array once, tasks name only a slice --------


def init_worker(shared, barrier=None, dtype=None) -> None:
    """Pool initializer: keep a NumPy view of ``shared`` (received at process creation), of
    ``dtype`` if given; ``barrier`` (a ``context.Barrier(n_workers)``) serves the ``*_together`` tasks.
    ``shared=None``: no array, a pool started like one that receives it (for ``pid_together``)."""
    _worker["array"] = None if shared is None else as_array(shared, dtype)
    _worker["barrier"] = barrier


def _wait_for_peers() -> None:
    barrier = _worker["barrier"]
    if barrier is None:
        raise RuntimeError("init_worker was given no barrier; pass one in initargs")
    barrier.wait(BARRIER_SECONDS)


def pid_together(_=None) -> int:
    """Wait until every worker holds one of these tasks, then return this worker's pid.

    Each worker blocks in the barrier with its task, so no worker can take two: a map of
    ``n_workers`` of these proves every worker started and ran its initializer.
    """
    _wait_for_peers()
    return os.getpid()


def arena_together(_=None) -> tuple[str, int, int]:
    """Like ``pid_together``, one per worker, then return ``arena_of`` the worker's shared array."""
    _wait_for_peers()
    return arena_of(_worker["array"])


def read_whole_together(_=None) -> tuple[float, float]:
    """Like ``pid_together``, one per worker, then sum the whole shared array; return the sum and this
    worker's CPU seconds in it (page faults included, waits for a CPU excluded): a worker's first read
    maps every page of the array."""
    _wait_for_peers()
    cpu_start = time.thread_time()
    total = float(np.sum(_worker["array"]))
    return total, time.thread_time() - cpu_start


def sum_slice_together(bounds: tuple[int, int]) -> float:
    """Wait until every worker holds one of these tasks (so none takes two), then sum
    ``[start:stop]`` of the worker's shared array: reads those pages, copies nothing."""
    _wait_for_peers()
    start, stop = bounds
    return float(np.sum(_worker["array"][start:stop]))


def fill_argument(array: np.ndarray, value: float) -> float:
    """Set every element of the array this task received to ``value``; return its first element.

    Given a NumPy view of shared memory as a task argument, the worker fills a pickled copy:
    the caller's array does not change.
    """
    array[...] = value
    return float(array[0])


# --- Lost updates: workers increment one shared counter ----------------------------------------

INCREMENT_WAYS = {
    "unlocked": "numpy view, no lock",
    "item": "Array item += 1 (its own lock)",
    "locked": "numpy view inside get_lock()",
    "local": "local count, one locked add",
}


def init_counter_worker(counter, barrier) -> None:
    """Pool initializer: keep the shared counter (an ``Array('q', 1, lock=True)``) and the barrier."""
    _worker["counter"] = counter
    _worker["barrier"] = barrier


def add_unlocked(view: np.ndarray, counter, lock, iterations: int) -> None:
    """Add 1 ``iterations`` times through a NumPy view, no lock: updates get lost."""
    for _ in range(iterations):
        view[0] += 1  # read, add, write: another worker may write in between


def add_item(view: np.ndarray, counter, lock, iterations: int) -> None:
    """Add 1 ``iterations`` times through the ``Array``'s item access, which takes its lock."""
    for _ in range(iterations):
        counter[0] += 1


def add_locked(view: np.ndarray, counter, lock, iterations: int) -> None:
    """Add 1 ``iterations`` times, each read-add-write inside the lock: exact."""
    for _ in range(iterations):
        with lock:
            view[0] += 1


def add_locally(view: np.ndarray, counter, lock, iterations: int) -> None:
    """Count ``iterations`` in a local variable, then add the total once under the lock: exact."""
    local = 0
    for _ in range(iterations):
        local += 1
    with lock:
        view[0] += local


LOOPS = {"unlocked": add_unlocked, "item": add_item, "locked": add_locked, "local": add_locally}
RACE_ITERATIONS = dict.fromkeys(LOOPS, 200_000)  # per worker, alike for every way so that their rows compare


def compile_line(line: str):
    """Compile ``line`` (the body of the exercise's loop) into ``for _ in range(iterations): line``.

    Raises ValueError, saying why, when ``line`` is not a string of Python statements.
    """
    if not isinstance(line, str) or not line.strip():
        raise ValueError(f"the answer must be a line of Python as a string, got {line!r}")
    body = textwrap.indent(textwrap.dedent(line).strip(), "    ")
    try:
        return compile(f"for _ in range(iterations):\n{body}\n", "<your line>", "exec")
    except SyntaxError as error:
        raise ValueError(f"{line!r} is not valid Python: {error.msg}") from None


def increment(way: str, iterations: int, line: str | None = None) -> tuple[float, float]:
    """Add 1 to the shared counter ``iterations`` times, in one of ``INCREMENT_WAYS`` (``LOOPS``),
    or ``way="line"``: run ``line`` ``iterations`` times with ``view``, ``counter`` and ``lock``.

    Waits for every worker first (one such task per worker, so the loops overlap); returns the
    loop's wall-clock seconds and this worker's CPU seconds in it (waits for the lock excluded).
    """
    counter = _worker["counter"]
    view = as_array(counter)
    lock = counter.get_lock()
    if way == "line":
        code = compile_line(line)
        names = {"view": view, "counter": counter, "lock": lock, "iterations": iterations}
    elif way not in LOOPS:
        raise ValueError(f"way must be one of {sorted(LOOPS)} or 'line', got {way!r}")
    _wait_for_peers()
    start, cpu_start = time.perf_counter(), time.thread_time()
    if way == "line":
        exec(code, names)  # the learner's line, in this worker
    else:
        LOOPS[way](view, counter, lock, iterations)
    return time.perf_counter() - start, time.thread_time() - cpu_start


@dataclass(frozen=True)
class IncrementRun:
    """``n_workers`` workers each added 1 ``iterations`` times; what the counter ended at.

    ``seconds`` are the workers' loop times (pool start-up excluded), one per worker;
    ``cpu_seconds`` the CPU time each spent in its loop (time waiting, for the lock or for a
    CPU, excluded).
    """

    way: str
    n_workers: int
    iterations: int
    count: int
    seconds: tuple[float, ...]
    cpu_seconds: tuple[float, ...]

    @property
    def expected(self) -> int:
        """The count if no update were lost."""
        return self.n_workers * self.iterations

    @property
    def lost(self) -> int:
        """Updates that vanished: another worker overwrote them."""
        return self.expected - self.count

    @property
    def seconds_per_update(self) -> float:
        """Median over workers of loop seconds divided by that worker's increments."""
        return statistics.median(self.seconds) / self.iterations

    @property
    def cpu_seconds_per_update(self) -> float:
        """Median over workers of loop CPU seconds divided by that worker's increments."""
        return statistics.median(self.cpu_seconds) / self.iterations


class CounterPool:
    """A pool of ``n_workers`` processes sharing one counter, received by inheritance.

    ``with CounterPool(context, n) as counters: counters.run("locked", 10_000)``. The counter
    (``Array('q', 1, lock=True)`` of ``context``) and a barrier travel in the pool's initargs;
    leaving the block closes the pool and joins its workers.
    """

    def __init__(self, context, n_workers: int):
        self.n_workers = n_workers
        self.counter = context.Array("q", 1, lock=True)
        self.barrier = context.Barrier(n_workers)
        self.pool = context.Pool(n_workers, initializer=init_counter_worker,
                                 initargs=(self.counter, self.barrier))

    def run(self, way: str, iterations: int, line: str | None = None) -> IncrementRun:
        """Reset the counter, let every worker add 1 ``iterations`` times, return what it reached.

        ``way`` is one of ``INCREMENT_WAYS``, or "line" to run ``line`` (see ``increment``).
        Raises ``multiprocessing.TimeoutError`` when the workers take over ``RUN_TIMEOUT`` seconds.
        """
        if way == "line":
            compile_line(line)  # a bad line fails here, before any worker waits for its peers
        elif way not in INCREMENT_WAYS:
            raise ValueError(f"way must be one of {sorted(INCREMENT_WAYS)} or 'line', got {way!r}")
        view = as_array(self.counter)
        view[0] = 0
        tasks = [(way, iterations, line)] * self.n_workers
        times = self.pool.starmap_async(increment, tasks, chunksize=1).get(RUN_TIMEOUT)
        return IncrementRun(way, self.n_workers, iterations, int(view[0]),
                            tuple(wall for wall, _ in times), tuple(cpu for _, cpu in times))

    def close(self) -> None:
        """Stop the workers and wait for them to exit."""
        self.pool.close()
        self.pool.join()

    def __enter__(self) -> CounterPool:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is not None:
            self.pool.terminate()
        self.close()


def measure_increments(
    counters: CounterPool, iterations: dict[str, int], repeat: int = 5
) -> dict[str, list[IncrementRun]]:
    """Run every way in ``iterations`` (way -> increments per worker) ``repeat`` times, interleaved.

    Round-robin order, so that a slow moment of a shared machine falls on every way alike.
    """
    runs: dict[str, list[IncrementRun]] = {way: [] for way in iterations}
    for _ in range(repeat):
        for way, count in iterations.items():
            runs[way].append(counters.run(way, count))
    return runs


def median_seconds_per_update(runs: list[IncrementRun], cpu: bool = False) -> float:
    """Median over runs of each run's seconds per update: wall-clock, or CPU time when ``cpu``."""
    return statistics.median(run.cpu_seconds_per_update if cpu else run.seconds_per_update for run in runs)


def increment_table(
    runs: dict[str, list[IncrementRun]], wall: dict[str, float], cpu: dict[str, float],
    ways: tuple[str, ...] | None = None,
) -> str:
    """One line per way (of ``ways``, default all): expected and counted totals, lost updates and
    their share of the expected total (min-max over runs), and the median wall and CPU seconds per
    update."""
    from helpers.measure.units import format_seconds

    lines = [f"{'way':<31} {'expected':>9} {'counted (min-max)':>19} {'lost (min-max)':>17} "
             f"{'lost %':>9} {'wall':>9} {'CPU':>9}"]
    for way, way_runs in runs.items():
        if ways is not None and way not in ways:
            continue
        counted = f"{min(r.count for r in way_runs):,}-{max(r.count for r in way_runs):,}"
        fewest, most = min(r.lost for r in way_runs), max(r.lost for r in way_runs)
        expected = way_runs[0].expected
        share = f"{fewest / expected:.0%}-{most / expected:.0%}"
        lines.append(f"{INCREMENT_WAYS[way]:<31} {expected:>9,} {counted:>19} {f'{fewest:,}-{most:,}':>17} "
                     f"{share:>9} {format_seconds(wall[way]):>9} {format_seconds(cpu[way]):>9}")
    return "\n".join(lines)


# --- "Your turn": the learner predicts the item loop, then writes the loop body that fixes the race --

EXERCISE_RUNS = 3  # runs of the learner's line; every one must count every update
ANSWER_KEYS = ("item_loses", "line")  # the answer: {"item_loses": True or False, "line": "a loop body"}


def _check_answer(answer, context, n_workers: int, iterations: int, item_lost) -> str | None:
    """The prediction first, against ``item_lost`` (the updates the item loop, ``counter[0] += 1``,
    lost in each of this run's rounds), before the line runs: a wrong prediction fails on its own."""
    if not isinstance(answer, dict) or set(answer) != set(ANSWER_KEYS):
        return 'answer with a dict: {"item_loses": True or False, "line": "your loop body"}'
    if not isinstance(answer["item_loses"], bool):
        return f'"item_loses" must be True or False, not {answer["item_loses"]!r}'
    if not answer["item_loses"]:
        lost_rounds = sum(lost > 0 for lost in item_lost)
        return (f"your prediction: counter[0] += 1 lost updates in {lost_rounds} of this run's "
                f"{len(item_lost)} rounds; the Array's lock is taken for the read and again for the write, "
                "not across both"
                if lost_rounds else
                "your prediction: counter[0] += 1 lost no update in this run's rounds, by luck; the Array's "
                "lock is taken for the read and again for the write, not across both, so it can lose one")
    return _check_line(answer["line"], context, n_workers, iterations)


def _check_line(answer, context, n_workers: int, iterations: int) -> str | None:
    try:
        compile_line(answer)
    except ValueError as error:
        return f"{error}; write the loop body as a string, e.g. \"view[0] += 1\""
    try:
        with CounterPool(context, n_workers) as counters:
            runs = [counters.run("line", iterations, answer) for _ in range(EXERCISE_RUNS)]
    except Exception as error:  # the learner's line raised in a worker, or never finished
        return f"your line failed in a worker: {type(error).__name__}: {error}"
    print(f"your line, {n_workers} workers x {iterations:,} times, {EXERCISE_RUNS} runs: counted "
          f"{', '.join(f'{run.count:,}' for run in runs)} of {runs[0].expected:,}; "
          f"lost {', '.join(f'{run.lost:,}' for run in runs)}")
    if all(run.count == 0 for run in runs):
        return "the counter stayed at 0, so every update was lost: each pass of the loop must add 1"
    if any(run.lost > 0 for run in runs):
        return (f"{max(run.lost for run in runs):,} updates were lost: another worker wrote between "
                "your read and your write; hold the lock around the whole read-add-write")
    if any(run.lost < 0 for run in runs):
        return "the counter went past the expected total: each pass of the loop must add exactly 1"
    if not names_the_lock(answer):
        return ("no update was lost in these runs, by luck: your line never takes the lock, so nothing stops "
                "another worker writing between its read and its write (counter[0] += 1 takes the Array's "
                "lock for the read and again for the write, not across both); hold the lock around the "
                "whole read-add-write")
    return None


def names_the_lock(line: str) -> bool:
    """Whether the loop body ``line`` names the counter's lock (``lock``, or ``get_lock`` as in
    ``counter.get_lock()``): a line that does not cannot hold it, and loses updates whenever the
    workers' loops overlap, however often a short run happens to lose none."""
    return bool({"lock", "get_lock"} & set(compile_line(line).co_names))


EXERCISE = Exercise(
    name="fix the race",
    question=('answer with a dict: "item_loses", your prediction (True or False) of whether counter[0] += 1 '
              'loses updates; "line", a loop body (a string) that adds 1 to the counter with no update lost, '
              "using view, counter or lock. The check compares your prediction with this run's rounds, then "
              "runs your line in every worker and counts lost updates."),
    check=_check_answer,
    solution=lambda **measured: {"item_loses": True, "line": "with lock: view[0] += 1"},
    explanation=("counter[0] += 1 takes the lock twice, not across the read and the write; your line holds "
                 "it from the read to the write, so no other worker writes in between."),
    misconceptions=(
        ({"item_loses": True, "line": "view[0] += 1"},
         "one NumPy statement is atomic, so += on a shared element loses no update"),
        ({"item_loses": True, "line": "counter[0] += 1"},
         "Array(lock=True) makes counter[0] += 1 safe: the Array's own lock covers it"),
        ({"item_loses": False, "line": "with lock: view[0] += 1"},
         "the prediction: the Array's own lock makes counter[0] += 1 safe (whatever the line)"),
    ),
)
