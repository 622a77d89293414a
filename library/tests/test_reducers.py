"""sharedarrays.reducers: arrays through mp.Queue, Pipe and Pool via shared memory, both ways,
undoable, leak-free.

Real processes and real /dev/shm throughout; the autouse fixture in conftest.py fails any test
that leaves an entry in /dev/shm (torch_* files included) or the temp folder.
"""

from __future__ import annotations

import copyreg
import multiprocessing as mp
import multiprocessing.resource_sharer
import os
import pickle
import signal
import subprocess
import sys
from multiprocessing.reduction import ForkingPickler

import array_workers as workers
import numpy as np
import pytest
from optional_torch import TORCH

from sharedarrays import lent_segments, reducers
from sharedarrays.shm import SharedNDArray, handle_of

WAYS = (TORCH, "shared_memory")
RECORD = np.dtype([("when", "M8[s]"), ("price", ">f4"), ("ticker", "U3")])
SPAWN = mp.get_context("spawn")


def cases() -> dict[str, np.ndarray]:
    """Every layout and dtype family the reductions must carry exactly."""
    rng = np.random.default_rng(8)
    records = np.zeros(50, RECORD)
    records["when"] = np.datetime64("2026-01-02T09:30:00") + np.arange(50).astype("m8[s]")
    records["price"] = rng.random(50)
    records["ticker"] = "NVD"
    return {
        "float64": rng.random(20_000),
        "datetime64": (np.datetime64("2026-01-01", "ns") + rng.integers(0, 10**15, 1000).astype("m8[ns]")),
        "records": records,
        "fortran": np.asfortranarray(rng.random((300, 7))),
        "strided view": rng.random((400, 30))[::3, 1::2],
        "reversed": rng.random(1000)[::-1],
        "empty": np.zeros((3, 0)),
        "zero-d": np.array(2.5),
        "read-only": np.frombuffer(rng.random(100).tobytes(), np.float64),
    }


def assert_same(received: np.ndarray, sent: np.ndarray) -> None:
    assert type(received) is np.ndarray
    assert received.dtype == sent.dtype and received.shape == sent.shape
    assert received.tobytes() == sent.tobytes()  # exact bytes in logical order, NaN and records too
    assert received.flags.writeable == sent.flags.writeable
    if sent.flags.f_contiguous and not sent.flags.c_contiguous:
        assert received.flags.f_contiguous


def in_shared_memory(array: np.ndarray, way: str) -> bool:
    if way == "torch":
        from sharedarrays.torch_reduction import shared_tensor_of

        return shared_tensor_of(array) is not None
    return handle_of(array) is not None


@pytest.fixture(autouse=True)
def nothing_shared_after():
    reducers.stop_sharing_arrays()
    yield
    reducers.stop_sharing_arrays()


def test_importing_reducers_does_not_import_torch():
    code = "import sys, sharedarrays.reducers; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("way", WAYS)
def test_only_forking_pickler_changes_and_stopping_restores_it(way):
    if way == "torch":
        import sharedarrays.torch_reduction  # noqa: F401  (torch registers its own types on import)
    array = np.random.default_rng(0).random(10_000)
    extra, dispatch = dict(ForkingPickler._extra_reducers), dict(copyreg.dispatch_table)
    plain, forking = pickle.dumps(array), bytes(ForkingPickler.dumps(array))
    reducers.share_arrays(way)
    assert reducers.active_way() == way
    assert pickle.dumps(array) == plain
    assert len(ForkingPickler.dumps(array)) < 2000 < len(plain)  # a description, not the data
    reducers.stop_sharing_arrays()
    assert reducers.active_way() is None
    assert dict(ForkingPickler._extra_reducers) == extra and dict(copyreg.dispatch_table) == dispatch
    assert bytes(ForkingPickler.dumps(array)) == forking


def test_an_earlier_ndarray_reducer_comes_back():
    def earlier(array):
        return np.array, (array.tolist(),)

    ForkingPickler.register(np.ndarray, earlier)
    try:
        with reducers.sharing_arrays("shared_memory"):
            assert ForkingPickler._extra_reducers[np.ndarray] is not earlier
        assert ForkingPickler._extra_reducers[np.ndarray] is earlier
    finally:
        del ForkingPickler._extra_reducers[np.ndarray]


