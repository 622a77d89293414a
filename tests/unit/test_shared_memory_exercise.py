"""Lesson 07's "Your turn" on a real measurement (fresh interpreters attaching a real segment): a wrong
prediction fails the check cell with a hint, the worked solution passes. Also the lesson's table
demonstrations (helpers.lessons.shared_memory_tables), with real processes."""

import multiprocessing as mp
import tracemalloc

import numpy as np
import pytest
from exercise_asserts import (
    assert_misconception_rejected,
    assert_worked_solution_passes,
    assert_wrong_answer_fails,
)

from helpers.lessons import shared_memory, shared_memory_tables
from helpers.measure.timing import Timing
from helpers.measure.units import MiB
from sharedarrays.shm import SharedNDArray

pytestmark = pytest.mark.timeout(120)
SPAWN = mp.get_context("spawn")
N_WORKERS, ARRAY_BYTES = 2, 16 * MiB


@pytest.fixture(scope="module")
def measured():
    """Which of the exercise's children, each in a fresh interpreter, left our segment in /dev/shm."""
    kept = set()
    for way in shared_memory.EXERCISE_WAYS:
        with SharedNDArray.copy_of(np.random.default_rng(1).random(1000)) as shared:
            if shared_memory.attach_and_exit(shared.handle, way).segment_exists_after:
                kept.add(way)
    return {"kept": frozenset(kept)}


@pytest.mark.parametrize("wrong, hint", [
    ({"stdlib", "by_hand", "sharedarrays", "our_worker"}, "our segment was gone"),  # "only unlink() deletes"
    (set(), "left our segment"),  # "an exit removes what the child mapped"
    ({"stdlib"}, "our segment was gone"),
    ({"by_hand"}, "'sharedarrays' child left our segment"),
    ({"by_hand", "sharedarrays"}, "'our_worker' child left our segment"),  # "a stdlib attach always unlinks"
    ({"untracked", "by_hand"}, "set of way names"),
    ("by_hand", "set of way names"),
])
def test_a_wrong_prediction_fails_the_check_cell_with_a_hint(measured, wrong, hint, monkeypatch):
    assert_wrong_answer_fails(shared_memory.EXERCISE, wrong, hint, monkeypatch, **measured)


