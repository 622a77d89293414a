"""helpers.lessons.pickler_reductions_torch and helpers.lessons.pickler_reductions_torch: what they
measure and report, at small sizes.

No timed assertions: only the shape of the results, that the arrays came back whole, that the
floors are positive, and that nothing is left behind.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

from helpers.lessons import pickler_reductions_torch
from helpers.measure.units import MiB
from sharedarrays import reducers

SPAWN = mp.get_context("spawn")


def test_reduction_of_names_the_way_each_how_uses():
    assert [pickler_reductions_torch.reduction_of(how) for how in pickler_reductions_torch.HOWS] == [
        None, "torch", "torch", "shared_memory", "shared_memory"]
    with pytest.raises(ValueError, match="how must be one of"):
        pickler_reductions_torch.reduction_of("carrier pigeon")


@pytest.mark.parametrize("how", pickler_reductions_torch.HOWS)
def test_local_round_trip_reports_first_and_warm_runs_and_undoes_the_reduction(how):
    array = np.random.default_rng(0).random(50_000)
    trip = pickler_reductions_torch.local_round_trip_seconds(array, how, repeat=3)
    assert trip.first > 0 and len(trip.runs) == 3 and trip.median == trip.warm.median
    assert reducers.active_way() is None


def test_the_table_has_a_row_per_size_how_and_place_with_ratios_to_both_floors():
    sizes = [MiB // 4, MiB]
    rows = pickler_reductions_torch.round_trip_table(sizes,
                                                  hows=["pickle", "shared_memory", "shared_memory_shared"],
                                                  repeat=2, mp_context=SPAWN)
    assert len(rows) == 2 * 3 * 2
    assert {(row["size_bytes"], row["how"], row["where"]) for row in rows} == {
        (size, how, where) for size in sizes for how in ("pickle", "shared_memory", "shared_memory_shared")
        for where in ("local", "remote")}
    for row in rows:
        assert set(row) == {"how", "size_bytes", "where", "first_s", "median_s", "runs_s",
                            "ratio_to_warm_floor", "ratio_to_fresh_floor", "warm_floor_s", "fresh_floor_s",
                            "fresh_floor_runs_s", "segments_new", "segments_reused"}
        if row["how"] == "shared_memory":  # the pool's own counters: the cold call's segment is new
            assert row["segments_new"] >= 1 and row["segments_new"] + row["segments_reused"] == 3
        else:
            assert row["segments_new"] is None and row["segments_reused"] is None
        assert len(row["runs_s"]) == 2 and row["warm_floor_s"] > 0 and row["fresh_floor_s"] > 0
        # every run of floor (b), before and after the size's trips; the floor reported is a median of them
        runs = row["fresh_floor_runs_s"]
        assert len(runs) >= 2 and all(run > 0 for run in runs)
        assert min(runs) <= row["fresh_floor_s"] <= max(runs)
        assert row["ratio_to_warm_floor"] == pytest.approx(row["median_s"] / row["warm_floor_s"])
    assert reducers.active_way() is None


def test_a_remote_round_trip_through_torch_brings_the_array_back():
    array = np.random.default_rng(1).random(30_000)
    with pickler_reductions_torch.EchoWorker("torch", SPAWN) as worker:
        first = worker.round_trip_seconds(array, "torch", repeat=2)
        shared = worker.round_trip_seconds(array, "torch_shared", repeat=2)
        with pytest.raises(ValueError, match="this worker shares"):
            worker.round_trip_seconds(array, "shared_memory", repeat=1)
    assert len(first.runs) == len(shared.runs) == 2


def test_file_descriptors_run_out_under_file_descriptor_sharing_not_under_file_system():
    by_fd, by_name, torch_free = pickler_reductions_torch.keep_many_arrays(SPAWN, n_arrays=120,
                                                                           nofile_limit=48)
    assert by_fd.strategy == "file_descriptor" and by_fd.ran_out_of_descriptors
    assert 0 < by_fd.n_kept < 120 and by_fd.torch_names_while_held == 0
    assert by_name.strategy == "file_system" and by_name.error == "" and by_name.n_kept == 120
    assert by_name.torch_names_while_held >= 120 and by_name.torch_names_after == 0
    assert torch_free.strategy == pickler_reductions_torch.TORCH_FREE
    assert torch_free.torch_names_while_held == 0
    if sys.version_info < (3, 13):  # mmap keeps a duplicate descriptor per mapping: it runs out too
        assert torch_free.ran_out_of_descriptors and 0 < torch_free.n_kept < 120, torch_free
    else:
        assert torch_free.error == "" and torch_free.n_kept == 120, torch_free


def test_the_segment_pool_keeps_given_back_segments_in_dev_shm_until_sharing_stops():
    array = np.random.default_rng(2).random(MiB // 8)
    with reducers.sharing_arrays("shared_memory"):
        received = ForkingPickler.loads(ForkingPickler.dumps(array))
        segments = reducers.shared_memory_pool()
        names = segments.names()
        lent = pickler_reductions_torch.segment_bytes_in_shm(names)
        assert lent >= array.nbytes and segments.lent_bytes >= array.nbytes
        del received  # its last view: the segment is given back
        idle = pickler_reductions_torch.collect_given_back(segments, timeout=2.0)
        assert idle >= array.nbytes and segments.lent_bytes == 0
        assert pickler_reductions_torch.segment_bytes_in_shm(names) == lent  # kept, warm
    assert pickler_reductions_torch.segment_bytes_in_shm(names) == 0
    assert pickler_reductions_torch.segment_bytes_in_shm(["no_such_segment_here"]) == 0


def test_working_lines_keep_the_lines_named_and_their_continuations():
    def example(a,
                b):
        """Docstring."""
        total = (a +
                 b)
        ignored = 1
        return total, ignored

    cut = "        ...  # (lines cut)"
    assert pickler_reductions_torch.working_lines(example, ("def ", "total = ", "return")).splitlines() == [
        "    def example(a,", "                b):", cut, "        total = (a +", "                 b)", cut,
        "        return total, ignored"]
    before_ignored = pickler_reductions_torch.working_lines(example, ("def ", "total = ", "return"),
                                                            until="ignored")
    assert before_ignored.splitlines() == [
        "    def example(a,", "                b):", cut, "        total = (a +", "                 b)", cut]
    assert "(lines cut)" not in pickler_reductions_torch.working_lines(example, ("def ", '"""', "total = ",
                                                                                 "ignored", "return"))


