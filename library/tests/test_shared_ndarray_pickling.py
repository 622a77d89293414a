"""SharedNDArray as a SharedMemory user expects it (issue 32, item 5): it pickles as a non-owning
reference to the same segment (SharedMemory pickles by name), so it can be passed to ``submit``,
``Process(args=...)`` or a queue under every start method; ``SharedNDArray(handle)`` attaches, as
``SharedMemory(name)`` does; ``track=`` as in Python 3.13's SharedMemory; an ArrayHandle is checked
when made (a byte count that overflows int64 is refused, not wrapped). Real processes and segments;
the autouse fixture checks that nothing is left in /dev/shm."""

from __future__ import annotations

import copy
import multiprocessing as mp
import pickle
import subprocess
import sys
import textwrap

import handle_workers
import numpy as np
import pytest

from sharedarrays import ArrayHandle, SharedMemoryExecutor, SharedNDArray, sweep
from sharedarrays._names import segment_exists

METHODS = ["fork", "spawn", "forkserver"]


def test_an_unpickled_shared_array_views_the_same_segment_and_does_not_own_it():
    with SharedNDArray.copy_of(np.arange(1000.0)) as shared:
        payload = pickle.dumps(shared)
        assert len(payload) < 600  # the handle, not the data
        other = pickle.loads(payload)
        assert other.name == shared.name and not other.owner and shared.owner
        other.array[:3] = -1  # the same pages
        assert shared.array[:3].tolist() == [-1.0, -1.0, -1.0]
        with pytest.raises(PermissionError):
            other.unlink()
        with other:  # leaving it closes this mapping only
            pass
        assert segment_exists(shared.name)
        assert copy.copy(shared).name == shared.name
    assert not segment_exists(shared.name)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.timeout(120)
def test_a_shared_array_passed_to_submit_is_attached_by_the_worker(method):
    with SharedNDArray.create(1000) as shared, SharedMemoryExecutor(1, mp.get_context(method)) as executor:
        name, owner, total = executor.submit(handle_workers.fill_and_describe, shared, 2.0).result()
        assert (name, owner, total) == (shared.name, False, 2000.0)
        assert shared.array.sum() == 2000.0  # the worker wrote into this segment


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.timeout(120)
def test_a_shared_array_passed_to_a_process_is_attached_there(method):
    with SharedNDArray.create(1000) as shared:
        process = mp.get_context(method).Process(target=handle_workers.fill_in_process, args=(shared, 3.0))
        process.start()
        process.join(60)
        assert process.exitcode == 0
        assert shared.array.sum() == 3000.0
    assert not segment_exists(shared.name)


def test_unpickled_after_its_owner_unlinked_it_names_what_happened():
    shared = SharedNDArray.create(10)
    payload = pickle.dumps(shared)
    shared.close()
    shared.unlink()
    with pytest.raises(FileNotFoundError, match="already unlinked"):
        pickle.loads(payload)


def test_attaching_by_handle_is_the_public_constructor():
    with SharedNDArray.copy_of(np.ones(5)) as shared:
        attached = SharedNDArray(shared.handle)
        assert not attached.owner and attached.array.sum() == 5.0
        attached.close()
    with pytest.raises(TypeError, match="SharedNDArray.create"):
        SharedNDArray("sal_not_a_handle")


UNTRACKED = """
import sys
from sharedarrays import SharedNDArray
shared = SharedNDArray.create(1000, track=sys.argv[1] == "True")
shared.array[:] = 7
print(shared.name, flush=True)
"""


@pytest.mark.parametrize("track", [True, False])
@pytest.mark.timeout(60)
def test_track_false_leaves_the_segment_for_others_after_its_creator_exits(track):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(UNTRACKED), str(track)],
                          capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr
    name = done.stdout.strip()
    if track:  # the resource tracker unlinked it when the creator ended, and warned of the leak
        assert not segment_exists(name)
        return
    assert segment_exists(name) and "leaked" not in done.stderr
    survivor = SharedNDArray(ArrayHandle(name, (1000,), np.dtype(np.float64), (8,)))
    assert survivor.array.sum() == 7000.0
    survivor.close()
    assert name in sweep()  # its creator is gone: sweep() removes it


@pytest.mark.parametrize("shape, strides, offset, error, words", [
    ((2**40, 2**40), (8 * 2**40, 8), 0, ValueError, "more than any segment can"),
    ((-1,), (8,), 0, ValueError, "negative dimensions"),
    ((3, 4), (8,), 0, ValueError, "do not match"),
    ((3,), (8,), -8, ValueError, "offset"),
])
def test_a_handle_is_checked_when_made(shape, strides, offset, error, words):
    with pytest.raises(error, match=words):
        ArrayHandle("sal_x", shape, np.dtype(np.float64), strides, offset)


def test_a_handle_name_must_be_a_string():
    with pytest.raises(TypeError, match="segment's name"):
        ArrayHandle(None, (1,), np.dtype(np.float64), (8,))


def test_create_refuses_a_size_that_overflows_int64_before_anything_exists():
    with pytest.raises(ValueError, match="more than any segment can"):
        SharedNDArray.create((2**40, 2**40))  # 2**83 bytes: np.prod in int64 would wrap to 0


DTYPES_THAT_CROSS = {
    "float64": np.dtype("<f8"),
    "big-endian": np.dtype(">i4"),
    "datetime64": np.dtype("M8[ns]"),
    "timedelta64": np.dtype("m8[s]"),
    "unicode": np.dtype("U7"),
    "bytes": np.dtype("S3"),
    "void": np.dtype("V16"),
    "complex": np.dtype("c16"),
    "bool": np.dtype("?"),
    "records": np.dtype([("when", "M8[s]"), ("price", ">f4"), ("ticker", "U3")]),
    "aligned records": np.dtype([("a", "u1"), ("b", "<f8")], align=True),
    "metadata": np.dtype("<f8", metadata={"unit": "m"}),
}


@pytest.mark.parametrize("dtype", DTYPES_THAT_CROSS.values(), ids=DTYPES_THAT_CROSS.keys())
def test_a_handle_carries_its_dtype_exactly_through_a_pickle(dtype):
    # A plain dtype crosses as its string (faster), any other as itself: the same dtype either way.
    with SharedNDArray.create((4, 3), dtype) as shared:
        back = pickle.loads(pickle.dumps(shared.handle)).dtype
        assert back == dtype and back.str == dtype.str and back.isalignedstruct == dtype.isalignedstruct
        assert back.metadata == dtype.metadata and back.descr == dtype.descr
        assert back.itemsize == dtype.itemsize
