"""SharedMemoryExecutor under fork: one resource tracker, the parent's (issue 12, point 2).

A worker forked before the parent's resource tracker runs starts a tracker of its own. The worker
registers each result segment there, the parent unregisters it with its own tracker (which then
prints a KeyError traceback), and when the worker exits its tracker unlinks the result segments
the parent still holds, with "leaked shared_memory objects" warnings. Each program runs in a fresh
interpreter, where no tracker runs yet, and must print nothing on stderr.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAM = """
    import multiprocessing as mp, os, time
    import numpy as np
    import array_workers as workers
    from sharedarrays.executor import SharedMemoryExecutor
    from sharedarrays.room import SEGMENT_PREFIX
    from sharedarrays.shm import handle_of
    if __name__ == "__main__":
        fork = mp.get_context("fork")
        with SharedMemoryExecutor(2, fork) as executor:
            for _ in range(3):  # big results, dropped at once: the parent unlinks their segments
                assert (executor.submit(workers.plus_one, np.ones(1 << 18)).result() == 2).all()
            held = executor.submit(workers.plus_one, np.ones(1 << 18)).result()  # 2 MiB, kept
        time.sleep(1)  # the workers are gone: a tracker of their own would have unlinked `held` by now
        print("still shared:", handle_of(held) is not None)
        with SharedMemoryExecutor(1, fork) as executor:
            total = executor.submit(workers.sum_array, held).result()  # crosses as a handle
            executor.submit(workers.fill_in_place, held, 7.0).result()  # mapped copy-on-write there
        print("read through shared memory:", total == 2 * held.size, "kept:", bool((held == 2).all()))
        del held
        mine = SEGMENT_PREFIX + str(os.getpid()) + "_"
        print("left:", [name for name in os.listdir("/dev/shm") if name.startswith(mine)])
"""


@pytest.mark.timeout(120)
def test_under_fork_big_results_stay_shared_and_the_tracker_says_nothing():
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROGRAM)], capture_output=True, text=True,
                          timeout=100)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["still shared: True", "read through shared memory: True kept: True",
                                        "left: []"]
    assert done.stderr == "", f"the program or a resource tracker printed: {done.stderr}"
