"""helpers.lessons.fork_copy_on_write with real forked and spawned processes; memory read from /proc
(process_memory)."""

import gc
import multiprocessing as mp
import os
import sys

import numpy as np
import pytest

from helpers.lessons import fork_copy_on_write, fork_copy_on_write_figures
from helpers.measure.proctree import descendant_pids
from helpers.measure.units import MiB

ARRAY_BYTES = 16 * MiB
N_WORKERS = 2
needs_fork = pytest.mark.skipif(not fork_copy_on_write.has_fork(), reason="this platform cannot fork")
# From Python 3.12 os.fork() warns when the process runs other threads; some tests do on purpose.
forks_with_threads = pytest.mark.filterwarnings("ignore:.*multi-threaded.*:DeprecationWarning")


@pytest.fixture(scope="module")
def array():
    return np.random.default_rng(3).random(ARRAY_BYTES // 8)


def _no_worker_left(fan):
    alive = set(descendant_pids(os.getpid()))
    assert not alive & {w.pid for w in fan.workers}


@needs_fork
def test_forked_workers_read_the_inherited_array_without_copying(array):
    with fork_copy_on_write.installed(array=array):
        idle = fork_copy_on_write.fan_out("fork", "idle", N_WORKERS, hold_seconds=0.2)
        read = fork_copy_on_write.fan_out("fork", "sum inherited array", N_WORKERS, hold_seconds=0.2)
    assert [w.result for w in read.workers] == [float(np.sum(array))] * N_WORKERS
    for worker in read.workers:
        assert worker.uss_growth < 0.25 * ARRAY_BYTES
    assert read.private_to_workers() - idle.private_to_workers() < 0.5 * ARRAY_BYTES
    assert read.growth("rss") > 0.75 * N_WORKERS * ARRAY_BYTES  # RSS counts the shared array per process
    assert set(read.held) == {os.getpid(), *(w.pid for w in read.workers)}
    _no_worker_left(read)


@needs_fork
def test_a_write_in_a_forked_child_copies_every_page_and_stays_private(array):
    before = array.copy()
    with fork_copy_on_write.installed(array=array):
        read = fork_copy_on_write.fan_out("fork", "sum inherited array", N_WORKERS, hold_seconds=0.2)
        write = fork_copy_on_write.fan_out("fork", "write inherited array", N_WORKERS, hold_seconds=0.2)
    np.testing.assert_array_equal(array, before)
    for worker in write.workers:
        assert worker.uss_growth > 0.9 * ARRAY_BYTES
    assert write.private_to_workers() - read.private_to_workers() > 0.75 * N_WORKERS * ARRAY_BYTES
    assert write.growth("pss") - read.growth("pss") > 0.75 * N_WORKERS * ARRAY_BYTES


@needs_fork
def test_iterating_inherited_rows_unshares_them_and_freezing_does_not_help(array):
    rows = fork_copy_on_write.rows_of_floats(array, len(array) // 4)
    size = fork_copy_on_write.footprint(rows)
    with fork_copy_on_write.installed(rows=rows):
        plain = fork_copy_on_write.fan_out("fork", "iterate inherited rows", N_WORKERS)
        with fork_copy_on_write.frozen_gc():
            frozen = fork_copy_on_write.fan_out("fork", "iterate inherited rows", N_WORKERS)
    expected = 0.0  # added in the workers' order: sum() compensates its rounding since Python 3.12
    for row in rows:
        for number in row:
            expected += number
    for worker in plain.workers + frozen.workers:
        assert worker.result == expected
        assert worker.uss_growth > 0.5 * size


@needs_fork
def test_freezing_keeps_a_collection_in_the_child_from_unsharing_the_rows(array):
    rows = fork_copy_on_write.rows_of_floats(array, len(array) // 4)
    size = fork_copy_on_write.footprint(rows)
    with fork_copy_on_write.installed(rows=rows):
        plain = fork_copy_on_write.fan_out("fork", "collect garbage", N_WORKERS)
        with fork_copy_on_write.frozen_gc() as frozen_objects:
            assert frozen_objects >= len(rows)
            frozen = fork_copy_on_write.fan_out("fork", "collect garbage", N_WORKERS)
    assert gc.get_freeze_count() == 0
    for worker in plain.workers:
        assert worker.uss_growth > 0.3 * size
    for worker in frozen.workers:
        assert worker.uss_growth < 0.05 * size


def test_a_spawned_worker_inherits_nothing_and_says_how_to_fix_it(array):
    with fork_copy_on_write.installed(array=array), pytest.raises(RuntimeError,
                                                                  match="nothing was inherited.*spawn"):
        fork_copy_on_write.fan_out("spawn", "sum inherited array", 1)
    assert fork_copy_on_write.ARRAY is None


def test_a_worker_that_receives_the_array_holds_its_own_copy(array):
    fan = fork_copy_on_write.fan_out("spawn", "sum received array", N_WORKERS, send=array, hold_seconds=0.2)
    for worker in fan.workers:
        assert worker.result == float(np.sum(array))
        assert worker.uss_growth > 0.9 * ARRAY_BYTES
    assert fan.growth("pss") > N_WORKERS * ARRAY_BYTES
    _no_worker_left(fan)


def test_installed_resets_the_globals_even_when_the_block_raises(array):
    with pytest.raises(KeyError), fork_copy_on_write.installed(array=array, rows=[[1.0, 2.0]]):
        assert fork_copy_on_write.ARRAY is array and fork_copy_on_write.ROWS == [[1.0, 2.0]]
        raise KeyError("boom")
    assert fork_copy_on_write.ARRAY is None and fork_copy_on_write.ROWS is None


def test_frozen_gc_unfreezes_even_when_the_block_raises():
    with pytest.raises(ValueError), fork_copy_on_write.frozen_gc():
        assert gc.get_freeze_count() > 0
        raise ValueError("boom")
    assert gc.get_freeze_count() == 0


def test_fan_out_refuses_unknown_tasks_and_payloads_nobody_reads(array):
    with pytest.raises(ValueError, match="unknown task"):
        fork_copy_on_write.fan_out("spawn", "no such task", 1)
    with pytest.raises(ValueError, match="needs send"):
        fork_copy_on_write.fan_out("spawn", "idle", 1, send=array)
    with pytest.raises(ValueError, match="needs send"):
        fork_copy_on_write.fan_out("spawn", "sum received array", 1)


@needs_fork
@forks_with_threads
def test_a_lock_held_by_a_thread_at_fork_time_is_never_released_in_the_child():
    with fork_copy_on_write.lock_held_by_a_thread(), mp.get_context("fork").Pool(1) as pool:
        with pytest.raises(TimeoutError, match="does not exist here"):
            pool.apply(fork_copy_on_write.take_lock, (0.2,))
    assert not fork_copy_on_write.LOCK.locked()
    with mp.get_context("fork").Pool(1) as pool:
        assert pool.apply(fork_copy_on_write.take_lock, (0.2,)) == "took the lock"


def test_rows_hold_the_same_numbers_as_python_objects(array):
    rows = fork_copy_on_write.rows_of_floats(array, 1000)
    assert len(rows) == 1000 and all(len(row) == 2 for row in rows)
    assert rows[10] == [float(array[20]), float(array[21])]
    # 8-byte pointer per row in the outer list, a 72-byte list of two, two 24-byte floats
    assert fork_copy_on_write.footprint(rows) == pytest.approx(1000 * (8 + 72 + 2 * 24), rel=0.01)


def test_tables_name_every_process_by_role_and_every_fan_out():
    fan = fork_copy_on_write.fan_out("spawn", "idle", 1, hold_seconds=0.1)
    table = fork_copy_on_write_figures.process_table(fan.held)
    assert "parent" in table and "worker 1" in table and "sum over the tree" in table
    assert str(fan.workers[0].pid) not in table and len(table.splitlines()) == 4
    growth = fork_copy_on_write_figures.growth_table({"idle spawn": fan}, ARRAY_BYTES)
    assert len(growth.splitlines()) == 2 and growth.splitlines()[1].startswith("idle spawn")
    with pytest.raises(ValueError, match="nothing was held"):
        fork_copy_on_write.fan_out("spawn", "idle", 1).growth()


def test_the_collection_plot_stacks_the_rows_on_the_kernel_and_marks_the_list_objects():
    import matplotlib.pyplot as plt

    figure = fork_copy_on_write_figures.plot_collections(30 * MiB, 28 * MiB, 0.5 * MiB, 32 * MiB)
    try:
        ax = figure.axes[0]
        widths = [(patch.get_x(), patch.get_width()) for patch in ax.patches]
        assert widths == [(0, 30), (30, 28), (0, 28), (0, 0.5)]  # the rows' lists, then the kernel's on top
        assert [line.get_xdata()[0] for line in ax.get_lines()] == [32]
        assert "32 MiB" in ax.get_legend().get_texts()[0].get_text()
    finally:
        plt.close(figure)


def test_default_start_method_is_one_this_platform_has():
    assert fork_copy_on_write.default_start_method() in mp.get_all_start_methods()
    assert fork_copy_on_write.has_fork() == ("fork" in mp.get_all_start_methods())


def test_refcount_reads_the_count_stored_in_the_object_and_naming_it_writes_it():
    numbers = [0.5, 1.5]
    before = fork_copy_on_write.refcount(numbers)
    assert before == sys.getrefcount(numbers)
    alias = numbers
    assert fork_copy_on_write.refcount(numbers) == before + 1
    del alias
    assert fork_copy_on_write.refcount(numbers) == before


@needs_fork
def test_warnings_on_fork_returns_what_forking_raised_here_and_leaves_the_filters_alone():
    import warnings

    filters_before = list(warnings.filters)
    caught = fork_copy_on_write.warnings_on_fork()
    assert all(isinstance(w, warnings.WarningMessage) for w in caught)
    if sys.version_info < (3, 12):
        assert caught == []  # os.fork() warns about threads from Python 3.12 only
    assert warnings.filters == filters_before
