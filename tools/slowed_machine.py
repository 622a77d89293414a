"""Run a command on this machine slowed on purpose: what a busy CI runner or Binder's shared CPU gives.

    python -m tools.slowed_machine [--quota CORES] [--hogs N] [--cpus LIST] [--hogs-on LIST] -- COMMAND ...

The command (and everything it starts) runs in a new cgroup of the cpu controller limited to
``--quota`` cores (default 0.5: a CFS quota of 50 ms in every 100 ms period; 0: no quota), while
``--hogs`` CPU-bound processes (default: one per CPU) compete with it from outside the cgroup.
``--cpus`` pins the command and the hogs to those CPUs (taskset's list form, e.g. ``0``);
``--hogs-on`` pins the hogs alone (e.g. ``--quota 0 --hogs 1 --hogs-on 0``: a neighbour on the CPU
the Binder-path browser run gives its server). Needs root and, with a quota, a cgroup v1 cpu
controller at /sys/fs/cgroup/cpu or cgroup v2 at /sys/fs/cgroup. The cgroup and the hogs are
removed when the command ends, also on Ctrl-C; the command's exit status is returned.

Checks that compare ratios to floors measured in the same run must pass under it; a check that
compares absolute seconds, or a floor measured at another moment than what it is compared with,
does not. Maintainers use it to show that a gate holds on a slow machine (see the README).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

PERIOD_US = 100_000
HOG = "while True: pass"


def _cgroup_root() -> tuple[Path, str]:
    """(the folder new cpu cgroups go in, 'v1' or 'v2')."""
    v1 = Path("/sys/fs/cgroup/cpu")
    if (v1 / "cpu.cfs_quota_us").exists():
        return v1, "v1"
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").exists() and "cpu" in (v2 / "cgroup.controllers").read_text().split():
        return v2, "v2"
    raise SystemExit("no cgroup cpu controller found (cgroup v1 /sys/fs/cgroup/cpu or v2 /sys/fs/cgroup)")


@contextlib.contextmanager
def cpu_limited_cgroup(cores: float) -> Iterator[Path]:
    """A new cgroup whose processes together get at most ``cores`` CPUs; removed on exit (its
    processes are moved back to the root first, so the removal never fails on a straggler)."""
    root, version = _cgroup_root()
    group = root / hog_marker()
    group.mkdir()
    quota = max(1000, int(cores * PERIOD_US))
    try:
        if version == "v1":
            (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        yield group
    finally:
        for _ in range(50):
            pids = [line for line in (group / "cgroup.procs").read_text().split() if line]
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    (root / "cgroup.procs").write_text(pid)
            time.sleep(0.1)
        group.rmdir()


def _pinned(command: list[str], cpus: str | None) -> list[str]:
    return ["taskset", "-c", cpus, *command] if cpus else command


def _wait(child: subprocess.Popen) -> int:
    try:
        return child.wait()
    except KeyboardInterrupt:
        child.terminate()
        child.wait()
        raise


def hog_marker(pid: int | None = None) -> str:
    """What the hogs of the run made by process ``pid`` (default: this one) carry in their command
    line; its cgroup has the same name."""
    return f"sal-slowed-{os.getpid() if pid is None else pid}"


def run_slowed(command: list[str], cores: float, n_hogs: int, cpus: str | None,
               hogs_on: str | None = None) -> int:
    """Run ``command`` in a cgroup of ``cores`` CPUs (none if 0) beside ``n_hogs`` CPU-bound
    processes; return its exit status."""
    hog = f"{HOG}  # {hog_marker()}"  # the marker tells our hogs from other programs' busy loops
    hogs = [subprocess.Popen(_pinned([sys.executable, "-c", hog], hogs_on or cpus)) for _ in range(n_hogs)]
    try:
        if cores <= 0:
            return _wait(subprocess.Popen(_pinned(command, cpus)))
        with cpu_limited_cgroup(cores) as group:
            def enter_group() -> None:
                (group / "cgroup.procs").write_text(str(os.getpid()))

            return _wait(subprocess.Popen(_pinned(command, cpus), preexec_fn=enter_group))
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quota", type=float, default=0.5,
                        help="CPUs the command gets (default 0.5; 0: no quota)")
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 1,
                        help="CPU-bound processes beside it (default: one per CPU)")
    parser.add_argument("--cpus", default=None, help="pin the command and the hogs to these CPUs (e.g. 0)")
    parser.add_argument("--hogs-on", default=None, help="pin the hogs alone to these CPUs (e.g. 0)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    if os.geteuid() != 0:
        parser.error("needs root (a cgroup of the cpu controller)")
    return run_slowed(command, args.quota, args.hogs, args.cpus, args.hogs_on)


if __name__ == "__main__":
    raise SystemExit(main())
