"""sharedarrays.shm.SharedNDArray with real processes, real segments and a real small tmpfs."""

import gc
import multiprocessing as mp
import os
import pickle
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time

import array_workers as workers
import numpy as np
import pytest

from sharedarrays.room import SEGMENT_PREFIX, SHM_DIR, available_memory, shm_free
from sharedarrays.shm import ArrayHandle, SharedNDArray, attach, handle_of, sweep
from sharedarrays.units import MiB

SPAWN = mp.get_context("spawn")


@pytest.fixture(scope="module")
def pool():
    with SPAWN.Pool(2) as workers_pool:
        yield workers_pool


def _segment_exists(name: str) -> bool:
    return (SHM_DIR / name).exists()


ROUND_TRIPS = {
    "float64 C": np.random.default_rng(0).random((3, 5)),
    "float32 Fortran": np.asfortranarray(np.random.default_rng(1).random((4, 6), dtype=np.float32)),
    "strided view": np.arange(40, dtype=np.int64)[::3],
    "transposed view": np.arange(12, dtype=np.int16).reshape(3, 4).T[1:],
    "0-d": np.array(7.5),
    "zero-size": np.empty((0, 4)),
    "bool": np.array([True, False, True]),
    "complex": np.array([1 + 2j, -3.5j], dtype=np.complex128),
    "big-endian": np.arange(5, dtype=">i4"),
    "datetime64": np.array(["2026-11-23T10:00", "NaT", "1970-01-01"], dtype="datetime64[ns]"),
    "bytes S": np.array([b"ab", b"", b"xyz"], dtype="S3"),
    "unicode U": np.array(["grüße", "", "日本"], dtype="U5"),
    "record": np.array(
        [(1.5, "2026-01-02", b"abc", "zz"), (np.nan, "NaT", b"", "ü")],
        dtype=[("price", "f8"), ("when", "M8[s]"), ("code", "S4"), ("label", "U2")],
    ).view(np.recarray),
}


@pytest.mark.parametrize("kind", ROUND_TRIPS)
def test_round_trips_exactly_through_a_spawned_worker(kind, pool):
    original = ROUND_TRIPS[kind]
    before = original.copy()
    with SharedNDArray.copy_of(original) as shared:
        assert shared.array.dtype == original.dtype and shared.array.shape == original.shape
        dtype, shape, contents = pool.apply(workers.shared_contents, (shared.handle,))
        assert (dtype, shape, contents) == (original.dtype, original.shape, original.tobytes())
        if original.ndim == 2 and original.flags.f_contiguous and not original.flags.c_contiguous:
            assert shared.array.flags.f_contiguous
    assert original.tobytes() == before.tobytes(), "copy_of changed the caller's array"


def test_a_worker_writes_and_the_owner_sees_it(pool):
    with SharedNDArray.create((4, 1000), np.float64) as shared:
        assert not shared.array.any()  # a new segment is zeroed
        pool.apply(workers.fill_shared, (shared.handle, 2.5))
        assert (shared.array == 2.5).all()
        chunks = [(shared.handle, i * 1000, (i + 1) * 1000) for i in range(4)]
        assert sum(pool.starmap(workers.sum_shared_slice, chunks)) == pytest.approx(10_000)


def test_read_only_input_is_copied_and_left_alone():
    original = np.arange(10.0)
    original.flags.writeable = False
    with SharedNDArray.copy_of(original) as shared:
        shared.array[0] = 99
        assert original[0] == 0 and not original.flags.writeable


@pytest.mark.parametrize("dtype", [object, [("name", object), ("value", "f8")]])
def test_object_dtypes_are_refused_with_the_way_out(dtype):
    with pytest.raises(TypeError, match="fixed-width 'U' or 'S'"):
        SharedNDArray.create(3, dtype)
    with pytest.raises(TypeError, match="cannot live in shared memory"):
        SharedNDArray.copy_of(np.array([("a", 1.0)], dtype=[("name", object), ("value", "f8")]))


def test_segments_are_owner_only():
    with SharedNDArray.create(10) as shared:
        mode = stat.S_IMODE(os.stat(SHM_DIR / shared.name).st_mode)
        assert mode == 0o600
        assert shared.name.startswith(f"{SEGMENT_PREFIX}{os.getpid()}_")


def test_attaching_a_missing_or_unlinked_segment_says_so():
    shared = SharedNDArray.create(10)
    handle = shared.handle
    shared.close()
    shared.unlink()
    with pytest.raises(FileNotFoundError, match="no shared-memory segment named"), attach(handle):
        pass
    with pytest.raises(FileNotFoundError), attach(ArrayHandle("sal_0_nothing", (1,), np.dtype("f8"), (8,))):
        pass


