"""track_memory measured against real processes, real shared memory and real copies."""

import multiprocessing as mp
import os
import time
import tracemalloc
from multiprocessing import shared_memory

import numpy as np
import pytest

from helpers.lessons import workers
from helpers.measure.memory import (
    BURST_CPU_SECONDS,
    DEFAULT_INTERVAL,
    MAX_CPU_SHARE,
    TARGET_CPU_SHARE,
    MemoryReport,
    TreeSample,
    _TreeSampler,
    track_memory,
)
from helpers.measure.proctree import ProcessMemory
from helpers.measure.units import MiB

ARRAY_BYTES = 96 * MiB
SPAWN = mp.get_context("spawn")
HOLD_SECONDS = 1.0  # a steady state needs several samples; an exact PSS read of a big tree is slow


def _hold_in_workers(target, args_for_worker, n_workers, report, label):
    """Start ``n_workers`` processes running ``target(*args, ready, release)``; mark the hold.

    Returns the steady state of the tree while every worker holds, then ends the workers.
    """
    release = SPAWN.Event()
    readies = [SPAWN.Event() for _ in range(n_workers)]
    processes = [
        SPAWN.Process(target=target, args=(*args_for_worker, ready, release)) for ready in readies
    ]
    try:
        for process in processes:
            process.start()
        for ready in readies:
            assert ready.wait(60), "a worker did not become ready"
        time.sleep(0.1)
        report.mark(f"{label} holding")
        time.sleep(HOLD_SECONDS)
        report.mark(f"{label} end")
    finally:
        release.set()
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join()
    time.sleep(0.05)


def _steady(report, label):
    return report.steady(f"{label} holding", f"{label} end")


