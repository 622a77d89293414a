"""Tasks that the library's tests run in worker processes.

They live in an importable module because a child started with spawn or forkserver imports the
function by name, and a function defined in a test module that pytest imported under a name of its
own may not be found there: pytest puts this folder on ``sys.path`` (rootdir conftest, no
``__init__.py``), and the children inherit it. This module imports NumPy and ``sharedarrays`` only.
"""

from __future__ import annotations

import builtins
import mmap
import os
import signal
import time

import numpy as np

from sharedarrays.shm import attach
from sharedarrays.transit import pack_result

PAGE = mmap.PAGESIZE


def sum_array(array: np.ndarray) -> float:
    """Sum every element (reads every page of the array)."""
    return float(np.sum(array))


def sum_slice(array: np.ndarray, start: int, stop: int) -> float:
    """Sum ``array[start:stop]``: one worker's share of a fan-out."""
    return float(np.sum(array[start:stop]))


def touch_pages(array: np.ndarray) -> int:
    """Read one byte of every page the array spans (maps them in); return the pages read."""
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        np.sum(array)  # reads every element, hence every page the view spans
        low, high = np.lib.array_utils.byte_bounds(array)
        return -(-(high - low) // PAGE)
    every_page = array.reshape(-1, order="A").view(np.uint8)[::PAGE]
    int(every_page.sum(dtype=np.uint64))
    return len(every_page)


def echo(value):
    """Return the argument unchanged: the round trip of a value through a pool."""
    return value


def worker_pid(_=None) -> int:
    """The worker's process id (to see how many distinct workers served a map)."""
    return os.getpid()


def array_nbytes(array: np.ndarray) -> int:
    """Bytes of the array the worker received (proves it arrived whole)."""
    return int(array.nbytes)


def sum_shared(handle) -> float:
    """Attach the shared array a handle describes and sum it (reads every page, copies nothing)."""
    with attach(handle) as array:
        return float(np.sum(array))


def sum_shared_slice(handle, start: int, stop: int) -> float:
    """Sum ``[start:stop]`` of the shared array a handle describes: one worker's share."""
    with attach(handle) as array:
        return float(np.sum(array[start:stop]))


def fill_shared(handle, value) -> None:
    """Attach the shared array and set every element to ``value`` (the owner sees the change)."""
    with attach(handle) as array:
        array[...] = value


def shared_contents(handle) -> tuple[np.dtype, tuple[int, ...], bytes]:
    """The dtype, shape and C-order bytes of the shared array a handle describes, as this worker sees it.

    Bytes, not an array, come back: pickling an array may change it (NumPy pickles a big-endian
    array as a native-endian one), the raw bytes cannot change.
    """
    with attach(handle) as array:
        return array.dtype, array.shape, array.tobytes()


def attach_and_raise(handle) -> None:
    """Attach the shared array, then raise: the segment must survive a worker's exception."""
    with attach(handle) as array:
        array.sum()
        raise RuntimeError("worker failed while attached")


def hold_shared_array(handle, ready, release) -> None:
    """Attach, read every page, hold until ``release`` is set (killed here in the leak tests)."""
    with attach(handle) as array:
        touch_pages(array)
        ready.set()
        release.wait()


def raise_error(kind: str, message: str) -> None:
    """Raise the built-in exception named ``kind`` (e.g. "ValueError") with ``message``."""
    raise getattr(builtins, kind)(message)


def sleep_then_echo(seconds: float, value):
    """Wait ``seconds``, then return ``value`` unchanged."""
    time.sleep(seconds)
    return value


def kill_this_worker(_=None) -> None:
    """SIGKILL the process running this task (a crashed worker, for tests)."""
    os.kill(os.getpid(), signal.SIGKILL)


def pack_result_later(seconds: float, result_name: str, n_items: int) -> None:
    """Wait ``seconds``, then do what an executor worker does with a big result: write
    ``n_items`` float64 ones into a new segment named ``result_name`` (a worker still busy when
    its pool broke, for tests)."""
    time.sleep(seconds)
    pack_result(np.ones(n_items), result_name, min_bytes=1)


def fill_in_place(array: np.ndarray, value) -> None:
    """Write ``value`` into every item of ``array`` (visible to the caller only if it is shared)."""
    array[...] = value


def describe_array(array: np.ndarray) -> dict:
    """Shape, dtype, memory order and writability of an array as the worker sees it."""
    return {"shape": array.shape, "dtype": array.dtype, "c_contiguous": array.flags.c_contiguous,
            "f_contiguous": array.flags.f_contiguous, "writeable": array.flags.writeable}


def plus_one_and_slice(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A new array (``array + 1``) and a view of the argument (its second half), as a pair."""
    return array + 1, array[array.shape[0] // 2:]


def echo_arrays(connection, how: str | None) -> None:
    """Enable the reduction ``how`` names ('torch', 'shared_memory' or None: plain pickling), say
    'ready', then send every object received straight back; stop at None or end of file. Ctrl-C
    is left to the parent, which stops this worker in order."""
    from sharedarrays import reducers

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if how is not None:
            reducers.share_arrays(how)
        connection.send("ready")
        while True:
            try:
                item = connection.recv()
            except EOFError:
                break
            if item is None:
                break
            connection.send(item)
            del item
    finally:
        connection.close()


def echo_queue(inbox, outbox, how: str | None) -> None:
    """Enable the reduction ``how`` names, then put every item got from ``inbox`` on ``outbox``
    (received arrays go back through shared memory, zero-copy); stop at None."""
    from sharedarrays import reducers

    if how is not None:
        reducers.share_arrays(how)
    while (item := inbox.get()) is not None:
        outbox.put(item)
        del item
    outbox.close()
    outbox.join_thread()  # every item is in the pipe before this process leaves


def receive_and_hold(inbox, ready, release) -> None:
    """Get one item from ``inbox``, read every page of each array in it, set ``ready``, hold it
    until ``release`` is set (killed here in the leak tests)."""
    item = inbox.get()
    for array in item if isinstance(item, list) else [item]:
        touch_pages(array)
    ready.set()
    release.wait()


def plus_one(array: np.ndarray) -> np.ndarray:
    """A new array of the same size: ``array + 1`` (the worker allocates and fills fresh pages)."""
    return array + 1


_KEPT: list[np.ndarray] = []  # arrays a worker keeps across tasks ("send once, run many tasks on it")


def keep_and_sum(array: np.ndarray) -> float:
    """Keep ``array`` in this worker (a module-level cache) and return its sum."""
    _KEPT.append(array)
    return float(np.sum(array))


def keep_and_return(array: np.ndarray) -> np.ndarray:
    """Keep ``array`` in this worker and return it too (the caller and the worker both hold it)."""
    _KEPT.append(array)
    return array


def keep_then_raise(array: np.ndarray) -> None:
    """Keep ``array`` in this worker, then raise ValueError (a reply that cannot say what was kept)."""
    _KEPT.append(array)
    raise ValueError("kept it, then failed")


def sums_of_kept() -> list[float]:
    """The sums of the arrays this worker kept, oldest first."""
    return [float(np.sum(array)) for array in _KEPT]


def unlinked_segments_mapped_here() -> int:
    """How many segments of ours this worker still maps after they were unlinked (``/proc/self/maps``
    marks them deleted): memory a kept view holds that ``ls /dev/shm`` no longer shows."""
    with open("/proc/self/maps") as maps:
        return len({line.split()[-2] for line in maps
                    if "/dev/shm/sal_" in line and line.rstrip().endswith("(deleted)")})


def forget_kept() -> int:
    """Drop every array this worker kept; return how many there were."""
    count = len(_KEPT)
    _KEPT.clear()
    return count


def twice(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(r, r)`` with ``r = array + 1``: one new array, returned twice."""
    result = array + 1
    return result, result


def first_and_view(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The argument itself and a view of its first half: two results over the same memory."""
    return array, array[: array.shape[0] // 2]


def add_one_in_place(array: np.ndarray) -> np.ndarray:
    """``array += 1`` in the worker's own copy, then return it."""
    array += 1
    return array


def is_same_object(first, second) -> bool:
    """True when the two arguments arrived as one object (pickle's memo keeps identity)."""
    return first is second


def describe_arrays(value) -> list[tuple]:
    """Every ndarray in ``value`` (nested tuples, lists and dict values, in order) as a tuple: type
    name, dtype string and fields, shape, C- and F-contiguous, writeable, the C-order bytes, the
    index of the first array that is the same object, and of the first other object whose memory
    it shares (-1: none): what a caller can tell about the arrays it got."""
    found: list[np.ndarray] = []
    _collect_arrays(value, found)
    described = []
    for array in found:
        same_as = next(i for i, other in enumerate(found) if other is array)
        overlaps = next((i for i, other in enumerate(found)
                         if other is not array and np.shares_memory(other, array)), -1)
        described.append((type(array).__name__, array.dtype.str, array.dtype.descr, array.shape,
                          array.flags.c_contiguous, array.flags.f_contiguous, array.flags.writeable,
                          array.tobytes(), same_as, overlaps))
    return described


def _collect_arrays(value, found: list) -> None:
    if isinstance(value, np.ndarray):
        found.append(value)
    elif isinstance(value, tuple | list):
        for item in value:
            _collect_arrays(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _collect_arrays(item, found)


def describe_arguments(*args, **kwargs) -> list[tuple]:
    """``describe_arrays`` of a call's arguments, as this worker received them."""
    return describe_arrays((args, kwargs))


def fail_after_reading(array: np.ndarray, kind: str) -> None:
    """Read every item of ``array``, then raise the built-in exception named ``kind`` (without the array)."""
    float(np.sum(array))
    raise getattr(builtins, kind)("failed after reading the array")


def attribute_is(value, holder, name: str) -> bool:
    """True when ``holder.name`` is ``value`` itself (identity across an object's attributes)."""
    return getattr(holder, name) is value


def broadcast_ones(n_items: int) -> np.ndarray:
    """A read-only view of one 1.0 seen as ``n_items`` float64 items: claims 8 * n_items bytes, uses 8."""
    return np.broadcast_to(np.ones(1), (n_items,))

