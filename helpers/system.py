"""Read this machine's limits: usable CPUs, RAM, the cgroup's memory counters, /dev/shm.

Everything here reads the kernel's files and returns bytes or counts; no value is cached, so a
value read twice shows what changed in between. Only where the cgroup's memory files are is found
once per process (``shm.SharedNDArray.create`` checks the memory available before every segment).
Functions return ``None`` where the machine does not expose the value (no cgroup file, no
/dev/shm).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from pathlib import Path

import psutil

SHM_DIR = Path("/dev/shm")
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_NO_LIMIT = 2**60  # cgroup v1 writes 9223372036854771712 for "no limit"


def _read_int(path: Path) -> int | None:
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


def _cgroup_dirs(controller: str) -> list[Path]:
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
    for folder in _cgroup_dirs("memory"):
        for name in ("memory.max", "memory.limit_in_bytes"):
            value = _read_int(folder / name)
            if limit_file is None and value is not None and value < _NO_LIMIT:
                limit_file = folder / name
        for name in ("memory.current", "memory.usage_in_bytes"):
            if usage_file is None and _read_int(folder / name) is not None:
                usage_file = folder / name
    return limit_file, usage_file


def cgroup_memory_limit() -> int | None:
    """The container's memory limit in bytes, or None if there is none (or it is unreadable)."""
    limit_file, _ = _memory_files()
    value = _read_int(limit_file) if limit_file is not None else None
    return value if value is not None and value < _NO_LIMIT else None


def cgroup_memory_usage_reader() -> Callable[[], int | None]:
    """A function that reads the cgroup's charged bytes quickly (the file is found once)."""
    _, usage_file = _memory_files()
    if usage_file is None:
        return lambda: None
    return lambda: _read_int(usage_file)


def cgroup_memory_usage() -> int | None:
    """Bytes the container's cgroup is charged now (page cache and /dev/shm included), or None."""
    return cgroup_memory_usage_reader()()


def available_memory() -> int:
    """Bytes this process may still allocate: RAM available, capped by the cgroup's headroom."""
    available = psutil.virtual_memory().available
    limit, usage = cgroup_memory_limit(), cgroup_memory_usage()
    if limit is not None and usage is not None:
        available = min(available, max(limit - usage, 0))
    return available


def total_memory() -> int:
    """Bytes of RAM this process can use at most: physical RAM, capped by the cgroup limit."""
    limit = cgroup_memory_limit()
    total = psutil.virtual_memory().total
    return min(total, limit) if limit is not None else total


def cgroup_cpu_quota() -> float | None:
    """CPUs the cgroup's CFS quota allows (e.g. 1.0 on Binder), or None when unlimited."""
    for folder in _cgroup_dirs("cpu"):
        try:
            quota, period = (folder / "cpu.max").read_text().split()
            if quota != "max":
                return int(quota) / int(period)
            return None
        except (OSError, ValueError):
            pass
        quota_us, period_us = _read_int(folder / "cpu.cfs_quota_us"), _read_int(folder / "cpu.cfs_period_us")
        if quota_us is not None and period_us:
            return quota_us / period_us if quota_us > 0 else None
    return None


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask, capped by the cgroup quota (at least 1)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity call
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        cpus = min(cpus, max(1, math.floor(quota)))
    return max(1, cpus)


def shm_size() -> int | None:
    """Total bytes of the /dev/shm tmpfs, or None where there is none."""
    try:
        stats = os.statvfs(SHM_DIR)
    except OSError:
        return None
    return stats.f_blocks * stats.f_frsize


def shm_free() -> int | None:
    """Bytes still free in /dev/shm, or None where there is none."""
    try:
        stats = os.statvfs(SHM_DIR)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def shm_used() -> int | None:
    """Bytes used in /dev/shm by every segment and file there (mapped or not), or None."""
    try:
        stats = os.statvfs(SHM_DIR)
    except OSError:
        return None
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize
