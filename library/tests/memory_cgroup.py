"""A memory cgroup of its own for one test (root only): cgroup v1's memory controller or cgroup v2."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")


def _own_path(controller: str) -> str:
    """This process's cgroup path for ``controller`` ('' for cgroup v2), from /proc/self/cgroup."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path.lstrip("/")
    raise RuntimeError(f"this process is in no {controller or 'v2'} cgroup")


def _new(limit_bytes: int, name: str) -> Path:
    if os.geteuid() != 0:
        raise RuntimeError("a memory cgroup needs root")
    if (V1_ROOT / "cgroup.procs").exists():
        path = V1_ROOT / _own_path("memory") / name
        path.mkdir()
        (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
        return path
    if (V2_ROOT / "cgroup.controllers").exists():
        parent = V2_ROOT / _own_path("")
        if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            raise RuntimeError(f"cgroup v2: the memory controller is not enabled below {parent}")
        path = parent / name
        path.mkdir()
        (path / "memory.max").write_text(str(limit_bytes))
        return path
    raise RuntimeError("no cgroup memory controller is mounted under /sys/fs/cgroup")


@contextmanager
def memory_cgroup(limit_bytes: int, name: str) -> Iterator[Path]:
    """A new memory cgroup capped at ``limit_bytes``: its folder, where writing a pid to
    ``cgroup.procs`` moves that process in. Removed afterwards, once its processes are gone (the
    caller ends them). Raises RuntimeError saying why where none can be made."""
    path = _new(limit_bytes, name)
    try:
        yield path
    finally:
        deadline = time.monotonic() + 30
        while True:
            try:
                path.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
