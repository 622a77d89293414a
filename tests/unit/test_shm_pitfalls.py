"""helpers.lessons.shared_memory with real interpreters, real segments and (where allowed) a real
small tmpfs."""

import hashlib
import multiprocessing as mp
import sys

import numpy as np
import pytest

from helpers.lessons import shared_memory, workers
from helpers.lessons.demos import increase
from helpers.measure.leftovers import SHM_DIR
from helpers.measure.memory import track_memory
from helpers.measure.units import MiB
from sharedarrays.shm import SharedNDArray

SPAWN = mp.get_context("spawn")


def _random_shared(n_items: int = 1000) -> SharedNDArray:
    return SharedNDArray.copy_of(np.random.default_rng(0).random(n_items))


def test_a_stdlib_attach_in_another_interpreter_unlinks_or_warns_on_exit():
    with _random_shared() as shared:
        outcome = shared_memory.attach_and_exit(shared.handle, "stdlib")
        assert outcome.returncode == 0, outcome.stderr
        assert float(outcome.stdout) == pytest.approx(shared.array.sum())
        assert outcome.warnings or not outcome.segment_exists_after
        assert all(line.startswith("UserWarning: resource_tracker") for line in outcome.warnings)
    assert not (SHM_DIR / shared.name).exists()  # the owner's unlink tolerates a segment already gone


@pytest.mark.parametrize("way", ["by_hand", "sharedarrays"])
def test_mapping_the_file_by_hand_or_with_sharedarrays_neither_unlinks_nor_warns(way):
    with _random_shared() as shared:
        outcome = shared_memory.attach_and_exit(shared.handle, way)
        assert outcome.returncode == 0 and outcome.stderr == ""
        assert float(outcome.stdout) == pytest.approx(shared.array.sum())
        assert outcome.segment_exists_after is True and outcome.warnings == []


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_stdlib_attach_in_a_process_of_ours_leaves_the_segment_to_our_tracker(method):
    with _random_shared() as shared:
        outcome = shared_memory.attach_and_exit(shared.handle, "our_worker", mp.get_context(method))
        assert outcome.returncode == 0
        assert float(outcome.stdout) == pytest.approx(shared.array.sum())
        assert outcome.segment_exists_after is True
    assert not (SHM_DIR / shared.name).exists()


@pytest.mark.skipif(sys.version_info < shared_memory.UNTRACKED_SINCE, reason="track=False is Python 3.13+")
def test_a_stdlib_attach_with_track_false_neither_unlinks_nor_warns():
    with _random_shared() as shared:
        outcome = shared_memory.attach_and_exit(shared.handle, "untracked")
        assert outcome.returncode == 0 and outcome.stderr == ""
        assert float(outcome.stdout) == pytest.approx(shared.array.sum())
        assert outcome.segment_exists_after is True


def test_track_false_runs_only_where_this_python_has_it():
    untracked = ["untracked"] if sys.version_info >= (3, 13) else []
    assert shared_memory.attach_ways_here() == ["stdlib", *untracked, "by_hand", "sharedarrays", "our_worker"]
    assert "SharedMemory(name=sys.argv[1], track=False)" in shared_memory.CHILD_CODE["untracked"]
    assert "track=False" not in shared_memory.CHILD_CODE["stdlib"]
    listing = shared_memory.child_code_listing()
    assert listing.count("SharedMemory(name=sys.argv[1]") == 1 and listing.count("attach(") == 1
    assert "track=False" not in listing
    assert "mmap.mmap(file.fileno(), 0)" in listing
    assert "resource_tracker" not in shared_memory.CHILD_CODE["by_hand"]
    if sys.version_info < shared_memory.UNTRACKED_SINCE:
        with _random_shared(10) as shared, pytest.raises(ValueError, match="needs Python 3.13"):
            shared_memory.attach_and_exit(shared.handle, "untracked")


def test_an_unknown_way_is_refused():
    with _random_shared(10) as shared, pytest.raises(ValueError, match="'sharedarrays' or 'our_worker'"):
        shared_memory.attach_and_exit(shared.handle, "pickle")
    with pytest.raises(ValueError, match="'stdlib' or 'sharedarrays'"):
        shared_memory.overfill_small_dev_shm("pickle")


def test_objects_viewed_in_another_process_crash_it():
    objects = np.array([f"row {i}" for i in range(8)] + [1.5, None], dtype=object)
    outcome = shared_memory.dereference_objects_elsewhere(objects)
    assert "viewed the segment as dtype=object" in outcome.stdout
    assert outcome.returncode != 0  # SIGSEGV in practice; garbage would print and exit 0 only by chance
    assert outcome.signal_name in ("SIGSEGV", "SIGBUS", "SIGABRT")
    with pytest.raises(TypeError, match="object array"):
        shared_memory.dereference_objects_elsewhere(np.arange(3))


