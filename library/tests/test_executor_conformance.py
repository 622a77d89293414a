"""Conformance: ``SharedMemoryExecutor`` keeps every promise ``ProcessPoolExecutor`` makes.

The executor is sold as a drop-in subclass, so each test here runs the SAME assertions against
both classes (the ``executor_class`` fixture), with a small payload and a big one (2 MiB, above
the 1 MiB ``min_shared_bytes`` default, so ours moves it through shared memory in every case):
``submit``, ``map`` (``chunksize``, ``timeout``), ``as_completed``, ``wait`` with each
``return_when``, cancellation, every ``shutdown`` variant, ``max_tasks_per_child``, a failing
initializer, what cannot be pickled, exceptions raised in a worker (type, message, remote
traceback, chained cause) and a killed worker. Where the start method matters, the test runs
under several. Expected values are what the stdlib does; a test that passes for the stdlib and
fails for ours is a bug in ours.

Worker tasks live in ``array_workers`` and ``conformance_workers`` (this folder is on ``sys.path``
here and in spawn and forkserver children, which inherit it).
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import pickle
import re
import signal
import threading
import time
import traceback
from concurrent.futures import (
    ALL_COMPLETED,
    FIRST_COMPLETED,
    FIRST_EXCEPTION,
    CancelledError,
    Future,
    ProcessPoolExecutor,
    as_completed,
    wait,
)
from concurrent.futures.process import BrokenProcessPool, _RemoteTraceback

import array_workers as workers
import conformance_workers as cw
import numpy as np
import pytest
import shm_leftovers as leftovers

from sharedarrays.executor import DEFAULT_MIN_SHARED_BYTES, SharedMemoryExecutor
from sharedarrays.shm import handle_of
from sharedarrays.units import MiB

EXECUTORS = {"stdlib": ProcessPoolExecutor, "shared": SharedMemoryExecutor}
PAYLOAD_BYTES = {"small": 80, "big": 2 * MiB}
METHOD = "forkserver"  # where the start method does not matter (Linux's default from Python 3.14)
LONG = 30.0  # a timeout nothing should reach

SHUTDOWN_MESSAGE = "cannot schedule new futures after shutdown"
BROKEN_SUBMIT_MESSAGE = "A child process terminated abruptly, the process pool is not usable anymore"
BROKEN_FUTURE_MESSAGE = ("A process in the process pool was terminated abruptly while the future was "
                         "running or pending.")
FORK_MESSAGE = ("max_tasks_per_child is incompatible with the 'fork' multiprocessing start method; "
                "supply a different mp_context.")


@pytest.fixture(params=list(EXECUTORS))
def executor_class(request):
    return EXECUTORS[request.param]


@pytest.fixture(params=list(PAYLOAD_BYTES))
def payload(request) -> np.ndarray:
    return np.random.default_rng(7).random(PAYLOAD_BYTES[request.param] // 8)


@pytest.fixture
def make(executor_class):
    """Build executors of the class under test; each is shut down (waiting) after the test."""
    made = []

    def make(max_workers: int = 1, method: str = METHOD, **options):
        executor = executor_class(max_workers, mp.get_context(method), **options)
        made.append(executor)
        return executor

    yield make
    for executor in made:
        executor.shutdown(wait=True, cancel_futures=True)


class Gate:
    """A file the test makes to release the tasks held on it (``cw.held_then_nbytes``)."""

    def __init__(self, path) -> None:
        self.path = str(path)

    def open(self) -> None:
        with open(self.path, "w"):
            pass


@pytest.fixture
def gate(make, tmp_path):
    """A closed gate, opened after the test (before its executors are shut down) if still closed."""
    made = Gate(tmp_path / "gate")
    yield made
    made.open()


def wait_until(condition, seconds: float = LONG) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{condition} never held"
        time.sleep(0.01)


def settle(before: dict, seconds: float = 10.0) -> None:
    """Wait for a pool shut down without waiting to free its queues (their semaphores live in /dev/shm)."""
    deadline = time.monotonic() + seconds
    while leftovers.new_since(before) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)


def assert_same_array(got, expected: np.ndarray) -> None:
    assert isinstance(got, np.ndarray) and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def slow_then_queued(executor, payload: np.ndarray, gate: Gate, n_queued: int = 4):
    """A running task held on ``gate``, then ``n_queued`` echoes behind it; with one worker the last is
    still pending (the stdlib marks at most ``max_workers + 1`` calls as running)."""
    slow = executor.submit(cw.held_then_nbytes, gate.path, payload)
    wait_until(slow.running)
    return slow, [executor.submit(workers.echo, payload) for _ in range(n_queued)]


# --- submit and map ---------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_submit_returns_the_result_under_every_start_method(make, payload, method):
    executor = make(2, method)
    future = executor.submit(workers.echo, payload)
    assert_same_array(future.result(timeout=LONG), payload)
    assert future.done() and not future.running() and not future.cancelled()
    assert future.exception(timeout=0) is None
    assert isinstance(future, Future)
    keyword = executor.submit(cw.sleep_then_nbytes, seconds=0.0, payload=payload)
    assert keyword.result(timeout=LONG) == payload.nbytes


@pytest.mark.timeout(60)
def test_submit_passes_keywords_named_fn_and_self_to_the_function(make, payload):
    executor = make(1)
    received = executor.submit(cw.keywords, fn=payload, self="me", timeout=3).result(timeout=LONG)
    assert received == {"fn": payload.nbytes, "self": "me", "timeout": 3}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chunksize", [1, 3])
def test_map_gives_results_in_order_whatever_the_chunksize(make, payload, chunksize):
    executor = make(2)
    n = 7
    results = executor.map(workers.sum_slice, [payload] * n, range(n), range(1, n + 1), chunksize=chunksize)
    assert list(results) == [float(payload[i]) for i in range(n)]
    echoed = list(executor.map(workers.echo, [payload, payload], chunksize=chunksize, timeout=LONG))
    assert len(echoed) == 2
    for got in echoed:
        assert_same_array(got, payload)


@pytest.mark.timeout(30)
def test_map_refuses_a_chunksize_below_one(make, payload):
    executor = make(1)
    with pytest.raises(ValueError, match=re.escape("chunksize must be >= 1.")):
        executor.map(workers.echo, [payload], chunksize=0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chunksize", [1, 2])
def test_map_raises_timeout_error_when_its_timeout_expires(make, payload, chunksize, gate):
    executor = make(1)
    results = executor.map(cw.held_then_nbytes, [gate.path] * 2, [payload] * 2, chunksize=chunksize,
                           timeout=0.05)
    with pytest.raises(TimeoutError):
        next(results)


@pytest.mark.timeout(60)
def test_map_raises_a_worker_exception_at_its_place(make, payload):
    executor = make(1)
    results = executor.map(cw.fail_when, [False, True, False], [payload] * 3, timeout=LONG)
    assert next(results) == payload.nbytes
    with pytest.raises(cw.ConformanceError, match="asked to fail"):
        next(results)


# --- waiting: result timeout, as_completed, wait ----------------------------------------------------


@pytest.mark.timeout(60)
def test_result_and_exception_with_an_expired_timeout_raise_timeout_error(make, payload, gate):
    executor = make(1)
    slow = executor.submit(cw.held_then_nbytes, gate.path, payload)
    with pytest.raises(TimeoutError):
        slow.result(timeout=0.01)
    with pytest.raises(TimeoutError):
        slow.exception(timeout=0.01)
    gate.open()
    assert slow.result(timeout=LONG) == payload.nbytes


@pytest.mark.timeout(60)
def test_as_completed_yields_each_future_once_when_done(make, payload):
    executor = make(2)
    futures = [executor.submit(cw.sleep_then_nbytes, seconds, payload) for seconds in (0.3, 0.0, 0.1)]
    futures.append(executor.submit(workers.echo, payload))
    seen = []
    for future in as_completed(futures + futures[:2], timeout=LONG):  # duplicates are yielded once
        assert future.done()
        seen.append(future)
    assert len(seen) == len(futures) and set(seen) == set(futures)
    assert [future.result() for future in futures[:3]] == [payload.nbytes] * 3
    assert_same_array(futures[3].result(), payload)


@pytest.mark.timeout(60)
def test_as_completed_raises_timeout_error_when_its_timeout_expires(make, payload, gate):
    executor = make(1)
    fast = executor.submit(workers.echo, payload)
    fast.result(timeout=LONG)
    slow = executor.submit(cw.held_then_nbytes, gate.path, payload)
    completed = as_completed([fast, slow], timeout=0.05)
    assert next(completed) is fast  # what is already done comes first
    with pytest.raises(TimeoutError, match=re.escape("1 (of 2) futures unfinished")):
        next(completed)
    gate.open()
    assert slow.result(timeout=LONG) == payload.nbytes


@pytest.mark.timeout(60)
def test_wait_first_completed_returns_once_one_future_is_done(make, payload, gate):
    executor = make(1)
    fast = executor.submit(workers.echo, payload)
    slow = executor.submit(cw.held_then_nbytes, gate.path, payload)
    done, not_done = wait([fast, slow], timeout=LONG, return_when=FIRST_COMPLETED)
    assert done == {fast} and not_done == {slow}
    assert_same_array(fast.result(timeout=0), payload)


@pytest.mark.timeout(60)
def test_wait_first_exception_returns_at_the_first_exception(make, payload, gate):
    executor = make(1)
    fine = executor.submit(cw.fail_when, False, payload)
    failing = executor.submit(cw.fail_when, True, payload)
    slow = executor.submit(cw.held_then_nbytes, gate.path, payload)
    done, not_done = wait([fine, failing, slow], timeout=LONG, return_when=FIRST_EXCEPTION)
    assert done == {fine, failing} and not_done == {slow}
    assert isinstance(failing.exception(timeout=0), cw.ConformanceError)


@pytest.mark.timeout(60)
def test_wait_first_exception_without_exceptions_waits_for_all(make, payload):
    executor = make(1)
    futures = [executor.submit(cw.sleep_then_nbytes, seconds, payload) for seconds in (0.0, 0.2)]
    done, not_done = wait(futures, timeout=LONG, return_when=FIRST_EXCEPTION)
    assert done == set(futures) and not not_done


@pytest.mark.timeout(60)
def test_wait_all_completed_waits_for_every_future(make, payload):
    executor = make(2)
    futures = [executor.submit(cw.sleep_then_nbytes, seconds, payload) for seconds in (0.2, 0.0)]
    futures.append(executor.submit(cw.fail_when, True, payload))
    done, not_done = wait(futures, timeout=LONG, return_when=ALL_COMPLETED)
    assert done == set(futures) and not not_done
    assert [future.result() for future in futures[:2]] == [payload.nbytes] * 2


@pytest.mark.timeout(60)
def test_wait_with_an_expired_timeout_returns_what_is_not_done(make, payload, gate):
    executor = make(1)
    slow = executor.submit(cw.held_then_nbytes, gate.path, payload)
    done, not_done = wait([slow], timeout=0.05)
    assert not done and not_done == {slow}


# --- cancellation -----------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_pending_future_can_be_cancelled_a_running_or_done_one_cannot(make, payload, gate):
    executor = make(1)
    slow, queued = slow_then_queued(executor, payload, gate)
    last = queued[-1]
    called = []
    last.add_done_callback(called.append)
    assert last.cancel() is True
    assert last.cancel() is True  # cancelling again still says it is cancelled
    assert last.cancelled() and last.done() and not last.running()
    assert called == [last]
    with pytest.raises(CancelledError):
        last.result(timeout=0)
    with pytest.raises(CancelledError):
        last.exception(timeout=0)
    assert slow.running() and slow.cancel() is False and not slow.cancelled()
    gate.open()
    assert slow.result(timeout=LONG) == payload.nbytes
    assert slow.cancel() is False and not slow.cancelled()
    done, not_done = wait(queued, timeout=LONG)
    assert done == set(queued) and not not_done
    for future in queued[:-1]:
        assert_same_array(future.result(timeout=0), payload)


@pytest.mark.timeout(60)
def test_a_cancelled_future_is_yielded_by_as_completed(make, payload, gate):
    executor = make(1)
    slow, queued = slow_then_queued(executor, payload, gate)
    assert queued[-1].cancel()
    gate.open()
    assert set(as_completed([slow, *queued], timeout=LONG)) == {slow, *queued}
    assert queued[-1].cancelled()


# --- shutdown ---------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_shutdown_waiting_returns_once_all_work_is_done(make, payload):
    executor = make(1)
    slow = executor.submit(cw.sleep_then_nbytes, 0.2, payload)
    echoed = executor.submit(workers.echo, payload)
    executor.shutdown(wait=True)
    assert slow.done() and echoed.done()
    assert slow.result(timeout=0) == payload.nbytes
    assert_same_array(echoed.result(timeout=0), payload)


@pytest.mark.timeout(60)
def test_shutdown_without_waiting_returns_at_once_and_the_work_still_completes(make, payload, gate):
    before = leftovers.snapshot()
    executor = make(1)
    slow = executor.submit(cw.held_then_nbytes, gate.path, payload)
    echoed = executor.submit(workers.echo, payload)
    executor.shutdown(wait=False)
    assert not slow.done()
    with pytest.raises(RuntimeError, match=SHUTDOWN_MESSAGE):
        executor.submit(workers.echo, payload)
    gate.open()
    assert slow.result(timeout=LONG) == payload.nbytes
    assert_same_array(echoed.result(timeout=LONG), payload)
    del slow, echoed
    settle(before)


@pytest.mark.timeout(60)
def test_shutdown_with_cancel_futures_cancels_pending_work_and_finishes_running_work(make, payload, gate):
    executor = make(1)
    slow, queued = slow_then_queued(executor, payload, gate)
    opener = threading.Timer(0.2, gate.open)  # while shutdown waits for the running task
    opener.start()
    executor.shutdown(wait=True, cancel_futures=True)
    opener.join()
    assert slow.result(timeout=0) == payload.nbytes
    assert all(future.done() for future in queued)
    assert queued[-1].cancelled()
    with pytest.raises(CancelledError):
        queued[-1].result(timeout=0)
    for future in queued:
        if not future.cancelled():
            assert_same_array(future.result(timeout=0), payload)


@pytest.mark.timeout(60)
def test_the_context_manager_returns_the_executor_and_waits_on_exit(make, payload):
    executor = make(1)
    with executor as entered:
        assert entered is executor
        slow = entered.submit(cw.sleep_then_nbytes, 0.2, payload)
        echoed = entered.submit(workers.echo, payload)
    assert slow.done() and echoed.done()
    assert slow.result(timeout=0) == payload.nbytes
    assert_same_array(echoed.result(timeout=0), payload)
    with pytest.raises(RuntimeError, match=SHUTDOWN_MESSAGE):
        executor.submit(workers.echo, payload)


@pytest.mark.timeout(60)
def test_the_context_manager_lets_an_error_through_after_waiting(make, payload):
    executor = make(1)
    with pytest.raises(ZeroDivisionError):
        with executor:
            slow = executor.submit(cw.sleep_then_nbytes, 0.2, payload)
            1 / 0  # noqa: B018
    assert slow.done() and slow.result(timeout=0) == payload.nbytes


@pytest.mark.timeout(60)
def test_submit_and_map_after_shutdown_raise_runtime_error(make, payload):
    executor = make(1)
    assert executor.submit(workers.array_nbytes, payload).result(timeout=LONG) == payload.nbytes
    executor.shutdown()
    with pytest.raises(RuntimeError, match=f"^{SHUTDOWN_MESSAGE}$"):
        executor.submit(workers.echo, payload)
    with pytest.raises(RuntimeError, match=f"^{SHUTDOWN_MESSAGE}$"):
        executor.map(workers.echo, [payload])
    unused = make(1)
    unused.shutdown(wait=False)
    with pytest.raises(RuntimeError, match=f"^{SHUTDOWN_MESSAGE}$"):
        unused.submit(workers.echo, payload)


@pytest.mark.timeout(60)
def test_shutdown_twice_is_harmless(make, payload):
    executor = make(1)
    assert_same_array(executor.submit(workers.echo, payload).result(timeout=LONG), payload)
    assert executor.shutdown() is None
    assert executor.shutdown() is None
    assert executor.shutdown(wait=False, cancel_futures=True) is None
    unused = make(1)
    unused.shutdown()
    unused.shutdown(wait=True, cancel_futures=True)


# --- max_tasks_per_child ----------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_max_tasks_per_child_replaces_a_worker_after_that_many_tasks(make, payload, method):
    executor = make(1, method, max_tasks_per_child=2)
    served = [executor.submit(cw.pid_and_nbytes, payload).result(timeout=LONG) for _ in range(4)]
    pids = [pid for pid, _ in served]
    assert pids[0] == pids[1] and pids[2] == pids[3] and pids[0] != pids[2]
    assert {nbytes for _, nbytes in served} == {payload.nbytes}


@pytest.mark.timeout(60)
def test_max_tasks_per_child_without_a_context_picks_a_start_method_that_allows_it(executor_class, payload):
    with executor_class(1, max_tasks_per_child=1) as executor:  # the stdlib picks spawn, not the fork default
        served = [executor.submit(cw.pid_and_nbytes, payload).result(timeout=LONG) for _ in range(2)]
    assert served[0][0] != served[1][0]


@pytest.mark.timeout(60)
def test_max_tasks_per_child_with_several_workers_gives_each_task_a_fresh_worker(make, payload):
    executor = make(2, max_tasks_per_child=1)
    served = list(executor.map(cw.pid_and_nbytes, [payload] * 5, timeout=LONG))
    assert len({pid for pid, _ in served}) == 5 and {nbytes for _, nbytes in served} == {payload.nbytes}


@pytest.mark.timeout(30)
def test_max_tasks_per_child_is_refused_with_fork_and_below_one(executor_class):
    with pytest.raises(ValueError) as refused:
        executor_class(1, mp.get_context("fork"), max_tasks_per_child=1)
    assert str(refused.value) == FORK_MESSAGE
    with pytest.raises(ValueError, match=re.escape("max_tasks_per_child must be >= 1")):
        executor_class(1, mp.get_context("spawn"), max_tasks_per_child=0)
    with pytest.raises(TypeError, match="max_tasks_per_child must be an integer"):
        executor_class(1, mp.get_context("spawn"), max_tasks_per_child=1.5)


# --- a failing initializer --------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_failing_initializer_breaks_the_pool(make, payload, method):
    executor = make(1, method, initializer=cw.fail_to_initialize, initargs=("no start",))
    future = executor.submit(workers.echo, payload)
    error = future.exception(timeout=LONG)
    assert type(error) is BrokenProcessPool and str(error) == BROKEN_FUTURE_MESSAGE
    with pytest.raises(BrokenProcessPool, match=f"^{BROKEN_SUBMIT_MESSAGE}$"):
        executor.submit(workers.echo, payload)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_the_initializer_runs_in_each_worker_before_its_tasks(make, payload, method):
    executor = make(2, method, initializer=cw.remember, initargs=(payload,))
    results = list(executor.map(cw.remembered, [payload] * 4, timeout=LONG))
    assert results == [(float(payload.sum()), payload.nbytes, payload.nbytes)] * 4


@pytest.mark.timeout(60)
def test_an_executor_dropped_without_shutdown_still_finishes_its_work(executor_class, payload):
    before = leftovers.snapshot()
    executor = executor_class(1, mp.get_context(METHOD))
    slow = executor.submit(cw.sleep_then_nbytes, 0.2, payload)
    echoed = executor.submit(workers.echo, payload)
    del executor
    gc.collect()
    assert slow.result(timeout=LONG) == payload.nbytes
    assert_same_array(echoed.result(timeout=LONG), payload)
    del slow, echoed
    settle(before)


# --- what cannot be pickled -------------------------------------------------------------------------

# What the stdlib raises: the type, and words of its message on every Python we test (3.11 says
# "Can't pickle local object", 3.13 "Can't get local object").
UNPICKLABLE = {
    "local function": (AttributeError, "local object"),
    "module lambda": (pickle.PicklingError, "attribute lookup <lambda> on conformance_workers failed"),
    "lock": (TypeError, "cannot pickle '_thread.lock' object"),
}
RETURNS_UNPICKLABLE = {"local function": cw.return_local_function, "module lambda": cw.return_lambda,
                       "lock": cw.return_lock}


def unpicklable(what: str):
    if what == "local function":
        return lambda value: value
    if what == "module lambda":
        return cw.MODULE_LAMBDA
    return threading.Lock()


def assert_pickling_error(error: BaseException, what: str) -> None:
    expected_type, words = UNPICKLABLE[what]
    assert type(error) is expected_type, f"{type(error).__name__}: {error}"
    assert words in str(error)
    assert type(error.__cause__) is _RemoteTraceback and words in error.__cause__.tb


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", list(UNPICKLABLE))
def test_an_unpicklable_argument_fails_its_future_as_in_the_stdlib_and_the_pool_goes_on(make, payload, what):
    executor = make(1)
    future = executor.submit(workers.echo, (unpicklable(what), payload))
    assert_pickling_error(future.exception(timeout=LONG), what)
    with pytest.raises(UNPICKLABLE[what][0]):
        future.result(timeout=0)
    assert_same_array(executor.submit(workers.echo, payload).result(timeout=LONG), payload)


@pytest.mark.timeout(60)
def test_an_unpicklable_function_fails_its_future_as_in_the_stdlib(make, payload):
    executor = make(1)
    future = executor.submit(lambda value: value, payload)
    assert_pickling_error(future.exception(timeout=LONG), "local function")
    assert_same_array(executor.submit(workers.echo, payload).result(timeout=LONG), payload)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", list(UNPICKLABLE))
def test_an_unpicklable_result_fails_its_future_as_in_the_stdlib_and_the_pool_goes_on(make, payload, what):
    executor = make(1)
    future = executor.submit(RETURNS_UNPICKLABLE[what], payload)
    assert_pickling_error(future.exception(timeout=LONG), what)
    assert_same_array(executor.submit(workers.echo, payload).result(timeout=LONG), payload)


# --- exceptions raised in a worker ------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_worker_exception_keeps_its_type_message_and_remote_traceback(make, payload):
    executor = make(1)
    future = executor.submit(cw.raise_own, "it went wrong: 42", payload)
    with pytest.raises(cw.ConformanceError) as raised:
        future.result(timeout=LONG)
    error = raised.value
    assert type(error) is cw.ConformanceError and error.args == ("it went wrong: 42",)
    assert future.exception(timeout=0) is error
    remote = error.__cause__
    assert type(remote) is _RemoteTraceback and error.__suppress_context__
    assert "in raise_own" in remote.tb and "raise ConformanceError(message)" in remote.tb
    assert remote.tb.rstrip().endswith('conformance_workers.ConformanceError: it went wrong: 42\n"""')
    assert "in raise_own" in "".join(traceback.format_exception(error))  # what the caller is shown
    builtin = executor.submit(workers.raise_error, "ValueError", "bad value").exception(timeout=LONG)
    assert type(builtin) is ValueError and builtin.args == ("bad value",)
    assert "ValueError: bad value" in builtin.__cause__.tb


