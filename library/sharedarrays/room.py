"""Where our shared memory lives and how much room it has: /dev/shm, RAM, the cgroup's memory limit.

Internal to ``sharedarrays``: not part of its API (``sharedarrays.__all__``), and may change
between versions.

Standard library only (so a clean-up script runs without NumPy). Every value is read afresh (bytes),
so reading twice shows what changed in between; only where the cgroup's memory files are is found
once per process (``SharedNDArray`` checks the room before every new segment). ``None`` means the
machine does not expose the value (no /dev/shm, no cgroup file).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path

SHM_DIR = Path("/dev/shm")
# Linux (glibc) keeps a POSIX segment as a file in /dev/shm, and shm_open fails without that folder;
# macOS keeps segments in the kernel, with no folder to list.
SEGMENTS_IN_A_FOLDER = sys.platform.startswith("linux")
SEGMENT_PREFIX = "sal_"  # every segment of ours: /dev/shm/sal_<creator pid>_ns<pid namespace>_<random>
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_NO_LIMIT = 2**60  # cgroup v1 writes 9223372036854771712 for "no limit"


def read_int(path: Path) -> int | None:
    """The integer at the start of a kernel file (cgroup counters), or None ("max", unreadable)."""
    try:
        text = path.read_text().split()[0]
    except (OSError, IndexError):
        return None
    if text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def cgroup_dirs(controller: str) -> list[Path]:
    """Candidate folders of this process's cgroup for one controller, v2 first, most specific first."""
    candidates: list[Path] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        rel = rel.lstrip("/")
        if controllers == "":  # cgroup v2 unified hierarchy
            for base in (_CGROUP_ROOT, _CGROUP_ROOT / "unified"):
                candidates += [base / rel, base]
        elif controller in controllers.split(","):
            base = _CGROUP_ROOT / controller
            candidates += [base / rel, base]
    return [c for c in dict.fromkeys(candidates) if c.is_dir()]


@functools.cache
def _memory_files() -> tuple[Path | None, Path | None]:
    """The files of this process's memory limit (None: no limit found) and charged bytes, found
    once (v2 first, most specific first); their values are read afresh at every call."""
    limit_file = usage_file = None
    for folder in cgroup_dirs("memory"):
        for name in ("memory.max", "memory.limit_in_bytes"):
            value = read_int(folder / name)
            if limit_file is None and value is not None and value < _NO_LIMIT:
                limit_file = folder / name
        for name in ("memory.current", "memory.usage_in_bytes"):
            if usage_file is None and read_int(folder / name) is not None:
                usage_file = folder / name
    return limit_file, usage_file


def cgroup_memory_limit() -> int | None:
    """The container's memory limit in bytes, or None if there is none (or it is unreadable)."""
    limit_file, _ = _memory_files()
    value = read_int(limit_file) if limit_file is not None else None
    return value if value is not None and value < _NO_LIMIT else None


def cgroup_memory_usage_reader() -> Callable[[], int | None]:
    """A function that reads the cgroup's charged bytes quickly (the file is found once)."""
    _, usage_file = _memory_files()
    if usage_file is None:
        return lambda: None
    return lambda: read_int(usage_file)


def cgroup_memory_usage() -> int | None:
    """Bytes the container's cgroup is charged now (page cache and /dev/shm included), or None."""
    return cgroup_memory_usage_reader()()


def cgroup_reclaimable_file_bytes() -> int | None:
    """Bytes of file pages (page cache) charged to this process's memory cgroup that the kernel
    reclaims before it refuses memory: the file LRU lists of ``memory.stat`` (``active_file`` and
    ``inactive_file``; cgroup v1's hierarchical ``total_`` ones first). tmpfs and /dev/shm pages
    are not among them (they sit on the anonymous lists). None where no such file is readable."""
    _, usage_file = _memory_files()
    if usage_file is None:
        return None
    try:
        return reclaimable_file_bytes_in((usage_file.parent / "memory.stat").read_text())
    except OSError:
        return None


