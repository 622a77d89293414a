"""helpers.lessons.send_once_and_managers in real spawned pools and a real Manager: sending,
installing, proxies, timing."""

import multiprocessing as mp
import pickle
import tracemalloc

import numpy as np
import pytest

from helpers.lessons import send_once_and_managers
from helpers.measure.memory import ProcessMemory, TreeSample
from helpers.measure.timing import Timing
from helpers.measure.units import MiB

SPAWN = mp.get_context("spawn")


@pytest.fixture(autouse=True)
def no_child_outlives_the_test():
    yield
    send_once_and_managers.uninstall()
    assert mp.active_children() == []


@pytest.fixture(scope="module")
def sequence():
    return send_once_and_managers.ListSequence(list(send_once_and_managers.make_block(MiB // 4, seed=3)))


def test_make_block_holds_whole_items_and_at_least_one_batch():
    block = send_once_and_managers.make_block(MiB)
    assert block.shape == (MiB // send_once_and_managers.ITEM_BYTES, send_once_and_managers.ITEM_FLOATS)
    assert block.dtype == np.float64 and 0 < block.min() and block.max() < 1
    assert send_once_and_managers.make_block(1).shape[0] == send_once_and_managers.BATCH_ITEMS


def test_list_sequence_builds_batches_and_refuses_out_of_range(sequence):
    items = sequence.items
    assert len(sequence) == len(items) // send_once_and_managers.BATCH_ITEMS
    np.testing.assert_array_equal(sequence[1], np.stack(items[8:16]))
    short = send_once_and_managers.ListSequence(items[:10], batch_size=4)
    assert len(short) == 3 and short[2].shape == (2, send_once_and_managers.ITEM_FLOATS)
    with pytest.raises(IndexError, match="out of range"):
        short[3]
    with pytest.raises(ValueError, match="batch_size"):
        send_once_and_managers.ListSequence(items, batch_size=0)


def test_sent_with_every_task_and_installed_once_give_the_same_sums(sequence):
    expected = [float(sequence[i].sum()) for i in range(len(sequence))]
    with SPAWN.Pool(2) as pool:
        sent = [pool.apply(send_once_and_managers.batch_sum, (sequence, i)) for i in range(len(sequence))]
        with pytest.raises(LookupError, match="nothing is installed"):
            pool.apply(send_once_and_managers.installed_batch_sum, (0,))
    with SPAWN.Pool(2, initializer=send_once_and_managers.install, initargs=(sequence,)) as pool:
        assert len(send_once_and_managers.answers_from_every_worker(pool, 2)) == 2
        installed = pool.map(send_once_and_managers.installed_batch_sum, range(len(sequence)))
        timing = send_once_and_managers.seconds_per_task(pool, send_once_and_managers.installed_batch_sum,
                                                         [(0,)] * 4)
    assert sent == pytest.approx(expected) and installed == pytest.approx(expected)
    assert len(timing.runs) == 3 and timing.min > 0


def test_a_worker_change_stays_in_that_worker(sequence):
    with send_once_and_managers.installed_pool(SPAWN, 2, sequence) as pool:
        changer, length = pool.apply(send_once_and_managers.shrink_installed,
                                     (send_once_and_managers.BATCH_ITEMS,))
        seen = send_once_and_managers.answers_from_every_worker(
            pool, 2, send_once_and_managers.installed_length_after_pause
        )
    assert length == 1 and seen[changer] == 1
    assert [n for pid, n in seen.items() if pid != changer] == [len(sequence)]
    assert len(sequence) == len(sequence.items) // send_once_and_managers.BATCH_ITEMS


class FromMain:
    """Stands for a class defined in a notebook cell."""


FromMain.__module__ = "__main__"


def from_main():
    """Stands for a function defined in a notebook cell."""


from_main.__module__ = "__main__"


def test_installed_pool_refuses_main_module_objects_when_main_cannot_be_imported(monkeypatch, sequence):
    monkeypatch.setattr(send_once_and_managers, "_main_is_importable", lambda: False)
    for obj in (FromMain(), [1, {"f": from_main}], FromMain):
        with pytest.raises(TypeError, match="defined in __main__"):
            with send_once_and_managers.installed_pool(SPAWN, 2, obj):
                pass
    send_once_and_managers.check_importable_by_workers(sequence)  # an importable class passes
    monkeypatch.setattr(send_once_and_managers, "_main_is_importable", lambda: True)
    send_once_and_managers.check_importable_by_workers(FromMain())  # a script's __main__ is importable


def test_a_manager_list_proxy_is_small_to_send_and_each_read_is_a_round_trip(sequence):
    with SPAWN.Manager() as manager:
        proxy = manager.list(sequence.items)
        assert len(pickle.dumps(proxy)) < 1024
        np.testing.assert_array_equal(send_once_and_managers.ListSequence(proxy)[1], sequence[1])
        read = send_once_and_managers.loop_read_seconds(proxy, range(20), repeat=1)
        with SPAWN.Pool(1, initializer=send_once_and_managers.install, initargs=(proxy,)) as pool:
            total = pool.apply(send_once_and_managers.installed_items_sum, ([0, 1, 2],))
            worker_read = pool.apply(send_once_and_managers.loop_read_seconds, (proxy, range(5), 1))
    assert total == pytest.approx(send_once_and_managers.items_sum(sequence.items, [0, 1, 2]))
    local = send_once_and_managers.loop_read_seconds(sequence.items, list(range(len(sequence.items))))
    assert read > 1e-6 and worker_read > 1e-6 and 0 < local < read


def test_seconds_per_task_needs_more_tasks_than_warmups():
    with pytest.raises(ValueError, match="more than warmup"):
        send_once_and_managers.seconds_per_task(None, send_once_and_managers.installed_length, [()], warmup=1)


def test_linear_cost_and_break_even():
    fixed, per_read = send_once_and_managers.linear_cost([0, 1, 8, 64], [1.0, 9.0, 2.0, 65.0])
    assert (fixed, per_read) == pytest.approx((1.0, 1.0))
    assert send_once_and_managers.break_even_reads(11.0, fixed, per_read) == pytest.approx(10.0)
    assert send_once_and_managers.break_even_reads(0.5, fixed, per_read) is None
    assert send_once_and_managers.break_even_reads(0.9, fixed, per_read) == 0.0  # 1.0 against 0.9: a tie
    with pytest.raises(ValueError):
        send_once_and_managers.break_even_reads(1.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        send_once_and_managers.linear_cost([4, 4], [1.0, 2.0])


def test_descendants_pss_leaves_this_process_out():
    import os

    def sample(own, child):
        processes = {os.getpid(): ProcessMemory(own, own, own), 1: ProcessMemory(child, child, child)}
        return TreeSample(time=0.0, processes=processes, shm=0, cgroup=None)

    assert send_once_and_managers.descendants_pss([sample(100, 7), sample(500, 9), sample(1, 8)]) == 8
    with pytest.raises(ValueError):
        send_once_and_managers.descendants_pss([])


def test_format_table_aligns_columns():
    text = send_once_and_managers.format_table([{"way": "a", "cost": "1 ms"},
                                                {"way": "longer", "cost": "2 s"}])
    assert text.splitlines() == ["way     cost", "------  ----", "a       1 ms", "longer  2 s"]


def test_resend_memory_splits_the_peak_and_what_stays_between_this_process_and_the_workers():
    import os

    from helpers.measure.memory import MemoryReport

    def sample(time, own, worker):
        processes = {os.getpid(): ProcessMemory(own, own, own), 1: ProcessMemory(worker, worker, worker)}
        return TreeSample(time=time, processes=processes, shm=0, cgroup=None)

    report = MemoryReport(interval=0.1)
    report.samples = [sample(0, 100, 0), sample(1, 100, 50), sample(2, 100, 50),  # before, then the idle pool
                      sample(3, 230, 190), sample(4, 130, 300), sample(5, 120, 250), sample(6, 120, 250)]
    report.marks = {"pool idle": 1, "pool idle ends": 2, "largest per task": 3, "tasks done": 5,
                    "tasks done ends": 6}
    memory = send_once_and_managers.resend_memory(report)
    assert (memory.idle_pool, memory.worst, memory.worst_parent) == (50, 280, 30)  # the worst: 130 + 300
    assert (memory.after, memory.after_parent, memory.workers_after) == (220, 20, 200)


def test_tree_worst_is_the_whole_trees_highest_sample_between_two_marks_above_the_first():
    import os

    from helpers.measure.memory import MemoryReport

    def sample(time, own, worker):
        processes = {os.getpid(): ProcessMemory(own, own, own), 1: ProcessMemory(worker, worker, worker)}
        return TreeSample(time=time, processes=processes, shm=0, cgroup=None)

    report = MemoryReport(interval=0.1)
    report.samples = [sample(0, 100, 0), sample(1, 300, 100), sample(2, 150, 400), sample(3, 900, 900)]
    report.marks = {"start": 1, "held": 2, "later": 3}
    assert send_once_and_managers.tree_worst(report, "start", "held") == 450  # 150 + 400 - 100
    with pytest.raises(ValueError):
        send_once_and_managers.tree_worst(report, "held", "start")
    # this process's share at that worst moment (150 + 400), above its first sample (100)
    assert send_once_and_managers.own_share_at_worst(report, "start", "held") == 50
    with pytest.raises(ValueError):
        send_once_and_managers.own_share_at_worst(report, "held", "start")


def test_install_pays_back_its_extra_start_up_by_what_each_task_saves():
    from helpers.lessons import send_once_and_managers_figures as figures

    assert send_once_and_managers.tasks_to_pay_back(0.72, 0.4) == pytest.approx(1.8)
    assert send_once_and_managers.tasks_to_pay_back(0.72, 0.0) is None
    empty = Timing((0.21, 0.22, 0.25))
    assert figures.start_up_over(Timing((0.9, 0.95, 1.0)), empty) == "+690 ms start-up"
    assert figures.start_up_over(Timing((0.2, 0.24, 0.3)), empty) == "within an empty pool's spread (10 ms)"
    assert figures.start_up_added(Timing((0.2, 0.24, 0.3)), empty) is None


def test_start_ups_of_an_empty_pool_and_of_pools_installing_each_object_are_timed_in_turn():
    empty, installing = send_once_and_managers.seconds_to_start_installing(SPAWN, 2, [None, [1.0]], repeat=2)
    assert [len(timing.runs) for timing in [empty, *installing]] == [2, 2, 2]
    assert all(run > 0 for timing in [empty, *installing] for run in timing.runs)


def test_seconds_to_start_times_each_empty_pool_until_every_worker_answers():
    timing = send_once_and_managers.seconds_to_start(SPAWN, 2, repeat=2)
    assert len(timing.runs) == 2 and all(run > 0 for run in timing.runs)


def test_pss_between_exact_reads_carries_each_process_by_its_rss_change():
    import os

    from helpers.measure.memory import MemoryReport

    own = os.getpid()

    def sample(time, own_rss, own_pss, worker_rss, worker_pss, exact):
        processes = {own: ProcessMemory(own_rss, own_pss, own_pss),
                     1: ProcessMemory(worker_rss, worker_pss, worker_pss)}
        return TreeSample(time=time, processes=processes, shm=0, cgroup=None, exact=exact)

    samples = [sample(0, 150, 100, 80, 50, True),
               sample(1, 150, 100, 380, 50, False),  # the worker received 300 bytes: its PSS was not re-read
               sample(2, 150, 100, 180, 150, True)]
    assert send_once_and_managers.pss_between_exact_reads(samples) == [
        {own: 100, 1: 50}, {own: 100, 1: 350}, {own: 100, 1: 150}]
    parent = ProcessMemory(150 * MiB, 100 * MiB, 100 * MiB)
    before_exec = ProcessMemory(151 * MiB, 100 * MiB, 100 * MiB)  # a child before its exec: this process's
    starting = [TreeSample(time=0, processes={own: parent, 2: before_exec}, shm=0, cgroup=None),
                TreeSample(time=1, processes={own: parent, 2: ProcessMemory(20 * MiB, 100 * MiB, 100 * MiB)},
                           shm=0, cgroup=None, exact=False)]
    assert send_once_and_managers.pss_between_exact_reads(starting) == [{own: 100 * MiB, 2: 0},
                                                                       {own: 100 * MiB, 2: 0}]
    report = MemoryReport(interval=0.1)
    report.samples = [sample(0, 150, 100, 80, 50, True), sample(1, 150, 100, 80, 50, False),
                      sample(2, 250, 200, 80, 50, True),
                      sample(3, 250, 200, 380, 50, False),  # the peak, seen in RSS only
                      sample(4, 200, 150, 180, 150, True), sample(5, 200, 150, 180, 150, False)]
    report.marks = {"pool idle": 0, "pool idle ends": 1, "largest per task": 2, "tasks done": 4,
                    "tasks done ends": 5}
    memory = send_once_and_managers.resend_memory(report)
    assert (memory.worst, memory.worst_parent, memory.after, memory.after_parent) == (400, 100, 150, 50)


def test_the_memory_plot_draws_a_peak_seen_in_rss_only():
    """Section 5's plot draws what section 1's Found reads: PSS carried between exact reads by RSS."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers.lessons import send_once_and_managers_figures as figures
    from helpers.measure.memory import MemoryReport

    def sample(time, rss, pss, exact):
        return TreeSample(time=time, processes={1: ProcessMemory(rss, pss, pss)}, shm=0, cgroup=None,
                          exact=exact)

    report = MemoryReport(interval=0.1)
    report.samples = [sample(0, 80 * MiB, 50 * MiB, True), sample(1, 380 * MiB, 50 * MiB, False),
                      sample(2, 180 * MiB, 150 * MiB, True)]
    report.process_labels = {1: "worker 1"}
    carried = figures.pss_carried_by_rss(report)
    assert [s.pss for s in carried.samples] == [50 * MiB, 350 * MiB, 150 * MiB]
    assert [s.rss for s in carried.samples] == [s.rss for s in report.samples]
    assert [s.pss for s in report.samples] == [50 * MiB, 50 * MiB, 150 * MiB]  # the report is left as it was
    fig = figures.plot_memory({"sent": report})
    tree = next(line for line in fig.axes[0].lines if line.get_label() == "tree PSS")
    assert max(tree.get_ydata()) == 350
    plt.close(fig)
    report.marks = {"held": 0.5, "held ends": 1.5}  # labelled above the axes, its end shaded instead
    fig = figures.plot_memory({"sent": report})
    assert [(text.get_text(), text.xyann) for text in fig.axes[0].texts] == [("held", (0.5, 1.0))]
    plt.close(fig)


def test_pickling_peak_counts_the_pickle_and_stops_tracing(sequence):
    size, peak = send_once_and_managers.pickling_peak((sequence, 0))
    assert size >= MiB // 4  # the sequence's 256 KiB of items travel in it
    assert peak >= size
    assert not tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        with pytest.raises(RuntimeError, match="already tracing"):
            send_once_and_managers.pickling_peak((sequence, 0))
    finally:
        tracemalloc.stop()
