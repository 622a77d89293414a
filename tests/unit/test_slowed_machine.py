"""tools.slowed_machine: a command runs in a CPU-limited cgroup beside CPU hogs, and nothing is left."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tools import slowed_machine

ROOT = Path(__file__).resolve().parents[2]
needs_root_and_cgroup = pytest.mark.skipif(
    os.geteuid() != 0 or not (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists()
                              or Path("/sys/fs/cgroup/cgroup.controllers").exists()),
    reason="needs root and a cgroup cpu controller (v1 or v2)")


@needs_root_and_cgroup
@pytest.mark.timeout(60)
def test_the_command_runs_in_a_quota_cgroup_beside_hogs_and_both_are_gone_after():
    report = "import os, psutil; print(open('/proc/self/cgroup').read()); print(os.getppid())"
    command = [sys.executable, "-m", "tools.slowed_machine", "--quota", "0.5", "--hogs", "1", "--",
               sys.executable, "-c", report]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr
    group = next(line.split(":", 2)[2] for line in done.stdout.splitlines() if "sal-slowed-" in line)
    root, _ = slowed_machine._cgroup_root()
    assert not (root / group.lstrip("/")).exists()  # removed
    # its own hogs only: the library's tests, run beside these, start busy loops of their own
    marker = group.strip().rstrip("/").rsplit("/", 1)[-1]
    hogs = [process for process in psutil.process_iter(["cmdline"])
            if marker in " ".join(process.info["cmdline"] or [])]
    assert marker.startswith("sal-slowed-") and hogs == []


@needs_root_and_cgroup
@pytest.mark.timeout(60)
def test_the_commands_exit_status_is_returned():
    assert slowed_machine.run_slowed([sys.executable, "-c", "raise SystemExit(3)"], 0.5, 0, None) == 3
    assert slowed_machine.run_slowed([sys.executable, "-c", "pass"], 0, 1, None, hogs_on="0") == 0
