"""helpers.lessons.sharedctypes with real spawned processes and real sharedctypes memory."""

import ctypes
import gc
import multiprocessing as mp
import os
import weakref

import numpy as np
import pytest

from helpers.lessons import sharedctypes as demo
from helpers.measure.memory import MemoryReport
from helpers.measure.units import MiB

SPAWN = mp.get_context("spawn")


def test_as_array_views_a_raw_array_and_a_locked_array_without_copying():
    raw = SPAWN.RawArray("d", 8)
    locked = SPAWN.Array("q", 4)
    raw_view, locked_view = demo.as_array(raw), demo.as_array(locked)
    assert raw_view.dtype == np.float64 and locked_view.dtype == np.int64
    assert not raw_view.flags.owndata and not locked_view.flags.owndata
    raw_view[3] = 2.5
    locked_view[1] = 7
    assert raw[3] == 2.5 and locked[1] == 7
    assert demo.as_array(raw, np.uint8).nbytes == 64


def test_shared_copy_of_keeps_shape_dtype_and_values():
    rng = np.random.default_rng(0)
    for array in (rng.random((3, 5)), np.arange(12, dtype=np.int32), np.array(["ab", "cde"], dtype="U3")):
        shared, view = demo.shared_copy_of(SPAWN, array)
        assert view.shape == array.shape and view.dtype == array.dtype
        assert np.array_equal(view, array)
        assert not view.flags.owndata
        del shared, view
    shared, view = demo.shared_copy_of(SPAWN, rng.random(4), lock=True)
    assert hasattr(shared, "get_lock")


def test_shared_copy_of_refuses_object_dtypes():
    with pytest.raises(TypeError, match="Python objects"):
        demo.shared_copy_of(SPAWN, np.array(["a", 1], dtype=object))


def test_a_spawned_process_writes_into_the_parents_raw_array():
    raw = SPAWN.RawArray("d", 16)
    child = SPAWN.Process(target=demo.write_at, args=(raw, 15, -1.0))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert demo.as_array(raw)[15] == -1.0


