"""Lesson 07's "Your turn" on a real measurement (spawned workers attaching a real segment): a wrong
prediction fails the check cell with a hint, the worked solution passes. Also the lesson's table
and forked-child demonstrations (helpers.lessons.shared_memory_tables), with real processes."""

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
from helpers.lessons.demos import increase
from helpers.measure.memory import track_memory
from helpers.measure.units import MiB
from sharedarrays.shm import SharedNDArray

pytestmark = pytest.mark.timeout(120)
SPAWN = mp.get_context("spawn")
N_WORKERS, ARRAY_BYTES = 2, 16 * MiB


@pytest.fixture(scope="module")
def measured():
    with SharedNDArray.copy_of(np.random.default_rng(1).random(ARRAY_BYTES // 8)) as shared:
        with track_memory() as report:
            shared_memory.attach_and_hold_in_workers(SPAWN, shared.handle, N_WORKERS, report,
                                                     hold_seconds=1.0)
    grew = increase(report, "workers idle", "workers attached")
    return {"n_workers": N_WORKERS, "rss_arrays": grew["tree RSS sum"] / ARRAY_BYTES,
            "pss_arrays": grew["tree PSS sum"] / ARRAY_BYTES, "noise_arrays": 8 * MiB / ARRAY_BYTES}


@pytest.mark.parametrize("wrong, hint", [
    ({"rss": 1.0, "pss": 1.0}, "RSS sum grew by"),  # "one array, shared": RSS counts it per worker
    ({"rss": N_WORKERS, "pss": N_WORKERS}, "PSS grew by"),  # "PSS also counts it per worker"
    ({"rss": N_WORKERS, "pss": 1.0}, "PSS grew by"),  # "one more copy for the tree"
    ({"rss": N_WORKERS}, "dict of two numbers"),
    ({"rss": "N", "pss": 0}, "dict of two numbers"),
    ([N_WORKERS, 0], "dict of two numbers"),
])
def test_a_wrong_prediction_fails_the_check_cell_with_a_hint(measured, wrong, hint, monkeypatch):
    assert_wrong_answer_fails(shared_memory.EXERCISE, wrong, hint, monkeypatch, **measured)


@pytest.mark.parametrize("answer, misconception", shared_memory.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(measured, answer, misconception, monkeypatch):
    assert_misconception_rejected(shared_memory.EXERCISE, answer, misconception, monkeypatch, **measured)


def test_the_worked_solution_passes(measured, monkeypatch, capsys):
    assert_worked_solution_passes(shared_memory.EXERCISE, monkeypatch, capsys, **measured)


def test_the_by_hand_copy_times_both_copies_and_unlinks_its_segment():
    copy = shared_memory.copy_into_new_segment(np.random.default_rng(2).random(MiB // 8))
    assert copy.copied_exactly and not copy.exists_after_unlink
    assert copy.fresh_seconds > 0 and copy.resident_seconds > 0


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
    timings, sums = shared_memory_tables.time_table_fan_outs(SPAWN, N_WORKERS, 8192, repeat=3)
    traced_already = tracemalloc.is_tracing()  # then every way is traced, and none is timed apart
    assert all(np.allclose(values, values[0]) for values in sums.values()) and len(sums) == 4 - traced_already
    assert (shared_memory_tables.PICKLED_OBJECTS_TRACED in timings) is not traced_already
    objects = timings[shared_memory_tables.PICKLED_OBJECTS].median
    assert objects >= 5 * timings[shared_memory_tables.PICKLED_BYTES].median
    assert objects >= 5 * timings[shared_memory_tables.SHARED].median


@pytest.mark.parametrize("times, says", [
    ((0.002, 0.07, 0.003, 0.2), ["pickling was 1.5× as fast as shared memory", "shared memory was 23×",
                                 "Only the strings", "took 2.9× as long: tracemalloc records"]),
    ((0.002, 0.01, 0.003, None), ["do not separate that way"]),
    ((0.002, 0.07, 0.003, 0.071), ["costs little"]),
])
def test_the_posts_two_versions_are_worded_by_the_measured_times(times, says):
    text = shared_memory_tables.post_versions(*times)
    assert all(said in text for said in says), text


def test_a_forked_child_reads_the_parents_objects_as_they_were_at_the_fork():
    forked = shared_memory_tables.read_objects_in_forked_child()
    assert forked.returncode == 0 and forked.child_exit == 0
    assert forked.child_at_fork == ["'a string'", "3.5", "None", "{'key': 'value'}"]
    assert forked.child_later == forked.child_at_fork
    assert forked.parent_later[3] == "{'key': 'changed'}"


@pytest.mark.parametrize("value, text", [(503.2, "500"), (7.34, "7.3"), (0.171, "0.17"), (12345.0, "12,000")])
def test_figures_in_prose_keep_two_significant_digits(value, text):
    assert shared_memory_tables.about(value) == text