def _random_segment(n_bytes):
    segment = shared_memory.SharedMemory(create=True, size=n_bytes)
    view = np.ndarray((n_bytes // 8,), dtype=np.float64, buffer=segment.buf)
    np.random.default_rng(1).random(out=view)  # filled in place: no temporary array
    del view
    return segment


@pytest.mark.parametrize("n_workers", [2, 4])
def test_readers_of_one_segment_count_once_in_tree_pss_but_n_times_in_rss(n_workers):
    segment = _random_segment(ARRAY_BYTES)
    segment_name = segment.name
    segment.close()  # the parent unmaps it: only the workers map it, /dev/shm still holds it
    try:
        with track_memory(trace_python=False) as report:
            _hold_in_workers(workers.allocate_and_hold, (0,), n_workers, report, "idle")
            _hold_in_workers(workers.hold_shared_segment, (segment_name,), n_workers, report, "shared")
        idle, shared = _steady(report, "idle"), _steady(report, "shared")
    finally:
        shared_memory.SharedMemory(name=segment_name).unlink()
    pss_of_array = shared.pss - idle.pss
    rss_of_array = shared.rss - idle.rss
    print(f"N={n_workers}: tree PSS +{pss_of_array / MiB:.1f} MiB, RSS sum +{rss_of_array / MiB:.1f} MiB")
    assert pss_of_array == pytest.approx(ARRAY_BYTES, rel=0.2)
    assert rss_of_array == pytest.approx(n_workers * ARRAY_BYTES, rel=0.2)


def test_pickled_copies_count_once_per_worker_in_tree_pss():
    n_workers = 2
    array = np.random.default_rng(2).random(ARRAY_BYTES // 8)
    with track_memory(trace_python=False) as report:
        _hold_in_workers(workers.allocate_and_hold, (0,), n_workers, report, "idle")
        _hold_in_workers(workers.hold_array, (array,), n_workers, report, "copies")
    pss_of_copies = _steady(report, "copies").pss - _steady(report, "idle").pss
    print(f"{n_workers} pickled copies: tree PSS +{pss_of_copies / MiB:.1f} MiB")
    assert pss_of_copies == pytest.approx(n_workers * ARRAY_BYTES, rel=0.2)


def test_a_mark_makes_the_next_sample_exact_so_shared_pages_are_not_counted_twice():
    """A reader attaching our segment halves our PSS without moving our RSS: a sample that carries
    our old PSS over counts the shared half twice. Out of CPU budget, the sampler would carry it
    over; a mark makes the next sample read it afresh anyway."""
    segment = _random_segment(32 * MiB)  # mapped and touched here
    report = MemoryReport(interval=DEFAULT_INTERVAL)
    sampler = _TreeSampler(report)
    release, ready = SPAWN.Event(), SPAWN.Event()
    reader = SPAWN.Process(target=workers.hold_shared_segment, args=(segment.name, ready, release))
    try:
        sampler.sample(exact=True)  # this process alone, holding all 32 MiB
        reader.start()
        assert ready.wait(60)
        no_budget = {"change_allowed": False, "refresh_allowed": False}
        carried = sampler.sample(**no_budget)  # the reader is read once, on its own; we are not
        report.mark("reader holds")
        marked = sampler.sample(**no_budget)
        after = sampler.sample(**no_budget)
    finally:
        release.set()
        reader.join(30)
        sampler.files.close()
        segment.close()
        segment.unlink()
    assert not carried.exact and marked.exact and not after.exact
    print(f"carried over: tree PSS {carried.pss / MiB:.1f} MiB, exact: {marked.pss / MiB:.1f} MiB")
    # At least the reader's half of the segment was counted twice (shared library pages too).
    assert carried.pss - marked.pss >= 0.8 * 16 * MiB


def test_steady_takes_pss_and_uss_from_exact_samples_and_rss_from_all():
    report = MemoryReport(interval=DEFAULT_INTERVAL)
    report.marks.update({"start": 0.0, "end": 1.0})
    for time_s, rss, pss, exact in ((0.1, 10, 90, False), (0.2, 20, 90, False), (0.3, 30, 40, True),
                                    (0.4, 40, 90, False), (0.5, 50, 50, True)):
        report.samples.append(TreeSample(time_s, {1: ProcessMemory(rss, pss, pss)}, shm=0, cgroup=None,
                                         exact=exact))
    steady = report.steady("start", "end")
    assert (steady.rss, steady.pss, steady.uss, steady.samples) == (30, 45, 45, 5)
    assert report.steady("start", "end", exact_only=True).rss == 40
    report.samples[2:] = []  # no exact sample in the window: carried-over figures are all there is
    assert report.steady("start", "end").pss == 90


def test_a_child_started_after_tracking_began_is_seen():
    with track_memory(trace_python=False) as report:
        time.sleep(0.05)
        release, ready = SPAWN.Event(), SPAWN.Event()
        child = SPAWN.Process(target=workers.allocate_and_hold, args=(32 * MiB, ready, release))
        child.start()
        try:
            assert ready.wait(60)
            report.mark("child holds")  # the sampler's next sample reads PSS exactly
            time.sleep(HOLD_SECONDS)
            deadline = time.monotonic() + 30  # a busy CPU may hold the sampler's thread back
            while not any(s.exact and child.pid in s.processes for s in report.window("child holds")):
                assert time.monotonic() < deadline, "no exact sample of the holding child in 30 s"
                time.sleep(0.05)
        finally:
            release.set()
            child.join(30)
    assert child.pid in report.process_labels
    held = [s for s in report.window("child holds") if s.exact and child.pid in s.processes]
    child_pss = max(s.processes[child.pid].pss for s in held)
    assert child_pss >= 32 * MiB
    assert report.peak_pss >= report.baseline.pss + 32 * MiB


def test_sampler_costs_under_five_percent_of_one_core_at_its_default_interval():
    release = SPAWN.Event()
    readies = [SPAWN.Event() for _ in range(2)]
    children = [SPAWN.Process(target=workers.allocate_and_hold, args=(MiB, r, release)) for r in readies]
    for child in children:
        child.start()
    try:
        for ready in readies:
            assert ready.wait(60)
        with track_memory() as report:
            time.sleep(2.0)
    finally:
        release.set()
        for child in children:
            child.join(30)
    # The sampler thread measures its own CPU time (time.thread_time, nanosecond resolution).
    cpu_share = report.sampler_cpu_seconds / report.duration
    print(f"sampler: {cpu_share:.1%} of one core, {len(report.samples)} samples "
          f"({report.exact_samples} with PSS read afresh)")
    assert cpu_share < MAX_CPU_SHARE
    # A quiet tree is still sampled several times a second: reading RSS is cheap, though waking
    # a thread and reading /proc cold costs ~0.7 ms a sample on a loaded VM. PSS is re-read too.
    assert len(report.samples) >= 0.05 * 2.0 / DEFAULT_INTERVAL
    assert report.exact_samples >= 2


def test_the_sampler_samples_while_a_tree_changes():
    """Workers starting and attaching force exact reads; the CPU budget must still leave samples."""
    with track_memory(trace_python=False) as report:
        _hold_in_workers(workers.allocate_and_hold, (8 * MiB,), 4, report, "busy")
    held = report.window("busy holding", "busy end")
    assert len(held) >= 3
    assert report.exact_samples >= 3  # the workers' arrival was read exactly, not only carried over
    # The exact reads' token bucket, an invariant whatever the load: credit starts at half a
    # burst and accrues at half the target share; a read the budget may refuse starts only while
    # the debt is under half a burst, so the last one can overshoot by its own cost; reads it may
    # not refuse (marks, a process seen for the first time) are paid from the same credit later.
    budgeted = report.sampler_exact_cpu_seconds - report.sampler_forced_cpu_seconds
    bucket = (TARGET_CPU_SHARE / 2 * report.duration + BURST_CPU_SECONDS
              + report.sampler_largest_read_seconds)
    print(f"exact reads {report.sampler_exact_cpu_seconds:.3f} s (forced "
          f"{report.sampler_forced_cpu_seconds:.3f}), bucket {bucket:.3f} s, "
          f"all {report.sampler_cpu_seconds:.3f} s in {report.duration:.2f} s")
    assert budgeted <= bucket
    # The cheap RSS samples are spaced by a smoothed cost, so they have no hard bound: on a busy
    # CPU they stay within the promise's remaining share, with 20 ms for the smoothing's lag.
    cheap = report.sampler_cpu_seconds - report.sampler_exact_cpu_seconds
    assert cheap <= (MAX_CPU_SHARE - TARGET_CPU_SHARE / 2) * report.duration + 0.02


def test_tracemalloc_sees_numpy_buffers_and_shm_counter_sees_segments():
    with track_memory() as report:
        private = np.ones(16 * MiB, dtype=np.uint8)
        segment = _random_segment(16 * MiB)
        time.sleep(0.2)
    try:
        assert report.peak_tracemalloc >= 16 * MiB
        assert report.peak_tracemalloc < 24 * MiB  # the segment is not a Python-side allocation
        assert report.peak_shm >= 16 * MiB
        # The last sample is exact and this process still holds both; other memory it freed
        # meanwhile (garbage of earlier tests) may offset part of the growth.
        assert report.samples[-1].exact
        assert report.peak_uss >= report.baseline.uss + 16 * MiB
    finally:
        del private
        segment.close()
        segment.unlink()
    assert not tracemalloc.is_tracing()


def test_report_is_filled_when_the_block_raises():
    with pytest.raises(RuntimeError), track_memory() as report:
        raise RuntimeError("boom")
    assert len(report.samples) >= 2
    assert report.peak_rss > 0
    assert not tracemalloc.is_tracing()


def _child_reports_tracing(queue):
    queue.put(tracemalloc.is_tracing())


def test_forked_children_do_not_inherit_tracemalloc():
    fork = mp.get_context("fork")
    queue = fork.Queue()
    with track_memory():
        child = fork.Process(target=_child_reports_tracing, args=(queue,))
        child.start()
        tracing_in_child = queue.get(timeout=30)
        child.join(30)
    assert tracing_in_child is False


def test_timeline_and_plot_have_one_line_per_process_and_the_total():
    import matplotlib

    matplotlib.use("Agg")
    with track_memory() as report:
        release, ready = SPAWN.Event(), SPAWN.Event()
        child = SPAWN.Process(target=workers.allocate_and_hold, args=(MiB, ready, release))
        child.start()
        ready.wait(60)
        report.mark("child ready")
        time.sleep(0.1)
        release.set()
        child.join(30)
    times, per_process, totals = report.timeline("pss")
    assert len(times) == len(totals) == len(report.samples)
    assert set(per_process) == set(report.process_labels)
    ax = report.plot()
    assert len(ax.get_lines()) >= len(per_process) + 2
    with pytest.raises(ValueError, match="measure"):
        report.timeline("vss")


def test_proc_files_drop_exited_processes_and_close_every_fd():
    from helpers.measure.proctree import ProcFiles, descendant_pids, resident_bytes

    files = ProcFiles()
    release, ready = SPAWN.Event(), SPAWN.Event()
    child = SPAWN.Process(target=workers.allocate_and_hold, args=(4 * MiB, ready, release))
    child.start()
    try:
        assert ready.wait(60)
        assert child.pid in descendant_pids(os.getpid(), files)
        assert resident_bytes(child.pid, files) >= 4 * MiB
    finally:
        release.set()
        child.join(30)
    assert resident_bytes(child.pid, files) is None  # the fd of an exited process reads nothing
    assert child.pid not in descendant_pids(os.getpid(), files)
    held = len(files._fds)
    fds_open = len(os.listdir("/proc/self/fd"))
    files.close()
    assert held > 0 and len(os.listdir("/proc/self/fd")) == fds_open - held


def test_a_nested_block_keeps_the_outer_blocks_tracemalloc_peak():
    with track_memory() as outer:
        freed_before_inner = np.ones(50 * MiB, dtype=np.uint8)
        del freed_before_inner
        with track_memory() as inner:
            kept = np.ones(MiB, dtype=np.uint8)
        del kept
    assert outer.peak_tracemalloc >= 50 * MiB
    assert MiB <= inner.peak_tracemalloc < 2 * MiB
    assert not tracemalloc.is_tracing()


def test_name_roles_labels_the_parent_named_processes_and_workers_instead_of_pids():
    context = mp.get_context("spawn")
    with context.Pool(2) as pool, context.Manager() as manager:
        workers_ = [process.pid for process in pool._pool]
        manager_pid = manager._process.pid
        with track_memory(interval=0.02) as report:
            pool.map(abs, range(4))
            time.sleep(0.1)
        report.name_roles(workers=reversed(workers_), named={manager_pid: "manager"})
    labels = report.process_labels
    assert labels[os.getpid()] == "parent" and labels[manager_pid] == "manager"
    assert [labels[pid] for pid in reversed(workers_)] == ["worker 1", "worker 2"]
    others = [label for label in labels.values() if not label.startswith("worker")]
    assert not any(char.isdigit() for label in others for char in label)


def test_name_roles_keeps_forkserver_workers_given_as_workers():
    context = mp.get_context("forkserver")
    with context.Pool(2) as pool:
        workers_ = [process.pid for process in pool._pool]
        with track_memory(interval=0.02) as report:
            pool.map(abs, range(4))
            time.sleep(0.1)
        report.name_roles(workers=workers_)
    assert [report.process_labels[pid] for pid in workers_] == ["worker 1", "worker 2"]