def test_a_handle_that_does_not_fit_the_segment_is_refused():
    with SharedNDArray.create(10, np.float64) as shared:
        too_big = ArrayHandle(shared.name, (11,), np.dtype("f8"), (8,))
        with pytest.raises(ValueError, match="does not fit"), attach(too_big):
            pass
        wider = ArrayHandle(shared.name, (10,), np.dtype("complex128"), (16,))
        with pytest.raises(ValueError, match="does not fit"), attach(wider):
            pass
        with pytest.raises(TypeError, match="ArrayHandle"), attach(shared.name):
            pass
        objects = ArrayHandle(shared.name, (1,), np.dtype(object), (8,))
        with pytest.raises(TypeError, match="Python objects"), attach(objects):
            pass


def test_closed_arrays_and_non_owners_are_refused_clearly():
    shared = SharedNDArray.create(4)
    view = shared.array
    shared.close()
    with pytest.raises(ValueError, match="closed"):
        shared.array  # noqa: B018
    view[0] = 1.0  # a view kept alive keeps its mapping: no crash after close()
    shared.unlink()
    shared.unlink()  # twice is fine
    with SharedNDArray.create(4) as owned, attach(owned.handle) as attached:
        attached[1] = 3.0
        assert owned.array[1] == 3.0
    assert not _segment_exists(owned.name)


def _run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=60)


ATTACH_AND_EXIT = """
    import pickle, sys
    import numpy as np
    from sharedarrays.shm import attach
    handle = pickle.loads(bytes.fromhex(sys.argv[1]))
    with attach(handle) as array:
        print(float(array.sum()))
"""


def test_an_attaching_process_neither_unlinks_nor_warns_when_it_exits():
    with SharedNDArray.copy_of(np.ones(1000)) as shared:
        result = _run_python(ATTACH_AND_EXIT, pickle.dumps(shared.handle).hex())
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "1000.0"
        assert result.stderr == "", f"the attaching process printed: {result.stderr}"
        assert _segment_exists(shared.name)
        assert shared.array.sum() == 1000.0


def test_nothing_survives_an_exception_in_a_worker(pool):
    with SharedNDArray.copy_of(np.ones(100)) as shared:
        with pytest.raises(RuntimeError, match="worker failed while attached"):
            pool.apply(workers.attach_and_raise, (shared.handle,))
        assert _segment_exists(shared.name)  # the worker's failure does not unlink the owner's segment
        assert pool.apply(workers.sum_shared, (shared.handle,)) == 100.0
    assert not _segment_exists(shared.name)


def test_nothing_survives_keyboard_interrupt_in_the_owner():
    with pytest.raises(KeyboardInterrupt), SharedNDArray.create(1000) as shared:
        raise KeyboardInterrupt
    assert not _segment_exists(shared.name)


