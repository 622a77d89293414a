"""helpers.measure.quiet_processes: workers that ignore Ctrl-C while their parent still gets it."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from helpers.measure.quiet_processes import _sigint_held, quiet_context


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_workers_of_a_quiet_context_ignore_ctrl_c(method):
    before = signal.getsignal(signal.SIGINT)
    with ProcessPoolExecutor(1, mp_context=quiet_context(method)) as pool:
        in_worker = pool.submit(signal.getsignal, signal.SIGINT).result()
    assert in_worker == signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is before  # this process still gets KeyboardInterrupt


def test_an_unknown_start_method_is_refused_by_name():
    with pytest.raises(ValueError, match="cannot find context"):
        quiet_context("teleport")


def _sigint_blocked_here() -> bool:
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_workers_do_not_keep_sigint_blocked(method):
    with ProcessPoolExecutor(1, mp_context=quiet_context(method)) as pool:
        assert pool.submit(_sigint_blocked_here).result() is False
    assert not _sigint_blocked_here()


@pytest.mark.parametrize("other_thread", [False, True], ids=["main thread alone", "with another thread"])
def test_a_ctrl_c_while_a_worker_starts_is_held_then_raised_not_lost(other_thread):
    # Another thread that does not block SIGINT (a pool's, a sampler's) is where the kernel may deliver
    # a Ctrl-C sent to the process: the block must hold it all the same.
    stop = threading.Event()
    if other_thread:
        threading.Thread(target=stop.wait, daemon=True).start()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # also if this run ignores SIGINT
    held = False
    try:
        with pytest.raises(KeyboardInterrupt):
            with _sigint_held():
                os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C in the middle of a worker's start
                time.sleep(0.1)  # held: nothing is raised inside the block
                held = True
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
        stop.set()
    assert held


def test_the_block_without_a_ctrl_c_raises_nothing_and_puts_the_handler_back():
    def own_handler(signum, frame):
        raise AssertionError("not called without a Ctrl-C")

    previous = signal.signal(signal.SIGINT, own_handler)
    try:
        with _sigint_held():
            pass
        assert signal.getsignal(signal.SIGINT) is own_handler
        assert not _sigint_blocked_here()
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_process_that_ignores_ctrl_c_still_ignores_it_after_the_block():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _sigint_held():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
        time.sleep(0.1)  # nothing held, nothing raised
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
