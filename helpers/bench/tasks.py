"""Tasks the benchmark's strategies run in their workers: reach the array each way, then sum it,
hold it or return a new one.

They live in an importable module because a spawned or forkserver-started child imports a task
by name. ``reach_*`` functions are context managers that yield the array a worker sees (by
argument, installed once, inherited, attached, mapped, through a proxy); ``strategy_*`` run one
task on it.
"""

from __future__ import annotations

import importlib
import os
import secrets
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext

import numpy as np

from helpers.lessons import fork_copy_on_write, send_once_and_managers
from helpers.lessons.sharedctypes import as_array
from helpers.lessons.workers import touch_pages
from sharedarrays.shm import attach

_strategy_arrays: dict[str, np.ndarray] = {}  # sharedctypes views set by init_sharedctypes_strategy
_own_tasks: dict[str, Callable] = {}  # a reader's task functions imported in this process, by spec
# In the message of the error a reader's task raises when it writes into a read-only view.
WRITES_READ_ONLY = "the task writes into its argument, which this strategy hands out read-only"


# A task names how its worker reaches the array (a ``reach_*`` function: a context manager yielding
# the worker's view of it, or None) and what to reach it with (the array itself, a handle, a path
# ...). The same four tasks then serve every strategy: the Pools, the executor and Ray's workers.


def reach_nothing(_=None):
    """Reach nothing: what an idle worker holds (the baseline of a memory measurement)."""
    return nullcontext(None)


def reach_argument(array):
    """The array came with the task (pickled, reduced into shared memory, or from Ray's store)."""
    return nullcontext(array)


def reach_installed(_=None):
    """The array a Pool initializer installed in this worker
    (``helpers.lessons.send_once_and_managers.install``)."""
    return nullcontext(send_once_and_managers.installed())


def reach_inherited(_=None):
    """The array this forked worker inherited as ``helpers.lessons.fork_copy_on_write.ARRAY``
    (copy-on-write pages)."""
    if fork_copy_on_write.ARRAY is None:
        raise RuntimeError(f"helpers.lessons.fork_copy_on_write.ARRAY is None in process {os.getpid()}: "
                           "only a worker forked inside fork_copy_on_write.installed(array=...) inherits it")
    return nullcontext(fork_copy_on_write.ARRAY)


def init_sharedctypes_strategy(shared, result) -> None:
    """Pool initializer: keep NumPy views of two RawArrays received at start-up (the array and the
    buffer a round trip writes its result into)."""
    _strategy_arrays["array"] = as_array(shared)
    _strategy_arrays["result"] = as_array(result)


def reach_sharedctypes(_=None):
    """This worker's view of the RawArray its initializer received."""
    return nullcontext(_strategy_arrays["array"])


def reach_sharedctypes_result(_=None):
    """This worker's view of the RawArray a round trip writes its result into."""
    return nullcontext(_strategy_arrays["result"])


def reach_memmap(spec):
    """Map the file a ``helpers.lessons.memmap.MemmapSpec`` describes, read-only, for the block."""
    return _mapped(spec, "r")


def reach_memmap_for_writing(spec):
    """Map the file a MemmapSpec describes read-write (writes land in the shared page cache)."""
    return _mapped(spec, "r+")


def _mapped(spec, mode: str):

    @contextmanager
    def mapping():
        array = spec.open(mode)
        try:
            yield array
        finally:
            del array

    return mapping()


def reach_shared(handle):
    """Attach the SharedNDArray a handle describes for the block (no copy; never unlinks)."""
    return attach(handle)


def reach_manager(proxy):
    """Read the array from a Manager's dict proxy: the manager pickles it to this worker (a copy)."""
    return nullcontext(proxy["array"])


def reach_manager_result(out):
    """A private buffer for ``(proxy, shape)``; when the block ends it is stored as ``proxy['result']``
    (pickled to the manager), where the caller reads it."""
    proxy, shape = out

    @contextmanager
    def buffer():
        result = np.empty(shape)
        yield result
        proxy["result"] = result

    return buffer()


