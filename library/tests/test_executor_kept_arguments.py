"""SharedMemoryExecutor: a worker that keeps an argument keeps its data (issue 12, point 1).

"Send once, then run many tasks on it": a worker function stores its array argument in a module
global. With the stdlib the worker holds a private copy; ours views the pooled segment the argument
crossed in, so the pool must not lend that segment to a later task while the worker still views it
(the worker's reply says it kept it, and the parent retires it: never lent again, unlinked once the
parent lets go, its memory gone with the worker's last view), and a result that is the kept argument
must not share its memory with the worker. Real workers under each start method, real /dev/shm;
nothing may be left behind.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import pathlib
import subprocess
import sys
import time

import array_workers as workers
import numpy as np
import pytest

from sharedarrays._segments import process_alive
from sharedarrays.executor import SharedMemoryExecutor
from sharedarrays.segment_holds import release_every_hold

N_ITEMS = 1_000_000  # 8 MB of float64: above the 1 MiB threshold, so it crosses in a pooled segment
METHODS = ["fork", "spawn", "forkserver"]


def lent_bytes_once_collected(executor: SharedMemoryExecutor, seconds: float = 10) -> int:
    """Bytes the executor's pool still has lent out, after waiting up to ``seconds`` for them to be 0."""
    deadline = time.monotonic() + seconds
    while True:
        executor.segment_pool.collect()
        if executor.segment_pool.lent_bytes == 0 or time.monotonic() > deadline:
            return executor.segment_pool.lent_bytes
        time.sleep(0.02)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
def test_a_kept_argument_is_not_overwritten_by_a_later_task(method):
    with SharedMemoryExecutor(1, mp.get_context(method)) as executor:
        assert executor.submit(workers.keep_and_sum, np.full(N_ITEMS, 1.0)).result() == 1e6
        later = executor.submit(workers.plus_one, np.full(N_ITEMS, 5.0)).result()  # same size, next task
        assert (later == 6.0).all()
        del later
        assert executor.submit(workers.sums_of_kept).result() == [1e6]  # the stdlib gives 1e6 too
        assert executor.submit(workers.forget_kept).result() == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
def test_a_kept_segment_is_never_lent_again_and_leaves_dev_shm_while_the_worker_keeps_its_data(method):
    with SharedMemoryExecutor(1, mp.get_context(method)) as executor:
        executor.submit(workers.keep_and_sum, np.full(N_ITEMS, 1.0)).result()
        assert lent_bytes_once_collected(executor) == 0  # retired: neither lent nor idle in the pool
        assert executor.segment_pool.names() == []  # and unlinked as soon as the parent let go
        assert executor.submit(workers.unlinked_segments_mapped_here).result() == 1  # the worker's view
        assert executor.submit(workers.sums_of_kept).result() == [1e6]
        executor.submit(workers.array_nbytes, np.full(N_ITEMS, 2.0)).result()
        assert executor.segment_pool.created == 2  # the kept one was not lent again
        assert executor.submit(workers.forget_kept).result() == 1
        assert executor.submit(workers.unlinked_segments_mapped_here).result() == 0  # its memory is gone
        executor.submit(workers.array_nbytes, np.full(N_ITEMS, 3.0)).result()
        assert executor.segment_pool.created == 2  # a warm one was reused


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
def test_a_result_that_is_the_kept_argument_does_not_share_the_workers_memory(method):
    with SharedMemoryExecutor(1, mp.get_context(method)) as executor:
        back = executor.submit(workers.keep_and_return, np.full(N_ITEMS, 1.0)).result()
        assert back.flags.writeable and (back == 1.0).all()
        back[:] = 9.0  # the caller's array is its own, as an unpickled one is
        assert executor.submit(workers.sums_of_kept).result() == [1e6]
        executor.submit(workers.plus_one, np.full(N_ITEMS, 5.0)).result()
        assert (back == 9.0).all()
        del back
        assert executor.submit(workers.forget_kept).result() == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", ["spawn", "forkserver"])  # fork refuses max_tasks_per_child
def test_a_worker_that_exits_holding_an_argument_takes_its_memory_with_it(method):
    with SharedMemoryExecutor(1, mp.get_context(method), max_tasks_per_child=1) as executor:
        assert executor.submit(workers.keep_and_sum, np.full(N_ITEMS, 1.0)).result() == 1e6
        assert lent_bytes_once_collected(executor) == 0  # retired, and unlinked once the parent let go
        assert executor.segment_pool.names() == []  # nothing left in /dev/shm: the worker's exit unmaps it
        executor.submit(workers.array_nbytes, np.full(N_ITEMS, 2.0)).result()
        assert executor.segment_pool.created == 2  # the kept segment was never lent again


def _report_sum_later(array: np.ndarray, go, connection) -> None:
    """Forked child: wait for ``go``, then send the sum of the array it inherited."""
    go.wait()
    connection.send(float(np.sum(array)))


@pytest.mark.timeout(120)
def test_a_forked_child_holding_a_result_keeps_its_data():
    """A result that views a pooled segment, inherited by a forked child: the parent drops it and
    submits again; the child must still see its own data (a copy-on-write copy, with plain arrays)."""
    fork = mp.get_context("fork")
    with SharedMemoryExecutor(1, mp.get_context("spawn")) as executor:
        held = executor.submit(workers.echo, np.full(N_ITEMS, 1.0)).result()  # a view of a pooled copy
        go = fork.Event()
        receiver, sender = fork.Pipe(duplex=False)
        child = fork.Process(target=_report_sum_later, args=(held, go, sender))
        child.start()
        del held
        gc.collect()
        again = executor.submit(workers.echo, np.full(N_ITEMS, 5.0)).result()
        go.set()
        assert receiver.recv() == 1e6
        child.join(30)
        del again
        receiver.close()
        sender.close()
        assert lent_bytes_once_collected(executor) == 0  # the child let go when it exited
    assert child.exitcode == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
