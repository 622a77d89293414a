"""Run the executor where /dev/shm is small (64 MiB: Docker's default, and most likely Binder's).

``run_with_small_dev_shm`` runs one program in a mount namespace of its own whose /dev/shm is a
private tmpfs of ``shm_mib`` MiB (Linux, root and ``unshare`` needed: ``why_not_here`` says what is
missing). The program does the same work through ``ProcessPoolExecutor`` and through
``SharedMemoryExecutor``: ``plus_one`` of a 20 MiB array, then of a 24 MiB one (each result dropped),
then five 20 MiB results held at once; it reports which answers were right, how many arrays ours
pickled for want of room and which (the tasks whose argument, whose result was pickled), the
notices it logged, and what it left in /dev/shm.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field

PROGRAM = """
    import json, multiprocessing as mp, os, sys
    import numpy as np
    from concurrent.futures import ProcessPoolExecutor
    from helpers.lessons import workers
    from helpers.lessons.demos import notices_of_sharedarrays
    from sharedarrays.executor import SharedMemoryExecutor
    from sharedarrays.shm import handle_of
    MiB = 1 << 20

    def work(executor, pickled):
        '''plus_one of 20 then 24 MiB (dropped), then five 20 MiB results held: is each one right?
        Appends to ``pickled`` (ours only) each task's arrays pickled: (arguments, results).'''
        def call(array):
            before = getattr(executor, "pickled_fallbacks", 0)
            pool = getattr(executor, "segment_pool", None)
            if pool is not None:
                names, created, reused = set(pool.names()), pool.created, pool.reused
            result = executor.submit(workers.plus_one, array).result()
            if pool is not None:
                result_pickled = int(handle_of(result) is None)
                pickled.append((executor.pickled_fallbacks - before - result_pickled, result_pickled))
                disk = os.statvfs("/dev/shm")
                steps.append({"mib": array.nbytes // MiB, "new": pool.created - created,
                              "reused": pool.reused - reused, "unlinked": len(names - set(pool.names())),
                              "result_shared": not result_pickled,
                              "used_mib": (disk.f_blocks - disk.f_bfree) * disk.f_frsize / MiB})
            return result
        right = []
        for n_mib in (20, 24):
            result = call(np.zeros(n_mib * MiB // 8))
            right.append(bool((result == 1).all()))
            del result
        held = [call(np.full(20 * MiB // 8, float(n))) for n in range(5)]
        right += [bool((result == n + 1).all()) for n, result in enumerate(held)]
        return right

    if __name__ == "__main__":
        context = mp.get_context(sys.argv[1])
        by_task, steps = [], []
        with ProcessPoolExecutor(1, context) as executor:
            stdlib_right = work(executor, by_task)
        with notices_of_sharedarrays() as said:
            with SharedMemoryExecutor(1, context) as executor:
                ours_right = work(executor, by_task)
                pickled = executor.pickled_fallbacks
        print(json.dumps({"stdlib_right": stdlib_right, "ours_right": ours_right,
                          "pickled_fallbacks": pickled, "pickled_by_task": by_task, "notices": said,
                          "left": sorted(os.listdir("/dev/shm")), "steps": steps}))
"""


@dataclass
class SmallShmRun:
    """What the program reported: per answer, whether it was right (stdlib, ours); how many arrays
    ours pickled, and per task (arguments pickled, results pickled); the notices it logged; the
    names left in the private /dev/shm at the end."""
    shm_mib: int
    stdlib_right: list[bool]
    ours_right: list[bool]
    pickled_fallbacks: int
    pickled_by_task: list[tuple[int, int]]
    notices: list[str]
    left: list[str]
    steps: list[dict] = field(default_factory=list)  # ours, per task: what its pool did, /dev/shm used after

    def task_lines(self) -> list[str]:
        """One line per task of ours: its size, the argument's segment (new, reused, or pickled), the
        pool segments unlinked to make room, the result (shared or pickled), /dev/shm used while its
        result was held."""
        lines = []
        tasks = zip(self.steps, self.pickled_by_task, strict=True)
        for number, (step, (args_pickled, _)) in enumerate(tasks, 1):
            segment = ("pickled" if args_pickled else "a new segment" if step["new"] else
                       "a reused segment" if step["reused"] else "none")
            unlinked = f", {step['unlinked']} idle segment unlinked" if step["unlinked"] else ""
            free = self.shm_mib - step["used_mib"]  # a pickled result took no room: as free before it
            result = ("shared" if step["result_shared"] else
                      f"pickled ({free:.1f} MiB free: short of a {step['mib']} MiB segment plus its header)")
            lines.append(f"task {number} ({step['mib']} MiB): argument in {segment}{unlinked}; result "
                         f"{result}; /dev/shm used while its result was held: {step['used_mib']:.0f} MiB")
        return lines

    def which_pickled(self) -> str:
        """Which tasks' arrays ours pickled (tasks numbered from 1), e.g. 'the results of tasks 4-7'."""
        parts = []
        for kind, index in (("arguments", 0), ("results", 1)):
            tasks = [number for number, counts in enumerate(self.pickled_by_task, 1) if counts[index]]
            if tasks:
                parts.append(f"the {kind} of task{'s' * (len(tasks) > 1)} {', '.join(map(str, tasks))}")
        return " and ".join(parts) or "none"


def why_not_here() -> str | None:
    """None where a private small /dev/shm can be made here; else the reason (one line)."""
    if not sys.platform.startswith("linux"):
        return f"needs Linux (this is {sys.platform})"
    if shutil.which("unshare") is None:
        return "needs the unshare command (util-linux)"
    if os.geteuid() != 0:
        return "needs root, to mount a private tmpfs on /dev/shm (not the case on Binder)"
    return None


def run_with_small_dev_shm(start_method: str, shm_mib: int = 64, timeout_s: float = 120) -> SmallShmRun:
    """Run ``PROGRAM`` with a private ``shm_mib`` MiB /dev/shm; RuntimeError when it cannot run here
    (``why_not_here``) or fails (with its stderr)."""
    reason = why_not_here()
    if reason is not None:
        raise RuntimeError(f"cannot make a private /dev/shm here: {reason}")
    script = f'mount -t tmpfs -o size={int(shm_mib)}m tmpfs /dev/shm && exec "$1" -c "$2" "$3"'
    finished = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", sys.executable,
                               textwrap.dedent(PROGRAM), start_method],
                              capture_output=True, text=True, timeout=timeout_s)
    if finished.returncode != 0:
        raise RuntimeError(f"the program failed (exit code {finished.returncode}): {finished.stderr[-2000:]}")
    return SmallShmRun(shm_mib=shm_mib, **json.loads(finished.stdout.strip().splitlines()[-1]))