@pytest.mark.timeout(60)
def test_an_exception_raised_from_another_keeps_its_chain_as_text_like_the_stdlib(make, payload):
    executor = make(1)
    error = executor.submit(cw.raise_from, "outer", "inner", payload).exception(timeout=LONG)
    assert type(error) is cw.ConformanceError and error.args == ("outer",)
    remote = error.__cause__  # the stdlib replaces the cause by the remote traceback, which tells it
    assert type(remote) is _RemoteTraceback and remote.__cause__ is None
    inner = remote.tb.index("KeyError: 'inner'")
    link = remote.tb.index("The above exception was the direct cause of the following exception:")
    outer = remote.tb.index("ConformanceError: outer")
    assert inner < link < outer


@pytest.mark.timeout(60)
def test_an_exception_raised_while_handling_another_keeps_that_context_as_text(make, payload):
    error = make(1).submit(cw.raise_while_handling, payload).exception(timeout=LONG)
    assert type(error) is cw.ConformanceError and error.args == ("while handling",)
    tb = error.__cause__.tb
    inner = tb.index("KeyError: 'handled'")
    link = tb.index("During handling of the above exception, another exception occurred:")
    assert inner < link < tb.index("ConformanceError: while handling")


@pytest.mark.timeout(60)
def test_an_exception_carrying_the_payload_brings_it_back(make, payload):
    error = make(1).submit(cw.raise_carrying, payload).exception(timeout=LONG)
    assert type(error) is cw.ConformanceError and error.args[0] == "carries the payload"
    assert_same_array(error.args[1], payload)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["SystemExit", "KeyboardInterrupt"])
