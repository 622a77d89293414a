"""helpers.lessons.pickler_reductions_torch and helpers.lessons.pickler_reductions_torch: what they
measure and report, at small sizes.

No timed assertions: only the shape of the results, that the arrays came back whole, that the
floors are positive, and that nothing is left behind.
"""

from __future__ import annotations

import multiprocessing as mp

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
                            "ratio_to_warm_floor", "ratio_to_fresh_floor", "warm_floor_s", "fresh_floor_s"}
        assert len(row["runs_s"]) == 2 and row["warm_floor_s"] > 0 and row["fresh_floor_s"] > 0
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
    by_fd, by_name = pickler_reductions_torch.keep_many_torch_arrays(SPAWN, n_arrays=120, nofile_limit=48)
    assert by_fd.strategy == "file_descriptor" and by_fd.ran_out_of_descriptors
    assert 0 < by_fd.n_kept < 120 and by_fd.torch_names_while_held == 0
    assert by_name.strategy == "file_system" and by_name.error == "" and by_name.n_kept == 120
    assert by_name.torch_names_while_held >= 120 and by_name.torch_names_after == 0