def test_signal_names_and_warning_lines_are_read_from_the_outcome():
    killed = shared_memory.ChildOutcome(-7, "", "/x/y.py:254: UserWarning: leaked\n  warnings.warn(...)\n")
    assert killed.signal_name == "SIGBUS" and killed.warnings == ["UserWarning: leaked"]
    assert shared_memory.ChildOutcome(0, "", "").signal_name is None


NO_PRIVATE_DEV_SHM = shared_memory.private_dev_shm_unavailable()


@pytest.mark.skipif(NO_PRIVATE_DEV_SHM is not None, reason=f"{NO_PRIVATE_DEV_SHM}")
def test_overfilling_a_small_dev_shm_is_sigbus_with_stdlib_and_memory_error_with_the_helper():
    stdlib = shared_memory.overfill_small_dev_shm("stdlib")
    assert stdlib.returncode == -7 and stdlib.signal_name == "SIGBUS"
    assert "created a segment of" in stdlib.stdout and "wrote every page" not in stdlib.stdout
    assert "created a segment of 16 MiB" in stdlib.stdout
    helper = shared_memory.overfill_small_dev_shm("sharedarrays")
    assert helper.returncode == 0, helper.stderr
    assert helper.stdout.startswith("MemoryError: a shared array of 16 MiB does not fit in /dev/shm")


def test_workers_hold_idle_then_attached_and_the_tree_holds_the_array_once():
    n_workers, n_bytes = 2, 16 * MiB
    with SharedNDArray.copy_of(np.random.default_rng(1).random(n_bytes // 8)) as shared:
        with track_memory() as report:
            data_pss = shared_memory.attach_and_hold_in_workers(SPAWN, shared.handle, n_workers, report,
                                                                hold_seconds=1.0,
                                                                during=shared_memory.tree_data_pss)
        grew = increase(report, "workers idle", "workers attached")
        assert grew["tree RSS sum"] >= 0.75 * n_workers * n_bytes
        assert grew["tree PSS sum"] <= 0.6 * n_bytes + 8 * MiB
        assert set(data_pss) == {"workers idle", "workers attached"}
        if data_pss["workers idle"] is not None:  # the kernel splits PSS by kind
            assert data_pss["workers attached"] - data_pss["workers idle"] <= 0.1 * n_bytes + 4 * MiB
            assert data_pss["workers idle"] >= n_bytes  # the segment, in this process's PSS and theirs


def test_without_a_report_the_hold_still_reads_during_each_state():
    with SharedNDArray.copy_of(np.zeros(1024)) as shared:
        readings = shared_memory.attach_and_hold_in_workers(SPAWN, shared.handle, 1, hold_seconds=0.2,
                                                            during=lambda: "read")
    assert readings == {"workers idle": "read", "workers attached": "read"}


def test_record_workers_sum_a_field_and_see_the_same_bytes():
    records = np.zeros(100, dtype=[("when", "M8[s]"), ("price", "f8"), ("ticker", "U8")])
    records["price"] = np.arange(100.0)
    records["price"][::7] = np.nan
    records["ticker"] = "ABC"
    records["when"] = np.datetime64("2026-01-01T00:00:00") + np.arange(100)
    with SharedNDArray.copy_of(records) as shared, SPAWN.Pool(2) as pool:
        halves = pool.starmap(shared_memory.nansum_field_slice, [(shared.handle, "price", 0, 50),
                                                          (shared.handle, "price", 50, 100)])
        digest = pool.apply(shared_memory.field_digest, (shared.handle, "ticker"))
    assert sum(halves) == pytest.approx(np.nansum(records["price"]))

    assert digest == hashlib.sha256(np.ascontiguousarray(records["ticker"]).tobytes()).hexdigest()


def test_try_attach_says_attached_or_names_the_error_when_the_segment_is_gone():
    with SharedNDArray.copy_of(np.arange(4.0)) as shared:
        handle = shared.handle
        assert shared_memory.try_attach(handle) == "attached"
    assert shared_memory.try_attach(handle) == "FileNotFoundError"


def test_a_pool_initializer_keeps_one_mapping_per_worker_across_tasks():
    source = np.random.default_rng(2).random(1000)
    total = pytest.approx(source.sum())
    with SharedNDArray.copy_of(source) as shared:
        with SPAWN.Pool(2, initializer=shared_memory.keep_attached, initargs=(shared.handle,)) as pool:
            for _ in range(3):
                halves = pool.starmap(shared_memory.sum_attached_slice, [(shared.name, 0, 400),
                                                                         (shared.name, 400, 1000)])
                assert sum(halves) == total
        with SPAWN.Pool(1, initializer=shared_memory.keep_attached, initargs=(shared.handle,)) as pool:
            assert pool.apply(shared_memory.sum_attached_slice, (shared.name, 0, 1000)) == total
            shared.unlink()  # the name is gone: only a mapping kept from before can still read the array
            assert pool.apply(shared_memory.sum_attached_slice, (shared.name, 0, 1000)) == total
            with pytest.raises(FileNotFoundError):  # a task that attaches anew finds no segment
                pool.apply(workers.sum_shared_slice, (shared.handle, 0, 1000))
    assert not (SHM_DIR / shared.name).exists()
