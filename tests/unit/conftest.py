"""Each unit test must clean up after itself, also when it fails."""

import gc

import pytest

from helpers.measure import leftovers


@pytest.fixture(autouse=True)
def nothing_left_behind_by_this_test():
    before = leftovers.snapshot()
    yield
    gc.collect(1)  # the young generations: most of what the test made and dropped in reference cycles
    left = leftovers.new_since(before)
    if left:  # an older object in a cycle (a closed Pool) may still hold a semaphore: a full
        gc.collect()  # collection, which takes about 0.2 s with everything imported, so only then
        left = leftovers.new_since(before)
    assert not left, f"this test left these behind: {left}"


@pytest.fixture(scope="session")
def every_strategy_run():
    """Every strategy once in this process (about a minute and a half), for the tests that share it."""
    from every_strategy import run_every_strategy

    return run_every_strategy()
