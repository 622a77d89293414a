"""Suite-wide checks: nothing of ours may be left in /dev/shm or the temp folder afterwards.

This file sits at the repository root so it also guards the notebooks that nbval runs. It uses
session hooks rather than a fixture: nbval's cells are not Python test functions, so they never
request fixtures, not even autouse ones.
"""

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


def pytest_sessionstart(session):
    _before.update(leftovers.snapshot())


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if any segment or temp file made during it survives it."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        gc.collect()  # objects in reference cycles (a closed Pool) free their semaphores here
        left = leftovers.new_since(_before)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"the test run left these behind: {left}"
        if reporter is not None:
            reporter.write_line(f"LEAK: {message}", red=True, bold=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
