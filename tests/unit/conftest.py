"""Each unit test must clean up after itself, also when it fails."""

import gc

import pytest

from helpers.measure import leftovers


@pytest.fixture(autouse=True)
def nothing_left_behind_by_this_test():
    before = leftovers.snapshot()
    before_multiprocessing = leftovers.multiprocessing_temp_dirs()
    yield
    gc.collect(1)  # the young generations: most of what the test made and dropped in reference cycles
    left = leftovers.new_since(before)
    if left:  # an older object in a cycle (a closed Pool) may still hold a semaphore: a full
        gc.collect()  # collection, which takes about 0.2 s with everything imported, so only then
        left = leftovers.new_since(before)
    # multiprocessing's pymp-* folders: a process this test started and that ended without its
    # exit handlers (SIGKILL) leaves one; a test that kills one on purpose removes it
    left += sorted(leftovers.multiprocessing_temp_dirs() - before_multiprocessing)
    assert not left, f"this test left these behind: {left}"


@pytest.fixture(scope="session")
def every_strategy_run():
    """Every strategy once in this process (about a minute and a half), for the tests that share it."""
    from every_strategy import run_every_strategy

    return run_every_strategy()
