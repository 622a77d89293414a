"""helpers.lessons.start_here (lesson 00) and helpers.lessons.demos (shared by lessons): real processes."""

import os
import time
from multiprocessing import shared_memory

import numpy as np
import psutil
import pytest

from helpers.lessons import demos, start_here, workers
from helpers.measure import system
from helpers.measure.memory import track_memory
from helpers.measure.units import MiB

SEGMENT_BYTES = 16 * MiB
SHORT_HOLD = 0.4


def _segment_exists(name: str) -> bool:
    try:
        shared_memory.SharedMemory(name=name).close()
    except FileNotFoundError:
        return False
    return True


def test_fresh_array_pages_become_resident_only_when_written():
    n_bytes = 32 * MiB
    array = start_here.fresh_array(n_bytes)
    assert array.dtype == np.float64 and array.nbytes == n_bytes
    assert array.flags.writeable
    before = psutil.Process().memory_info().rss
    array.fill(1.5)
    grown = psutil.Process().memory_info().rss - before
    assert grown >= 0.9 * n_bytes
    assert float(array.sum()) == 1.5 * array.size


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="page kinds come from /proc/PID/smaps")
def test_fresh_array_is_private_memory_not_shared_memory():
    n_bytes = 32 * MiB
    before = start_here.tree_by_kind()
    array = start_here.fresh_array(n_bytes)
    array.fill(1.5)
    after = start_here.tree_by_kind()
    del array
    assert after["uss"][start_here.ANONYMOUS] - before["uss"][start_here.ANONYMOUS] >= 0.9 * n_bytes
    assert after["pss"][start_here.SHARED_MEMORY] - before["pss"][start_here.SHARED_MEMORY] < 0.1 * n_bytes


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="glibc's malloc_trim is Linux-only")
def test_release_free_heap_runs_where_glibc_is():
    assert start_here.release_free_heap() in (True, False)


