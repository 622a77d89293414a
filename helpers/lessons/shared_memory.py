"""The pitfalls of ``multiprocessing.shared_memory``, each shown for real in a separate process.

Lesson 07 shows what goes wrong without putting its own kernel at risk: every demonstration that
may unlink a segment behind our back, crash (SIGSEGV) or be killed (SIGBUS) runs in a fresh
Python interpreter started with ``subprocess``, and the caller gets a ``ChildOutcome`` back
(exit status, what it printed, whether the segment still exists afterwards). Also here: the
by-hand copy into a new segment (``copy_into_new_segment``), ``attach_and_hold_in_workers``, which
holds workers idle and then attached, so the memory a shared array costs can be measured between
two steady states, ``time_fan_out`` (where a fan-out of handles spends its time), ``keep_attached``
(a pool initializer that keeps one mapping per worker for ``sum_attached_slice``), and
``EXERCISE``, the lesson's "Your turn" (which of ``attach_and_exit``'s children leave the segment).
The shared table is in ``helpers.lessons.shared_memory_tables``.
"""

from __future__ import annotations

import inspect
import multiprocessing as mp
import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from helpers.lessons import workers
from helpers.lessons.exercises import Exercise
from helpers.measure.leftovers import SHM_DIR
from helpers.measure.proctree import PSS_KINDS, tree_pss_by_kind
from helpers.measure.timing import Timing, stopwatch, time_it
from helpers.measure.units import MiB
from sharedarrays.shm import ArrayHandle, SharedNDArray, attach

ANONYMOUS, SHARED_MEMORY, _FILES = PSS_KINDS.values()  # the kinds of page tree_pss_by_kind splits PSS into

CHILD_TIMEOUT_SECONDS = 60.0
SMALL_DEV_SHM = "8m"  # the private tmpfs size for the SIGBUS demonstration (mount's notation)
OVERSIZED_SEGMENT_BYTES = 16 * MiB  # twice that tmpfs


@dataclass(frozen=True)
class ChildOutcome:
    """How a child interpreter ended: exit status (negative: killed by that signal), its output,
    and whether the segment it used still existed afterwards (None where that does not apply)."""

    returncode: int
    stdout: str
    stderr: str
    segment_exists_after: bool | None = None

    @property
    def signal_name(self) -> str | None:
        """'SIGSEGV', 'SIGBUS', ... when a signal killed the child, else None."""
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    @property
    def warnings(self) -> list[str]:
        """The warning lines the child printed, without the file path in front ('UserWarning: ...')."""
        return [line[line.index(": ") + 2:].strip() if line.startswith("/") else line.strip()
                for line in self.stderr.splitlines() if "Warning: " in line]


@dataclass(frozen=True)
class SegmentCopy:
    """One copy of an array into a new segment: seconds of the first copy (fresh pages) and the
    median of later copies into the same, now resident, pages; whether the bytes arrived exactly;
    the segment's name and whether it still existed in /dev/shm after ``unlink``."""

    fresh_seconds: float
    resident_seconds: float
    copied_exactly: bool
    name: str
    exists_after_unlink: bool


def copy_into_new_segment(source: np.ndarray, repeat: int = 3) -> SegmentCopy:
    """By hand: create a segment, view it as an array, time the first copy in and the later ones
    (seconds), then delete the view, close and unlink the segment whatever happened."""
    segment = SharedMemory(create=True, size=source.nbytes)
    try:
        view = np.ndarray(source.shape, dtype=source.dtype, buffer=segment.buf)
        with stopwatch() as first_copy:
            np.copyto(view, source)  # every page is faulted in and zeroed, then written
        resident = time_it(partial(np.copyto, view, source), repeat=repeat)  # pages already there
        copied_exactly = bool(np.array_equal(view, source))
        del view  # a live view keeps segment.buf exported: close() would raise BufferError
    finally:
        segment.close()
        segment.unlink()
    return SegmentCopy(first_copy.seconds, resident.median, copied_exactly, segment.name,
                       (SHM_DIR / segment.name).exists())


