"""helpers.measure.quiet_processes: workers that ignore Ctrl-C while their parent still gets it."""

from __future__ import annotations

import signal
from concurrent.futures import ProcessPoolExecutor

import pytest

from helpers.measure.quiet_processes import quiet_context


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
