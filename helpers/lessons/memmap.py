"""Arrays mapped from files (``np.memmap``) on a disk folder or on tmpfs (``/dev/shm``).

What a lesson needs around ``np.memmap``: which filesystem a path is on (``filesystem_of``),
a temporary folder of ours on either kind that always goes away (``temporary_folder``), a file
created owner-only with its space reserved (``owner_only_memmap``), the page cache seen and
emptied (``cached_fraction``, ``drop_from_page_cache``), what the process tree maps of one
file (``file_memory_in_tree``), and workers that map one file by path and hold it
(``map_and_hold_in_workers``). Sizes are bytes, durations seconds.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import resource
import shutil
import signal
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from helpers.lessons import workers
from helpers.lessons.demos import hold, join_or_kill, wait_until_ready
from helpers.measure.leftovers import SHM_DIR, TEMP_PREFIX
from helpers.measure.proctree import descendant_pids
from helpers.measure.timing import Timing, rotated, time_it
from helpers.measure.units import format_bytes

OWNER_ONLY = stat.S_IRUSR | stat.S_IWUSR  # 0o600: no other user can read or write the file
PAGE = mmap.PAGESIZE
_MAPS_HEADER = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Filesystem:
    """Where a path lives: the mount point that holds it, its type (ext4, overlay, tmpfs ...)
    and the device or source named in /proc/mounts."""

    mount_point: str
    fstype: str
    source: str
    options: str = ""  # the mount options, comma-separated (e.g. "rw,relatime,size=65536k")


def filesystem_of(path: str | os.PathLike) -> Filesystem:
    """The filesystem holding ``path``: the longest mount point in /proc/mounts that contains it.

    When one mount point appears twice (mounted over), the last entry wins, as the kernel does.
    """
    target = os.path.realpath(path)
    best: Filesystem | None = None
    with open("/proc/mounts") as mounts:
        for line in mounts:
            source, point, fstype, *rest = line.split()
            point = _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), point)
            inside = target == point or target.startswith(point.rstrip("/") + "/")
            if inside and (best is None or len(point) >= len(best.mount_point)):
                best = Filesystem(point, fstype, source, rest[0] if rest else "")
    if best is None:
        raise FileNotFoundError(f"no mount point in /proc/mounts holds {target}")
    return best


def free_bytes(path: str | os.PathLike) -> int:
    """Bytes an unprivileged process may still write on the filesystem holding ``path``."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")


def disk_parent() -> Path:
    """The folder ``temporary_folder("disk")`` works in: Python's temp folder, unless that lives in
    memory (``/tmp`` is tmpfs on Fedora, Arch and in many containers), then ``/var/tmp`` or the
    home folder, whichever is on a disk filesystem. FileNotFoundError when none is."""
    candidates = [Path(tempfile.gettempdir()), Path("/var/tmp"), Path.home()]
    for folder in candidates:
        if folder.is_dir() and os.access(folder, os.W_OK) and \
                filesystem_of(folder).fstype not in MEMORY_FILESYSTEMS:
            return folder
    raise FileNotFoundError(
        f"none of {', '.join(map(str, candidates))} is a writable folder on a disk filesystem "
        "(all are in memory): there is no disk folder to compare with tmpfs here"
    )


