"""Suite-wide checks: nothing of ours may be left in /dev/shm or the temp folder afterwards.

This file sits at the repository root so it also guards the notebooks that nbval runs.
"""

import gc
import os

import pytest

from helpers import leftovers

# The lessons read their array size from LAB_ARRAY_MB; give the unit tests the same small size.
os.environ.setdefault("LAB_ARRAY_MB", "16")


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind_by_the_suite():
    """Fail the run if any segment or temp file of ours survives it."""
    before = leftovers.snapshot()
    yield
    gc.collect()  # objects in reference cycles (a closed Pool) free their semaphores here
    left = leftovers.new_since(before)
    assert not left, f"the test run left these behind: {left}"