def test_a_result_passed_on_to_another_task_keeps_its_data_after_the_first_is_gone(method):
    with SharedMemoryExecutor(1, mp.get_context(method)) as executor:
        first = executor.submit(workers.echo, np.full(N_ITEMS, 1.0)).result()  # a view of a pooled segment
        second = executor.submit(workers.echo, first).result()  # crosses as its handle: the same memory
        del first
        gc.collect()
        for _ in range(2):  # same-size tasks that would reuse the segment if nobody held it
            assert executor.submit(np.sum, np.full(N_ITEMS, 7.0)).result() == 7e6
        assert (second == 1.0).all()
        del second
        assert lent_bytes_once_collected(executor) == 0  # and once nobody views it, it goes back


def _fork_a_child_that_keeps(array: np.ndarray, folder: str) -> int:
    """Task (fork workers run it from this module): fork a child that keeps viewing ``array`` after
    the task is over, until ``folder``/go exists; it then writes the array's sum to ``folder``/sum,
    lets go and exits. Returns the child's pid; the task itself keeps nothing."""
    child = os.fork()
    if child == 0:
        try:
            go = pathlib.Path(folder, "go")
            deadline = time.monotonic() + 60
            while not go.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            pathlib.Path(folder, "sum.tmp").write_text(repr(float(np.sum(array))))
            os.rename(pathlib.Path(folder, "sum.tmp"), pathlib.Path(folder, "sum"))
            del array
            release_every_hold()  # os._exit runs no exit hook: let go as a normal exit does
        finally:
            os._exit(0)
    return child


@pytest.mark.timeout(120)
def test_a_child_the_worker_forks_during_a_task_keeps_its_data(tmp_path):
    """The worker's reply names what it still views when the task ends; a child it forked during
    the task inherits the view, so a worker that forked names every segment of the task, and the
    segment is not lent to a later task while the child still reads it."""
    with SharedMemoryExecutor(1, mp.get_context("fork")) as executor:
        child = executor.submit(_fork_a_child_that_keeps, np.full(N_ITEMS, 1.0), str(tmp_path)).result()
        later = executor.submit(workers.plus_one, np.full(N_ITEMS, 5.0)).result()  # would reuse the segment
        assert (later == 6.0).all()
        del later
        assert executor.segment_pool.created == 2
        (tmp_path / "go").touch()
        deadline = time.monotonic() + 60
        while not (tmp_path / "sum").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert float((tmp_path / "sum").read_text()) == 1e6
        deadline = time.monotonic() + 30
        while process_alive(child) and time.monotonic() < deadline:  # a zombie of the worker: gone
            time.sleep(0.01)
        assert lent_bytes_once_collected(executor) == 0  # the child let go when it exited


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
def test_a_kept_result_passed_back_in_keeps_its_data_when_the_caller_writes_into_the_result(method):
    """An earlier result reaches a worker copy-on-write; one the worker keeps becomes its own then, so the
    caller's later writes into the result do not show through (the stdlib's worker kept a private copy)."""
    with SharedMemoryExecutor(1, mp.get_context(method)) as executor:
        result = executor.submit(np.ones, N_ITEMS).result()  # made by the worker: a result segment
        assert executor.submit(workers.keep_and_sum, result).result() == 1e6
        result[:] = 7.0
        assert executor.submit(workers.sums_of_kept).result() == [1e6]
        assert (result == 7.0).all()
        del result
        assert executor.submit(workers.forget_kept).result() == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
def test_a_task_that_kept_its_argument_then_raised_keeps_its_data(method):
    """An error carries no reply to say what the worker kept: every segment of a task that raised is
    retired, so a later task of the same size gets a new one."""
    with SharedMemoryExecutor(1, mp.get_context(method)) as executor:
        with pytest.raises(ValueError, match="kept it, then failed"):
            executor.submit(workers.keep_then_raise, np.full(N_ITEMS, 1.0)).result()
        later = executor.submit(workers.plus_one, np.full(N_ITEMS, 5.0)).result()  # would reuse it
        assert (later == 6.0).all()
        del later
        assert executor.segment_pool.created == 2
        assert executor.submit(workers.sums_of_kept).result() == [1e6]
        assert executor.submit(workers.forget_kept).result() == 1


PROGRAM_WITH_THE_EXECUTOR_ONLY = """
import numpy as np
from sharedarrays import SharedMemoryExecutor, segment_holds
import array_workers as workers

if __name__ == "__main__":
    with SharedMemoryExecutor(2) as executor:
        results = list(executor.map(workers.keep_and_sum, [np.full(300_000, 1.0)] * 4))
        kept = executor.submit(workers.keep_and_return, np.full(300_000, 2.0)).result()
    print(results == [3e5] * 4, float(kept.sum()) == 6e5, bool(segment_holds._FORK_HOOKS_REGISTERED),
          len(segment_holds._HOLDS))
"""


@pytest.mark.timeout(120)
def test_a_program_that_only_uses_the_executor_counts_no_holders():
    """The executor keeps no count in shared memory: a program that uses it, workers that keep
    their arguments included, registers none of the reductions' holder machinery (its fork hooks,
    its holds)."""
    finished = subprocess.run([sys.executable, "-c", PROGRAM_WITH_THE_EXECUTOR_ONLY], capture_output=True,
                              text=True, timeout=90, cwd=pathlib.Path(__file__).parent)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == ["True", "True", "False", "0"], finished.stdout + finished.stderr
