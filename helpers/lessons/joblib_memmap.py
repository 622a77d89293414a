"""joblib's automatic memory-mapping, measured for lesson 06: what ``Parallel(n_jobs=..., backend="loky")``
does with a NumPy argument, where it puts the file, and what the workers hold.

An array over ``max_nbytes`` (joblib's default: 1 MB) is dumped by joblib into a file in a folder
``joblib_memmapping_folder_<pid>_...`` (in ``/dev/shm`` when it has more than 2 GB free, else the
temp folder; ``temp_folder=`` or ``JOBLIB_TEMP_FOLDER`` choose) and each loky worker maps that file
(``mmap_mode``, default ``'r'``). What a worker receives (``describe_argument``), where joblib puts
its files (``joblib_temp_root``, ``joblib_folders``), and the workers holding an argument while the
tree's memory is sampled (``hold_in_workers``), calls timed with the seconds joblib spent dumping
and waiting to delete their dump's folder (``time_calls``). ``release_joblib`` shuts loky's
workers down and removes the empty folders joblib keeps until the interpreter exits. What a SIGKILLed
parent leaves behind is ``helpers.lessons.joblib_memmap_crash``. Sizes are bytes, durations seconds.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import multiprocessing
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import joblib._memmapping_reducer
import joblib.disk
import numpy as np
from joblib import Parallel, delayed, dump
from joblib._memmapping_reducer import SYSTEM_SHARED_MEM_FS_MIN_SIZE  # joblib's /dev/shm threshold

from helpers.lessons.demos import hold
from helpers.lessons.exercises import Exercise
from helpers.lessons.memmap import FileMemory, file_memory_in_tree
from helpers.lessons.workers import touch_pages
from helpers.measure.leftovers import SHM_DIR, TEMP_PREFIX, temp_dir
from helpers.measure.timing import Timing, time_in_turns, time_it
from helpers.measure.units import format_bytes

FOLDER_PREFIX = "joblib_memmapping_folder_"
BACKEND = "loky"  # joblib's default, named: loky workers are fresh interpreters (fork + exec, like spawn)
WHERE = ("pickled", "joblib's file", "its own file")  # what a worker's argument can be
READY_TIMEOUT = 120.0


@dataclass(frozen=True)
class ArgumentView:
    """What one worker received: its type, the file it maps (None: an unpickled copy in the worker's
    own memory), whether it may write, the memmap mode, its first item and the worker's pid."""

    type_name: str
    filename: str | None
    writeable: bool
    mode: str | None
    first: float
    pid: int

    @property
    def where(self) -> str:
        """One of ``WHERE``: pickled, a file in a joblib folder, or a file that was already there."""
        if self.filename is None:
            return WHERE[0]
        return WHERE[1] if Path(self.filename).parent.name.startswith(FOLDER_PREFIX) else WHERE[2]


@dataclass(frozen=True)
class TempRoot:
    """The folder joblib creates its memmapping folders in, and why (joblib's rule, read off this machine)."""

    path: Path
    reason: str


def joblib_temp_root(temp_folder: str | os.PathLike | None = None) -> TempRoot:
    """Where joblib 1.x puts its dumps: ``temp_folder``, else ``$JOBLIB_TEMP_FOLDER``, else /dev/shm if
    it has more than ``SYSTEM_SHARED_MEM_FS_MIN_SIZE`` bytes free (2 GB), else Python's temp folder."""
    if temp_folder is not None:
        return TempRoot(Path(temp_folder), "temp_folder= was given")
    if os.environ.get("JOBLIB_TEMP_FOLDER"):
        return TempRoot(Path(os.environ["JOBLIB_TEMP_FOLDER"]), "JOBLIB_TEMP_FOLDER is set")
    if SHM_DIR.is_dir():
        stats = os.statvfs(SHM_DIR)
        free = stats.f_bsize * stats.f_bavail
        threshold = SYSTEM_SHARED_MEM_FS_MIN_SIZE
        limit = f"joblib's {threshold / 1e9:.0f} GB ({format_bytes(threshold)})"
        if free > SYSTEM_SHARED_MEM_FS_MIN_SIZE:
            return TempRoot(SHM_DIR, f"/dev/shm has {format_bytes(free)} free, over {limit}")
        return TempRoot(temp_dir(), f"/dev/shm has {format_bytes(free)} free, under {limit}")
    return TempRoot(temp_dir(), "there is no /dev/shm")


def dump_root(array: np.ndarray, n_workers: int, **parallel_options) -> Path:
    """The folder in which one ``Parallel(n_jobs=n_workers, backend="loky", **parallel_options)`` call
    made its memmapping folder for ``array``, as the worker that mapped the dump reports it."""
    [view] = Parallel(n_jobs=n_workers, backend=BACKEND, **parallel_options)(
        delayed(describe_argument)(array) for _ in range(1))
    if view.where != WHERE[1]:
        raise ValueError(f"joblib did not dump this array (the worker got it {view.where}): give one over "
                         "max_nbytes, without Python objects, not already a memmap")
    return Path(view.filename).parent.parent


