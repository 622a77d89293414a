"""Tasks that worker processes of many lessons (and the tests and the benchmark) run.

They live in an importable module because a child started with spawn or forkserver (the default
on Linux from Python 3.14, and on macOS spawn) imports the function by name: a function defined in
a notebook cell lives in ``__main__`` and cannot be found there. A worker only one lesson runs lives
in that lesson's module instead. This module is a leaf: it imports NumPy and ``sharedarrays``
only, so any lesson (and any child) can import it without pulling in the others.
"""

from __future__ import annotations

import mmap
import os
import signal
import time
from multiprocessing import shared_memory

import numpy as np

from sharedarrays.shm import attach

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


def hold_array(array: np.ndarray, ready, release) -> None:
    """Keep the received array (a private copy) resident until ``release`` is set.

    Sets ``ready`` once every page was read, so a monitor can measure the tree while it holds.
    """
    touch_pages(array)
    ready.set()
    release.wait()


def hold_shared_segment(name: str, ready, release) -> None:
    """Attach the named shared-memory segment, read every page, hold it until ``release`` is set."""
    segment = shared_memory.SharedMemory(name=name)
    try:
        view = np.ndarray((segment.size,), dtype=np.uint8, buffer=segment.buf)
        touch_pages(view)
        del view
        ready.set()
        release.wait()
    finally:
        segment.close()


def allocate_and_hold(n_bytes: int, ready, release) -> None:
    """Allocate and fill ``n_bytes`` of private memory, then hold it until ``release`` is set."""
    block = np.ones(n_bytes, dtype=np.uint8)
    ready.set()
    release.wait()
    del block


# --- Workers that reach a SharedNDArray by its handle (sharedarrays.shm) -------------------------


def sum_shared_slice(handle, start: int, stop: int) -> float:
    """Sum ``[start:stop]`` of the shared array a handle describes: one worker's share."""
    with attach(handle) as array:
        return float(np.sum(array[start:stop]))


# --- sharedarrays.executor: tasks its tests and lesson 08 submit -------------------------------------


def sleep_then_echo(seconds: float, value):
    """Wait ``seconds``, then return ``value`` unchanged."""
    time.sleep(seconds)
    return value


def kill_this_worker(_=None) -> None:
    """SIGKILL the process running this task (a crashed worker, for tests)."""
    os.kill(os.getpid(), signal.SIGKILL)


def fill_in_place(array: np.ndarray, value) -> None:
    """Write ``value`` into every item of ``array`` (visible to the caller only if it is shared)."""
    array[...] = value


def plus_one_and_slice(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A new array (``array + 1``) and a view of the argument (its second half), as a pair."""
    return array + 1, array[array.shape[0] // 2:]


# --- Lesson 08: tasks the shared-memory executor lesson submits ---


def call_on_handle(fn, handle, *args):
    """Worker side of ``shared_memory_executor.submit_with_handles``: attach the shared array by its
    handle (no copy) and return ``fn(array, *args)``."""
    with attach(handle) as array:
        return fn(array, *args)


# --- Lesson 09 and its tests: arrays through the pickler reductions (sharedarrays.reducers) ---


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


# --- helpers.bench.transport_suite: tasks the transport benchmark submits (python -m helpers.bench) ---


def plus_one(array: np.ndarray) -> np.ndarray:
    """A new array of the same size: ``array + 1`` (the worker allocates and fills fresh pages)."""
    return array + 1


# --- sharedarrays.executor: drop-in checks against ProcessPoolExecutor (tests of issue 12) ---


def add_one_in_place(array: np.ndarray) -> np.ndarray:
    """``array += 1`` in the worker's own copy, then return it."""
    array += 1
    return array


