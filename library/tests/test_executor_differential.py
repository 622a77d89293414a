"""SharedMemoryExecutor against ProcessPoolExecutor: the same small programs, the same outcomes.

Each program runs on arrays of several dtypes (structured ones included), both byte orders, C and F
order, non-contiguous views, 0-d and empty arrays, read-only ones, nested in containers and passed
twice, through the stdlib's executor and ours (spawn). What the worker receives and what the caller
gets back must agree in values, dtype and byte order, memory order, writability, identity within
one call and (for distinct arrays) not sharing memory (``array_workers.describe_arrays``).
With ``min_shared_bytes=1`` every non-empty array crosses through shared memory; with the default
only the big ones do; results passed back in and written by workers behave as the stdlib's. Arrays the
caller already shares (a SharedNDArray) differ by design and are
not compared here (the executor's module docstring says how).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor

import array_workers as workers
import numpy as np
import pytest

from sharedarrays.executor import SharedMemoryExecutor

BIG = 2**20 // 8 * 2  # float64 items in 2 MiB: above the 1 MiB default threshold


def read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def samples() -> dict[str, np.ndarray]:
    """The arrays every program runs on, by name."""
    rng = np.random.default_rng(0)
    base = rng.random(64)
    records = np.zeros(8, dtype=[("time", "M8[ns]"), ("value", ">f4"), ("label", "U3"), ("count", "<i2")])
    records["value"], records["label"], records["count"] = base[:8], "abc", np.arange(8)
    big = rng.random(BIG)
    return {
        "float64": base,
        "int32 big-endian": np.arange(10, dtype=">i4"),
        "float64 big-endian": base.astype(">f8"),
        "complex little-endian": (base[:10] + 1j).astype("<c16"),
        "bool": base > 0.5,
        "structured": records,
        "datetime64": np.arange(5).astype("M8[s]"),
        "F order": np.asfortranarray(base.reshape(8, 8)),
        "F order big-endian": np.asfortranarray(base.reshape(8, 8).astype(">f8")),
        "F order 3-d": np.asfortranarray(np.arange(24.0).reshape(2, 3, 4)),
        "column": base.reshape(64, 1),
        "strided": base[::3],
        "strided 2-d": base.reshape(8, 8)[::2, 1::2],
        "strided big-endian": base.astype(">f8")[::2],
        "0-d": np.array(3.5),
        "0-d big-endian": np.array(7, dtype=">i8"),
        "empty": np.empty((0, 3)),
        "read-only": read_only(base.copy()),
        "read-only big-endian": read_only(base.astype(">f8")),
        "read-only F order": read_only(np.asfortranarray(base.reshape(8, 8))),
        "read-only strided": read_only(base.copy())[::2],
        "read-only 0-d": read_only(np.array(2.0)),
        "big": big,
        "big big-endian F order": np.asfortranarray(big.reshape(512, -1).astype(">f8")),
        "big read-only": read_only(big.copy()),
    }


def nested_twice(array: np.ndarray) -> tuple:
    """``array`` twice, a view of it, in lists, tuples and dicts."""
    return ([array, (array, array[..., :1] if array.ndim else array)], {"again": array, "none": None})


# name -> (function the worker runs, how to make its arguments from a sample, what to compare)
PROGRAMS: dict[str, tuple[Callable, Callable, str]] = {
    "received": (workers.describe_arguments, lambda array: (array,), "value"),
    "received nested twice": (workers.describe_arguments, nested_twice, "value"),
    "echoed": (workers.echo, lambda array: (array,), "arrays"),
    "echoed nested twice": (workers.echo, lambda array: (nested_twice(array),), "arrays"),
    "a new array returned twice": (workers.twice, lambda array: (array,), "arrays"),
    "written in place and returned": (workers.add_one_in_place, lambda array: (array,), "arrays"),
    "returned with a view of it": (workers.first_and_view, lambda array: (array,), "arrays"),
}
THRESHOLDS = {"everything shared": {"min_shared_bytes": 1}, "default threshold": {}}


def outcome(executor: Executor, fn: Callable, args: tuple, compare: str):
    """What the caller can tell about one call: the worker's answer ("value"), or a description of
    the arrays returned ("arrays"), or the error's type and text."""
    try:
        value = executor.submit(fn, *args).result()
    except Exception as error:  # noqa: BLE001 - the same error is the expected outcome
        return ("raised", type(error).__name__, str(error))
    return value if compare == "value" else workers.describe_arrays(value)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("program", PROGRAMS)
def test_ours_gives_what_the_stdlib_gives(program, threshold):
    fn, make_args, compare = PROGRAMS[program]
    context = mp.get_context("spawn")
    differences = {}
    with (ProcessPoolExecutor(1, context) as stdlib,
          SharedMemoryExecutor(1, context, **THRESHOLDS[threshold]) as ours):
        for name, array in samples().items():
            if program == "returned with a view of it" and array.ndim == 0:
                continue  # no first half to take
            args = make_args(array)
            expected, got = outcome(stdlib, fn, args, compare), outcome(ours, fn, args, compare)
            if got != expected:
                differences[name] = (expected, got)
        shared = ours.segment_pool.created
        ours.segment_pool.collect()
    assert not differences, "\n".join(f"{name}:\n  stdlib: {expected}\n  ours:   {got}"
                                      for name, (expected, got) in differences.items())
    assert shared > 0  # the comparison did go through shared memory


# A result passed back in: the caller never shared it on purpose, so a worker that writes into it writes
# into its own copy (ours maps the result's segment copy-on-write, or copies it), returns what it wrote,
# and four workers writing into it at once (map) do not touch the caller's array or each other's.
MADE_BY = {"echoed by a worker": workers.echo, "made by a worker": workers.plus_one}


def written_back(executor: Executor, make: Callable, array: np.ndarray):
    """A result of ``make(array)``, then written in place by one worker and by four at once: what
    came back, and whether the caller's result kept its bytes (or the error's type and text)."""
    try:
        result = executor.submit(make, array).result()
        bytes_before = result.tobytes()
        returned = executor.submit(workers.add_one_in_place, result).result()
        fanned = list(executor.map(workers.add_one_in_place, [result] * 4))
    except Exception as error:  # noqa: BLE001 - the same error is the expected outcome
        return ("raised", type(error).__name__, str(error))
    return (workers.describe_arrays(returned), workers.describe_arrays(fanned),
            "unchanged" if result.tobytes() == bytes_before else "changed by a worker")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("made_by", MADE_BY)
def test_a_result_passed_back_in_and_written_by_workers_behaves_as_with_the_stdlib(made_by, threshold):
    context = mp.get_context("spawn")
    differences = {}
    with (ProcessPoolExecutor(2, context) as stdlib,
          SharedMemoryExecutor(2, context, **THRESHOLDS[threshold]) as ours):
        for name, array in samples().items():
            expected = written_back(stdlib, MADE_BY[made_by], array)
            got = written_back(ours, MADE_BY[made_by], array)
            if got != expected:
                differences[name] = (expected, got)
    assert not differences, "\n".join(f"{name}:\n  stdlib: {expected}\n  ours:   {got}"
                                      for name, (expected, got) in differences.items())
