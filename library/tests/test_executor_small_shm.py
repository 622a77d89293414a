"""SharedMemoryExecutor with a small /dev/shm: it works wherever the stdlib does (issue 12, point 3).

In a private 64 MiB tmpfs (a mount namespace of its own, as root): idle pooled segments are freed
before anything is refused, and what still does not fit (an argument, or a worker's result) is
pickled as ``ProcessPoolExecutor`` pickles it, counted in ``pickled_fallbacks`` and said once (a
WARNING of the ``sharedarrays`` logger). The stdlib runs the same sequences first, so each one is
known to work there.
"""

from __future__ import annotations

import pytest
from private_shm import needs_private_tmpfs, run_in_64_mib_dev_shm

PROGRAM = """
    import multiprocessing as mp, os, sys
    import numpy as np
    from concurrent.futures import ProcessPoolExecutor
    import array_workers as workers
    from logged_notices import notices_of_sharedarrays
    from sharedarrays.executor import SharedMemoryExecutor
    MiB = 1 << 20

    def one_after_the_other(executor):
        '''plus_one of 20 MiB, then of 24 MiB, each result dropped: True when each is right.'''
        right = []
        for n_mib in (20, 24):
            result = executor.submit(workers.plus_one, np.zeros(n_mib * MiB // 8)).result()
            right.append(result.nbytes == n_mib * MiB and bool((result == 1).all()))
            del result
        return right

    def five_held(executor):
        '''Five 20 MiB results of plus_one, all held: their first items.'''
        held = [executor.submit(workers.plus_one, np.full(20 * MiB // 8, float(n))).result()
                for n in range(5)]
        return [float(result[0]) for result in held if (result == result[0]).all()]

    if __name__ == "__main__":
        context = mp.get_context(sys.argv[1])
        with ProcessPoolExecutor(1, context) as executor:
            print("stdlib:", one_after_the_other(executor), five_held(executor))
        with notices_of_sharedarrays() as said:
            with SharedMemoryExecutor(1, context) as executor:
                print("ours:", one_after_the_other(executor), "pickled:", executor.pickled_fallbacks)
                print("ours:", five_held(executor), "pickled some:", executor.pickled_fallbacks > 0)
        print("notices:", ["pickled_fallbacks" in message for message in said])
        print("left:", os.listdir("/dev/shm"))
"""


@needs_private_tmpfs
@pytest.mark.timeout(180)
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_what_the_stdlib_runs_in_64_mib_ours_runs_too(method):
    done = run_in_64_mib_dev_shm(PROGRAM, method)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "stdlib: [True, True] [1.0, 2.0, 3.0, 4.0, 5.0]",
        "ours: [True, True] pickled: 0",  # the idle 20 MiB segment made room for the 24 MiB result
        "ours: [1.0, 2.0, 3.0, 4.0, 5.0] pickled some: True",  # results beyond /dev/shm come pickled
        "notices: [True]",  # once per executor
        "left: []",
    ], done.stderr
    assert done.stderr == ""


ARGUMENT_TOO_BIG = """
    import multiprocessing as mp, os, warnings
    import numpy as np
    import array_workers as workers
    from logged_notices import notices_of_sharedarrays
    from sharedarrays.executor import SharedMemoryExecutor
    from sharedarrays.shm import SharedNDArray
    if __name__ == "__main__":
        warnings.simplefilter("error")  # as under -W error: the stdlib returns the value, so must we
        filler = SharedNDArray.create(40 << 20, "u1")  # 40 of the 64 MiB taken
        with notices_of_sharedarrays() as said, SharedMemoryExecutor(1, mp.get_context("spawn")) as executor:
            future = executor.submit(workers.array_nbytes, np.ones(30 << 20, "u1"))  # does not fit
            print("result:", future.result(), "pickled:", executor.pickled_fallbacks)
            print("again:", executor.submit(workers.array_nbytes, np.ones(30 << 20, "u1")).result())
        print("said:", ["/dev/shm had no room for 1 big array" in message for message in said])
        filler.close()
        filler.unlink()
        print("left:", os.listdir("/dev/shm"))
"""


@needs_private_tmpfs
@pytest.mark.timeout(120)
def test_an_argument_that_does_not_fit_is_pickled_and_said_once_even_under_warnings_as_errors():
    done = run_in_64_mib_dev_shm(ARGUMENT_TOO_BIG)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"result: {30 << 20} pickled: 1", f"again: {30 << 20}",
                                        "said: [True]", "left: []"], done.stderr


TOO_BIG_FOR_RAM_TOO = """
    import multiprocessing as mp, os
    import numpy as np
    import array_workers as workers
    from sharedarrays.executor import SharedMemoryExecutor
    from sharedarrays.room import available_memory
    if __name__ == "__main__":
        n_items = available_memory() // 8 + (1 << 20)  # a broadcast view claiming more than RAM has
        with SharedMemoryExecutor(1, mp.get_context("spawn")) as executor:
            for task in [(workers.array_nbytes, np.broadcast_to(np.ones(1), (n_items,))),
                         (workers.broadcast_ones, n_items)]:
                error = executor.submit(*task).exception()
                print(type(error).__name__, "/dev/shm" in str(error))
            print("still works:", executor.submit(workers.array_nbytes, np.ones(1 << 20)).result(),
                  "pickled:", executor.pickled_fallbacks)
        print("left:", os.listdir("/dev/shm"))
"""


@needs_private_tmpfs
@pytest.mark.timeout(120)
def test_an_array_too_big_to_pickle_either_is_a_memory_error_and_the_executor_goes_on():
    """The stdlib could not send these either (pickling needs their bytes in RAM): a clear error."""
    done = run_in_64_mib_dev_shm(TOO_BIG_FOR_RAM_TOO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["MemoryError True", "MemoryError True",
                                        f"still works: {8 << 20} pickled: 0", "left: []"], done.stderr
