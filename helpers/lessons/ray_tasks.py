"""Functions Ray's workers run in lesson 09, plain Python: ``helpers.lessons.ray_object_store``
wraps them with ``ray.remote(fn)`` when it calls them, so importing ``helpers`` never needs Ray, and
a worker imports them by name (a function defined in a notebook cell would live in ``__main__``).

Times are seconds from ``time.perf_counter`` (CLOCK_MONOTONIC on Linux, one clock for every
process on the machine), sizes bytes.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np


def mapping_of(address: int) -> str:
    """What this process has mapped at ``address``: the file name from /proc/self/maps (e.g.
    '/dev/shm/plasmaXXXX (deleted)'), '[heap]', 'anonymous', or 'not mapped'."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            start, end = (int(value, 16) for value in fields[0].split("-"))
            if start <= address < end:
                return fields[5].strip() if len(fields) == 6 else "anonymous"
    return "not mapped"


def store_mapping_names() -> set[str]:
    """Names of this process's mappings that belong to Ray's object store (its plasma file(s))."""
    with open("/proc/self/maps") as maps:
        return {line.split(maxsplit=5)[5].strip() for line in maps
                if len(line.split(maxsplit=5)) == 6 and "plasma" in line.split(maxsplit=5)[5]}


def array_facts(array: np.ndarray) -> dict:
    """What a worker got: its type, dtype, whether it may write, whether the bytes lie in the
    object store's mapping (zero copy) or in this worker's own memory (a copy), and its pid."""
    mapping = mapping_of(array.ctypes.data) if array.size else "empty"
    return {
        "type": type(array).__name__,
        "dtype": str(array.dtype),
        "writeable": bool(array.flags.writeable),
        "in_object_store": "plasma" in mapping,
        "mapping": mapping,
        "pid": os.getpid(),
    }


def facts_after_get(boxed_refs: list) -> dict:
    """``array_facts`` of ``ray.get(boxed_refs[0])``, plus ``get_seconds``: how long that get took
    here (the ref comes in a list so that Ray does not fetch it before the task starts)."""
    import ray

    start = time.perf_counter()
    array = ray.get(boxed_refs[0])
    seconds = time.perf_counter() - start
    return {**array_facts(array), "get_seconds": seconds}


def sum_array(array: np.ndarray) -> float:
    """Read every element once (the fan-out's work)."""
    return float(array.sum())


def sum_and_hold(array: np.ndarray, hold_seconds: float) -> tuple[float, float, float]:
    """Sum the array, then keep it (and the store's copy) alive ``hold_seconds``; return the sum
    and the perf_counter instants the hold began and ended."""
    total = float(array.sum())
    began = time.perf_counter()
    time.sleep(hold_seconds)
    return total, began, time.perf_counter()


def zero_small_values_in_place(array: np.ndarray, threshold: float) -> int:
    """Set every value below ``threshold`` to 0 in the array given; return how many were set.
    On an array from Ray's object store this raises ValueError: the view is read-only."""
    small = array < threshold
    array[small] = 0.0
    return int(small.sum())


def zero_small_values_in_a_copy(array: np.ndarray, threshold: float) -> int:
    """The fix: copy first (a private, writeable array in this worker), then zero in place."""
    own = array.copy()
    return zero_small_values_in_place(own, threshold)


def time_put_and_get(n_bytes: int, repeat: int = 3) -> dict:
    """In this worker: median seconds of ``ray.put`` of a random float64 array of ``n_bytes``
    into this node's store, and of ``ray.get`` of it back, with where the store's file lives."""
    import ray

    array = np.random.default_rng(7).random(max(1, n_bytes // 8))
    puts, gets, mappings = [], [], set()
    for _ in range(repeat + 1):  # the first round is a warm-up
        start = time.perf_counter()
        ref = ray.put(array)
        put_done = time.perf_counter()
        view = ray.get(ref)
        gets.append(time.perf_counter() - put_done)
        puts.append(put_done - start)
        mappings.add(mapping_of(view.ctypes.data))
        del view, ref
    return {"put_seconds": statistics.median(puts[1:]), "get_seconds": statistics.median(gets[1:]),
            "mappings": sorted(mappings), "pid": os.getpid()}


def hello(_: int = 0) -> int:
    """Return this worker's pid (to start workers and load this module before anything is timed)."""
    return os.getpid()
