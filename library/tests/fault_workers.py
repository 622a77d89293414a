"""Tasks of the executor's fault matrix (test_executor_faults.py), importable by name in workers
started with fork, spawn or forkserver (the test puts this folder on PYTHONPATH)."""

from __future__ import annotations

import faulthandler
import os
import signal
import time

import numpy as np

# A worker that imports this module prints every thread's stack on SIGUSR1 (the fault matrix's
# driver asks, when a program outlasts its deadline), to the program's stderr.
faulthandler.register(signal.SIGUSR1, all_threads=True)


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