def test_enabling_again_does_nothing_and_the_other_way_is_refused():
    reducers.share_arrays_with_shared_memory()
    pool = reducers.shared_memory_pool()
    reducers.share_arrays_with_shared_memory()
    assert reducers.shared_memory_pool() is pool
    with pytest.raises(RuntimeError, match="stop_sharing_arrays"):
        reducers.share_arrays_with_torch()
    with reducers.sharing_arrays("shared_memory"):  # already on: the block leaves it on
        pass
    assert reducers.active_way() == "shared_memory"
    with pytest.raises(ValueError, match="how must be one of"):
        reducers.share_arrays("pickle")


@pytest.mark.parametrize("way", WAYS)
def test_object_arrays_are_refused_with_a_type_error(way):
    with reducers.sharing_arrays(way), pytest.raises(TypeError, match="fixed-width"):
        ForkingPickler.dumps(np.array(["a", 1, None], dtype=object))


@pytest.mark.parametrize("way", WAYS)
def test_local_round_trip_keeps_every_layout_and_resends_without_copying(way):
    with reducers.sharing_arrays(way):
        for name, array in cases().items():
            received = ForkingPickler.loads(ForkingPickler.dumps(array))
            assert_same(received, array)
            if array.nbytes:
                assert in_shared_memory(received, way), name
                view = received[::-1] if received.ndim else received[...]
                again = ForkingPickler.loads(ForkingPickler.dumps(view))
                assert_same(again, view)
                if received.flags.writeable:  # zero-copy: a write through one shows in the other
                    before = received.tobytes()
                    again[(0,) * again.ndim] = received[(0,) * received.ndim]
                    assert received.tobytes() != before or received.size == 1, name


def test_a_returned_segment_is_reused_warm():
    array = np.random.default_rng(1).random(100_000)
    with reducers.sharing_arrays("shared_memory"):
        pool = reducers.shared_memory_pool()
        for _ in range(4):
            assert_same(ForkingPickler.loads(ForkingPickler.dumps(array)), array)
        pool.collect()
        assert (pool.created, pool.reused) == (1, 3)


def test_a_segment_still_held_is_not_lent_again():
    first, second = np.random.default_rng(2).random(50_000), np.random.default_rng(3).random(50_000)
    with reducers.sharing_arrays("shared_memory"):
        held = ForkingPickler.loads(ForkingPickler.dumps(first))
        sent_on = ForkingPickler.loads(ForkingPickler.dumps(held))  # one more holder
        del held
        for _ in range(3):
            assert_same(ForkingPickler.loads(ForkingPickler.dumps(second)), second)
        assert_same(sent_on, first)
        pool = reducers.shared_memory_pool()
        pool.collect()
        assert pool.created == 2


def test_loading_after_the_sender_stopped_says_the_segment_is_gone():
    with reducers.sharing_arrays("shared_memory"):
        payload = ForkingPickler.dumps(np.random.default_rng(4).random(1000))
    with pytest.raises(FileNotFoundError, match="sender stops sharing or exits"):
        ForkingPickler.loads(payload)


@pytest.mark.parametrize("way", WAYS)
def test_round_trip_through_a_pipe(way):
    sent = list(cases().values())
    with reducers.sharing_arrays(way):
        here, there = SPAWN.Pipe()
        worker = SPAWN.Process(target=workers.echo_arrays, args=(there, way))
        worker.start()
        there.close()
        try:
            assert here.recv() == "ready"
            here.send(sent)
            back = here.recv()
            here.send(None)
        finally:
            here.close()
            worker.join()
        for received, array in zip(back, sent, strict=True):
            assert_same(received, array)
            assert not array.nbytes or in_shared_memory(received, way)  # back in our own segments
    assert worker.exitcode == 0


@pytest.mark.parametrize("way", WAYS)
def test_round_trip_through_queues_and_an_echo_keeps_the_data(way):
    sent = list(cases().values())
    with reducers.sharing_arrays(way):
        inbox, outbox = SPAWN.Queue(), SPAWN.Queue()
        worker = SPAWN.Process(target=workers.echo_queue, args=(inbox, outbox, way))
        worker.start()
        for array in sent:
            inbox.put(array)
        back = [outbox.get() for _ in sent]
        second = [ForkingPickler.loads(ForkingPickler.dumps(array)) for array in sent]  # reuse attempts
        inbox.put(None)
        worker.join()
        inbox.close(), outbox.close()
        inbox.join_thread(), outbox.join_thread()
    for received, again, array in zip(back, second, sent, strict=True):
        assert_same(received, array)
        assert_same(again, array)