def test_a_base_exception_in_the_worker_comes_back_and_the_pool_goes_on(make, payload, kind):
    executor = make(1)
    error = executor.submit(cw.raise_base, kind, payload).exception(timeout=LONG)
    assert type(error).__name__ == kind and type(error.__cause__) is _RemoteTraceback
    if kind == "SystemExit":
        assert error.code == 3
    assert_same_array(executor.submit(workers.echo, payload).result(timeout=LONG), payload)


@pytest.mark.timeout(60)
def test_an_exception_that_cannot_be_pickled_comes_back_as_the_pickling_error(make, payload):
    executor = make(1)
    error = executor.submit(cw.raise_carrying_lock, payload).exception(timeout=LONG)
    assert type(error) is TypeError and str(error) == "cannot pickle '_thread.lock' object"
    assert "TypeError: cannot pickle '_thread.lock' object" in error.__cause__.tb
    assert_same_array(executor.submit(workers.echo, payload).result(timeout=LONG), payload)


@pytest.mark.timeout(60)
def test_an_exception_that_cannot_be_rebuilt_in_the_caller_breaks_the_pool(make, payload):
    executor = make(1)
    failing = executor.submit(cw.raise_unrebuildable, payload)
    assert_broken(executor, [failing], payload)
    why = failing.exception().__cause__.tb  # the error unpickling it in the caller
    assert "NeedsTwoArguments.__init__() missing 1 required positional argument" in why


