"""helpers.lessons.pickle_baseline and the workers lesson 02 adds, in real spawned children and real pipes."""

import multiprocessing as mp
import pickle
import sys
import threading
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from helpers.lessons import pickle_baseline, workers
from helpers.measure.units import MiB

SPAWN = mp.get_context("spawn")


@pytest.fixture(autouse=True)
def no_child_outlives_the_test():
    yield
    assert mp.active_children() == []


def _random(n_bytes: int) -> np.ndarray:
    return np.random.default_rng(1).random(n_bytes // 8)


def _through_a_pipe(obj, send, receive):
    """Send ``obj`` from a thread, receive it here (a pipe blocks past 64 KiB without a reader)."""
    receiver, sender = mp.Pipe(duplex=False)
    thread = threading.Thread(target=send, args=(sender, obj))
    thread.start()
    try:
        return receive(receiver)
    finally:
        thread.join()
        sender.close()
        receiver.close()


def test_breakdown_times_every_stage_and_sizes_the_payload():
    array = _random(MiB)
    breakdown = pickle_baseline.pickle_cost_breakdown(array, SPAWN, repeat=2)
    assert set(breakdown.stages) == {"pickle.dumps", "pipe", "pickle.loads"}
    assert all(seconds > 0 for seconds in breakdown.stages.values())
    assert breakdown.total == pytest.approx(sum(breakdown.stages.values()))
    assert array.nbytes < breakdown.payload_bytes < array.nbytes + 1024
    assert len(breakdown.pipe.runs) == 2


def test_out_of_band_dumps_copies_nothing_and_loads_shares_the_memory():
    array = _random(MiB)
    data, buffers = pickle_baseline.dumps_out_of_band(array)
    assert len(data) < 1024
    assert [b.raw().nbytes for b in buffers] == [array.nbytes]
    rebuilt = pickle.loads(data, buffers=buffers)
    assert np.shares_memory(rebuilt, array)
    assert np.array_equal(rebuilt, array)


@pytest.mark.parametrize("direct", [False, True])
def test_out_of_band_over_a_pipe_rebuilds_nested_arrays_exactly(direct):
    original = {
        "big": _random(MiB),
        "fortran": np.asfortranarray(_random(64 * 1024).reshape(64, -1)),
        "strided": _random(64 * 1024)[::3],  # not contiguous: travels in band
        "dates": np.arange(1000).astype("datetime64[s]"),
        "label": "kept in the pickle",
    }
    received = _through_a_pipe(
        original, pickle_baseline.send_out_of_band,
        lambda c: pickle_baseline.recv_out_of_band(c, direct=direct)
    )
    assert received["label"] == original["label"]
    for key in ("big", "fortran", "strided", "dates"):
        assert received[key].dtype == original[key].dtype
        assert np.array_equal(received[key], original[key])
    assert received["fortran"].flags.f_contiguous
    assert received["big"].flags.writeable


def test_read_message_into_fills_the_buffer_from_a_large_message():
    payload = np.random.default_rng(2).integers(0, 255, 3 * MiB + 5, dtype=np.uint8)
    target = np.zeros_like(payload)
    size = _through_a_pipe(
        payload, lambda c, p: c.send_bytes(p), lambda c: pickle_baseline.read_message_into(c, target)
    )
    assert size == payload.nbytes
    assert np.array_equal(target, payload)


def test_read_message_into_refuses_a_buffer_too_small():
    receiver, sender = mp.Pipe(duplex=False)
    try:
        sender.send_bytes(b"x" * 100)
        with pytest.raises(ValueError, match="does not fit"):
            pickle_baseline.read_message_into(receiver, bytearray(10))
    finally:
        sender.close()
        receiver.close()


def test_sum_server_answers_every_transfer_with_the_sum_and_stops():
    array = _random(2 * MiB)
    part = array[: len(array) // 3]
    with pickle_baseline.sum_server(SPAWN) as ask:
        for transfer in pickle_baseline.TRANSFERS:
            assert np.isclose(ask(array, transfer), array.sum())
            assert np.isclose(ask(part, transfer), part.sum())


def test_unknown_transfer_is_refused_before_anything_is_sent():
    with pickle_baseline.sum_server(SPAWN) as ask:
        with pytest.raises(ValueError, match="transfer must be one of"):
            ask(np.ones(3), "carrier pigeon")
        assert ask(np.ones(3), pickle_baseline.PICKLED) == 3.0


def test_unpickle_error_names_what_the_worker_cannot_find():
    missing = b"chelpers.lessons.workers\nno_such_function\n."  # a protocol-0 reference to a missing name
    with ProcessPoolExecutor(1, mp_context=SPAWN) as executor:
        error = executor.submit(pickle_baseline.unpickle_error, missing).result()
        fine = executor.submit(pickle_baseline.unpickle_error, pickle.dumps(workers.echo)).result()
    assert error.startswith("AttributeError: Can't get attribute 'no_such_function'")
    assert fine == ""


def test_pss_rise_rise_order_and_rises_at_tree_peak_read_each_role_above_its_median_before_the_mark():
    from helpers.measure.memory import MemoryReport, TreeSample
    from helpers.measure.proctree import ProcessMemory

    def sample(time, parent_pss, worker_pss):
        processes = {1: ProcessMemory(rss=0, uss=0, pss=parent_pss),
                     2: ProcessMemory(rss=0, uss=0, pss=worker_pss)}
        return TreeSample(time=time, processes=processes, shm=0, cgroup=None)

    samples = [sample(0.0, 100, 5), sample(0.1, 104, 5), sample(0.2, 300, 50), sample(0.3, 220, 90),
               sample(0.5, 900, 5)]
    report = MemoryReport(interval=0.01, samples=samples)
    report.marks.update({"send": 0.15, "all holding": 0.35})
    report.process_labels.update({1: "parent", 2: "worker 1"})
    assert pickle_baseline.pss_rise(report, "parent", "send", "all holding") == 300 - 102
    assert pickle_baseline.pss_rise(report, "worker 1", "send", "all holding") == 90 - 5
    assert pickle_baseline.pss_rise(report, "parent", "send", "all holding", statistic=min) == 220 - 102
    assert pickle_baseline.rise_order(report, "send", "all holding", 50) == ["parent", "worker 1"]
    assert pickle_baseline.rise_order(report, "send", "all holding", 150) == ["parent"]
    assert pickle_baseline.rise_order(report, "send", "all holding", 500) == []
    # the tree's highest sample in the window is the one at 0.2 s (350 bytes), not 0.3 s (310)
    assert pickle_baseline.rises_at_tree_peak(report, "send", "all holding") == {
        "parent": 300 - 102, "worker 1": 50 - 5}
    # the process that rose half its array first is numbered first, whatever order it was started in
    assert pickle_baseline.in_order_received(report, [2, 1], "send", 50) == [1, 2]  # 0.2 s, then 0.3 s
    assert pickle_baseline.in_order_received(report, [2, 1], "send", 150) == [1, 2]  # 2 never: last
    assert pickle_baseline.in_order_received(report, [2, 1], "send", 1000) == [2, 1]  # neither: as given


def test_all_holding_marks_the_first_exact_sample_that_shows_every_worker_holding_its_copy():
    """The plot's "all holding" line sits where the workers' lines reach their copies, not one
    carried-over sample before."""
    array = _random(32 * MiB)
    report = pickle_baseline.track_memory_while_workers_hold(SPAWN, 2, array)
    at = report.window("all holding")[0]
    assert at.exact and at.time == report.marks["all holding"]
    for role in ("worker 1", "worker 2"):
        pid = next(pid for pid, name in report.process_labels.items() if name == role)
        before = min(sample.processes[pid].pss for sample in report.window(0.0, "send")
                     if pid in sample.processes)
        assert at.processes[pid].pss - before >= 0.75 * array.nbytes, role


def test_pipe_capacity_is_a_whole_number_of_pages_or_unknown():
    capacity = pickle_baseline.pipe_capacity()
    if sys.platform.startswith("linux"):
        assert capacity is not None and capacity >= 4096 and capacity % 4096 == 0, capacity
    else:
        assert capacity is None or capacity > 0
