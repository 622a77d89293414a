"""Example tasks for ``python -m helpers.bench --task helpers.bench.example_tasks:NAME``, and the ones the
tests run: each is ``task(array, worker_index, n_workers)`` (the contract of ``helpers.bench.own_task``).

They differ in what decides the ranking: how much of the array a worker reads (``sum_slice`` a
small part of its share, ``sum_all`` everything, as the course's default task), whether it writes
into its argument (``scale_share_in_place``), and what it returns (``plus_one``: an array the size
of its input). ``fails`` and ``hangs`` misbehave on purpose (the benchmark reports them per strategy).
"""

from __future__ import annotations

import time

import numpy as np

SLICE_FRACTION = 64  # sum_slice reads 1/64 of its worker's share


def _share(array: np.ndarray, worker_index: int, n_workers: int) -> np.ndarray:
    """This worker's contiguous part of the flattened array."""
    flat = array.reshape(-1)
    step = -(-flat.size // n_workers)
    return flat[worker_index * step:(worker_index + 1) * step]


def sum_slice(array: np.ndarray, worker_index: int, n_workers: int) -> float:
    """Sum the first 1/64 of this worker's share: reads a small slice of the array."""
    share = _share(array, worker_index, n_workers)
    return float(share[:max(1, share.size // SLICE_FRACTION)].sum())


def sum_all(array: np.ndarray, worker_index: int, n_workers: int) -> float:
    """Sum the whole array: every worker reads every page (the course's default task)."""
    return float(array.sum())


def scale_share_in_place(array: np.ndarray, worker_index: int, n_workers: int) -> float:
    """Multiply this worker's share by 1 in place (the values stay, the pages are written): a task that
    writes into its argument. Returns the share's first item."""
    share = _share(array, worker_index, n_workers)
    np.multiply(share, 1.0, out=share)
    return float(share[0])


def plus_one(array: np.ndarray, worker_index: int, n_workers: int) -> np.ndarray:
    """Return ``array + 1``: a new array the size of the input."""
    return array + 1


def fails(array: np.ndarray, worker_index: int, n_workers: int) -> float:
    """Raise in every worker (what a bug in a reader's task looks like)."""
    raise RuntimeError(f"example task failed on purpose in worker {worker_index} of {n_workers}")


def hangs(array: np.ndarray, worker_index: int, n_workers: int) -> float:
    """Never return (well, after an hour): the per-strategy time limit must end it."""
    time.sleep(3600)
    return 0.0