def strategy_sum(reach, arg) -> float:
    """Sum the whole array this worker reaches with ``reach(arg)`` (reads every page)."""
    with reach(arg) as array:
        total = float(np.sum(array))
        del array  # drop the view before the segment closes (lesson 07)
    return total


def strategy_hold(reach, arg, folder: str, label: str) -> int:
    """Reach the array, read every page, create ``folder/<label>-ready-*``, then hold it until the
    file ``folder/<label>-release`` exists (files, not multiprocessing events: Ray's workers hold
    too). Returns the bytes held (0 when holding nothing)."""
    with reach(arg) as array:
        if array is not None and not array.dtype.hasobject:  # an object array's items are elsewhere
            touch_pages(array)
        held = 0 if array is None else int(array.nbytes)
        ready = os.path.join(folder, f"{label}-ready-{os.getpid()}-{secrets.token_hex(4)}")
        with open(ready, "x"):
            pass
        release = os.path.join(folder, f"{label}-release")
        while not os.path.exists(release):
            time.sleep(0.01)
        del array
    return held


def strategy_plus_one(reach, arg) -> np.ndarray:
    """Return a new same-size array, ``array + 1``, the way this worker's mechanism sends results."""
    with reach(arg) as array:
        result = array + 1.0
        del array
    return result


def strategy_plus_one_into(reach, arg, reach_out, out) -> None:
    """Write ``array + 1`` into the result buffer ``reach_out(out)`` gives (shared memory, a mapped
    file, a manager): the caller reads it there."""
    with reach(arg) as array, reach_out(out) as result:
        np.add(array, 1.0, out=result)
        del array, result  # drop the views before the segments close (lesson 07)


# --- a reader's own task (``python -m helpers.bench --task module:function``) ---------------------


def load_own_task(spec: str) -> Callable:
    """The function ``spec`` ('module:function') names, imported the way a spawned child imports it
    (``importlib.import_module``, cached for this process)."""
    if spec not in _own_tasks:
        module_name, _, function_name = spec.partition(":")
        function = importlib.import_module(module_name)
        for part in function_name.split("."):
            function = getattr(function, part)
        _own_tasks[spec] = function
    return _own_tasks[spec]


def array_digest(value) -> object:
    """What a fan-out sends back of a task's value: a small value as is; an array as
    ``("array", shape, dtype)`` (the round trip sends the array itself)."""
    if isinstance(value, np.ndarray):
        return ("array", tuple(value.shape), value.dtype.str)
    return value


def is_array_digest(value) -> bool:
    return isinstance(value, tuple) and len(value) == 3 and value[0] == "array"


def _call_own_task(array, spec: str, index: int, n_workers: int):
    try:
        return load_own_task(spec)(array, index, n_workers)
    except ValueError as error:
        if isinstance(array, np.ndarray) and not array.flags.writeable and "read-only" in str(error):
            raise PermissionError(f"{WRITES_READ_ONLY} ({error})") from error
        raise


def strategy_own_task(reach, arg, spec: str, index: int, n_workers: int) -> object:
    """Call the reader's task ``spec`` as ``task(array, index, n_workers)`` on the array this worker
    reaches; return its value, an array as a digest (``array_digest``)."""
    with reach(arg) as array:
        value = array_digest(_call_own_task(array, spec, index, n_workers))
        del array
    return value


def strategy_own_task_whole(reach, arg, spec: str, index: int, n_workers: int) -> object:
    """The same, returning the task's value whole (an array travels back the mechanism's way)."""
    with reach(arg) as array:
        value = _call_own_task(array, spec, index, n_workers)
        if isinstance(value, np.ndarray) and np.shares_memory(value, array):
            value = value.copy()  # a view of the shared array must not outlive the block
        del array
    return value