# --- a killed worker --------------------------------------------------------------------------------


def assert_broken(executor, futures, payload) -> None:
    for future in futures:
        error = future.exception(timeout=LONG)
        assert type(error) is BrokenProcessPool and str(error) == BROKEN_FUTURE_MESSAGE
    with pytest.raises(BrokenProcessPool, match=f"^{BROKEN_SUBMIT_MESSAGE}$"):
        executor.submit(workers.echo, payload)
    with pytest.raises(BrokenProcessPool, match=f"^{BROKEN_SUBMIT_MESSAGE}$"):
        executor.map(workers.echo, [payload])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_worker_killing_itself_mid_task_breaks_the_pool(make, payload, method):
    executor = make(2, method)
    doomed = executor.submit(workers.kill_this_worker, payload)
    pending = []
    for _ in range(3):
        try:
            pending.append(executor.submit(cw.sleep_then_nbytes, LONG, payload))
        except BrokenProcessPool:  # a forked worker can die before the next submit: refused, as it must be
            break
    assert_broken(executor, [doomed, *pending], payload)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_worker_killed_from_outside_mid_task_breaks_the_pool(make, payload, method):
    executor = make(1, method)
    pid = executor.submit(workers.worker_pid).result(timeout=LONG)
    doomed = executor.submit(cw.sleep_then_nbytes, LONG, payload)
    pending = [executor.submit(workers.echo, payload) for _ in range(3)]
    wait_until(doomed.running)
    time.sleep(0.2)  # let the worker take the task
    os.kill(pid, signal.SIGKILL)
    assert_broken(executor, [doomed, *pending], payload)