def reclaimable_file_bytes_in(memory_stat: str) -> int | None:
    """``active_file + inactive_file`` of a cgroup's ``memory.stat`` text, v1 or v2 (v1's
    hierarchical ``total_`` counters first, as the cgroup's own can leave out its children's);
    None when the text has neither."""
    stat = dict(line.split(None, 1) for line in memory_stat.splitlines() if " " in line)
    for prefix in ("total_", ""):
        if f"{prefix}inactive_file" in stat:
            return sum(int(stat.get(f"{prefix}{name}", "0")) for name in ("active_file", "inactive_file"))
    return None


def _sysconf(name: str) -> int | None:
    try:
        value = os.sysconf(name)
    except (ValueError, OSError):  # a name this platform does not know (macOS: SC_AVPHYS_PAGES)
        return None
    return value if value >= 0 else None


def ram_available() -> int | None:
    """Bytes of RAM the kernel says can be allocated without swapping (``MemAvailable``, which
    counts reclaimable page cache as available); without /proc/meminfo the free pages, else all
    pages (``sysconf``: macOS knows only the total); None where none of these can be read."""
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            for line in meminfo:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    page_size = _sysconf("SC_PAGE_SIZE")
    for name in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
        pages = _sysconf(name)
        if pages is not None and page_size is not None:
            return pages * page_size
    return None


def available_memory() -> int:
    """Bytes this process may still allocate: RAM available, capped by the cgroup's headroom (its
    limit less what it is charged, page cache the kernel would reclaim counted as free, as
    ``MemAvailable`` counts it). Where the machine tells neither, no limit is assumed
    (``sys.maxsize``): the room check then lets the kernel answer."""
    available = ram_available()
    limit, usage = cgroup_memory_limit(), cgroup_memory_usage()
    if limit is not None and usage is not None:
        headroom = max(limit - usage + (cgroup_reclaimable_file_bytes() or 0), 0)
        available = headroom if available is None else min(available, headroom)
    return sys.maxsize if available is None else available


# The longest segment name every platform takes: macOS's PSHMNAMLEN (31) counts the leading "/".
NAME_LIMIT = 30
NAME_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"  # base 36: short tags and random parts
NAMESPACE_TAG_CHARS = 7  # base-36 digits of a namespace's inode kept in a name (a 32-bit inode has at most 7)


def base36(number: int) -> str:
    """``number`` (>= 0) in base 36, lower case."""
    digits = ""
    while True:
        number, digit = divmod(number, 36)
        digits = NAME_DIGITS[digit] + digits
        if number == 0:
            return digits


@functools.cache
def pid_namespace() -> str:
    """A short tag of this process's pid namespace (the last ``NAMESPACE_TAG_CHARS`` base-36 digits
    of its inode), written into our segment names so that ``sweep()`` leaves alone the segments of
    processes in other namespaces that share this /dev/shm (containers with ``--ipc=host``, a pod's
    containers): their pids mean nothing here. ``"0"`` where /proc does not tell."""
    try:
        return base36(os.stat("/proc/self/ns/pid").st_ino)[-NAMESPACE_TAG_CHARS:]
    except OSError:
        return "0"


def creator_prefix() -> str:
    """How the names of the segments this process creates begin: ``sal_<pid>_ns<namespace>_``
    (at most 22 characters: a pid has at most 7 digits on Linux, 5 on macOS)."""
    return f"{SEGMENT_PREFIX}{os.getpid()}_ns{pid_namespace()}_"


def _shm_stats() -> os.statvfs_result | None:
    try:
        return os.statvfs(SHM_DIR)
    except OSError:
        return None


def shm_size() -> int | None:
    """Total bytes of the /dev/shm tmpfs, or None where there is none."""
    stats = _shm_stats()
    return None if stats is None else stats.f_blocks * stats.f_frsize


def shm_free() -> int | None:
    """Bytes still free in /dev/shm, or None where there is none."""
    stats = _shm_stats()
    return None if stats is None else stats.f_bavail * stats.f_frsize


def shm_used() -> int | None:
    """Bytes used in /dev/shm by every segment and file there (mapped or not), or None."""
    stats = _shm_stats()
    return None if stats is None else (stats.f_blocks - stats.f_bfree) * stats.f_frsize
