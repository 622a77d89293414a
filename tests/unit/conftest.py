"""Each unit test must clean up after itself, also when it fails."""

import gc

import pytest

from helpers.measure import leftovers


@pytest.fixture(autouse=True)
def nothing_left_behind_by_this_test():
    before = leftovers.snapshot()
    yield
    gc.collect()  # objects in reference cycles (a closed Pool) free their semaphores here
    left = leftovers.new_since(before)
    assert not left, f"this test left these behind: {left}"