def test_pool_workers_read_the_array_they_received_in_their_initializer():
    source = np.random.default_rng(1).random(2 * MiB // 8)
    shared, view = demo.shared_copy_of(SPAWN, source)
    barrier = SPAWN.Barrier(2)
    bounds = [(0, view.size // 2), (view.size // 2, view.size)]
    with SPAWN.Pool(2, initializer=demo.init_worker, initargs=(shared, barrier)) as pool:
        pids = pool.map(demo.pid_together, range(2), chunksize=1)
        slice_sums = pool.map(demo.sum_slice_together, bounds, chunksize=1)
        whole_reads = pool.map(demo.read_whole_together, range(2), chunksize=1)
        arenas = pool.map(demo.arena_together, range(2), chunksize=1)
        pool.close()
        pool.join()
    assert len(set(pids)) == 2 and os.getpid() not in pids
    assert np.isclose(sum(slice_sums), source.sum())
    assert np.allclose([total for total, _ in whole_reads], source.sum())
    assert all(cpu_seconds > 0 for _, cpu_seconds in whole_reads)
    path, inode, size = demo.arena_of(view)
    assert "/pym-" in path and path.endswith("(deleted)") and size >= view.nbytes
    assert all(arena[1] == inode for arena in arenas)


def test_a_pool_started_without_an_array_still_waits_for_every_worker():
    barrier = SPAWN.Barrier(2)
    with SPAWN.Pool(2, initializer=demo.init_worker, initargs=(None, barrier)) as pool:
        pids = pool.map(demo.pid_together, range(2), chunksize=1)
        pool.close()
        pool.join()
    assert len(set(pids)) == 2 and os.getpid() not in pids


def test_a_sharedctypes_object_cannot_be_a_task_argument():
    raw = SPAWN.RawArray("d", 10)
    with SPAWN.Pool(1) as pool:
        with pytest.raises(RuntimeError, match="through inheritance"):
            pool.apply(demo.as_array, (raw,))
        pool.close()
        pool.join()


def test_a_view_given_as_a_task_argument_is_a_copy():
    raw = SPAWN.RawArray("d", 10)
    view = demo.as_array(raw)
    with SPAWN.Pool(1) as pool:
        assert pool.apply(demo.fill_argument, (view, 7.0)) == 7.0
        pool.close()
        pool.join()
    assert not view.any()


def test_arena_of_refuses_an_ordinary_array():
    with pytest.raises(LookupError):
        demo.arena_of(np.ones(10))


def test_a_big_arena_is_unmapped_with_the_last_view():
    raw = SPAWN.RawArray("d", 4 * MiB // 8)
    view = demo.as_array(raw)
    inode = demo.arena_of(view)[1]
    del raw
    assert any(mapping[1] == inode for mapping in demo.arena_mappings())
    del view
    gc.collect()
    assert not any(mapping[1] == inode for mapping in demo.arena_mappings())


def test_named_shm_mapped_sees_a_spawn_contexts_semaphore_until_it_is_collected():
    before = set(demo.named_shm_mapped())
    locked = SPAWN.Array(ctypes.c_double, 3)
    name = "/dev/shm/sem" + locked.get_lock()._semlock.name.replace("/", ".")
    assert name in set(demo.named_shm_mapped()) - before
    del locked
    gc.collect()
    assert name not in demo.named_shm_mapped()


def test_counter_pool_counts_exactly_with_the_lock_and_never_more_without():
    with demo.CounterPool(SPAWN, 2) as counters:
        runs = demo.measure_increments(
            counters, {"unlocked": 20_000, "item": 2_000, "locked": 2_000, "local": 20_000}, repeat=2
        )
        with pytest.raises(ValueError, match="way must be one of"):
            counters.run("atomic", 10)
    assert all(len(way_runs) == 2 for way_runs in runs.values())
    for run in runs["locked"] + runs["local"]:
        assert run.count == run.expected == 2 * run.iterations and run.lost == 0
    for run in runs["unlocked"] + runs["item"]:
        assert 0 < run.count <= run.expected
    for way_runs in runs.values():
        assert all(len(run.seconds) == 2 and min(run.seconds) > 0 for run in way_runs)
        assert all(len(run.cpu_seconds) == 2 and min(run.cpu_seconds) > 0 for run in way_runs)
        assert demo.median_seconds_per_update(way_runs) > 0
        assert demo.median_seconds_per_update(way_runs, cpu=True) > 0


def test_time_making_keeps_what_it_made_until_the_clock_stops():
    """Freeing a run's result happens untimed, before the next run: one warm-up and three timed
    runs, each object gone before the next is made, none kept at the end."""
    made = []  # weak references to what make() returned

    class Made:
        pass

    def make():
        assert not [ref for ref in made if ref() is not None], "the previous object is still alive"
        made.append(weakref.ref(obj := Made()))
        return obj

    timing = demo.time_making(make, repeat=3)
    assert len(timing.runs) == 3 and min(timing.runs) > 0
    assert len(made) == 4 and all(ref() is None for ref in made)


def test_ctype_and_length_keeps_numbers_and_stores_other_dtypes_as_bytes():
    assert demo.ctype_and_length(np.zeros(3)) == (ctypes.c_double, 3)
    assert demo.ctype_and_length(np.array(["ab", "cde"], dtype="U3")) == (ctypes.c_ubyte, 24)
    with pytest.raises(TypeError, match="Python objects"):
        demo.ctype_and_length(np.array([None]))


def test_increment_table_shows_only_the_ways_asked_for():
    run = demo.IncrementRun("unlocked", 2, 10, 15, (1e-3, 1e-3), (1e-3, 1e-3))
    runs = {"unlocked": [run], "locked": [demo.IncrementRun("locked", 2, 10, 20, (2e-3,) * 2, (2e-3,) * 2)]}
    seconds = {"unlocked": 1e-4, "locked": 2e-4}
    table = demo.increment_table(runs, seconds, seconds, ways=("unlocked",))
    assert demo.INCREMENT_WAYS["unlocked"] in table and demo.INCREMENT_WAYS["locked"] not in table
    assert demo.INCREMENT_WAYS["locked"] in demo.increment_table(runs, seconds, seconds)


def test_increment_table_gives_lost_updates_as_a_share_of_the_expected_total():
    runs = {"unlocked": [demo.IncrementRun("unlocked", 2, 10, 15, (1e-3,) * 2, (1e-3,) * 2),
                         demo.IncrementRun("unlocked", 2, 10, 10, (1e-3,) * 2, (1e-3,) * 2)]}
    seconds = {"unlocked": 1e-4}
    row = demo.increment_table(runs, seconds, seconds).splitlines()[1]
    assert "5-10" in row and "25%-50%" in row


def test_one_mark_per_state_labels_each_state_once_and_leaves_the_report_alone():
    report = MemoryReport(interval=0.1, marks={"idle holding": 1.0, "idle end": 2.0, "busy holding": 2.1,
                                               "busy end": 3.0, "done": 3.5})
    assert demo.one_mark_per_state(report).marks == {"idle": 1.0, "busy": 2.1, "done": 3.5}
    assert len(report.marks) == 5


def test_every_race_runs_as_many_additions_so_their_rows_compare():
    assert set(demo.RACE_ITERATIONS) == set(demo.INCREMENT_WAYS)
    assert len(set(demo.RACE_ITERATIONS.values())) == 1
