"""helpers.measure.quiet_processes: workers that ignore Ctrl-C while their parent still gets it."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from helpers.measure.quiet_processes import _sigint_blocked, quiet_context


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


def test_a_ctrl_c_while_a_worker_starts_is_held_then_raised_not_lost():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # also if this run ignores SIGINT
    with pytest.raises(KeyboardInterrupt):
        with _sigint_blocked():
            os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C in the middle of a worker's start
            time.sleep(0.1)  # held: nothing is raised inside the block
            held = True
    signal.signal(signal.SIGINT, previous)
    assert held
