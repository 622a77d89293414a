"""Read one process tree's memory from /proc: who the descendants are, and each one's RSS/USS/PSS.

Two readers with different costs: ``process_memory`` reads /proc/PID/smaps_rollup (RSS, USS and
PSS, exact, but the kernel walks every mapping: ~0.5 ms for a Python process), ``resident_bytes``
reads /proc/PID/statm (RSS only, ~20 µs). ``helpers.measure.memory`` uses the cheap one to notice change
and the exact one when something changed. All values are bytes.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass

import psutil

PAGE = mmap.PAGESIZE


@dataclass(frozen=True)
class ProcessMemory:
    """One process's memory at one instant, in bytes."""

    rss: int
    uss: int
    pss: int



def label(pid: int, root_pid: int) -> str:
    """A short name for a process in the tree: 'this process (PID)', 'spawned child (PID)', ..."""
    if pid == root_pid:
        return f"this process ({pid})"
    try:
        cmdline = " ".join(psutil.Process(pid).cmdline())
    except (psutil.Error, OSError):
        cmdline = ""
    for marker, role in (
        ("resource_tracker", "resource tracker"),
        ("forkserver", "forkserver"),
        ("multiprocessing.spawn", "spawned child"),
    ):
        if marker in cmdline:
            return f"{role} ({pid})"
    return f"child ({pid})"


class ProcFiles:
    """Keeps /proc files open and re-reads them with pread: about 4x cheaper than open/read/close.

    A /proc file re-generates its text on a read at offset 0. An fd opened for a process that has
    since exited fails with ESRCH (it never reads a newer process that got the same pid), and is
    dropped. ``sweep_untouched()`` closes the files not read since the previous sweep.
    """

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self._touched: set[str] = set()

    def read(self, path: str) -> str | None:
        """The file's text now, or None when it (or its process) is gone."""
        self._touched.add(path)
        fd = self._fds.get(path)
        if fd is None:
            try:
                fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
        try:
            chunks, offset = [], 0
            while True:
                chunk = os.pread(fd, 65536, offset)
                chunks.append(chunk)
                if len(chunk) < 65536:
                    return b"".join(chunks).decode()
                offset += len(chunk)
        except OSError:
            self._forget(path)
            return None

    def _forget(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def sweep_untouched(self) -> None:
        for path in set(self._fds) - self._touched:
            self._forget(path)
        self._touched = set()

    def close(self) -> None:
        for path in list(self._fds):
            self._forget(path)


def _children_from_proc(pid: int, files: ProcFiles) -> list[int] | None:
    """Direct children of ``pid`` from /proc/PID/task/*/children (None where the kernel lacks it).

    Every thread's file is read: a pool's worker-handler thread starts workers, not the main one.
    """
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # the process ended meanwhile
    children: list[int] = []
    for tid in tasks:
        text = files.read(f"/proc/{pid}/task/{tid}/children")
        if text is None:
            if pid == os.getpid() and tid == str(pid):
                return None  # even our own main thread has no children file: no CONFIG_PROC_CHILDREN
            continue  # the thread or process ended meanwhile
        children.extend(int(child) for child in text.split())
    return children


def descendant_pids(root_pid: int, files: ProcFiles | None = None) -> list[int]:
    """Every live descendant of ``root_pid`` (children, grandchildren, ...), parents first."""
    own_files = files is None
    files = files or ProcFiles()
    found: list[int] = []
    pending = [root_pid]
    try:
        while pending:
            children = _children_from_proc(pending.pop(), files)
            if children is None:  # no /proc children files: ask psutil (slower, reads every process)
                try:
                    return [c.pid for c in psutil.Process(root_pid).children(recursive=True)]
                except psutil.Error:
                    return []
            found.extend(children)
            pending.extend(children)
        return found
    finally:
        if own_files:
            files.close()


def _smaps_rollup_fields(pid: int) -> dict[str, int] | None:
    """The fields of /proc/PID/smaps_rollup (``Rss``, ``Pss``, ``Pss_Anon`` ...) in bytes, or None
    when the process is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as file:
            text = file.read()
    except OSError:
        return None
    fields = {}
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "kB":
            fields[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return fields


def _read_smaps_rollup(pid: int) -> ProcessMemory | None:
    """RSS, USS (private pages) and PSS of one process from /proc/PID/smaps_rollup, in bytes."""
    fields = _smaps_rollup_fields(pid)
    if not fields or "Rss" not in fields:
        return None
    private = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return ProcessMemory(fields["Rss"], private, fields.get("Pss", private))


# The fields of /proc/PID/smaps_rollup that split PSS by kind of page (Linux 5.x and later).
PSS_KINDS = {"Pss_Anon": "anonymous", "Pss_Shmem": "shared memory", "Pss_File": "files (code, libraries)"}


def pss_by_kind(pid: int) -> dict[str, int] | None:
    """PSS of one process split by kind of page (``PSS_KINDS``' names), in bytes: None when the
    process is gone or unreadable, or the kernel does not split PSS (before Linux 5.x, not Linux)."""
    fields = _smaps_rollup_fields(pid)
    if fields is None or not set(PSS_KINDS) <= set(fields):
        return None
    return {kind: fields[field] for field, kind in PSS_KINDS.items()}


def tree_pss_by_kind(root: int) -> dict[str, int] | None:
    """PSS of ``root`` and its descendants split by kind of page (``pss_by_kind``), in bytes, read
    now; a process that ended meanwhile is left out. None where the kernel does not split PSS."""
    totals = dict.fromkeys(PSS_KINDS.values(), 0)
    for pid in [root, *descendant_pids(root)]:
        kinds = pss_by_kind(pid)
        if kinds is None:
            if os.path.exists(f"/proc/{pid}"):
                return None  # a readable process, but no split of PSS by kind
            continue
        for kind, pss in kinds.items():
            totals[kind] += pss
    return totals


def process_memory(pid: int) -> ProcessMemory | None:
    """RSS, USS and PSS of one process in bytes (None if it is gone or not readable).

    Reads /proc/PID/smaps_rollup where the kernel has it, else asks psutil (where a platform
    has no PSS, USS stands in for it).
    """
    measured = _read_smaps_rollup(pid)
    if measured is not None:
        return measured
    try:
        info = psutil.Process(pid).memory_full_info()
    except (psutil.Error, OSError):
        return None
    return ProcessMemory(info.rss, info.uss, getattr(info, "pss", info.uss))


def resident_bytes(pid: int, files: ProcFiles | None = None) -> int | None:
    """RSS of one process in bytes from /proc/PID/statm (cheap; None if gone or unreadable)."""
    path = f"/proc/{pid}/statm"
    if files is not None:
        text = files.read(path)
    else:
        try:
            with open(path) as file:
                text = file.read()
        except OSError:
            text = None
    if text is None:
        return None
    return int(text.split()[1]) * PAGE
