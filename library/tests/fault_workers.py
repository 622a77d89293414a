"""Tasks of the executor's fault matrix (test_executor_faults.py), importable by name in workers
started with fork, spawn or forkserver (the test puts this folder on PYTHONPATH)."""

from __future__ import annotations

import os
import time

import numpy as np


def announce_then_hold(array: np.ndarray, seconds: float, fail: bool = False) -> np.ndarray:
    """Write 'running <pid>' to stdout, hold ``array`` for ``seconds``, then raise ValueError if
    ``fail``, else return ``array + 1`` (a new array as big: a result segment of its own).

    One ``os.write`` per line: lines of several workers sharing a pipe never interleave.
    """
    os.write(1, f"running {os.getpid()}\n".encode())
    time.sleep(seconds)
    if fail:
        raise ValueError(f"failed holding {array.nbytes} bytes")
    return array + 1