def run_python(code: str, *args: str, timeout: float = CHILD_TIMEOUT_SECONDS) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter of this environment (``sys.executable -c``); capture output."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=timeout)


def _outcome(result: subprocess.CompletedProcess, segment: str | None = None) -> ChildOutcome:
    exists = (SHM_DIR / segment).exists() if segment is not None else None
    return ChildOutcome(result.returncode, result.stdout, result.stderr, exists)


ATTACH_WITH_STDLIB = """\
import sys
import numpy as np
from multiprocessing.shared_memory import SharedMemory

segment = SharedMemory(name=sys.argv[1])
view = np.ndarray((int(sys.argv[2]),), dtype=np.float64, buffer=segment.buf)
print(float(view.sum()))
del view
segment.close()
"""

ATTACH_UNTRACKED = ATTACH_WITH_STDLIB.replace("SharedMemory(name=sys.argv[1])",
                                              "SharedMemory(name=sys.argv[1], track=False)")

ATTACH_BY_HAND = """\
import mmap, sys
import numpy as np

with open(f"/dev/shm/{sys.argv[1]}", "r+b") as file:  # the segment is this file
    mapping = mmap.mmap(file.fileno(), 0)
view = np.ndarray((int(sys.argv[2]),), dtype=np.float64, buffer=mapping)
print(float(view.sum()))
del view
mapping.close()
"""

ATTACH_WITH_SHAREDARRAYS = """\
import pickle, sys
from sharedarrays.shm import attach

with attach(pickle.loads(bytes.fromhex(sys.argv[1]))) as view:  # the handle: name, shape, dtype, strides
    print(float(view.sum()))
"""

# attach_and_exit's ways: what each child calls, and the code it runs ('our_worker': a function, below)
ATTACH_WAYS = {"stdlib": "SharedMemory(name=...)", "untracked": "SharedMemory(name=..., track=False)",
               "by_hand": "open /dev/shm/<name> and mmap it", "sharedarrays": "sharedarrays.shm.attach",
               "our_worker": "SharedMemory(name=...)"}
CHILD_CODE = {"stdlib": ATTACH_WITH_STDLIB, "untracked": ATTACH_UNTRACKED, "by_hand": ATTACH_BY_HAND,
              "sharedarrays": ATTACH_WITH_SHAREDARRAYS}
UNTRACKED_SINCE = (3, 13)  # SharedMemory's track parameter
EXERCISE_WAYS = ("stdlib", "by_hand", "sharedarrays", "our_worker")  # alike on Python 3.8-3.13


def attach_ways_here() -> list[str]:
    """The ways of ``attach_and_exit`` this Python runs ('untracked' from 3.13)."""
    return [way for way in ATTACH_WAYS if way != "untracked" or sys.version_info >= UNTRACKED_SINCE]


def where_it_ran(way: str) -> str:
    """Where a way's child ran, for the page: another program's interpreter, or a process of ours."""
    return "a process our context started" if way == "our_worker" else "another interpreter"


def child_code_listing() -> str:
    """The code each of the exercise's children (``EXERCISE_WAYS``) runs, for the page."""
    code = {**CHILD_CODE, "our_worker": inspect.getsource(sum_by_name_with_stdlib)}
    return "\n".join(f"# child '{way}': {ATTACH_WAYS[way]}\n{code[way]}" for way in EXERCISE_WAYS)