def temp_folder_experiment(array: np.ndarray, n_workers: int, folder: Path) -> dict[str, Path]:
    """Where joblib dumps ``array`` when asked for ``folder``: with ``temp_folder=`` and with
    ``JOBLIB_TEMP_FOLDER`` while loky's workers from an earlier call live on, then with ``temp_folder=``
    on new workers, then without it. Shuts loky's workers down before the third call and after the last."""
    roots = {"temp_folder=, workers kept from the last call": dump_root(array, n_workers, temp_folder=folder)}
    before = os.environ.get("JOBLIB_TEMP_FOLDER")
    os.environ["JOBLIB_TEMP_FOLDER"] = str(folder)
    try:
        roots["JOBLIB_TEMP_FOLDER, the same workers"] = dump_root(array, n_workers)
    finally:
        if before is None:
            del os.environ["JOBLIB_TEMP_FOLDER"]
        else:
            os.environ["JOBLIB_TEMP_FOLDER"] = before
    release_joblib()
    try:
        roots["temp_folder=, new workers"] = dump_root(array, n_workers, temp_folder=folder)
        roots["no temp_folder=, the same workers"] = dump_root(array, n_workers)
    finally:
        release_joblib()  # else later calls would keep dumping into ``folder``
    return roots


FOLDER_RETRY_S = joblib.disk.RM_SUBDIRS_RETRY_TIME  # joblib's wait before it tries a folder again: 0.1 s


@contextlib.contextmanager
def folder_retry_waits() -> Iterator[list[float]]:
    """The seconds this process sleeps inside the block in ``joblib.disk.delete_folder``: at the end
    of a call joblib deletes the call's memmapping folder, and while the dump is still in it (loky's
    resource tracker removes it once no worker holds it) joblib sleeps ``FOLDER_RETRY_S`` and tries
    again. The yielded list fills as the block runs."""
    slept: list[float] = []
    real = joblib.disk.time

    class CountingTime:
        def __getattr__(self, name):
            return getattr(real, name)

        def sleep(self, seconds: float) -> None:
            slept.append(seconds)
            real.sleep(seconds)

    joblib.disk.time = CountingTime()
    try:
        yield slept
    finally:
        joblib.disk.time = real


@contextlib.contextmanager
def seconds_in(module, name: str) -> Iterator[list[float]]:
    """The seconds each call of ``module.<name>`` made inside the block took (the function is wrapped
    for the block's length: code that looks the name up in ``module`` at call time is timed)."""
    spent: list[float] = []
    real = getattr(module, name)

    @functools.wraps(real)  # its module and name stay the real one's: joblib looks functions up by them
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    setattr(module, name, timed)
    try:
        yield spent
    finally:
        setattr(module, name, real)


@dataclass(frozen=True)
class TimedCalls:
    """A ``Timing`` of calls (seconds) and, for each timed run in order: the seconds joblib slept in it
    before trying again to delete the call's folder (``folder_retry_waits``), and the seconds its
    memmapping reducer spent dumping arguments (``joblib.dump``, inside the call)."""

    timing: Timing
    retry_waits: tuple[float, ...]
    dumping: tuple[float, ...]


def time_calls(calls: Mapping[str, Callable[[], object]], repeat: int = 5) -> dict[str, TimedCalls]:
    """``time_in_turns(calls, repeat, warmup=1)`` (calls that share a pool: the same ``Parallel``
    options), counting each timed run's ``folder_retry_waits`` and the seconds spent in the memmapping
    reducer's ``dump`` (``seconds_in``). Returns each call's ``TimedCalls``, by the keys of ``calls``."""
    waits: dict[str, list[float]] = {name: [] for name in calls}
    dumping: dict[str, list[float]] = {name: [] for name in calls}

    def counted(name: str) -> Callable[[], None]:
        def run() -> None:
            with folder_retry_waits() as slept, seconds_in(joblib._memmapping_reducer, "dump") as dumped:
                calls[name]()
            waits[name].append(sum(slept))
            dumping[name].append(sum(dumped))
        return run

    timings = time_in_turns({name: counted(name) for name in calls}, repeat=repeat, warmup=1)
    return {name: TimedCalls(timings[name], tuple(waits[name][1:]), tuple(dumping[name][1:]))
            for name in calls}  # [1:]: the warm-up round's