def test_the_round_trip_table_gives_the_cold_call_over_floor_b():
    rows = [{"how": "shared_memory", "where": "local", "size_bytes": MiB, "first_s": 0.09, "median_s": 0.01,
             "runs_s": [0.01], "ratio_to_warm_floor": 1.0, "ratio_to_fresh_floor": 0.1,
             "warm_floor_s": 0.01, "fresh_floor_s": 0.1}]
    lines = pickler_reductions_torch.format_round_trips(rows, MiB).splitlines()
    assert lines[1].split()[-4:] == ["(b)", "cold", "÷", "(b)"] and lines[2].endswith("0.90×"), lines
    assert lines[2].split()[-3:-1] == ["~1.0×", "0.10×"], lines  # within 5% of a floor: equal within noise
    shared = pickler_reductions_torch.format_round_trips([{**rows[0], "how": "shared_memory_shared"}], MiB)
    assert shared.splitlines()[2].split()[-3:] == ["—", "—", "—"], shared  # no copy: no ratio to a floor


def test_the_medians_table_has_a_column_per_size_and_the_floors_first():
    rows = [{"how": "pickle", "where": where, "size_bytes": size, "first_s": 0.09, "median_s": seconds,
             "runs_s": [seconds], "ratio_to_warm_floor": 1.0, "ratio_to_fresh_floor": 0.1,
             "warm_floor_s": 0.001 * size / MiB, "fresh_floor_s": 0.01 * size / MiB}
            for where, seconds in (("local", 0.02), ("remote", 0.05)) for size in (MiB, 4 * MiB)]
    lines = pickler_reductions_torch.format_medians_by_size(rows).splitlines()
    assert lines[0].split()[-4:] == ["1", "MiB", "4", "MiB"], lines
    assert lines[1].endswith("1 ms      4 ms") and lines[2].endswith("10 ms     40 ms"), lines
    assert lines[3].startswith("stdlib pickle, local") and lines[4].endswith("50 ms     50 ms"), lines
    assert len(lines) == 5


def test_segment_names_are_left_out_of_a_message():
    message = "gone: segment 'sal_10173_ns1ulajuk_lbbm9a2q8w' no longer exists. Receive it first."
    assert pickler_reductions_torch.without_segment_names(message) == (
        "gone: segment no longer exists. Receive it first.")