def test_nothing_survives_a_worker_killed_while_attached():
    release, ready = SPAWN.Event(), SPAWN.Event()
    with SharedNDArray.copy_of(np.random.default_rng(0).random(MiB // 8)) as shared:
        worker = SPAWN.Process(target=workers.hold_shared_array, args=(shared.handle, ready, release))
        worker.start()
        assert ready.wait(60)
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(30)
        assert worker.exitcode == -signal.SIGKILL
        assert _segment_exists(shared.name)
    assert not _segment_exists(shared.name)


OWN_AND_WAIT = """
    import sys, time
    from sharedarrays.shm import SharedNDArray
    shared = SharedNDArray.create(1 << 20, "u1")
    shared.array[:] = 1
    print(shared.name, flush=True)
    time.sleep(60)
"""


def test_sweep_removes_what_a_killed_owner_left_and_spares_live_owners():
    # The owner and its resource tracker are killed together (its whole session, as an OOM kill
    # of a job would): nothing of it can unlink, so the segment stays until sweep() runs.
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(OWN_AND_WAIT)],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        name = owner.stdout.readline().strip()
        assert name.startswith(SEGMENT_PREFIX) and _segment_exists(name)
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        owner.wait(30)
        owner.stdout.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _segment_exists(name) and not _segment_dead(name):
        time.sleep(0.05)
    with SharedNDArray.create(10) as alive:
        removed = sweep()
        assert name in removed or not _segment_exists(name)
        assert alive.name not in removed and _segment_exists(alive.name)
    assert not _segment_exists(name)


def _segment_dead(name: str) -> bool:
    pid = int(name[len(SEGMENT_PREFIX):].split("_")[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


UNSHARE = shutil.which("unshare")


def _in_small_dev_shm(code: str, size: str = "8m") -> subprocess.CompletedProcess:
    """Run Python code in a private mount namespace whose /dev/shm is a tmpfs of ``size``."""
    script = f"mount -t tmpfs -o size={size} tmpfs /dev/shm && exec {sys.executable} -c \"$0\""
    return subprocess.run([UNSHARE, "--mount", "sh", "-c", script, textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=60)


def _can_make_a_private_dev_shm() -> bool:
    if UNSHARE is None or os.geteuid() != 0:
        return False
    return _in_small_dev_shm("pass").returncode == 0


@pytest.mark.skipif(not _can_make_a_private_dev_shm(), reason="needs root and unshare for a private tmpfs")
def test_a_full_dev_shm_raises_memory_error_not_sigbus():
    result = _in_small_dev_shm("""
        import os
        import numpy as np
        from sharedarrays.shm import SharedNDArray
        try:
            SharedNDArray.create(16 << 20, "u1")
        except MemoryError as error:
            print("MemoryError:", error)
        filler = SharedNDArray.create(6 << 20, "u1")  # fits; then the next one must not
        try:
            SharedNDArray.copy_of(np.ones(4 << 20, "u1"))
        except MemoryError as error:
            print("MemoryError:", error)
        filler.close(); filler.unlink()
        print("left:", os.listdir("/dev/shm"))
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len([line for line in lines if line.startswith("MemoryError: ")]) == 2
    assert "does not fit in /dev/shm" in lines[0] and "16 MiB" in lines[0]
    assert lines[-1] == "left: []"


FAIL_AFTER_THE_SEGMENT_EXISTS = """
    import errno, mmap, os, sys
    import numpy as np
    from multiprocessing import resource_tracker
    from sharedarrays import _segments, transit
    from sharedarrays.room import SEGMENT_PREFIX
    from sharedarrays.shm import SharedNDArray

    def raising(error):
        def fail(*args, **kwargs):
            raise error
        return fail

    class UnmappableMmap(mmap.mmap):  # a class, so isinstance(x, mmap.mmap) elsewhere still works
        def __new__(cls, *args, **kwargs):
            raise OSError(errno.ENOMEM, "Cannot allocate memory")

    FAILURES = {  # where a step after shm_open fails: (module, attribute, its failing stand-in)
        "reserving interrupted": (os, "posix_fallocate", raising(KeyboardInterrupt())),
        "reserving finds /dev/shm full": (os, "posix_fallocate", raising(OSError(errno.ENOSPC, "No space"))),
        "mapping fails": (mmap, "mmap", UnmappableMmap),
        "populating interrupted": (_segments, "_populate", raising(KeyboardInterrupt())),
        "copying the result interrupted": (transit, "view_on", raising(KeyboardInterrupt())),
    }
    CALLS = {
        "SharedNDArray.create": lambda: SharedNDArray.create(1 << 20, "u1"),
        "pack_result": lambda: transit.pack_result(np.ones(1 << 18), _segments.new_name(), 1 << 20),
    }
    failure, call = sys.argv[1:]
    resource_tracker.ensure_running()
    setattr(*FAILURES[failure])
    try:
        CALLS[call]()
        print("no error")
    except BaseException as error:
        print(type(error).__name__)
    mine = f"{SEGMENT_PREFIX}{os.getpid()}_"
    print("left:", [name for name in os.listdir("/dev/shm") if name.startswith(mine)])
"""

CREATE_FAILURES = {
    "reserving interrupted": "KeyboardInterrupt",
    "reserving finds /dev/shm full": "MemoryError",
    "mapping fails": "OSError",
    "populating interrupted": "KeyboardInterrupt",
}


@pytest.mark.parametrize(("call", "failure", "error"), [
    *[("SharedNDArray.create", failure, error) for failure, error in CREATE_FAILURES.items()],
    *[("pack_result", failure, error) for failure, error in CREATE_FAILURES.items()],
    ("pack_result", "copying the result interrupted", "KeyboardInterrupt"),
])
def test_a_failure_after_the_segment_exists_removes_it_and_its_tracker_entry(call, failure, error):
    # In a child of its own, so its resource tracker says at exit whether an entry was left over.
    result = _run_python(FAIL_AFTER_THE_SEGMENT_EXISTS, failure, call)
    assert result.stdout.splitlines() == [error, "left: []"], result.stderr
    assert result.stderr == "", f"the child or its resource tracker printed: {result.stderr}"


INTERRUPT_A_BIG_CREATE = """
    import os, signal, sys
    from multiprocessing import resource_tracker
    from sharedarrays.room import SEGMENT_PREFIX
    from sharedarrays.shm import SharedNDArray
    resource_tracker.ensure_running()
    signal.signal(signal.SIGALRM, signal.default_int_handler)  # the alarm acts as a Ctrl-C
    signal.setitimer(signal.ITIMER_REAL, float(sys.argv[2]))
    try:
        SharedNDArray.create(int(sys.argv[1]), "u1")
        print("not interrupted")
    except KeyboardInterrupt:
        print("KeyboardInterrupt")
    mine = f"{SEGMENT_PREFIX}{os.getpid()}_"
    print("left:", [name for name in os.listdir("/dev/shm") if name.startswith(mine)])
"""
BIG_CREATE_BYTES = 1 << 30  # reserving 1 GiB of /dev/shm pages takes about 0.1-0.3 s
ALARM_SECONDS = 0.01  # well inside posix_fallocate, which the kernel interrupts for a signal


def test_ctrl_c_while_a_big_segment_is_reserved_removes_it():
    room = min(available_memory(), shm_free() or 0)
    if room < 2 * BIG_CREATE_BYTES:
        pytest.skip(f"needs 2 GiB free in /dev/shm and RAM to reserve 1 GiB; {room / 2**30:.1f} GiB here")
    result = _run_python(INTERRUPT_A_BIG_CREATE, str(BIG_CREATE_BYTES), str(ALARM_SECONDS))
    assert result.stdout.splitlines() == ["KeyboardInterrupt", "left: []"], result.stderr
    assert result.stderr == "", f"the child or its resource tracker printed: {result.stderr}"


def test_sweep_spares_multiprocessing_semaphores_a_live_process_maps():
    lock = mp.get_context("spawn").Lock()  # a named semaphore in /dev/shm while the lock lives
    name = "sem." + lock._semlock.name.lstrip("/")
    try:
        assert (SHM_DIR / name).exists()
        assert name not in sweep(semaphores=True) and (SHM_DIR / name).exists()
    finally:
        del lock
        gc.collect()
    assert not (SHM_DIR / name).exists()


def _ours_of_this_process() -> set[str]:
    return {name for name in os.listdir(SHM_DIR) if name.startswith(f"{SEGMENT_PREFIX}{os.getpid()}_")}


@pytest.mark.parametrize("shape", [(-1,), (3, -2), -5])
def test_a_negative_dimension_is_refused_before_a_segment_exists(shape):
    before = _ours_of_this_process()
    with pytest.raises(ValueError, match="negative dimensions"):
        SharedNDArray.create(shape)
    assert _ours_of_this_process() == before


def test_np_asarray_of_a_shared_array_is_its_shared_view_and_a_copy_only_when_asked():
    with SharedNDArray.copy_of(np.arange(6.0)) as shared:
        viewed = np.asarray(shared)
        assert viewed.dtype == np.float64 and viewed.shape == (6,)
        assert np.shares_memory(viewed, shared.array)
        copied = np.array(shared, copy=True)
        assert not np.shares_memory(copied, shared.array) and np.array_equal(copied, shared.array)
        assert np.asarray(shared, dtype=np.float32).dtype == np.float32
        del viewed, copied


def test_copy_of_keeps_a_recarray_and_a_matrix_as_what_they_are():
    records = np.rec.fromarrays([np.arange(4), np.linspace(0, 1, 4)], names="id,score")
    with SharedNDArray.copy_of(records) as shared:
        assert type(shared.array) is np.recarray and np.array_equal(shared.array.score, records.score)
        with attach(shared.handle) as elsewhere:  # another process gets the same dtype, as an ndarray
            assert elsewhere.dtype == records.dtype and np.array_equal(elsewhere["id"], records.id)
    with pytest.warns(PendingDeprecationWarning):
        matrix = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    with SharedNDArray.copy_of(matrix) as shared:
        assert type(shared.array) is np.matrix and np.array_equal(shared.array, matrix)


def test_copy_of_a_masked_array_is_refused_and_leaves_no_segment():
    def ours() -> set[str]:
        return {name for name in os.listdir(SHM_DIR) if name.startswith(f"{SEGMENT_PREFIX}{os.getpid()}_")}

    before = ours()
    with pytest.raises(TypeError, match="mask would be"):
        SharedNDArray.copy_of(np.ma.masked_array(np.arange(4.0), mask=[False, True, False, False]))
    assert ours() == before


def test_handle_of_a_masked_array_is_refused_not_stripped_of_its_mask():
    with SharedNDArray.copy_of(np.arange(4.0)) as shared:
        masked = np.ma.masked_array(shared.array, mask=[False, True, False, False])
        with pytest.raises(TypeError, match="mask would be"):
            handle_of(masked)
        del masked
