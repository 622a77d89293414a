"""How many open files the segments a process keeps mapped hold: none from Python 3.13 (``mmap``'s
``trackfd=False``), one each before (``mmap`` keeps a duplicate of the descriptor; no way around it
in the standard library). A receiver keeping many arrays meets its open-file limit only before 3.13,
as torch's ``file_descriptor`` strategy does on every version. Real segments, this process's real
descriptor table (``/proc/self/fd``)."""

from __future__ import annotations

import os
import sys
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

from sharedarrays import SharedNDArray, reducers

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")]

N_ARRAYS = 20


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("kind", ["SharedNDArray", "received through the reduction"])
def test_each_kept_segment_holds_no_open_file_from_python_3_13_and_one_before(kind):
    before = open_files()
    if kind == "SharedNDArray":
        kept = [SharedNDArray.copy_of(np.full(1000, float(i))) for i in range(N_ARRAYS)]
    else:
        with reducers.sharing_arrays("shared_memory"):
            kept = [ForkingPickler.loads(ForkingPickler.dumps(np.full(100_000, float(i))))
                    for i in range(N_ARRAYS)]
    held = open_files() - before
    expected = 0 if sys.version_info >= (3, 13) else N_ARRAYS
    assert expected <= held <= expected + 2, held  # a lazily opened file of the pool aside
    for item in kept:
        if isinstance(item, SharedNDArray):
            item.close()
            item.unlink()
    del kept
