"""SharedMemoryExecutor: drop-in behaviour, what crosses how, and that no segment outlives its use.

Real worker processes and real /dev/shm segments throughout; the autouse fixture in conftest.py
fails any test that leaves a segment behind.
"""

from __future__ import annotations

import collections
import concurrent.futures
import concurrent.futures._base
import copyreg
import gc
import multiprocessing as mp
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.reduction import ForkingPickler

import array_workers as workers
import numpy as np
import pytest
import shm_leftovers as leftovers

from sharedarrays.executor import SharedMemoryExecutor
from sharedarrays.room import SEGMENT_PREFIX, SHM_DIR
from sharedarrays.shm import SharedNDArray, handle_of

BIG = 2**20 // 8 * 2  # float64 items in 2 MiB: above the 1 MiB default threshold
Pair = collections.namedtuple("Pair", "left right")


def our_segments() -> set[str]:
    return {name for name in os.listdir(SHM_DIR) if name.startswith(f"{SEGMENT_PREFIX}{os.getpid()}_")}


def random_array(n_items: int = BIG, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random(n_items)


@pytest.fixture
def executor():
    with SharedMemoryExecutor(2, mp.get_context("spawn")) as shared_executor:
        yield shared_executor


def test_is_a_process_pool_executor_and_patches_nothing_global(executor):
    before = (concurrent.futures.Future, concurrent.futures._base.Future,
              concurrent.futures.ProcessPoolExecutor, dict(ForkingPickler._extra_reducers),
              dict(copyreg.dispatch_table))
    assert executor.submit(workers.echo, random_array()).result().shape == (BIG,)
    assert isinstance(executor, concurrent.futures.ProcessPoolExecutor)
    after = (concurrent.futures.Future, concurrent.futures._base.Future,
             concurrent.futures.ProcessPoolExecutor, dict(ForkingPickler._extra_reducers),
             dict(copyreg.dispatch_table))
    assert after == before
    assert concurrent.futures._base.Future.set_result is concurrent.futures.Future.set_result


def test_big_arrays_nested_in_containers_round_trip(executor):
    array = random_array()
    value = {"list": [array, 1, "x"], "tuple": (array[:10], array), "pair": Pair(array, None)}
    back = executor.submit(workers.echo, value).result()
    assert back["list"][1:] == [1, "x"] and back["pair"].right is None
    assert isinstance(back["pair"], Pair) and isinstance(back["tuple"], tuple)
    for got in (back["list"][0], back["tuple"][1], back["pair"].left):
        np.testing.assert_array_equal(got, array)
    np.testing.assert_array_equal(back["tuple"][0], array[:10])
    assert handle_of(back["tuple"][0]) is None  # small arrays are pickled as usual


@pytest.mark.parametrize("dtype", [
    np.dtype([("time", "M8[ns]"), ("value", ">f4"), ("label", "U3")]),
    np.dtype(">i8"),
    np.dtype("M8[ms]"),
    np.dtype("c16"),
])
def test_dtypes_round_trip_as_pickling_gives_them(executor, dtype):
    array = np.zeros(2**20 // dtype.itemsize + 1, dtype=dtype)
    raw = array.view(np.uint8)
    raw[:] = np.random.default_rng(1).integers(0, 256, raw.size, dtype=np.uint8)
    if dtype.names:
        array["label"] = "abc"  # random bytes are not valid code points
    back = executor.submit(workers.echo, array).result()
    # The stdlib's pickling may turn a plain big-endian dtype native (NumPy, protocol < 5): ours too.
    unpickled = pickle.loads(pickle.dumps(array, protocol=pickle.DEFAULT_PROTOCOL))
    assert back.dtype == unpickled.dtype
    assert back.tobytes() == unpickled.tobytes()
    assert back.astype(dtype).tobytes() == array.tobytes()


def test_memory_order_is_kept_and_read_only_arrives_as_pickling_gives_it(executor):
    fortran = np.asfortranarray(random_array().reshape(512, -1))
    seen = executor.submit(workers.describe_array, fortran).result()
    assert seen["f_contiguous"] and not seen["c_contiguous"]
    np.testing.assert_array_equal(executor.submit(workers.echo, fortran).result(), fortran)
    strided = random_array(BIG * 2)[::2]
    np.testing.assert_array_equal(executor.submit(workers.echo, strided).result(), strided)
    frozen = random_array()
    frozen.flags.writeable = False
    unpickled = pickle.loads(pickle.dumps(frozen, protocol=pickle.DEFAULT_PROTOCOL))
    # The worker gets its own copy, writable where unpickling makes it so (protocol < 5): like the stdlib.
    assert executor.submit(workers.describe_array, frozen).result()["writeable"] is unpickled.flags.writeable
    with SharedNDArray.copy_of(random_array()) as shared:
        view = shared.array[:]
        view.flags.writeable = False
        # Memory the caller shares stays read-only in the worker: it is the caller's own.
        assert executor.submit(workers.describe_array, view).result()["writeable"] is False
        del view


def test_map_with_chunksize_and_timeout_matches_the_builtin_map(executor):
    arrays = [random_array(seed=seed) for seed in range(5)]
    got = list(executor.map(workers.array_nbytes, arrays, chunksize=2, timeout=60))
    assert got == [array.nbytes for array in arrays]
    echoed = list(executor.map(workers.echo, arrays, chunksize=3))
    for back, sent in zip(echoed, arrays, strict=True):
        np.testing.assert_array_equal(back, sent)


def test_task_exceptions_keep_their_type_and_release_segments(executor):
    with pytest.raises(ValueError, match="bad input"):
        executor.submit(workers.raise_error, "ValueError", "bad input").result()
    with pytest.raises(ZeroDivisionError, match="after reading"):
        executor.submit(workers.fail_after_reading, random_array(), "ZeroDivisionError").result()
    executor.segment_pool.collect()
    assert executor.segment_pool.lent_bytes == 0  # the failed task's frames let go of its argument
    array = random_array()
    error = executor.submit(workers.raise_error, "ZeroDivisionError", array).exception()
    assert type(error) is ZeroDivisionError  # its argument is the worker's array: pickled back, a copy
    np.testing.assert_array_equal(error.args[0], array)


def test_an_already_shared_array_crosses_without_a_copy(executor):
    with SharedNDArray.copy_of(random_array(BIG * 2)) as shared:
        executor.submit(workers.fill_in_place, shared.array, 7.0).result()
        assert (shared.array == 7.0).all()  # the worker wrote into our memory: no copy was sent
        echoed = executor.submit(workers.echo, shared.array[::2]).result()  # 2 MiB, strided
        assert np.shares_memory(echoed, shared.array)
        del echoed


def test_results_are_views_of_inputs_or_adopted_segments_the_caller_owns(executor):
    array = random_array()
    new, half = executor.submit(workers.plus_one_and_slice, array).result()
    np.testing.assert_array_equal(new, array + 1)
    np.testing.assert_array_equal(half, array[BIG // 2:])
    assert handle_of(half).name in executor.segment_pool.names()  # a view of our argument's pooled copy
    adopted = handle_of(new).name  # the worker's new segment, mapped here without a copy
    assert adopted not in executor.segment_pool.names()
    assert executor.submit(workers.fill_in_place, new, 0.0).result() is None
    np.testing.assert_array_equal(new, array + 1)  # a result is not shared on purpose: the write stayed there
    del new, half
    assert adopted not in our_segments()  # unlinked once the caller's arrays on it are gone


def test_a_returned_result_gives_its_segment_back_to_the_pool():
    with SharedMemoryExecutor(1, mp.get_context("spawn")) as executor:
        array = random_array()
        for _ in range(4):
            back = executor.submit(workers.echo, array).result()
            np.testing.assert_array_equal(back, array)
            del back
        assert executor.segment_pool.created == 1 and executor.segment_pool.reused == 3
        kept = [executor.submit(workers.echo, array).result() for _ in range(2)]
        assert executor.segment_pool.created == 2  # a result still held keeps its segment
        del kept
    assert not our_segments()


def test_an_idle_cap_of_zero_keeps_no_idle_segment():
    with SharedMemoryExecutor(1, mp.get_context("spawn"), idle_cap_bytes=0) as executor:
        executor.submit(workers.array_nbytes, random_array()).result()
        executor.submit(workers.echo, 1).result()
        executor.segment_pool.collect()
        assert executor.segment_pool.idle_bytes == 0
        assert not our_segments()


def test_cancelled_and_shutdown_pending_work_leave_nothing():
    executor = SharedMemoryExecutor(1, mp.get_context("spawn"))
    first = executor.submit(workers.sleep_then_echo, 0.5, random_array())
    pending = [executor.submit(workers.echo, random_array(seed=seed)) for seed in range(6)]
    assert pending[-1].cancel() and pending[-1].cancelled()
    executor.shutdown(wait=True, cancel_futures=True)
    assert first.result().shape == (BIG,)
    assert all(future.done() for future in pending)
    assert any(future.cancelled() for future in pending)
    del first, pending
    gc.collect()
    assert not our_segments()


def test_shutdown_without_waiting_frees_segments_once_work_ends():
    before = leftovers.snapshot()
    executor = SharedMemoryExecutor(1, mp.get_context("spawn"))
    future = executor.submit(workers.sleep_then_echo, 0.3, random_array())
    executor.shutdown(wait=False)
    assert future.result(timeout=60).shape == (BIG,)
    del future, executor
    deadline = time.monotonic() + 10
    while leftovers.new_since(before) and time.monotonic() < deadline:
        gc.collect()  # the pool's queues and semaphores go once its manager thread has finished
        time.sleep(0.05)
    assert not our_segments()


def test_a_killed_worker_breaks_the_pool_and_leaves_nothing():
    with SharedMemoryExecutor(1, mp.get_context("spawn")) as executor:
        doomed = executor.submit(workers.kill_this_worker, random_array())
        with pytest.raises(BrokenProcessPool):
            doomed.result(timeout=60)
        with pytest.raises(BrokenProcessPool):
            executor.submit(workers.echo, random_array()).result()
    del doomed
    assert not our_segments()


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_every_start_method(method):
    array = random_array()
    with SharedMemoryExecutor(2, mp.get_context(method)) as executor:
        new, half = executor.submit(workers.plus_one_and_slice, array).result()
        np.testing.assert_array_equal(new, array + 1)
        np.testing.assert_array_equal(half, array[BIG // 2:])
        del new, half


def test_constructor_arguments_pass_through():
    with SharedMemoryExecutor(max_workers=1, mp_context=mp.get_context("spawn"), initializer=workers.echo,
                              initargs=(1,), max_tasks_per_child=1, min_shared_bytes=10) as executor:
        pids = {executor.submit(workers.worker_pid).result() for _ in range(3)}
        assert len(pids) == 3  # a new worker per task
        small = np.arange(4.0)
        assert handle_of(executor.submit(workers.echo, small).result()) is not None


def ctrl_c_reaches_it() -> None:
    """preexec_fn: SIGINT back to its default in the child, so that Python turns it into
    KeyboardInterrupt there even when this run inherited an ignored SIGINT (a shell's background job)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_script(body: str) -> subprocess.Popen:
    """Start ``body`` in a fresh interpreter (its own pid, so its segment names are its own)."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(body)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches_it)


def segments_of(pid: int) -> list[str]:
    return [name for name in os.listdir(SHM_DIR) if name.startswith(f"{SEGMENT_PREFIX}{pid}_")]


def wait_until_present(pid: int, seconds: float = 30) -> list[str]:
    deadline = time.monotonic() + seconds
    while not segments_of(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return segments_of(pid)


def wait_until_gone(pid: int, seconds: float = 30) -> list[str]:
    deadline = time.monotonic() + seconds
    while segments_of(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return segments_of(pid)


SCRIPT_WITH_A_TASK_IN_FLIGHT = """
    import multiprocessing as mp, sys
    import numpy as np
    import shm_leftovers as leftovers
    import array_workers as workers
    from sharedarrays.executor import SharedMemoryExecutor
    if __name__ == "__main__":
        executor = SharedMemoryExecutor(1, mp.get_context("spawn"))
        future = executor.submit(workers.sleep_then_echo, 2, np.ones(2**20))
        while not future.running():
            pass
        print("in flight", flush=True)
        {then}
"""


@pytest.mark.parametrize("how", ["KeyboardInterrupt", "SIGKILL"])
def test_a_program_stopped_mid_task_leaves_nothing(how):
    script = run_script(SCRIPT_WITH_A_TASK_IN_FLIGHT.format(then="future.result()"))
    try:
        assert script.stdout.readline().strip() == "in flight"
        assert wait_until_present(script.pid), "the argument never reached shared memory"
        if how == "KeyboardInterrupt":
            script.send_signal(signal.SIGINT)  # Ctrl-C while the caller waits for the result
        else:  # no finally, no atexit: the resource tracker unlinks once the program's last
            script.kill()  # process (the worker, after its task) has let go of it
        _, stderr = script.communicate(timeout=60)
    finally:
        script.kill()
        script.communicate()
    if how == "KeyboardInterrupt":
        assert "KeyboardInterrupt" in stderr
    assert wait_until_gone(script.pid) == []


UNSHARE = shutil.which("unshare")


def in_small_dev_shm(code: str, size: str = "8m") -> subprocess.CompletedProcess:
    """Run Python code in a private mount namespace whose /dev/shm is a tmpfs of ``size``."""
    script = f"mount -t tmpfs -o size={size} tmpfs /dev/shm && exec {sys.executable} -c \"$0\""
    return subprocess.run([UNSHARE, "--mount", "sh", "-c", script, textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(UNSHARE is None or os.geteuid() != 0, reason="needs root and unshare for a private tmpfs")
def test_an_argument_or_result_too_big_for_dev_shm_is_pickled_as_the_stdlib_does():
    result = in_small_dev_shm("""
        import multiprocessing as mp, os
        import numpy as np
        import array_workers as workers
        from logged_notices import notices_of_sharedarrays
        from sharedarrays.executor import SharedMemoryExecutor
        if __name__ == "__main__":
            with notices_of_sharedarrays() as said:
                with SharedMemoryExecutor(1, mp.get_context("spawn")) as executor:
                    echoed = executor.submit(workers.echo, np.ones(2 << 20)).result()  # 16 MiB both ways
                    made = executor.submit(np.ones, 2 << 20).result()  # a 16 MiB result
                    print(echoed.sum() == echoed.size, made.sum() == made.size, executor.pickled_fallbacks)
                    print("still works:", executor.submit(workers.array_nbytes, np.ones(2 << 17)).result())
            print("notices:", ["/dev/shm" in message for message in said])
            print("left:", os.listdir("/dev/shm"))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["True True 3", "still works: 2097152", "notices: [True]",
                                          "left: []"]


AFTER_SHUTDOWN = "cannot schedule new futures after shutdown"  # the stdlib's refusal, word for word
RACE_ROUNDS = 60
PREEMPTED_SECONDS = 0.001


def _preempted_after_the_stdlib_queues_a_call(frame, event, _arg) -> None:
    """Profile hook for the submitting thread: pause it as the stdlib's ``submit`` returns.

    It stands in for the scheduler preempting that thread just after the call was queued (a GIL
    switch, or any moment on a free-threaded build), so a shutdown from the other thread can land
    there in a few rounds instead of a few million; nothing is replaced, only delayed.
    """
    if event == "return" and frame.f_code is ProcessPoolExecutor.submit.__code__:
        time.sleep(PREEMPTED_SECONDS)


def _race_submit_against_shutdown(array: np.ndarray, rng: random.Random) -> str:
    """One round: this thread submits ``array`` while another calls ``shutdown(wait=False)``, each
    after a random delay (seconds). Returns 'ok', 'refused' (the stdlib's refusal) or what else
    happened."""
    executor = SharedMemoryExecutor(1, mp.get_context("fork"))
    executor.submit(workers.worker_pid).result()  # the worker runs: the race is submit against shutdown
    manager = executor._executor_manager_thread
    start = threading.Barrier(2)
    shutdown_after = rng.uniform(0, 2 * PREEMPTED_SECONDS)
    closer = threading.Thread(target=lambda: (start.wait(), time.sleep(shutdown_after),
                                              executor.shutdown(wait=False)))
    closer.start()
    start.wait()
    time.sleep(rng.uniform(0, PREEMPTED_SECONDS))
    try:
        return _outcome_of_submitting(executor, array)
    finally:
        closer.join()
        manager.join(60)


def _outcome_of_submitting(executor: SharedMemoryExecutor, array: np.ndarray) -> str:
    sys.setprofile(_preempted_after_the_stdlib_queues_a_call)
    try:
        future = executor.submit(workers.echo, array)
    except RuntimeError as error:
        return "refused" if str(error) == AFTER_SHUTDOWN else f"submit raised {error!r}"
    finally:
        sys.setprofile(None)
    error = future.exception(timeout=60)
    if error is None:
        return "ok" if np.array_equal(future.result(), array) else "a wrong result"
    return "refused" if type(error) is RuntimeError and str(error) == AFTER_SHUTDOWN else repr(error)


def test_submit_racing_shutdown_from_another_thread_completes_or_is_refused():
    array, rng = random_array(), random.Random(0)
    outcomes = collections.Counter(_race_submit_against_shutdown(array, rng) for _ in range(RACE_ROUNDS))
    assert set(outcomes) <= {"ok", "refused"}, outcomes
    assert wait_until_gone(os.getpid()) == []


FORK_CHILD_EXITS = """
    import os, sys
    import multiprocessing as mp
    import numpy as np
    import array_workers as workers
    from sharedarrays.room import SEGMENT_PREFIX, SHM_DIR
    from sharedarrays.executor import SharedMemoryExecutor

    def ours():
        return sorted(name for name in os.listdir(SHM_DIR) if name.startswith(SEGMENT_PREFIX))

    if __name__ == "__main__":
        with SharedMemoryExecutor(1, mp.get_context("forkserver")) as executor:
            assert executor.submit(workers.sum_array, np.ones(1_000_000)).result() == 1e6
            before = ours()
            child = os.fork()
            if child == 0:
                sys.exit(0)  # a normal exit: the inherited finalizers run here
            os.waitpid(child, 0)
            after = ours()
            print(len(before), before == after)
            assert executor.submit(workers.sum_array, np.ones(1_000_000)).result() == 1e6
        print("left", ours())
"""


@pytest.mark.timeout(120)
def test_a_forked_child_that_exits_normally_leaves_the_parents_pooled_segments_alone(tmp_path):
    program = tmp_path / "fork_child_exits.py"
    program.write_text(textwrap.dedent(FORK_CHILD_EXITS))
    finished = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=90,
                              cwd=os.getcwd())
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split("\n")[:2] == ["1 True", "left []"], finished.stdout + finished.stderr
    assert "KeyError" not in finished.stderr, finished.stderr


@pytest.mark.timeout(60)
def test_a_result_segment_made_after_the_pool_broke_is_unlinked_once_its_maker_is_gone():
    """When the pool breaks, a worker that still runs may write its task's result segment after the
    future failed (the stdlib fails the futures, then stops the workers); the executor waits for the
    workers to be gone and unlinks it, instead of leaving it until the program ends."""
    from sharedarrays import executor_workers
    from sharedarrays._segments import new_name

    result_name = new_name()
    maker = mp.get_context("spawn").Process(target=workers.pack_result_later, args=(1.0, result_name, BIG))
    maker.start()
    try:
        executor_workers.unlink_when_gone(result_name, [maker.pid], wait_seconds=30)
        maker.join(5)
        assert maker.exitcode == 0  # it made the segment, and only then did the wait end
        assert not (SHM_DIR / result_name).exists()
    finally:
        maker.join(10)