@contextmanager
def temporary_folder(on: str = "disk", room_bytes: int = 0) -> Iterator[Path]:
    """A new folder of ours (name starts with ``sal-``) on ``"disk"`` (``disk_parent()``: Python's
    temp folder unless it is in memory) or ``"tmpfs"`` (/dev/shm), removed with everything in it
    when the block ends, also on error.

    Raises MemoryError naming both sizes when the filesystem has less than ``room_bytes`` free
    (on a full tmpfs a writer through a mapping is killed by SIGBUS), FileNotFoundError when
    there is no /dev/shm.
    """
    if on not in ("disk", "tmpfs"):
        raise ValueError(f"on must be 'disk' or 'tmpfs', got {on!r}")
    parent = disk_parent() if on == "disk" else SHM_DIR
    if not parent.is_dir():
        raise FileNotFoundError(f"{parent} does not exist here: no {on} folder to use")
    free = free_bytes(parent)
    if room_bytes > free:
        raise MemoryError(
            f"{parent} has {format_bytes(free)} free, the lesson needs {format_bytes(room_bytes)}: "
            "use a smaller array (LAB_ARRAY_MB) or free some space there"
        )
    folder = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def owner_only_memmap(path: str | os.PathLike, shape: int | tuple[int, ...], dtype="float64") -> np.memmap:
    """Create a NEW file at ``path`` readable and writable by its owner only (0o600), reserve its
    bytes on the filesystem, and map it read-write (zero-filled).

    Refuses an existing path (FileExistsError) instead of truncating it, as ``mode='w+'`` would.
    Reserving the space first (``posix_fallocate``) turns a full filesystem into an OSError here
    instead of a SIGBUS on a later write through the mapping.
    """
    dtype = np.dtype(dtype)
    n_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, OWNER_ONLY)
    try:
        os.fchmod(fd, OWNER_ONLY)  # the umask may only remove bits; make the mode exact
        if n_bytes:
            os.posix_fallocate(fd, 0, n_bytes)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return np.memmap(path, dtype=dtype, mode="r+", shape=shape)


def permissions(path: str | os.PathLike) -> int:
    """The permission bits of ``path`` (e.g. 0o600)."""
    return stat.S_IMODE(os.stat(path).st_mode)