@pytest.mark.parametrize("way", WAYS)
def test_spawn_pool_with_an_initializer_copies_first_shares_and_shares_shared_arrays(way):
    private = np.random.default_rng(5).random(10_000)
    with reducers.sharing_arrays(way):
        shared_owner = SharedNDArray.copy_of(private) if way == "shared_memory" else None
        shared = shared_owner.array if shared_owner else ForkingPickler.loads(ForkingPickler.dumps(private))
        try:
            with SPAWN.Pool(2, initializer=reducers.share_arrays, initargs=(way,)) as pool:
                echoed = pool.map(workers.echo, list(cases().values()))
                pool.apply(workers.fill_in_place, (private, 7.0))
                pool.apply(workers.fill_in_place, (shared, 7.0))
                pair = pool.apply(workers.plus_one_and_slice, (private,))
        finally:
            if shared_owner is not None:
                del shared
                shared_owner.__exit__(None, None, None)
                shared = None
    for received, array in zip(echoed, cases().values(), strict=True):
        assert_same(received, array)
    assert not np.any(private == 7.0)  # a first share is a copy
    assert shared is None or np.all(shared == 7.0)  # an already shared array is the same memory
    np.testing.assert_array_equal(pair[0], private + 1)
    np.testing.assert_array_equal(pair[1], private[5000:])


def test_forked_children_lend_from_a_pool_of_their_own():
    fork = mp.get_context("fork")
    array = np.random.default_rng(6).random(20_000)
    with reducers.sharing_arrays("shared_memory"):
        kept = ForkingPickler.loads(ForkingPickler.dumps(array))  # a reception the children inherit
        parent_pool = reducers.shared_memory_pool()
        holders = lent_segments.holders_of(kept)
        with fork.Pool(2) as pool:
            results = pool.map(workers.plus_one_and_slice, [array] * 4)
            pids = {str(child.pid) for child in mp.active_children()}
            lenders = {handle_of(new).name.split("_")[1] for new, _ in results}
            assert holders[0] == 3  # this process and the two children that inherited the reception
        assert lenders <= pids
        assert reducers.shared_memory_pool() is parent_pool
        assert all(name.split("_")[1] == str(os.getpid()) for name in parent_pool.names())
        for new, view in results:
            np.testing.assert_array_equal(new, array + 1)
            np.testing.assert_array_equal(view, array[10_000:])
        assert_same(kept, array)
        assert holders[0] >= 1  # children killed by terminate() cannot give theirs back: kept lent, safe


@pytest.mark.parametrize("way", WAYS)
def test_an_item_never_received_leaves_nothing(way):
    with reducers.sharing_arrays(way):
        queue = SPAWN.Queue()
        queue.put(np.random.default_rng(7).random(50_000))
        here, there = SPAWN.Pipe()
        here.send(np.random.default_rng(8).random(50_000))
        queue.close()
        queue.join_thread()
        here.close(), there.close()
    if way == "torch":
        multiprocessing.resource_sharer.stop()  # close the descriptors kept for the unreceived items


@pytest.mark.parametrize("way", WAYS)
def test_a_receiver_killed_while_holding_leaves_nothing(way):
    array = np.random.default_rng(9).random(200_000)
    with reducers.sharing_arrays(way):
        queue, ready, release = SPAWN.Queue(), SPAWN.Event(), SPAWN.Event()
        holder = SPAWN.Process(target=workers.receive_and_hold, args=(queue, ready, release))
        holder.start()
        queue.put([array, array[::2]])
        assert ready.wait(60)
        os.kill(holder.pid, signal.SIGKILL)
        holder.join()
        queue.close()
        queue.join_thread()
    assert holder.exitcode == -signal.SIGKILL


def test_torch_missing_is_a_clear_import_error():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from sharedarrays import reducers\n"
        "try:\n    reducers.share_arrays_with_torch()\n"
        "except ImportError as error:\n    print(error)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install torch" in result.stdout and "share_arrays_with_shared_memory" in result.stdout


def test_the_holder_count_reaches_zero_only_when_every_view_is_gone():
    array = np.random.default_rng(10).random(10_000)
    with reducers.sharing_arrays("shared_memory"):
        received = ForkingPickler.loads(ForkingPickler.dumps(array))
        holders = lent_segments.holders_of(received)
        part = received[10:20]
        del received
        assert holders[0] == 1
        del part
        assert holders[0] == 0
