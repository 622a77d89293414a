"""No finalizer calls into the resource tracker (issue 32, point 10).

A garbage collection may run a finalizer on any thread at any allocation, also while that thread is
inside a call to ``multiprocessing``'s resource tracker (registering a segment it makes). The
tracker refuses a call it is already in (``ReentrantCallError``, printed as "Exception ignored" and
lost), so a finalizer that unregisters a segment there leaves the tracker believing it still
exists: at the program's end it warns of leaked shared_memory and tries to unlink it again. The
library's finalizers unlink at once and leave what the tracker must hear for the next call of the
library, or the program's exit.

Each program runs in a fresh interpreter and holds the tracker's own lock (as a thread inside a
tracker call does) while the last reference to what the finalizer watches goes. It must print
nothing on stderr and leave nothing in /dev/shm.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

# CPython's own race at exit, before 3.12.8 and 3.13.1 (gh-125451, fixed by gh-125492): the exit hook
# of concurrent.futures wakes an executor's manager thread through a pipe that thread may be closing,
# and prints this. The stdlib's ProcessPoolExecutor, dropped the same way, does too: it is no call into
# the tracker, and the tracker did not warn.
STDLIB_EXIT_RACE = re.compile(
    r"Exception ignored in: <module 'threading' from [^\n]*>\nTraceback \(most recent call last\):\n"
    r"(?:  [^\n]*\n)*?[^\n]*_python_exit\n(?:  [^\n]*\n)*OSError: \[Errno 9\] Bad file descriptor\n")


# The stdlib's own queue semaphores (multiprocessing.synchronize.SemLock: an executor's call and result
# queues) unregister themselves from the tracker in a finalizer of the stdlib's. When the collection that
# the program runs inside the tracker call frees them (the executor's manager thread let go of them
# first: a race, seen once in a busy CI run on 3.13 with forkserver), the tracker warns about a semaphore.
# That is no finalizer of ours and no segment: this file checks ours, so it sets these apart, and only
# these (a shared_memory object named in any warning still fails).
STDLIB_SEMAPHORE_FINALIZER = re.compile(
    r"[^\n]*UserWarning: ResourceTracker called reentrantly for resource cleanup, which is unsupported\. "
    r"The semaphore object '/mp-[^']+' might leak\.\n  warnings\.warn\(\n")


def without_the_stdlib_exit_race(stderr: str) -> str:
    """``stderr`` less CPython's known exit race (``STDLIB_EXIT_RACE``) on the Pythons that have it, and
    less the warnings of the stdlib's own semaphore finalizers (``STDLIB_SEMAPHORE_FINALIZER``)."""
    stderr = STDLIB_SEMAPHORE_FINALIZER.sub("", stderr)
    if sys.version_info >= (3, 13, 1) or (3, 12, 8) <= sys.version_info < (3, 13):
        return stderr
    return STDLIB_EXIT_RACE.sub("", stderr)


def test_only_the_stdlibs_semaphore_warnings_are_set_apart():
    semaphore = ("/x/resource_tracker.py:201: UserWarning: ResourceTracker called reentrantly for resource "
                 "cleanup, which is unsupported. The semaphore object '/mp-wkxmhamp' might leak.\n"
                 "  warnings.warn(\n")
    segment = semaphore.replace("semaphore object '/mp-wkxmhamp'", "shared_memory object '/sal_1_ns1_ab'")
    assert STDLIB_SEMAPHORE_FINALIZER.sub("", semaphore) == ""
    assert STDLIB_SEMAPHORE_FINALIZER.sub("", segment) == segment


COMMON = """
    import gc, multiprocessing as mp, os, sys
    from multiprocessing import resource_tracker
    import numpy as np
    import array_workers as workers
    from sharedarrays.executor import SharedMemoryExecutor
    from sharedarrays.room import SEGMENT_PREFIX
    from sharedarrays.shm import handle_of

    def inside_a_tracker_call():
        resource_tracker.ensure_running()
        return resource_tracker._resource_tracker._lock  # what a thread inside register() holds

    def ours():
        mine = SEGMENT_PREFIX + str(os.getpid()) + "_"
        return [name for name in os.listdir("/dev/shm") if name.startswith(mine)]
"""

RESULT_LET_GO = COMMON + """
    if __name__ == "__main__":
        with SharedMemoryExecutor(1, mp.get_context(sys.argv[1])) as executor:
            result = executor.submit(workers.plus_one, np.ones(1 << 18)).result()  # its own segment
            name = handle_of(result).name
            with inside_a_tracker_call():
                del result  # the finalizer unlinks the result's segment here
                gc.collect()
                print("unlinked at once:", name not in ours())
        print("left:", ours())
"""

EXECUTOR_LET_GO = COMMON + """
    if __name__ == "__main__":
        executor = SharedMemoryExecutor(1, mp.get_context(sys.argv[1]))
        assert executor.submit(workers.array_nbytes, np.ones(1 << 18)).result() == 1 << 21
        print("warm segments kept:", len(ours()) > 0)
        with inside_a_tracker_call():
            del executor  # no shutdown() left to do it: its finalizer closes the segment pool
            gc.collect()
            print("unlinked at once:", ours() == [] or ours())
        print("left:", ours())
"""


def run_program(program: str, start_method: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(program), start_method], capture_output=True,
                          text=True, timeout=100)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_a_result_let_go_inside_a_tracker_call_is_unlinked_and_the_tracker_told_later(start_method):
    done = run_program(RESULT_LET_GO, start_method)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["unlinked at once: True", "left: []"]
    stderr = without_the_stdlib_exit_race(done.stderr)
    assert stderr == "", f"a finalizer called into the tracker, or the tracker warned: {done.stderr}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_an_executor_let_go_inside_a_tracker_call_closes_its_pool_and_the_tracker_is_told_later(start_method):
    done = run_program(EXECUTOR_LET_GO, start_method)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["warm segments kept: True", "unlinked at once: True", "left: []"]
    stderr = without_the_stdlib_exit_race(done.stderr)
    assert stderr == "", f"a finalizer called into the tracker, or the tracker warned: {done.stderr}"
