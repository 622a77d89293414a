"""A release finalizer that the cyclic GC runs while its own thread counts holders must not deadlock.

``count_holders`` takes a process-wide lock and the segment's flock; anything it allocates may start
the GC, which may free an array received through shared memory and run its release finalizer on the
same thread, which wants the same lock. The program below lands the collection inside the lock by
trying every small GC threshold; before the fix it hung at a threshold of 4.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAM = """
    import gc
    import numpy as np
    from multiprocessing.reduction import ForkingPickler
    from sharedarrays import reducers, segment_holds
    from sharedarrays._segments import mapping_under
    from sharedarrays.shm import handle_of

    with reducers.sharing_arrays("shared_memory"):
        keeper = ForkingPickler.loads(ForkingPickler.dumps(np.ones(300_000)))
        name = handle_of(keeper).name
        header = np.frombuffer(mapping_under(keeper), np.uint8, count=64)
        released = 0
        for threshold in range(2, 40):
            received = ForkingPickler.loads(ForkingPickler.dumps(np.ones(300_000)))
            held_before = len(segment_holds._HOLDS)
            gc.collect()
            gc.disable()
            cycle = [received]
            cycle.append(cycle)  # only the collector can free it, and its finalizer with it
            del received, cycle
            gc.set_threshold(threshold)
            gc.enable()
            segment_holds.count_holders(name, header, 0)
            gc.set_threshold(700, 10, 10)
            gc.collect()
            released += len(segment_holds._HOLDS) == held_before - 1
        del keeper
    print("released", released)
"""


@pytest.mark.timeout(90)
def test_a_finalizer_run_by_the_collector_inside_the_count_does_not_deadlock():
    finished = subprocess.run([sys.executable, "-c", textwrap.dedent(PROGRAM)], capture_output=True,
                              text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == ["released", "38"], finished.stdout + finished.stderr
    assert "Exception ignored" not in finished.stderr, finished.stderr


FORK_PROGRAM = """
    import gc, os
    os.register_at_fork(after_in_child=gc.collect)  # runs in the child before the library's own hook
    import numpy as np
    from multiprocessing.reduction import ForkingPickler
    from sharedarrays import lent_segments, reducers

    with reducers.sharing_arrays("shared_memory"):
        kept = ForkingPickler.loads(ForkingPickler.dumps(np.ones(300_000)))
        for _ in range(5):
            received = ForkingPickler.loads(ForkingPickler.dumps(np.ones(300_000)))
            cycle = [received]
            cycle.append(cycle)  # freed by the collector in the child's fork hooks
            del received, cycle
            gc.disable()
            child = os.fork()
            if child == 0:  # a normal exit: its exit hook gives back what it inherited
                raise SystemExit(0 if float(kept.sum()) == 300_000 else 3)
            gc.enable()
            _, status = os.waitpid(child, 0)
            assert os.waitstatus_to_exitcode(status) == 0, status
            gc.collect()
        print("holders of the kept array:", int(lent_segments.holders_of(kept)[0]))
        del kept
"""


@pytest.mark.timeout(90)
def test_a_release_the_collector_runs_in_a_fork_hook_does_not_hang_the_child():
    finished = subprocess.run([sys.executable, "-c", textwrap.dedent(FORK_PROGRAM)], capture_output=True,
                              text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "holders of the kept array: 1", finished.stdout + finished.stderr


SLOW_CHILD_PROGRAM = """
    import gc, os, time
    os.register_at_fork(after_in_child=lambda: time.sleep(0.3))  # a child slow to run the library's hooks
    import numpy as np
    from multiprocessing.reduction import ForkingPickler
    from sharedarrays import reducers

    with reducers.sharing_arrays("shared_memory"):
        received = ForkingPickler.loads(ForkingPickler.dumps(np.full(300_000, 1.0)))
        child = os.fork()
        if child == 0:  # the child views what it inherited, well after its parent let go
            time.sleep(0.5)
            os._exit(0 if float(received.sum()) == 300_000 else 3)
        del received  # the parent lets go at once: the segment must stay lent, the child views it
        gc.collect()
        again = ForkingPickler.loads(ForkingPickler.dumps(np.full(300_000, 9.0)))  # would reuse it
        _, status = os.waitpid(child, 0)
        print("child saw its data:", os.waitstatus_to_exitcode(status) == 0)
        del again
"""


@pytest.mark.timeout(90)
def test_a_forked_child_is_counted_before_the_fork_so_its_parent_may_let_go_at_once():
    """The torch-free reduction's holder counts (``segment_holds``): the parent counts the child
    before ``fork``; counted by the child after it, the segment could be lent again (and
    overwritten) while the child still views it."""
    finished = subprocess.run([sys.executable, "-c", textwrap.dedent(SLOW_CHILD_PROGRAM)],
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "child saw its data: True", finished.stdout + finished.stderr
