"""Describe this machine for every measurement: CPUs, memory limits, /dev/shm, start methods,
library versions, and the memcpy floors every lesson compares against.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import platform
import socket
import sys
from importlib import metadata
from pathlib import Path

import psutil

from helpers.measure import system
from helpers.measure.copy_floors import memcpy_floors
from helpers.measure.units import MiB, format_bytes, format_rate

LIBRARIES = ("numpy", "psutil", "torch", "ray", "matplotlib", "ipykernel", "jupyterlab")
BINDER_SHM_BYTES = 64 * MiB  # containerd's default /dev/shm, what mybinder.org most likely gives
SMALL_RAM_BYTES = 4 * 1024 * MiB


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_governor() -> str | None:
    try:
        return Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").read_text().strip()
    except OSError:
        return None


def library_versions() -> dict[str, str | None]:
    """Installed versions of the libraries the lessons use (None where not installed)."""
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def machine_report(floor_bytes: int = 64 * MiB) -> dict:
    """A dict describing this machine, with memcpy floors measured on ``floor_bytes`` of data."""
    memory = psutil.virtual_memory()
    floors = memcpy_floors(floor_bytes)
    return {
        "host": socket.gethostname(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_governor": _cpu_governor(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": system.usable_cpus(),
        "cgroup_cpu_quota": system.cgroup_cpu_quota(),
        "ram_total_bytes": memory.total,
        "ram_available_bytes": system.available_memory(),
        "cgroup_memory_limit_bytes": system.cgroup_memory_limit(),
        "shm_size_bytes": system.shm_size(),
        "shm_free_bytes": system.shm_free(),
        "start_methods": multiprocessing.get_all_start_methods(),
        "default_start_method": multiprocessing.get_start_method(allow_none=True)
        or multiprocessing.get_context().get_start_method(),
        "libraries": library_versions(),
        "memcpy_floor_bytes": floor_bytes,
        "memcpy_warm_seconds": floors["warm"].median,
        "memcpy_fresh_seconds": floors["fresh"].median,
        "memcpy_warm_bytes_per_second": floor_bytes / floors["warm"].median,
        "memcpy_fresh_bytes_per_second": floor_bytes / floors["fresh"].median,
    }


def limits_warnings(report: dict) -> list[str]:
    """Plain-language warnings when this machine is as small as Binder's (or smaller)."""
    warnings = []
    if report["usable_cpus"] < 2:
        warnings.append(
            f"Only {report['usable_cpus']} CPU is usable here: workers take turns, so no lesson can "
            "show a parallel speed-up. Memory and copy costs are still real."
        )
    shm = report["shm_size_bytes"]
    if shm is None:
        warnings.append("No /dev/shm here: shared-memory lessons fall back or are skipped.")
    elif shm <= BINDER_SHM_BYTES:
        warnings.append(
            f"/dev/shm holds only {format_bytes(shm)} (a container default): every shared-memory "
            "segment must fit in it, so the lessons use small arrays. Writing past a full /dev/shm "
            "kills a process with SIGBUS; the helpers check the space first."
        )
    total = report["cgroup_memory_limit_bytes"] or report["ram_total_bytes"]
    if total <= SMALL_RAM_BYTES:
        warnings.append(
            f"Memory is limited to {format_bytes(total)}: going over it restarts the kernel, so the "
            "array sizes are chosen to fit."
        )
    return warnings


def print_machine_report(report: dict | None = None) -> dict:
    """Print the machine report for humans (measuring it first if not given); return it."""
    report = report if report is not None else machine_report()
    limit = report["cgroup_memory_limit_bytes"]
    shm_size, shm_free = report["shm_size_bytes"], report["shm_free_bytes"]
    rows = [
        ("CPU", f"{report['cpu_model']} ({report['logical_cpus']} logical)"),
        ("CPUs you may use", str(report["usable_cpus"])),
        ("RAM", f"{format_bytes(report['ram_total_bytes'])}, "
                f"{format_bytes(report['ram_available_bytes'])} available"),
        ("cgroup memory limit", format_bytes(limit) if limit else "none"),
        ("/dev/shm", f"{format_bytes(shm_size)}, {format_bytes(shm_free)} free" if shm_size else "none"),
        ("start methods", f"{', '.join(report['start_methods'])} "
                          f"(default here: {report['default_start_method']})"),
        ("Python", report["python"]),
        ("libraries", ", ".join(f"{k} {v}" for k, v in report["libraries"].items() if v)),
        (f"memcpy {format_bytes(report['memcpy_floor_bytes'])}, warm",
         format_rate(report["memcpy_warm_bytes_per_second"])),
        (f"memcpy {format_bytes(report['memcpy_floor_bytes'])}, fresh pages",
         format_rate(report["memcpy_fresh_bytes_per_second"])),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    for warning in limits_warnings(report):
        print(f"WARNING: {warning}")
    return report