def time_dump(array: np.ndarray, folder: Path, repeat: int = 5) -> Timing:
    """Seconds of ``joblib.dump(array, <folder>/dump.pkl)``, the call joblib's reducer makes to dump
    an argument (a new file each run, removed untimed before the next and after the last)."""
    path = Path(folder) / "dump.pkl"
    try:
        return time_it(lambda: dump(array, path), repeat=repeat, warmup=1,
                       setup=lambda: path.unlink(missing_ok=True))
    finally:
        path.unlink(missing_ok=True)


def time_write(array: np.ndarray, folder: Path, repeat: int = 5) -> Timing:
    """Seconds to write ``array``'s bytes into a new file in ``folder`` with one ``write``: a dump's floor
    there (its pages are new, allocated as written; a new file each run, removed untimed)."""
    path = Path(folder) / "bytes.raw"
    data = memoryview(np.ascontiguousarray(array)).cast("B")

    def write() -> None:
        with open(path, "wb") as file:
            file.write(data)

    try:
        return time_it(write, repeat=repeat, warmup=1, setup=lambda: path.unlink(missing_ok=True))
    finally:
        path.unlink(missing_ok=True)


def joblib_folders(pid: int | None = None) -> list[Path]:
    """joblib's memmapping folders now in /dev/shm and the temp folder (of process ``pid`` only if given)."""
    prefix = FOLDER_PREFIX if pid is None else f"{FOLDER_PREFIX}{pid}_"
    found = []
    for parent in dict.fromkeys((SHM_DIR, temp_dir())):
        if parent.is_dir():
            found += sorted(path for path in parent.iterdir() if path.name.startswith(prefix))
    return found


def bytes_in(folders: list[Path]) -> int:
    """Bytes of the files in ``folders`` (a folder removed meanwhile counts 0)."""
    total = 0
    for folder in folders:
        for path in folder.glob("*"):
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                continue
    return total


def release_joblib(timeout: float = 10.0) -> list[Path]:
    """Shut loky's reusable workers down (joblib keeps them for its next call), wait up to ``timeout``
    for loky's resource tracker to unlink the dumped files, then remove this process's joblib folders
    (joblib deletes them only when the interpreter exits). Returns the folders removed here."""
    from joblib.externals.loky import reusable_executor  # its one executor, if any, is module state

    executor = getattr(reusable_executor, "_executor", None)
    if executor is not None:
        if hasattr(executor, "terminate"):
            executor.terminate()  # joblib's MemmappingExecutor: shut down, then clean its folders
        else:
            executor.shutdown(wait=True)
        reusable_executor._executor = None  # a shut-down executor's semaphores go when it is collected
        del executor
    multiprocessing.active_children()  # forgets ended workers (a killed one still holds a semaphore)
    gc.collect()
    deadline = time.monotonic() + timeout
    while bytes_in(joblib_folders(os.getpid())) and time.monotonic() < deadline:
        time.sleep(0.05)
    removed = joblib_folders(os.getpid())
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    return removed


@dataclass(frozen=True)
class Held:
    """What ``hold_in_workers`` saw: the workers' pids, and the mappings of this process's joblib dumps
    in the tree (bytes, read halfway through the window; zero when nothing was dumped)."""

    pids: list[int]
    dump: FileMemory


def dump_memory() -> FileMemory:
    """RSS and PSS (bytes) that the tree maps of the files now in this process's joblib folders, and how
    many processes map one (the most of any file)."""
    rss = pss = processes = 0
    for folder in joblib_folders(os.getpid()):
        for path in folder.glob("*"):
            seen = file_memory_in_tree(path)
            rss, pss, processes = rss + seen.rss, pss + seen.pss, max(processes, seen.processes)
    return FileMemory(rss, pss, processes)


def hold_in_workers(report, label: str, array: np.ndarray | None, n_workers: int, seconds: float,
                    **parallel_options) -> Held:
    """One ``Parallel(n_jobs=n_workers, backend="loky", **parallel_options)`` call, in a thread, whose
    ``n_workers`` tasks each receive ``array``, read every page and hold it while ``'<label> holding'``
    .. ``'<label> end'`` is marked on a MemoryReport (``demos.hold``)."""
    with tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as folder:
        pids: list[int] = []
        errors: list[BaseException] = []

        def call():
            try:
                parallel = Parallel(n_jobs=n_workers, backend=BACKEND, **parallel_options)
                pids.extend(parallel(delayed(hold_argument)(array, folder) for _ in range(n_workers)))
            except BaseException as error:  # noqa: BLE001 - raised again in the caller's thread
                errors.append(error)

        thread = threading.Thread(target=call, name=f"joblib {label}")
        thread.start()
        try:
            deadline = time.monotonic() + READY_TIMEOUT
            while len(list(Path(folder).glob("ready-*"))) < n_workers and thread.is_alive():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the workers did not all hold the array within {READY_TIMEOUT:.0f} s")
                time.sleep(0.01)
            dump = hold(report, label, seconds, during=dump_memory) if thread.is_alive() else None
        finally:
            Path(folder, "release").touch()
            thread.join()
    if errors:
        raise errors[0]
    return Held(pids, dump)


def workers_pss(report, label: str, pids: list[int]) -> float:
    """Median PSS (bytes) summed over the processes ``pids``, over the exact samples of ``'<label> holding'``
    .. ``'<label> end'`` on a MemoryReport: what those workers held, apart from the parent's noise."""
    samples = [sample for sample in report.window(f"{label} holding", f"{label} end") if sample.exact]
    if not samples:
        raise ValueError(f"no exact samples between '{label} holding' and '{label} end'; hold longer")
    return statistics.median(sum(sample.processes[pid].pss for pid in pids if pid in sample.processes)
                             for sample in samples)


# --- Worker functions (run in loky workers; importable by name) ---


def describe_argument(array: np.ndarray) -> ArgumentView:
    """What this worker received as ``array``: an ``ArgumentView``. The file is that of the np.memmap
    found along ``.base`` (joblib hands a strided view of a file as a plain ndarray over a memmap)."""
    mapped = array
    while mapped is not None and not isinstance(mapped, np.memmap):
        mapped = getattr(mapped, "base", None)
    filename = getattr(mapped, "filename", None)
    return ArgumentView(type(array).__name__, None if filename is None else str(filename),
                        bool(array.flags.writeable), getattr(mapped, "mode", None), float(array.flat[0]),
                        os.getpid())


def sum_argument(array: np.ndarray) -> float:
    """Sum the array this worker received (reads every page)."""
    return float(np.sum(array))


def hold_argument(array: np.ndarray | None, folder: str) -> int:
    """Read every page of ``array`` (None: hold nothing), create ``folder/ready-<pid>``, hold it until
    ``folder/release`` exists; return this worker's pid."""
    if array is not None:
        touch_pages(array)
    Path(folder, f"ready-{os.getpid()}").touch()
    while not Path(folder, "release").exists():
        time.sleep(0.01)
    return os.getpid()


# --- The exercise: which arrays does joblib memory-map? ---


# The right answer for the lesson's five arrays, by the names its ``candidates`` give them.
LESSON_ANSWER = {"joblib_array": WHERE[1], "source[:100]": WHERE[0], "objects": WHERE[0],
                 "mapped": WHERE[2], "mapped[:100]": WHERE[2]}


def _check_where(answer, views: dict[str, ArgumentView]) -> str | None:
    if not isinstance(answer, dict) or set(answer) != set(views):
        return f"answer with a dict of the {len(views)} names, each one of {WHERE}"
    wrong = [name for name, view in views.items() if answer[name] != view.where]
    if wrong:
        return f"look again at {wrong[0]!r}: its size, its dtype, and whether it already lives in a file"
    return None


EXERCISE = Exercise(
    name="which arrays joblib memory-maps",
    question=f"For each array, what does a loky worker receive: one of {WHERE}?",
    check=_check_where,
    solution=lambda views: {name: view.where for name, view in views.items()},
    explanation="joblib first asks whether an array already lives in a file (an np.memmap, or a view "
                "of one): then it sends that file's name, whatever the size. Otherwise it dumps the array "
                "only when it is over max_nbytes AND holds no Python objects.",
    misconceptions=(  # keyed by the lesson's names for its five arrays (``candidates``)
        ({**LESSON_ANSWER, "objects": WHERE[1]},
         "joblib dumps every argument over max_nbytes, an array of Python objects too"),
        ({**LESSON_ANSWER, "source[:100]": WHERE[1]},
         "a view of a big array is mapped from joblib's file like the array it views"),
        ({**LESSON_ANSWER, "mapped": WHERE[1]},
         "an np.memmap is dumped again into joblib's folder, like any big array"),
        ({**LESSON_ANSWER, "mapped[:100]": WHERE[0]},
         "size alone decides: a small array is pickled, even a slice of a file"),
        ({**LESSON_ANSWER, "mapped": WHERE[1], "mapped[:100]": WHERE[0]},
         "big goes to joblib's file, small is pickled, whatever holds the array"),
    ),
)



def as_solved(views: dict[str, ArgumentView], own_file: str | os.PathLike) -> bool:
    """Whether the lesson's five arrays (``candidates``' names) reached the workers as its worked
    solution says: each where ``LESSON_ANSWER`` puts it, joblib's dump read-only, and ``own_file``'s
    arrays mapped from that file, writable. The check cell asserts it without stating the answer."""
    own = [name for name, where in LESSON_ANSWER.items() if where == WHERE[2]]
    dumped = views["joblib_array"]
    return ({name: view.where for name, view in views.items()} == LESSON_ANSWER
            and dumped.type_name == "memmap" and dumped.mode == "r" and not dumped.writeable
            and all(views[name].filename == str(own_file) and views[name].writeable for name in own))