@pytest.mark.parametrize("answer, misconception", shared_memory.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(measured, answer, misconception, monkeypatch):
    assert_misconception_rejected(shared_memory.EXERCISE, answer, misconception, monkeypatch, **measured)


def test_the_worked_solution_passes(measured, monkeypatch, capsys):
    assert_worked_solution_passes(shared_memory.EXERCISE, monkeypatch, capsys, **measured)


def test_the_outcome_check_accepts_the_solution_and_names_each_mismatch():
    gone = shared_memory.ChildOutcome(0, "1.0", "x.py:1: UserWarning: resource_tracker: leaked", False)
    kept = shared_memory.ChildOutcome(0, "1.0", "", True)
    outcomes = {"stdlib": gone, "by_hand": kept, "sharedarrays": kept, "our_worker": kept}
    right = dict.fromkeys(outcomes, True)
    later = {way: "attached" for way in outcomes} | {"stdlib": "FileNotFoundError"}
    assert shared_memory.outcome_mismatches(outcomes, right, later) == []
    assert [m.split(":")[0] for m in shared_memory.outcome_mismatches(
        outcomes | {"stdlib": kept, "by_hand": gone}, right, later)] == ["stdlib", "by_hand"]
    assert shared_memory.outcome_mismatches(outcomes, right | {"sharedarrays": False}, later)
    assert shared_memory.outcome_mismatches(outcomes, right, later | {"our_worker": "FileNotFoundError"})


def test_the_by_hand_copy_times_both_copies_and_unlinks_its_segment():
    copy = shared_memory.copy_into_new_segment(np.random.default_rng(2).random(MiB // 8))
    assert copy.copied_exactly and not copy.exists_after_unlink
    assert copy.fresh_seconds > 0 and copy.resident_seconds > 0


def test_a_fan_out_is_timed_call_by_call_with_its_workers_reads():
    n_items = ARRAY_BYTES // 8
    bounds = [(0, n_items // 2), (n_items // 2, n_items)]
    source = np.random.default_rng(3).random(n_items)
    with SharedNDArray.copy_of(source) as shared, SPAWN.Pool(N_WORKERS) as pool:
        times = shared_memory.time_fan_out(pool, shared.handle, bounds, repeat=3)
    assert len(times.calls.runs) == len(times.last_tasks) == len(times.attach_only.runs) == 3
    assert times.first_vs_second > 0 and times.attach_only.min > 0
    assert len(times.attach_only_ways_back) == 3 and 0 < times.attach_only_way_back < times.attach_only.min
    fastest, (until_sum, read, unmap, back) = times.fastest()
    assert fastest == times.calls.min and 0 < read < fastest and until_sum > 0 and unmap > 0 and back > 0
    assert until_sum + read + unmap + back == pytest.approx(fastest)


@pytest.mark.parametrize("n_rows, text, message", [
    (0, "bytes", "n_rows must be"), (2.5, "bytes", "n_rows must be"), (10, "utf8", "text must be one of")])
def test_a_bad_table_is_refused_clearly(n_rows, text, message):
    with pytest.raises(ValueError, match=message):
        shared_memory_tables.make_table(n_rows, text)


def test_both_text_kinds_hold_the_same_table():
    as_bytes, as_objects = (shared_memory_tables.make_table(1000, kind)
                            for kind in shared_memory_tables.TEXT_KINDS)
    assert as_objects.dtype["ticker"] == np.dtype(object) and as_bytes.dtype["ticker"] == np.dtype("S8")
    assert [ticker.decode() for ticker in as_bytes["ticker"]] == list(as_objects["ticker"])
    assert np.array_equal(as_bytes["price"], as_objects["price"], equal_nan=True)


def test_a_shared_table_is_read_exactly_and_tracemalloc_misses_the_segment():
    table = shared_memory_tables.make_table(ARRAY_BYTES // 32)
    shared = shared_memory_tables.share_table_with_workers(SPAWN, table, N_WORKERS)
    assert sum(shared.price_sums) == pytest.approx(np.nansum(table["price"]))
    assert set(shared.worker_digests) == {shared.parent_digest}
    assert shared.report.peak_tracemalloc < 0.1 * table.nbytes <= shared.report.peak_shm
    assert "parent" in shared.report.process_labels.values()


def test_pickling_a_table_of_python_strings_is_far_slower_than_sharing_it():
    table = shared_memory_tables.make_table(ARRAY_BYTES // 32)
    fan_outs = shared_memory_tables.time_table_fan_outs(SPAWN, N_WORKERS, table, 8192, repeat=3)
    traced_already = tracemalloc.is_tracing()  # then every way is traced, and none is timed apart
    sums = fan_outs.sums
    assert all(np.allclose(values, values[0]) for values in sums.values())
    assert len(sums) == 7 - 2 * traced_already
    assert (shared_memory_tables.PICKLED_OBJECTS_TRACED in fan_outs.timings) is not traced_already
    assert (shared_memory_tables.SHARED_TRACED in fan_outs.timings) is not traced_already
    whole = [sums[way][0] for way in (shared_memory_tables.PICKLED_BYTES, shared_memory_tables.SHARED,
                                      shared_memory_tables.SHARED_KEPT)]
    assert whole == pytest.approx([np.nansum(table["price"])] * 3)
    if not traced_already:
        assert sums[shared_memory_tables.SHARED_TRACED][0] == pytest.approx(np.nansum(table["price"]))
        assert fan_outs.rows[shared_memory_tables.SHARED_TRACED] == len(table)
    assert sums[shared_memory_tables.PICKLED_OBJECTS][0] == pytest.approx(np.nansum(table["price"][:8192]))
    assert fan_outs.rows[shared_memory_tables.PICKLED_OBJECTS] == 8192
    assert fan_outs.rows[shared_memory_tables.SHARED_KEPT] == len(table)
    assert fan_outs.rows[shared_memory_tables.ONE_ROW] == 1
    assert 0 < fan_outs.fixed < fan_outs.timings[shared_memory_tables.PICKLED_OBJECTS].min
    assert fan_outs.whole_table(shared_memory_tables.SHARED, len(table)) == fan_outs.timings[
        shared_memory_tables.SHARED].min
    objects = fan_outs.per_row(shared_memory_tables.PICKLED_OBJECTS)
    assert objects >= 5 * fan_outs.per_row(shared_memory_tables.PICKLED_BYTES)
    assert objects >= 5 * fan_outs.per_row(shared_memory_tables.SHARED)
    kept = fan_outs.timings[shared_memory_tables.SHARED_KEPT].min
    assert kept < fan_outs.timings[shared_memory_tables.SHARED].min


def fan_outs_of(pickled_bytes, pickled_objects, shared, traced, rows=1000, object_rows=100, fixed=None,
                shared_traced=None):
    """A TableFanOuts of one run a way (seconds), the object ways on ``object_rows`` rows, a
    one-row call of ``fixed`` seconds and a traced new segment of ``shared_traced`` where given."""
    tables = shared_memory_tables
    times = {tables.PICKLED_BYTES: pickled_bytes, tables.SHARED: shared, tables.SHARED_KEPT: shared / 2,
             tables.PICKLED_OBJECTS: pickled_objects, tables.PICKLED_OBJECTS_TRACED: traced,
             tables.SHARED_TRACED: shared_traced, tables.ONE_ROW: fixed}
    timings = {way: Timing((seconds,)) for way, seconds in times.items() if seconds is not None}
    rows = {way: 1 if way == tables.ONE_ROW else object_rows if "objects" in way else rows for way in timings}
    return shared_memory_tables.TableFanOuts(timings, rows, {})


def test_a_calls_fixed_cost_is_set_aside_per_row_and_added_back_for_the_whole_table():
    fan_outs = fan_outs_of(0.004, 0.0021, 0.001, None, fixed=0.0001)
    strings = shared_memory_tables.PICKLED_OBJECTS
    assert fan_outs.per_row(strings) == pytest.approx(0.002 / 100)
    assert fan_outs.whole_table(strings, 1000) == pytest.approx(0.0001 + 0.02)
    assert fan_outs_of(0.004, 0.0021, 0.001, None).fixed == 0.0


@pytest.mark.parametrize("times, says", [
    ((0.004, 0.008, 0.001, 0.024), ["| pickling fixed-width bytes / a new segment | 4× |",
                                    "| text as Python objects / fixed-width bytes | 20× |",
                                    "| tracemalloc on / off | 3× |",
                                    "| all together, with our 2 workers | **240×**, more than the post's",
                                    "so compare their size, not their value."]),
    ((0.004, 0.008, 0.001, None), ["| text as Python objects / fixed-width bytes | 20× |",
                                   "**80×**, near the post's 100×"]),
    ((0.002, 0.0005, 0.001, 0.0006), ["| tracemalloc on / off | 1.2× |", "**6×**, short of the post's 100×",
                                      ": ours fall short of a gap of this size."]),
])
def test_the_posts_factor_is_worded_by_the_measured_times_per_row(times, says):
    text = shared_memory_tables.post_versions(fan_outs_of(*times), N_WORKERS)
    assert "tracemalloc on / off" in text or times[3] is None
    assert "If about" not in text and "as here" not in text  # no start-up back-solved to land on our factor
    assert "doubling" not in text  # more workers are not measured here
    assert "Over pickling" not in text  # the conclusion above already gives those times
    assert all(said in text for said in [*says, "(`'S6'`; ours is `'S8'`)",
                                         "The post's 4 workers change these factors",
                                         "'A new segment' is created inside the timed call, "
                                         "as in the post"]), text


def test_a_table_with_its_text_as_objects_is_refused_by_shared_memory():
    with pytest.raises(TypeError, match="holds Python objects"):
        SharedNDArray.copy_of(shared_memory_tables.make_table(4, "objects"))


@pytest.mark.parametrize("value, text", [(503.2, "500"), (7.34, "7.3"), (0.171, "0.17"), (12345.0, "12,000")])
def test_figures_in_prose_keep_two_significant_digits(value, text):
    assert shared_memory_tables.about(value) == text


def test_all_together_is_the_product_of_the_factors_as_printed():
    # per row: bytes / new segment 4.40, objects / bytes 18.6, tracemalloc 2.98; their product 243.9
    # would read 240×, the product as printed (4.4 × 19 × 3 = 250.8) reads 250×
    text = shared_memory_tables.post_versions(fan_outs_of(0.0044, 0.008184, 0.001, 0.02438832), N_WORKERS)
    assert all(row in text for row in ["| pickling fixed-width bytes / a new segment | 4.4× |",
                                       "| text as Python objects / fixed-width bytes | 19× |",
                                       "| tracemalloc on / off | 3× |",
                                       "| all together, with our 2 workers | **250×**, more than"]), text


def test_tracing_a_new_segment_too_divides_the_objects_tracing_factor():
    text = shared_memory_tables.post_versions(fan_outs_of(0.004, 0.008, 0.001, 0.024, shared_traced=0.0015),
                                              N_WORKERS)
    assert "| tracemalloc on / off: objects' 3.00× ÷ a new segment's 1.50× | 2× |" in text, text
    assert "**160×**, more than the post's 100×" in text, text
