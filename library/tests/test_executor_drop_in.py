"""SharedMemoryExecutor as a drop-in for ProcessPoolExecutor: the details (issue 12, point 4).

Construction refuses what the stdlib refuses; pickle's memo keeps identity within a call and
within a result; a read-only argument returned comes back writable where unpickling makes it so;
containers the stdlib pickles (cycles, arrays inside any object) cross the same way; and
``SharedNDArray.copy_of`` refuses a masked array instead of dropping its mask.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import types
from concurrent.futures import ProcessPoolExecutor

import array_workers as workers
import numpy as np
import pytest

from sharedarrays.executor import SharedMemoryExecutor
from sharedarrays.shm import SharedNDArray, handle_of

BIG = 2**20 // 8 * 2  # float64 items in 2 MiB: above the 1 MiB default threshold


@pytest.fixture
def executor():
    with SharedMemoryExecutor(1, mp.get_context("spawn")) as shared_executor:
        yield shared_executor


@pytest.mark.parametrize("initializer", [5, "workers.echo"])
def test_a_non_callable_initializer_is_refused_at_construction_like_the_stdlib(initializer):
    with pytest.raises(TypeError) as stdlib:
        ProcessPoolExecutor(1, mp.get_context("spawn"), initializer=initializer)
    with pytest.raises(TypeError) as ours:
        SharedMemoryExecutor(1, mp.get_context("spawn"), initializer=initializer)
    assert str(ours.value) == str(stdlib.value)


@pytest.mark.parametrize("n_items", [BIG, 10], ids=["shared", "pickled"])
def test_the_same_array_twice_in_one_call_arrives_as_one_object(executor, n_items):
    array = np.arange(float(n_items))
    assert executor.submit(workers.is_same_object, array, array).result()
    described = executor.submit(workers.describe_arguments, [array], {"again": array}, also=array).result()
    assert [entry[8] for entry in described] == [0, 0, 0]  # each is the first one
    holder = types.SimpleNamespace(inside=array)
    assert executor.submit(workers.attribute_is, array, holder, "inside").result()


def test_a_result_returned_twice_comes_back_as_one_object(executor):
    first, second = executor.submit(workers.twice, np.zeros(BIG)).result()
    assert first is second and (first == 1).all()
    array = np.zeros(BIG)
    pair = executor.submit(workers.echo, (array, array)).result()
    assert pair[0] is pair[1]


def test_a_read_only_argument_comes_back_writable_where_unpickling_makes_it_so(executor):
    frozen = np.arange(float(BIG))
    frozen.flags.writeable = False
    unpickled = pickle.loads(pickle.dumps(frozen, protocol=pickle.DEFAULT_PROTOCOL))
    with ProcessPoolExecutor(1, mp.get_context("spawn")) as stdlib:
        stdlib_back = stdlib.submit(workers.echo, frozen).result()
    back = executor.submit(workers.echo, frozen).result()
    assert back.flags.writeable == stdlib_back.flags.writeable == unpickled.flags.writeable
    if back.flags.writeable:
        back[0] = -1.0  # the caller's own array: the argument is untouched
        assert frozen[0] == 0.0
    bumped = executor.submit(workers.add_one_in_place, frozen).result()  # the stdlib's worker may write
    np.testing.assert_array_equal(bumped, frozen + 1)
    del back, bumped


def test_containers_the_stdlib_pickles_cross_the_same_way(executor):
    array = np.arange(float(BIG))
    cyclic = [array]
    cyclic.append(cyclic)  # a list that holds itself: pickle's memo handles it
    back = executor.submit(workers.echo, cyclic).result()
    assert back[1] is back
    np.testing.assert_array_equal(back[0], array)
    holder = types.SimpleNamespace(first=array, second=array)
    echoed = executor.submit(workers.echo, holder).result()
    assert echoed.first is echoed.second
    np.testing.assert_array_equal(echoed.first, array)
    assert handle_of(echoed.first) is not None  # an array inside any object crosses in shared memory
    del back, echoed


def test_copy_of_refuses_a_masked_array_instead_of_dropping_its_mask():
    masked = np.ma.masked_array(np.arange(3.0), mask=[False, True, False])
    with pytest.raises(TypeError, match="mask would be silently lost.*getmaskarray"):
        SharedNDArray.copy_of(masked)
