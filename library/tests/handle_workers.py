"""Tasks for test_shared_ndarray_pickling.py: a spawn or forkserver worker imports them by module
name (pytest puts this folder on ``sys.path``, which children inherit)."""

from __future__ import annotations

from sharedarrays import SharedNDArray


def fill_and_describe(shared: SharedNDArray, value: float) -> tuple[str, bool, float]:
    """Fill the received ``SharedNDArray`` with ``value``; return (its name, whether this process
    owns it, the sum it sees)."""
    shared.array[:] = value
    return shared.name, shared.owner, float(shared.array.sum())


def fill_in_process(shared: SharedNDArray, value: float) -> None:
    """A ``Process`` target: fill the received array, then close this process's mapping."""
    shared.array[:] = value
    shared.close()
