"""Suite-wide checks: nothing of ours may be left in /dev/shm or the temp folder afterwards.

This file sits at the repository root so it also guards the notebooks that nbval runs. It uses
session hooks rather than a fixture: nbval's cells are not Python test functions, so they never
request fixtures, not even autouse ones. Besides our own entries, multiprocessing's ``pymp-*``
folders count: a process of ours that ends without its exit handlers leaves one.

nbval ends each notebook's kernel with SIGKILL (``shutdown_kernel(now=True)``), so the kernel's exit
handlers never run and the folder of its forkserver's socket stayed behind, one per lesson. Asking
the kernel to shut down does not help: ipykernel first waits for its children to end, and the
resource tracker ignores SIGTERM, so jupyter_client sends the kernel SIGTERM after 2.5 s (this is
also what JupyterLab's "Shut Down Kernel" does; a lesson's knobs cell turns that SIGTERM into a
normal exit, ``helpers.measure.kernel_exit``, but nothing survives SIGKILL). Here the kernel runs
multiprocessing's exit handlers, what a Python process that ends normally runs, before nbval kills
it; a process of ours that leaves a ``pymp-*`` folder any other way fails the run.
"""

import functools
import gc
import os
import time

import pytest

from helpers.measure import leftovers

# The lessons read their array size from LAB_ARRAY_MB; give the unit tests the same small size.
os.environ.setdefault("LAB_ARRAY_MB", "16")

# A killed kernel's resource tracker removes what the kernel registered, a moment after it died.
SETTLE_SECONDS = 2.0
_before: dict[str, set[str]] = {}


# multiprocessing's atexit handler: finalizers (the temp folder's removal), daemonic children ended
EXIT_HANDLERS = "import multiprocessing.util\nmultiprocessing.util._exit_function()"
EXIT_HANDLERS_SECONDS = 30


def _stop_kernel_after_its_exit_handlers(self, _stop=None):
    """nbval's ``RunningKernel.stop``, after the kernel has run multiprocessing's exit handlers."""
    if self.is_alive():
        try:
            self.await_reply(self.execute_cell_input(EXIT_HANDLERS), timeout=EXIT_HANDLERS_SECONDS)
        except Exception as error:  # a kernel that died or hangs is killed as before
            print(f"the kernel did not run multiprocessing's exit handlers: {error!r}")
    _stop(self)


try:
    from nbval.kernel import RunningKernel
except ImportError:  # a venv without nbval: no notebooks run here
    pass
else:
    RunningKernel.stop = functools.partialmethod(_stop_kernel_after_its_exit_handlers, _stop=RunningKernel.stop)


def _left_since(before: dict[str, set[str]]) -> list[str]:
    left = leftovers.new_since(before)
    return left + sorted(leftovers.multiprocessing_temp_dirs() - before["multiprocessing"])


def pytest_sessionstart(session):
    _before.update(leftovers.snapshot())
    _before["multiprocessing"] = leftovers.multiprocessing_temp_dirs()


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if any segment or temp file made during it survives it."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        gc.collect()  # objects in reference cycles (a closed Pool) free their semaphores here
        left = _left_since(_before)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"the test run left these behind: {left}"
        if reporter is not None:
            reporter.write_line(f"LEAK: {message}", red=True, bold=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