def test_random_segment_holds_random_data_and_is_owned_by_the_caller():
    segment = start_here.random_segment(SEGMENT_BYTES, seed=3)
    try:
        view = np.ndarray((SEGMENT_BYTES // 8,), dtype=np.float64, buffer=segment.buf)
        assert segment.size >= SEGMENT_BYTES
        assert 0.0 <= view.min() and view.max() < 1.0
        assert abs(float(view.mean()) - 0.5) < 0.01
        expected = np.random.default_rng(3).random(SEGMENT_BYTES // 8)
        assert np.array_equal(view, expected)
        del view
    finally:
        segment.close()
        segment.unlink()


@pytest.mark.skipif(system.shm_free() is None, reason="no /dev/shm here")
def test_random_segment_refuses_what_does_not_fit_without_creating_anything():
    before = set(os.listdir(system.SHM_DIR))
    with pytest.raises(MemoryError, match=r"does not fit.*lower array_mib \(LAB_ARRAY_MB\)"):
        start_here.random_segment(system.shm_free() + 64 * MiB)
    assert set(os.listdir(system.SHM_DIR)) <= before


def test_segment_checksum_reads_every_byte():
    segment = start_here.random_segment(MiB, seed=4)
    try:
        expected = int(np.ndarray((MiB,), dtype=np.uint8, buffer=segment.buf).sum(dtype=np.uint64))
        assert start_here.segment_checksum(segment.name) == expected
    finally:
        segment.close()
        segment.unlink()


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_self_check_round_trips_through_a_worker_and_cleans_up(start_method):
    before_children = {c.pid for c in psutil.Process().children(recursive=True)}
    result = start_here.self_check(start_method)
    assert result.start_method == start_method
    assert result.checksum > 0 and result.checksum == result.expected
    assert result.segment_in_dev_shm is (True if system.SHM_DIR.is_dir() else None)
    time.sleep(0.2)
    workers_left = [
        c for c in psutil.Process().children(recursive=True)
        if c.pid not in before_children and "spawn_main" in " ".join(c.cmdline())
        and c.is_running() and c.status() != psutil.STATUS_ZOMBIE
    ]
    assert not workers_left


def test_hold_marks_a_window_and_calls_during_halfway():
    with track_memory(trace_python=False) as report:
        answer = demos.hold(report, "quiet", 0.2, during=lambda: 42)
    assert answer == 42
    assert report.marks["quiet end"] - report.marks["quiet holding"] >= 0.2
    assert report.steady("quiet holding", "quiet end").samples >= 1


def test_hold_in_workers_holds_n_distinct_workers_then_ends_them():
    with track_memory(trace_python=False) as report:
        held = start_here.hold_in_workers(workers.allocate_and_hold, (4 * MiB,), 2, "spawn",
                                     hold_seconds=SHORT_HOLD, report=report, label="busy",
                                     during=demos.tree_pss_by_kind)
    assert len(set(held.pids)) == 2
    assert all(not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
               for pid in held.pids)
    assert {"busy holding", "busy end"} <= set(report.marks)
    seen = {pid for s in report.window("busy holding", "busy end") for pid in s.processes}
    assert set(held.pids) <= seen
    if held.during is not None:
        assert set(held.during) == {"anonymous", "shared memory", "files (code, libraries)"}


def test_hold_in_workers_fails_fast_when_a_worker_dies_before_ready():
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="exited with code"):
        start_here.hold_in_workers(workers.hold_shared_segment, ("sal_no_such_segment",), 1, "spawn",
                              hold_seconds=SHORT_HOLD)
    assert time.monotonic() - started < 30


@pytest.mark.skipif(demos.tree_pss_by_kind() is None, reason="this kernel does not split PSS")
def test_readers_of_one_segment_add_one_array_of_shared_memory_pss_and_n_arrays_of_rss():
    n_workers = 2
    with track_memory(trace_python=False) as report:
        idle = start_here.hold_in_workers(workers.allocate_and_hold, (0,), n_workers, "spawn",
                                     hold_seconds=SHORT_HOLD, report=report, label="idle",
                                     during=demos.tree_pss_by_kind)
        segment = start_here.random_segment(SEGMENT_BYTES)
        try:
            segment.close()
            shared = start_here.hold_segment_in_workers(segment.name, n_workers, "spawn", SHORT_HOLD,
                                                   report=report, during=demos.tree_pss_by_kind)
        finally:
            segment.unlink()
    grown = demos.increase(report, "idle", "shared")
    shmem = shared.during["shared memory"] - idle.during["shared memory"]
    assert shmem == pytest.approx(SEGMENT_BYTES, rel=0.05)
    assert grown["tree RSS sum"] >= 0.75 * n_workers * SEGMENT_BYTES
    assert grown["/dev/shm bytes"] >= 0.9 * SEGMENT_BYTES
    assert not _segment_exists(segment.name)


def test_tree_pss_by_kind_sees_a_segment_this_process_maps():
    before = demos.tree_pss_by_kind()
    if before is None:
        pytest.skip("this kernel does not split PSS")
    segment = start_here.random_segment(SEGMENT_BYTES)
    try:
        after = demos.tree_pss_by_kind()
    finally:
        segment.close()
        segment.unlink()
    assert after["shared memory"] - before["shared memory"] >= 0.9 * SEGMENT_BYTES
    assert all(value >= 0 for value in after.values())


def test_increase_and_tables_report_bytes_and_arrays():
    with track_memory() as report:
        demos.hold(report, "idle", 0.5)
        # New pages (not heap an earlier test freed and the allocator kept resident), touched.
        block = start_here.fresh_array(8 * MiB)
        block[:] = 1
        demos.hold(report, "busy", 0.5)
        del block
    grown = demos.increase(report, "idle", "busy")
    assert grown["tracemalloc peak (this process)"] is not None  # a mapping is no Python allocation
    assert grown["tree USS sum"] >= 5 * MiB  # 8 MiB touched; other processes of the tree may shrink meanwhile
    assert set(grown) >= {"tree RSS sum", "tree PSS sum", "/dev/shm bytes", "cgroup counter"}
    table = demos.format_measure_table({"A": grown, "B": {"tree RSS sum": None}}, 8 * MiB)
    lines = table.splitlines()
    assert lines[0].split() == ["measure", "A", "B"]
    assert "arrays)" in table and "n/a" in table
    per_process = start_here.steady_per_process(report, "busy holding", "busy end", {os.getpid(): "me"})
    assert per_process.splitlines()[1].startswith("me ")
