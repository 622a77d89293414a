"""Read this machine's limits: usable CPUs, RAM, the cgroup's memory counters, /dev/shm.

Everything here reads the kernel's files and returns bytes or counts; no value is cached, so a
value read twice shows what changed in between. The room for shared memory (/dev/shm, RAM
available, the cgroup's memory counters) is read by the library itself (``sharedarrays.room``)
and re-exported here beside the CPU counts. Functions return ``None`` where the machine does not
expose the value (no cgroup file, no /dev/shm).
"""

from __future__ import annotations

import math
import os

import psutil

from sharedarrays.room import (
    SHM_DIR,
    available_memory,
    cgroup_dirs,
    cgroup_memory_limit,
    cgroup_memory_usage,
    cgroup_memory_usage_reader,
    read_int,
    shm_free,
    shm_size,
    shm_used,
)

__all__ = [
    "SHM_DIR", "available_memory", "cgroup_cpu_quota", "cgroup_memory_limit", "cgroup_memory_usage",
    "cgroup_memory_usage_reader", "shm_free", "shm_size", "shm_used", "total_memory", "usable_cpus",
]


def total_memory() -> int:
    """Bytes of RAM this process can use at most: physical RAM, capped by the cgroup limit."""
    limit = cgroup_memory_limit()
    total = psutil.virtual_memory().total
    return min(total, limit) if limit is not None else total


def cgroup_cpu_quota() -> float | None:
    """CPUs the cgroup's CFS quota allows (e.g. 1.0 on Binder), or None when unlimited."""
    for folder in cgroup_dirs("cpu"):
        try:
            quota, period = (folder / "cpu.max").read_text().split()
            if quota != "max":
                return int(quota) / int(period)
            return None
        except (OSError, ValueError):
            pass
        quota_us, period_us = read_int(folder / "cpu.cfs_quota_us"), read_int(folder / "cpu.cfs_period_us")
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