def attach_and_exit(handle: ArrayHandle, way: str, context=None) -> ChildOutcome:
    """A child attaches a 1-D float64 shared array, reports its sum and exits cleanly.

    ``way='stdlib'``: a fresh interpreter (another program) calls ``SharedMemory(name=...)``, which
    registers the segment with that program's own resource tracker (the default on every Python),
    so the child's exit unlinks it and warns of a "leak" (seen on 3.11.7, 3.12.1 and 3.13.0).
    ``way='untracked'`` (Python 3.13+): the same with ``track=False``. ``way='by_hand'``: open
    ``/dev/shm/<name>`` and ``mmap`` it, no tracker involved. ``way='sharedarrays'``:
    ``sharedarrays.shm.attach``, which does not register it either. The code each runs:
    ``CHILD_CODE[way]``. ``way='our_worker'``: the stdlib attach in a process ``context`` (default
    spawn) starts, ``sum_by_name_with_stdlib``: it registers the segment with the tracker it shares with
    us, which unlinks only when our program ends.
    """
    if way not in ATTACH_WAYS:
        raise ValueError("way must be 'stdlib', 'untracked', 'by_hand', 'sharedarrays' or 'our_worker', "
                         f"got {way!r}")
    if way not in attach_ways_here():
        raise ValueError(f"SharedMemory's track=False needs Python 3.13+; this is {sys.version.split()[0]}")
    if way == "our_worker":
        return _attach_in_our_worker(handle, context or mp.get_context("spawn"))
    if way == "sharedarrays":
        result = run_python(CHILD_CODE[way], pickle.dumps(handle).hex())
    else:
        result = run_python(CHILD_CODE[way], handle.name, str(handle.shape[0]))
    return _outcome(result, handle.name)


def try_attach(handle: ArrayHandle) -> str:
    """Attach ``handle`` in this process and close it again: 'attached', or the name of the error
    (FileNotFoundError when the segment is gone)."""
    try:
        with attach(handle):
            return "attached"
    except FileNotFoundError as error:
        return type(error).__name__


def _attach_in_our_worker(handle: ArrayHandle, context) -> ChildOutcome:
    """``attach_and_exit``'s 'our_worker': ``sum_by_name_with_stdlib`` in a process of ``context``."""
    results = context.Queue()
    child = context.Process(target=sum_by_name_with_stdlib, args=(handle.name, handle.shape[0], results))
    child.start()
    try:
        total = results.get(timeout=CHILD_TIMEOUT_SECONDS)
    finally:
        child.join(CHILD_TIMEOUT_SECONDS)
        if child.exitcode is None:  # never leave a child behind
            child.kill()
            child.join()
        results.close()
        results.join_thread()
    exists = (SHM_DIR / handle.name).exists()
    return ChildOutcome(child.exitcode, repr(total), "", exists)


VIEW_POINTERS_AS_OBJECTS = """
    import pickle, sys
    import numpy as np
    from sharedarrays.shm import attach
    with attach(pickle.loads(bytes.fromhex(sys.argv[1]))) as pointers:
        items = np.ndarray(pointers.shape, dtype=object, buffer=pointers)
        print("viewed the segment as dtype=object", flush=True)
        print("first item:", repr(items[0]), flush=True)
"""


def dereference_objects_elsewhere(objects: np.ndarray) -> ChildOutcome:
    """Put an object array's raw bytes (pointers into this process's heap) in a segment, and let
    a fresh interpreter view them as dtype=object and print an item: it reads through pointers
    into memory it does not have (usually SIGSEGV; by chance it may read garbage)."""
    if objects.dtype != object:
        raise TypeError(f"expected an object array, got dtype {objects.dtype}")
    pointers = np.frombuffer(objects.tobytes(), dtype=np.uintp)  # what the segment would hold
    with SharedNDArray.copy_of(pointers) as shared:
        result = run_python(VIEW_POINTERS_AS_OBJECTS, pickle.dumps(shared.handle).hex())
    return _outcome(result)


def private_dev_shm_unavailable() -> str | None:
    """Why a private, small /dev/shm cannot be made here (None when it can: root and unshare)."""
    if shutil.which("unshare") is None:
        return "the unshare command is missing"
    if os.geteuid() != 0:
        return "mounting a private tmpfs needs root"
    result = run_in_small_dev_shm("pass")
    if result.returncode != 0:
        return f"unshare --mount failed: {result.stderr.strip() or result.returncode}"
    return None


def run_in_small_dev_shm(code: str, *args: str, size: str = SMALL_DEV_SHM) -> subprocess.CompletedProcess:
    """Run Python ``code`` in a private mount namespace whose /dev/shm is a fresh tmpfs of ``size``.

    Nothing outside sees that tmpfs; it disappears with the process. The interpreter replaces
    the shell (``exec``), so a signal that kills it shows as a negative return code.
    """
    script = f'mount -t tmpfs -o size={size} tmpfs /dev/shm && exec {sys.executable} -c "$0" "$@"'
    return subprocess.run([shutil.which("unshare") or "unshare", "--mount", "sh", "-c", script,
                           textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_SECONDS)


WRITE_WITH_STDLIB = """
    import sys
    from multiprocessing import shared_memory
    import numpy as np
    segment = shared_memory.SharedMemory(create=True, size=int(sys.argv[1]))
    print("created a segment of", segment.size // 2**20, "MiB", flush=True)
    view = np.ndarray((segment.size,), dtype=np.uint8, buffer=segment.buf)
    view[::4096] = 1  # the first write to each page needs a page of /dev/shm
    print("wrote every page", flush=True)
"""

CREATE_WITH_SHAREDARRAYS = """
    import sys
    from sharedarrays.shm import SharedNDArray
    try:
        with SharedNDArray.create(int(sys.argv[1]), "u1") as shared:
            shared.array[:] = 1
            print("wrote every page", flush=True)
    except MemoryError as error:
        print(f"{type(error).__name__}: {error}", flush=True)
"""


def overfill_small_dev_shm(way: str, n_bytes: int = OVERSIZED_SEGMENT_BYTES) -> ChildOutcome:
    """In a private /dev/shm of SMALL_DEV_SHM, create a segment of ``n_bytes`` and write every page.

    ``way='stdlib'``: ``SharedMemory(create=True)`` succeeds (the size is only a promise) and the
    first write past the free space kills the process with SIGBUS. ``way='sharedarrays'``:
    ``SharedNDArray.create`` checks and reserves the pages first, so it raises MemoryError.
    """
    code = {"stdlib": WRITE_WITH_STDLIB, "sharedarrays": CREATE_WITH_SHAREDARRAYS}.get(way)
    if code is None:
        raise ValueError(f"way must be 'stdlib' or 'sharedarrays', got {way!r}")
    return _outcome(run_in_small_dev_shm(code, str(n_bytes)))


def attach_and_hold_in_workers(context, handle: ArrayHandle, n_workers: int, report=None,
                               hold_seconds: float = 1.5, timeout: float = CHILD_TIMEOUT_SECONDS,
                               during: Callable[[], object] | None = None) -> dict[str, object]:
    """Start ``n_workers`` processes; hold them idle, then let each attach the shared array and
    read every page, and hold again; then release and join them.

    Marks ``'workers idle holding'``/``'workers idle end'`` and ``'workers attached holding'``/
    ``'workers attached end'`` on a MemoryReport when given (see ``helpers.lessons.demos.increase``).
    ``during`` (optional, e.g. ``tree_data_pss``) is called once halfway through each hold; returns
    ``{"workers idle": its result, "workers attached": its result}`` (None without ``during``).
    """
    from helpers.lessons.demos import hold, join_or_kill, wait_until_ready

    go, release = context.Event(), context.Event()
    started = [context.Event() for _ in range(n_workers)]
    attached = [context.Event() for _ in range(n_workers)]
    processes = [context.Process(target=attach_on_go_and_hold, args=(handle, s, go, a, release))
                 for s, a in zip(started, attached, strict=True)]
    readings: dict[str, object] = {}
    try:
        for process in processes:
            process.start()
        wait_until_ready(started, processes, timeout)
        for state, events in (("workers idle", None), ("workers attached", attached)):
            if events is not None:
                go.set()
                wait_until_ready(events, processes, timeout)
            if report is not None:
                readings[state] = hold(report, state, hold_seconds, during)
            else:
                time.sleep(hold_seconds / 2)
                readings[state] = during() if during is not None else None
                time.sleep(hold_seconds / 2)
    finally:
        go.set()
        release.set()
        join_or_kill(processes, timeout)
    return readings


def tree_data_pss() -> int | None:
    """PSS of this process and its descendants in anonymous and shared-memory pages (what an array
    is made of), in bytes, read now; None where the kernel does not split PSS by kind. File pages
    (code, libraries) are left out: their PSS moves by MiB as other programs on the machine map
    the same files."""
    kinds = tree_pss_by_kind(os.getpid())
    return None if kinds is None else kinds[ANONYMOUS] + kinds[SHARED_MEMORY]


@dataclass(frozen=True)
class FanOutTimes:
    """A fan-out of handles timed call by call (seconds): each call's wall time; in each call, the
    task that ended last, split in four: from the call's start to its sum's start, its sum of its
    slice (each task sums once, through the mapping it just made), the unmapping after it, and the
    rest until the call returned (the way back: the worker sending its result, the pool's result
    thread, the caller waking); a first read over a second read of the same slice, from other tasks
    that sum twice (the fastest of each, which a busy machine slows least); and calls of the same
    tasks that attach and sum nothing, each with its own way back (from its last task's end)."""

    calls: Timing
    last_tasks: tuple[tuple[float, float, float, float], ...]
    first_sum: float
    second_sum: float
    attach_only: Timing
    attach_only_ways_back: tuple[float, ...]

    @property
    def first_vs_second(self) -> float:
        """The fastest first read over the fastest second read of the same slice."""
        return self.first_sum / self.second_sum

    def fastest(self) -> tuple[float, tuple[float, float, float, float]]:
        """The fastest call's wall time and, within it, its last task's (until its sum began, the sum,
        the unmapping, the rest until the call returned), in seconds: they add up to the call."""
        index = self.calls.runs.index(self.calls.min)
        return self.calls.min, self.last_tasks[index]

    @property
    def attach_only_way_back(self) -> float:
        """Seconds from the last task's end to the call's return in the fastest attach-only call: the
        same span as the fan-out's way back, with no sum and no pages to unmap before it."""
        return self.attach_only_ways_back[self.attach_only.runs.index(self.attach_only.min)]


def time_fan_out(pool, handle: ArrayHandle, bounds: list[tuple[int, int]], repeat: int = 5) -> FanOutTimes:
    """Time ``repeat`` fan-outs of ``handle`` over ``bounds`` (one slice a worker) in a started pool,
    after one untimed; each task attaches, sums its slice once and says when its sum began and how
    long the sum and the unmapping took. Then
    tasks that sum twice (first vs second read) and calls of tasks that only attach (the round trip)."""
    tasks = [(handle, start, stop) for start, stop in bounds]
    pool.starmap(sum_slice_timed, tasks)  # warm-up
    walls, last_tasks = [], []
    for _ in range(repeat):
        began = time.perf_counter()  # the same clock in every process of this machine (CLOCK_MONOTONIC)
        results = pool.starmap(sum_slice_timed, tasks)
        ended = time.perf_counter()
        _, read_began, read, unmap = max(results, key=lambda result: sum(result[1:]))  # the last to end
        walls.append(ended - began)
        last_tasks.append((read_began - began, read, unmap, ended - read_began - read - unmap))
    pairs = [pair for _ in range(3) for pair in pool.starmap(time_two_reads, tasks)]  # (first, second) a task
    firsts, seconds = zip(*pairs, strict=True)
    pool.starmap(attach_and_return, tasks)  # warm-up
    attach_walls, ways_back = [], []
    for _ in range(repeat):
        began = time.perf_counter()
        ends = pool.starmap(attach_and_return, tasks)
        ended = time.perf_counter()
        attach_walls.append(ended - began)
        ways_back.append(ended - max(ends))
    return FanOutTimes(Timing(tuple(walls)), tuple(last_tasks), min(firsts), min(seconds),
                       Timing(tuple(attach_walls)), tuple(ways_back))


def outcome_mismatches(outcomes: dict[str, ChildOutcome], sums_right: dict[str, bool],
                       later_attach: dict[str, str]) -> list[str]:
    """How the children's outcomes differ from the exercise's solution (empty: they agree). Every child
    exits with code 0 and sums right; the 'stdlib' child warns of a leak and our segment is gone after
    it (a later attach raises FileNotFoundError); after every other child, without a word on stderr,
    it is still there and attaches."""
    mismatches = []
    for way, outcome in outcomes.items():
        if outcome.returncode != 0 or not sums_right[way]:
            mismatches.append(f"{way}: exit code {outcome.returncode}, sum right: {sums_right[way]}")
        if way == "stdlib":
            gone = not outcome.segment_exists_after and later_attach[way] == "FileNotFoundError"
            if not outcome.warnings or not gone:
                mismatches.append(f"{way}: warnings {outcome.warnings}, kept {outcome.segment_exists_after}, "
                                  f"later attach {later_attach[way]}")
        elif outcome.stderr or not outcome.segment_exists_after or later_attach[way] != "attached":
            mismatches.append(f"{way}: stderr {outcome.stderr!r}, kept {outcome.segment_exists_after}, "
                              f"later attach {later_attach[way]}")
    return mismatches


def _check_which_ways_keep(answer, kept: frozenset[str]) -> str | None:
    if not isinstance(answer, set | frozenset | list | tuple) or not all(
            way in EXERCISE_WAYS for way in answer):
        return ("answer with a set of way names among 'stdlib', 'by_hand', 'sharedarrays' and 'our_worker', "
                "e.g. {'stdlib'}")
    said = set(answer)
    for way in EXERCISE_WAYS:
        if way in said and way not in kept:
            return (f"after the '{way}' child exited (code 0, it only close()d), our segment was gone: "
                    "what did attaching register, and with which process?")
        if way not in said and way in kept:
            if way == "our_worker":
                return ("the 'our_worker' child left our segment: it registered it too, but with which "
                        "tracker, and when does that one unlink?")
            return f"the '{way}' child left our segment in /dev/shm: nothing it ran unlinks the name"
    return None


EXERCISE = Exercise(
    name="which children leave our segment",
    question=("A child attaches our segment one of four ways ('stdlib': SharedMemory(name=...) in "
              "another program, 'by_hand': open /dev/shm/<name> and mmap it, 'sharedarrays': "
              "sharedarrays.shm.attach, 'our_worker': SharedMemory(name=...) in a process our spawn "
              "context starts), sums it, close()s and exits with code 0. After which children is our "
              "segment still in /dev/shm? Answer a set of those names (set() for none)."),
    check=_check_which_ways_keep,
    solution=lambda **measured: {"by_hand", "sharedarrays", "our_worker"},
    explanation=("SharedMemory(name=...) registers the segment with the resource tracker of the program "
                 "it runs in: another program's own tracker unlinks it when that program exits; our "
                 "worker shares our tracker, which unlinks only when our program ends. Mapping the file, "
                 "by hand or through attach, tells no tracker."),
    misconceptions=(
        ({"stdlib", "by_hand", "sharedarrays", "our_worker"},
         "only unlink() deletes a segment, and these children only close()"),
        (set(), "a child's exit removes every segment it mapped"),
        ({"stdlib"}, "the standard library's own class is the safe way; mapping the file yourself loses it"),
        ({"by_hand", "sharedarrays"}, "a stdlib attach unlinks at exit wherever it runs"),
    ),
)


# --- Worker functions (run in child processes; importable by name under spawn and forkserver) ---


def sum_by_name_with_stdlib(name: str, n_items: int, results) -> None:
    """Attach ``name`` with SharedMemory, put the sum of its first ``n_items`` floats on ``results``."""
    segment = SharedMemory(name=name)
    view = np.ndarray((n_items,), dtype=np.float64, buffer=segment.buf)
    results.put(float(view.sum()))
    del view
    segment.close()


def sum_segment_slice(name: str, n_items: int, start: int, stop: int) -> float:
    """Attach a stdlib ``SharedMemory`` segment by name, view ``n_items`` float64, sum ``[start:stop]``.
    Attaching registers the segment with the resource tracker this worker shares with its parent."""
    segment = SharedMemory(name=name)
    try:
        view = np.ndarray((n_items,), dtype=np.float64, buffer=segment.buf)
        total = float(np.sum(view[start:stop]))
        del view
        return total
    finally:
        segment.close()


def sum_slice_timed(handle: ArrayHandle, start: int, stop: int) -> tuple[float, float, float, float]:
    """``workers.sum_shared_slice``, also returning when its sum began (``time.perf_counter()``), the
    seconds it took and the seconds the unmapping after it took: (sum, began, sum seconds, unmap seconds)."""
    with attach(handle) as array:
        began = time.perf_counter()
        total = float(np.sum(array[start:stop]))
        summed = time.perf_counter()
        del array  # no view left: leaving the block unmaps the segment now
    return total, began, summed - began, time.perf_counter() - summed


def attach_and_return(handle: ArrayHandle, start: int, stop: int) -> float:
    """A fan-out task that attaches the shared array and reads nothing: the call's cost without a sum.
    Returns when it ended (``time.perf_counter()``, after the unmapping), to time the way back."""
    with attach(handle):
        pass
    return time.perf_counter()


def time_two_reads(handle: ArrayHandle, start: int, stop: int) -> tuple[float, float]:
    """Attach, then sum ``[start:stop]`` twice: seconds of the first read (each page is mapped into
    this new mapping as it is first touched) and of the second (the pages already mapped)."""
    with attach(handle) as array:
        with stopwatch() as first:
            np.sum(array[start:stop])
        with stopwatch() as second:
            np.sum(array[start:stop])
    return first.seconds, second.seconds


_attached: dict[str, SharedNDArray] = {}  # this worker's shared arrays by segment name (keep_attached)


def keep_attached(handle: ArrayHandle) -> None:
    """A pool's initializer: attach the shared array once in this worker and keep it (``_attached``),
    so its pages' first touches are paid once per worker and no task unmaps; the mapping goes when the
    worker exits. Use: ``pool = Pool(n, initializer=keep_attached, initargs=(handle,))``, then
    ``pool.starmap(sum_attached_slice, [(handle.name, start, stop), ...])`` as often as you like."""
    _attached[handle.name] = SharedNDArray(handle)  # attach: maps the segment, tells no resource tracker


def sum_attached_slice(name: str, start: int, stop: int) -> float:
    """Sum ``[start:stop]`` of the shared array ``keep_attached`` attached in this worker, by segment name."""
    return float(np.sum(_attached[name].array[start:stop]))


def nansum_field_slice(handle, field: str, start: int, stop: int) -> float:
    """Attach a shared record array and return ``np.nansum`` of one numeric field over ``[start:stop]``."""
    from sharedarrays.shm import attach

    with attach(handle) as records:
        return float(np.nansum(records[field][start:stop]))


def field_digest(handle, field: str) -> str:
    """SHA-256 (hex) of one field's bytes of a shared record array, as this worker reads them."""
    import hashlib

    from sharedarrays.shm import attach

    with attach(handle) as records:
        return hashlib.sha256(np.ascontiguousarray(records[field]).tobytes()).hexdigest()


def attach_on_go_and_hold(handle, started, go, attached, release) -> None:
    """Say ``started`` (idle, nothing attached); on ``go`` attach the shared array and read every
    page, say ``attached``; hold the mapping until ``release`` is set."""
    from sharedarrays.shm import attach

    started.set()
    go.wait()
    with attach(handle) as array:
        workers.touch_pages(array)
        attached.set()
        release.wait()

