"""A memory cgroup with Binder's limit for the Jupyter server of the learner's-path test.

Binder runs the whole JupyterLab (server, every kernel, every worker they start) in a container
whose memory is capped, 2 GB by default: past it the kernel's OOM killer ends a process. The test
puts the server into a cgroup of its own with that limit (kernels and workers inherit it), on
cgroup v1's memory controller or cgroup v2, so the run meets the same wall. Needs root.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class MemoryCgroup:
    path: Path
    version: int  # 1 or 2

    def add(self, pid: int) -> None:
        """Move process ``pid`` into the cgroup (its children started afterwards are in it too)."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def _read(self, name: str) -> str | None:
        try:
            return (self.path / name).read_text()
        except OSError:
            return None

    def peak_bytes(self) -> int | None:
        """The most memory the cgroup was charged at once, bytes (page cache included)."""
        text = self._read("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")
        return int(text) if text else None

    def oom_kills(self) -> int:
        """Processes the OOM killer ended in this cgroup (0 where the kernel does not count them)."""
        text = self._read("memory.oom_control" if self.version == 1 else "memory.events") or ""
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0


def _own_cgroup(controller: str) -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    raise RuntimeError(f"this process is in no {controller or 'v2'} cgroup")


def _make(limit_bytes: int, name: str) -> MemoryCgroup:
    if os.geteuid() != 0:
        raise RuntimeError("a memory cgroup needs root")
    if (V1_ROOT / "memory.limit_in_bytes").exists() or (V1_ROOT / "cgroup.procs").exists():
        path = V1_ROOT / _own_cgroup("memory").lstrip("/") / name
        path.mkdir()
        (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
        if (path / "memory.memsw.limit_in_bytes").exists():  # no escape into swap
            (path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        return MemoryCgroup(path, 1)
    if (V2_ROOT / "cgroup.controllers").exists():
        parent = V2_ROOT / _own_cgroup("").lstrip("/")
        if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            raise RuntimeError(f"cgroup v2: the memory controller is not enabled below {parent}")
        path = parent / name
        path.mkdir()
        (path / "memory.max").write_text(str(limit_bytes))
        if (path / "memory.swap.max").exists():
            (path / "memory.swap.max").write_text("0")
        return MemoryCgroup(path, 2)
    raise RuntimeError("no cgroup memory controller is mounted under /sys/fs/cgroup")


@contextmanager
def memory_cgroup(limit_bytes: int, name: str = f"sal-binder-{os.getpid()}"):
    """A new memory cgroup capped at ``limit_bytes``; removed afterwards, once its processes are gone
    (the caller stops them). Raises RuntimeError saying why where none can be made."""
    cgroup = _make(limit_bytes, name)
    try:
        yield cgroup
    finally:
        deadline = time.monotonic() + 30
        while True:
            try:
                cgroup.path.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
