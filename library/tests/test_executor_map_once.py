"""``map(f, [a] * n)`` copies ``a`` into shared memory once: every task maps that one copy
copy-on-write, and the results are the stdlib's, also where a worker writes into its argument,
returns it, or keeps it. Under fork, spawn and forkserver, with real processes and segments."""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor

import array_workers as workers
import numpy as np
import pytest

from sharedarrays import SharedMemoryExecutor

METHODS = ["fork", "spawn", "forkserver"]
N_CALLS = 4


@pytest.fixture
def array() -> np.ndarray:
    return np.random.default_rng(3).random(2**18)  # 2 MiB: over the executor's 1 MiB threshold


@pytest.fixture(scope="module", params=METHODS)
def pools(request):
    """SharedMemoryExecutor and ProcessPoolExecutor, 2 workers each, started once per start method
    for the tests of this module. Ours keeps no idle segment (``idle_cap_bytes=0``), so that each
    test's clean-up check finds nothing of it in /dev/shm once its arrays are gone."""
    context = mp.get_context(request.param)
    with SharedMemoryExecutor(2, context, idle_cap_bytes=0) as ours:
        with ProcessPoolExecutor(2, context) as stdlib:
            yield ours, stdlib


@pytest.fixture
def ours(pools):
    yield pools[0]
    pools[0].segment_pool.collect()  # segments back from their tasks are unlinked now


def _both(pools, call) -> tuple[list, list]:
    """``call(executor)`` on SharedMemoryExecutor and on ProcessPoolExecutor."""
    ours, stdlib = pools
    try:
        return call(ours), call(stdlib)
    finally:
        ours.segment_pool.collect()


@pytest.mark.timeout(120)
def test_an_array_passed_to_every_call_of_a_map_is_copied_once(ours, array):
    before = ours.segment_pool.created
    sums = list(ours.map(workers.sum_array, [array] * N_CALLS))
    assert sums == [float(array.sum())] * N_CALLS
    assert ours.segment_pool.created == before + 1  # one segment for the four calls
    list(ours.map(workers.sum_array, [array, array.copy()]))  # two arrays: two copies
    assert ours.segment_pool.created == before + 3


@pytest.mark.timeout(120)
def test_writes_into_the_shared_copy_stay_in_each_task_as_with_the_stdlib(pools, array):
    ours, stdlib = _both(pools, lambda executor: list(executor.map(workers.add_one_in_place,
                                                                    [array] * N_CALLS)))
    for mine, theirs in zip(ours, stdlib, strict=True):
        np.testing.assert_array_equal(mine, theirs)
        np.testing.assert_array_equal(mine, array + 1)  # no task saw another's write
    ours[0][:] = -1  # the results are separate arrays, as unpickled ones are
    assert all(np.array_equal(result, array + 1) for result in ours[1:])


@pytest.mark.timeout(120)
def test_results_that_return_the_argument_and_chunks_match_the_stdlib(pools, array):
    def echoes(executor):
        return (list(executor.map(workers.echo, [array] * N_CALLS)),
                list(executor.map(workers.echo, [array] * 3, chunksize=2)))

    (ours, ours_chunked), (stdlib, stdlib_chunked) = _both(pools, echoes)
    for mine, theirs in zip(ours + ours_chunked, stdlib + stdlib_chunked, strict=True):
        np.testing.assert_array_equal(mine, theirs)
        assert mine.flags.writeable == theirs.flags.writeable and mine.dtype == theirs.dtype
    # identity as pickle's memo gives it: one object per chunk that carried the array twice
    assert (ours_chunked[0] is ours_chunked[1]) == (stdlib_chunked[0] is stdlib_chunked[1])
    ours[0][:] = 0
    assert np.array_equal(ours[1], array)  # a result is not a view another result shares


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
def test_an_argument_a_worker_keeps_stays_as_it_was_when_the_segment_is_used_again(method, array):
    with SharedMemoryExecutor(1, mp.get_context(method)) as executor:
        assert list(executor.map(workers.keep_and_sum, [array] * 2)) == [float(array.sum())] * 2
        other = np.full_like(array, 7.0)
        list(executor.map(workers.sum_array, [other] * 2))  # the warm segment now holds `other`
        assert executor.segment_pool.reused >= 1
        kept = executor.submit(workers.sums_of_kept).result()
        assert kept == [float(array.sum())] * 2, kept
        executor.submit(workers.forget_kept).result()
