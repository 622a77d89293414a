"""Benchmark targets clean up after themselves like unit tests: nothing new in /dev/shm or temp."""

import gc

import pytest

from helpers.measure import leftovers


@pytest.fixture(autouse=True)
def nothing_left_behind_by_this_test():
    before = leftovers.snapshot()
    yield
    gc.collect()
    left = leftovers.new_since(before)
    assert not left, f"this test left these behind: {left}"