def drop_from_page_cache(path: str | os.PathLike) -> None:
    """Write the file's dirty pages to disk, then ask the kernel to forget its cached pages.

    No root needed: ``posix_fadvise(DONTNEED)`` drops clean pages nobody maps. On tmpfs the
    pages ARE the file, so nothing is dropped.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cached_fraction(path: str | os.PathLike) -> float:
    """Share (0..1) of the file's pages now in the page cache, asked with ``mincore``."""
    size = os.path.getsize(path)
    if size == 0:
        return 1.0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    n_pages = -(-size // PAGE)
    vector = (ctypes.c_ubyte * n_pages)()
    with open(path, "rb") as file, mmap.mmap(file.fileno(), size, prot=mmap.PROT_READ) as region:
        view = np.frombuffer(region, dtype=np.uint8)
        try:
            if libc.mincore(view.ctypes.data, size, vector) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
        finally:
            del view
    return sum(byte & 1 for byte in vector) / n_pages


def faults_per_read(spec: MemmapSpec, repeat: int = 3) -> int:
    """Minor page faults (``ru_minflt``) this process took to map ``spec``'s file afresh and sum it
    once, its pages already in RAM (the fewest of ``repeat`` reads: other threads fault too). A
    fault maps one 4 KiB page, a few neighbours with it (fault-around), or a whole large folio."""
    counts = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        array = spec.open("r")
        float(np.sum(array))
        del array
        counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return min(counts)


def time_second_sum(spec: MemmapSpec, repeat: int = 5) -> Timing:
    """Seconds to sum ``spec``'s file again through one mapping whose pages a first sum has already
    mapped: a warm read without its page faults, its mapping or its unmapping."""
    array = spec.open("r")
    float(np.sum(array))  # maps every page
    return time_it(lambda: float(np.sum(array)), repeat=repeat)


def tmpfs_huge_option(path: str | os.PathLike) -> str | None:
    """The ``huge=`` option of the tmpfs mount that holds ``path`` ("never" when its options name
    none, the default), or None when ``path`` is not on tmpfs."""
    fs = filesystem_of(path)
    if fs.fstype != "tmpfs":
        return None
    return next((option.split("=", 1)[1] for option in fs.options.split(",") if option.startswith("huge=")),
                "never")


@dataclass(frozen=True)
class FileMemory:
    """What the process tree maps of one file, in bytes: RSS summed over processes (each
    process counts the pages it maps) and PSS summed (each page counted once in all)."""

    rss: int
    pss: int
    processes: int


def _file_memory_of(pid: int, target: str) -> tuple[int, int, bool]:
    rss = pss = 0
    found = matching = False
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            if _MAPS_HEADER.match(line):
                parts = line.split(maxsplit=5)
                name = parts[5].rstrip("\n") if len(parts) == 6 else ""
                matching = name.removesuffix(" (deleted)") == target
                found = found or matching
            elif matching and line.startswith(("Rss:", "Pss:")):
                value = int(line.split()[1]) * 1024
                if line.startswith("Rss:"):
                    rss += value
                else:
                    pss += value
    return rss, pss, found


def file_memory_in_tree(path: str | os.PathLike) -> FileMemory:
    """RSS and PSS (bytes) of every mapping of ``path`` in this process and its descendants."""
    target = os.path.realpath(path)
    rss = pss = processes = 0
    for pid in [os.getpid(), *descendant_pids(os.getpid())]:
        try:
            one_rss, one_pss, found = _file_memory_of(pid, target)
        except (FileNotFoundError, ProcessLookupError):
            continue  # the process ended meanwhile
        rss, pss, processes = rss + one_rss, pss + one_pss, processes + found
    return FileMemory(rss, pss, processes)


@dataclass(frozen=True)
class MemmapSpec:
    """What a worker needs to map an array from a file by itself: path, dtype, shape and the
    byte offset of the data (a .npy file has a header before it). Small and picklable."""

    path: str
    dtype: str
    shape: tuple[int, ...]
    offset: int = 0

    @classmethod
    def of(cls, array: np.memmap) -> MemmapSpec:
        """The spec of an open memmap (``np.memmap`` or ``np.load(..., mmap_mode=...)``)."""
        return cls(str(array.filename), array.dtype.str, tuple(array.shape), int(array.offset))

    def open(self, mode: str = "r") -> np.memmap:
        """Map the file in this process (``mode`` as for np.memmap: 'r', 'r+' or 'c')."""
        return np.memmap(self.path, dtype=np.dtype(self.dtype), mode=mode, shape=self.shape,
                         offset=self.offset)


def map_and_hold_in_workers(context, spec: MemmapSpec, n_workers: int, report=None,
                            hold_seconds: float = 1.5, label: str = "",
                            timeout: float = 60.0) -> dict[str, FileMemory]:
    """Start ``n_workers`` processes; hold them idle, then let each map the whole file read-only
    and read every page, and hold again; then release and join them.

    Marks ``'<label>workers idle holding'``/``'... end'`` and ``'<label>workers read holding'``/
    ``'... end'`` on a MemoryReport when given. Returns ``file_memory_in_tree`` read while idle
    and while read, under the keys ``'workers idle'`` and ``'workers read'``.
    """
    go, release = context.Event(), context.Event()
    started = [context.Event() for _ in range(n_workers)]
    mapped = [context.Event() for _ in range(n_workers)]
    processes = [context.Process(target=hold_memmap, args=(spec, s, go, m, release))
                 for s, m in zip(started, mapped, strict=True)]
    seen: dict[str, FileMemory] = {}
    try:
        for process in processes:
            process.start()
        wait_until_ready(started, processes, timeout)
        for state, event_list in (("workers idle", None), ("workers read", mapped)):
            if event_list is not None:
                go.set()
                wait_until_ready(event_list, processes, timeout)
            measure = lambda: file_memory_in_tree(spec.path)  # noqa: E731
            if report is not None:
                seen[state] = hold(report, label + state, hold_seconds, during=measure)
            else:
                seen[state] = measure()
    finally:
        go.set()
        release.set()
        join_or_kill(processes, timeout)
    return seen


# --- Worker functions (run in child processes; importable by name under spawn and forkserver) ---


def sum_memmap_slice(spec, start: int, stop: int) -> float:
    """Map the file a MemmapSpec describes read-only and sum ``[start:stop]`` (one worker's share)."""
    array = spec.open("r")
    try:
        return float(np.sum(array[start:stop]))
    finally:
        del array


_kept: dict[str, np.memmap] = {}  # this worker's mappings, by name: keep_mappings fills it


def keep_mappings(specs: Mapping[str, MemmapSpec]) -> None:
    """A pool's initializer: map each file once in this worker and read every page (the faults are
    paid here, once per worker); ``sum_kept_slice`` reads through these mappings."""
    for name, spec in specs.items():
        _kept[name] = spec.open("r")
        float(np.sum(_kept[name]))


def pid_after(seconds: float) -> int:
    """Sleep ``seconds``, then return this worker's pid: a task long enough that a pool hands its
    next task to another idle worker."""
    time.sleep(seconds)
    return os.getpid()


def wait_for_every_worker(pool, n_workers: int, seconds: float = 0.05, timeout: float = 30.0) -> None:
    """Return once ``n_workers`` distinct workers of ``pool`` have each run a task, so each has finished
    starting and its initializer: a timing that follows catches no worker still starting."""
    deadline = time.monotonic() + timeout
    while len(set(pool.map(pid_after, [seconds] * n_workers, chunksize=1))) < n_workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {n_workers} workers answered within {timeout} s")


def time_pool_starts(context, n_workers: int, ways: Mapping[str, Mapping[str, MemmapSpec] | None],
                     repeat: int = 5) -> dict[str, Timing]:
    """Seconds from creating a pool of ``n_workers`` to every worker having run a first task (so each has
    run its initializer), for each of ``ways``: None starts the pool with no initializer, specs with
    ``keep_mappings`` of them. The ways start in turns (``rotated``); each pool is closed and joined
    untimed. Returns each way's Timing, by the keys of ``ways``."""
    runs: dict[str, list[float]] = {name: [] for name in ways}
    for round_number in range(repeat):
        for name, specs in rotated(list(ways.items()), round_number):
            options = {} if specs is None else {"initializer": keep_mappings, "initargs": (specs,)}
            start = time.perf_counter()
            with context.Pool(n_workers, **options) as pool:
                wait_for_every_worker(pool, n_workers, seconds=0.002)
                runs[name].append(time.perf_counter() - start)
                pool.close()
                pool.join()
    return {name: Timing(tuple(seconds)) for name, seconds in runs.items()}


def sum_kept_slice(name: str, start: int, stop: int) -> float:
    """Sum ``[start:stop]`` of the file ``keep_mappings`` mapped under ``name`` in this worker."""
    return float(np.sum(_kept[name][start:stop]))


def hold_memmap(spec, started, go, mapped, release) -> None:
    """Say ``started``; on ``go`` map the whole file read-only and read every page, say ``mapped``,
    then keep the mapping until ``release`` is set."""
    started.set()
    go.wait()
    array = spec.open("r")
    workers.touch_pages(array)
    mapped.set()
    release.wait()
    del array


def write_through_memmap(spec, index: int, value: float, mode: str) -> float:
    """Map the file with ``mode`` ('r+' or 'c'), write ``value`` at ``index``, flush; return what
    this worker then reads at ``index`` (its own view of the write)."""
    array = spec.open(mode)
    try:
        array[index] = value
        array.flush()
        return float(array[index])
    finally:
        del array


def write_and_die(spec, index: int, value: float) -> None:
    """Map the file 'r+', write ``value`` at ``index`` and SIGKILL this process: no ``flush()``, no
    unmap, no exit handler. The write is in the page cache already, so the file keeps it."""
    array = spec.open("r+")
    array[index] = value
    os.kill(os.getpid(), signal.SIGKILL)
