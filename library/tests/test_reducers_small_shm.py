"""Switching on the pickler reductions never makes a pool fail where it works without them: with an
8 MiB /dev/shm, a 24 MiB array sent with a reduction active is pickled as if the reduction were not
there (and said once; our executor, which pickles it too, says so once of its own), through the
stdlib's ProcessPoolExecutor, a Pool and ours. And the executor
pickles with its own dispatch table: with a reduction active, it ships arrays as it does without one
(small arrays are not lent segments of their own). Real processes in a private /dev/shm (root)."""

from __future__ import annotations

import pytest
from optional_torch import TORCH
from private_shm import needs_private_tmpfs, run_in_private_dev_shm

EIGHT_MIB = """
    import multiprocessing as mp, os, sys
    import numpy as np
    from concurrent.futures import ProcessPoolExecutor
    import array_workers as workers
    from logged_notices import notices_of_sharedarrays
    from sharedarrays import SharedMemoryExecutor, sharing_arrays

    if __name__ == "__main__":
        way = sys.argv[1]
        array = np.random.default_rng(0).random(3 << 20)  # 24 MiB: three times /dev/shm
        context = mp.get_context("spawn")
        with notices_of_sharedarrays() as said, sharing_arrays(way):
            with ProcessPoolExecutor(1, context) as stdlib:
                print("stdlib:", stdlib.submit(workers.sum_array, array).result() == array.sum())
            with SharedMemoryExecutor(1, context) as ours:
                print("ours:", ours.submit(workers.sum_array, array).result() == array.sum())
            with context.Pool(1) as pool:
                print("pool:", pool.apply(workers.sum_array, (array,)) == array.sum())
        print("said by the reduction:", sum(message.startswith("sharedarrays:") for message in said),
              "by our executor:", sum(message.startswith("SharedMemoryExecutor:") for message in said))
        print("left:", sorted(name for name in os.listdir("/dev/shm") if not name.startswith("sem.")))
"""


@needs_private_tmpfs
@pytest.mark.timeout(180)
@pytest.mark.parametrize("way", ["shared_memory", TORCH])
def test_a_reduction_that_finds_no_room_pickles_the_array_as_usual_and_says_so_once(way):
    done = run_in_private_dev_shm(EIGHT_MIB, way, size="8m", timeout=170)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = ["stdlib: True", "ours: True", "pool: True", "said by the reduction: 1 by our executor: 1",
                "left: []"]
    assert done.stdout.splitlines() == expected, done.stderr[-3000:]


BOTH_ON = """
    import multiprocessing as mp, os
    import numpy as np
    import array_workers as workers
    from sharedarrays import SharedMemoryExecutor, reducers

    if __name__ == "__main__":
        small = np.arange(1000.0)  # under min_shared_bytes: pickled in the call, as the stdlib does
        big = np.random.default_rng(0).random(1 << 18)  # 2 MiB: copied into the executor's pool
        with reducers.sharing_arrays("shared_memory"):
            lent = reducers.shared_memory_pool()
            with SharedMemoryExecutor(1, mp.get_context("spawn")) as executor:
                print("small:", executor.submit(workers.sum_array, small).result() == small.sum())
                print("big:", executor.submit(workers.sum_array, big).result() == big.sum())
                print("echoed:", np.array_equal(executor.submit(workers.echo, small).result(), small))
            print("lent by the reduction:", lent.created)
        print("left:", sorted(name for name in os.listdir("/dev/shm") if not name.startswith("sem.")))
"""


@needs_private_tmpfs
@pytest.mark.timeout(120)
def test_the_executor_ships_arrays_the_same_way_with_a_reduction_switched_on():
    done = run_in_private_dev_shm(BOTH_ON, size="256m", timeout=110)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["small: True", "big: True", "echoed: True",
                                        "lent by the reduction: 0", "left: []"], done.stderr[-3000:]
