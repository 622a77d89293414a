"""A call that cannot be pickled fails its own future, whatever ``shutdown`` does meanwhile.

The stdlib hands a pickling error to its feeder thread's error handler, which pops the work item,
then takes the executor's shutdown lock to wake the manager thread. If ``shutdown(wait=False)`` has
just woken that thread, it finds no pending work, takes the same lock and joins the feeder: neither
goes on, and the future stays pending forever (CPython gh-125451, fixed in 3.12.8 and 3.13.1, not
in 3.11; the machines here run 3.11.7, 3.12.1 and 3.13.0; gh-116685 is the same path with
``cancel_futures=True``). ``SharedMemoryExecutor`` pickles the call itself when the feeder pickles
its task, fails the caller's future there, and sends a no-op in its place, so that path is never
taken. Here the race is run in a loop while other processes keep every CPU busy, under each start
method (a hang fails the test at its time limit; the timed ``result`` fails it sooner). The race is
rare even there, so a test also checks the cause itself, which holds every time: the stdlib's
feeder error handler runs for the stdlib's executor, and never for ours.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import _RemoteTraceback

import numpy as np
import pytest

from sharedarrays.executor import SharedMemoryExecutor
from sharedarrays.units import MiB

RESULT_SECONDS = 30  # a future the race left pending would wait forever: far above any healthy wait
ROUNDS = {"fork": 20, "spawn": 8, "forkserver": 8}  # each round starts a pool (CI runs 3 Pythons)
HOG = "while True: pass"


class ErrorAtPickle:
    """An argument whose pickling raises, as in CPython's test_shutdown_deadlock_pickle."""

    def __reduce__(self):
        raise pickle.PicklingError("error at pickle")


@pytest.fixture
def every_cpu_busy() -> Iterator[None]:
    """One CPU-bound process per CPU for the test's length (the race shows on a busy machine)."""
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(mp.cpu_count())]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def assert_the_pickling_error(error: BaseException | None) -> None:
    assert type(error) is pickle.PicklingError and str(error) == "error at pickle", repr(error)
    assert type(error.__cause__) is _RemoteTraceback and "error at pickle" in error.__cause__.tb


@pytest.mark.timeout(120)
@pytest.mark.parametrize("executor_class", [ProcessPoolExecutor, SharedMemoryExecutor])
def test_a_pickling_error_takes_the_stdlibs_feeder_error_path_only_in_the_stdlib(executor_class):
    """The path where gh-125451 deadlocks (_SafeQueue._on_queue_feeder_error, which takes the
    shutdown lock) is recorded as it runs: once for the stdlib's executor, never for ours."""
    handled: list[type] = []
    with executor_class(1, mp.get_context("spawn")) as executor:
        queue = executor._call_queue
        handler = queue._on_queue_feeder_error  # the stdlib's, bound to this queue

        def record_then_handle(error: Exception, obj) -> None:
            handled.append(type(error))
            handler(error, obj)

        queue._on_queue_feeder_error = record_then_handle
        future = executor.submit(np.sum, np.ones(MiB), ErrorAtPickle())
        assert_the_pickling_error(future.exception(timeout=RESULT_SECONDS))
        assert executor.submit(sum, [1, 2]).result(timeout=RESULT_SECONDS) == 3
    assert handled == ([pickle.PicklingError] if executor_class is ProcessPoolExecutor else [])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("method", list(ROUNDS))
def test_shutdown_without_waiting_never_leaves_an_unsendable_call_pending(every_cpu_busy, method):
    """CPython's test_shutdown_deadlock_pickle, round after round, with a big array beside the bad
    argument (copied into a pooled segment before the pickling fails: released all the same)."""
    big = np.arange(MiB // 8, dtype=np.float64)  # 1 MiB: at min_shared_bytes, shared
    for _ in range(ROUNDS[method]):
        executor = SharedMemoryExecutor(2, mp.get_context(method))
        try:
            assert executor.submit(sum, [1, 2]).result(timeout=RESULT_SECONDS) == 3  # the pool is up
            # after shutdown(wait=False) a second shutdown returns at once: join the pool's manager
            # thread (as CPython's test does), which frees the pool's semaphores as it ends
            manager = executor._executor_manager_thread
            future = executor.submit(np.sum, big, ErrorAtPickle())
            executor.shutdown(wait=False)
            assert_the_pickling_error(future.exception(timeout=RESULT_SECONDS))
        finally:
            executor.shutdown(wait=True)
        manager.join(RESULT_SECONDS)
        assert not manager.is_alive()
    # the autouse fixture checks that no segment (the big array's copy) or semaphore is left


@pytest.mark.timeout(120)
def test_unsendable_calls_then_shutdown_with_cancel_futures_returns():
    """gh-116685's reproduction: every call fails its future, and the shutdown returns."""
    with SharedMemoryExecutor(1, mp.get_context("spawn")) as executor:
        futures = [executor.submit(np.sum, np.ones(MiB), ErrorAtPickle()) for _ in range(10)]
        for future in futures:
            assert_the_pickling_error(future.exception(timeout=RESULT_SECONDS))
        executor.shutdown(wait=True, cancel_futures=True)


@pytest.mark.timeout(120)
def test_the_pool_goes_on_after_an_unsendable_call_and_its_no_op():
    with SharedMemoryExecutor(1, mp.get_context("spawn")) as executor:
        bad = executor.submit(np.sum, np.ones(MiB), ErrorAtPickle())
        assert_the_pickling_error(bad.exception(timeout=RESULT_SECONDS))
        array = np.arange(MiB, dtype=np.float64)
        assert executor.submit(np.sum, array).result(timeout=RESULT_SECONDS) == array.sum()
        assert executor.segment_pool.created >= 1  # the failed call's array went through a segment