# --- the big payload really takes the shared-memory path in ours -------------------------------------


@pytest.mark.timeout(60)
def test_the_big_payload_crosses_through_shared_memory_in_ours(payload):
    assert PAYLOAD_BYTES["big"] >= 2 * DEFAULT_MIN_SHARED_BYTES
    with SharedMemoryExecutor(1, mp.get_context(METHOD)) as executor:
        back = executor.submit(workers.echo, payload).result(timeout=LONG)
        assert (handle_of(back) is not None) == (payload.nbytes >= executor.min_shared_bytes)
        del back


# --- A deliberate difference: a call or a result that breaks while being unpickled ------------------
# CPython's test_deadlock sends a pool arguments that raise (or call sys.exit) while the worker
# unpickles them, and results that do so while the parent unpickles them. The stdlib's worker (or its
# management thread) dies of it and the whole pool breaks; ours unpickles both inside the task, so
# that one future raises what was raised and the pool goes on. Lesson 08 names this difference.


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["argument", "result"])
@pytest.mark.parametrize("how", ["raise", "exit"])
def test_a_call_or_result_that_breaks_while_unpickled_breaks_the_stdlib_pool_and_one_future_of_ours(
        where, how):
    expected = {"raise": cw.ConformanceError, "exit": SystemExit}[how]
    for executor_class, pool_goes_on in ((ProcessPoolExecutor, False), (SharedMemoryExecutor, True)):
        with executor_class(1, mp.get_context(METHOD)) as executor:
            future = (executor.submit(workers.echo, cw.BreaksWhenUnpickled(how)) if where == "argument"
                      else executor.submit(cw.return_breaking, how))
            with pytest.raises(expected if pool_goes_on else BrokenProcessPool):
                future.result(timeout=LONG)
            if pool_goes_on:
                assert executor.submit(workers.echo, 7).result(timeout=LONG) == 7
            else:
                with pytest.raises(BrokenProcessPool):
                    executor.submit(workers.echo, 7).result(timeout=LONG)
