"""Lesson 02's "Your turn": the bytes one fan-out pickles, measured on a real array; a wrong or
malformed prediction fails the check cell with a hint, the worked solution passes."""

import numpy as np
import pytest
from exercise_asserts import (
    assert_misconception_rejected,
    assert_worked_solution_passes,
    assert_wrong_answer_fails,
)

from helpers.lessons import pickle_baseline
from helpers.measure.units import MiB

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=[2, 3, 4])
def measured(request):
    array = np.random.default_rng(2).random(MiB // 8)
    return {"n_workers": request.param, "sent": pickle_baseline.arrays_pickled(array, request.param)}


def test_each_task_pickles_the_elements_its_argument_shows(measured):
    sent = measured["sent"]
    assert sent["whole"] == pytest.approx(measured["n_workers"], rel=0.01)
    assert sent["slices"] == pytest.approx(1.0, rel=0.01)
    assert sent["strided"] == pytest.approx(1.0, rel=0.01)
    assert sent["chunks"] == pytest.approx(3.0, rel=0.01)  # 3 chunks of the same array twice: memo
    assert sent["pairs"] == pytest.approx(6.0, rel=0.01)  # 3 chunks of the array and its copy: two objects


def test_bytes_are_counted_as_the_pickler_writes_them():
    """``bytes_pickled`` counts what ``ForkingPickler.dumps`` returns, without keeping the pickle."""
    from multiprocessing.reduction import ForkingPickler

    array = np.random.default_rng(5).random(MiB // 8)
    tasks = [array, (array, array), (array, array.copy()), array[::3], "small"]
    assert pickle_baseline.bytes_pickled(tasks) == sum(len(ForkingPickler.dumps(t)) for t in tasks)


@pytest.mark.parametrize("wrong, hint", [
    (lambda n: {"strided": n, "chunks": 3.0, "pairs": 6.0}, "'strided'"),  # a strided view sends its buffer
    (lambda n: {"strided": 1.0, "chunks": 6.0, "pairs": 6.0}, "'chunks'"),  # every item pickles its copy
    (lambda n: {"strided": 1.0, "chunks": 2.0, "pairs": 2.0}, "'chunks'"),  # one pickle per worker of 2
    (lambda n: {"strided": 1.0, "chunks": 3.0, "pairs": 3.0}, "'pairs'"),  # one array per task, any chunk
    (lambda n: {"strided": 1.0, "chunks": "two", "pairs": 6.0}, "'chunks'"),
    (lambda n: {"strided": 1.0, "chunks": 3.0}, "dict of one number per way"),
    (lambda n: [1.0, n / 2], "dict of one number per way"),
])
def test_a_wrong_prediction_fails_the_check_cell_with_a_hint(measured, wrong, hint, monkeypatch):
    answer = wrong(measured["n_workers"])
    assert_wrong_answer_fails(pickle_baseline.EXERCISE, answer, hint, monkeypatch, **measured)


def test_the_worked_solution_passes(measured, monkeypatch, capsys):
    assert_worked_solution_passes(pickle_baseline.EXERCISE, monkeypatch, capsys, **measured)


@pytest.mark.parametrize("answer, misconception", pickle_baseline.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(measured, answer, misconception, monkeypatch):
    assert_misconception_rejected(pickle_baseline.EXERCISE, answer, misconception, monkeypatch, **measured)


@pytest.mark.parametrize("n_workers", range(2, 17))
def test_every_split_sending_one_array_in_all_is_rejected_at_any_worker_count(n_workers):
    """The answer "every way sends one array in all" fails at any worker count (the "Try it" suggests 4)."""
    sent = pickle_baseline.arrays_pickled(np.random.default_rng(3).random(MiB // 8), n_workers)
    one_in_all = {"strided": 1.0, "chunks": 1.0, "pairs": 1.0}
    assert pickle_baseline.EXERCISE.check(one_in_all, n_workers=n_workers, sent=sent) is not None
    assert pickle_baseline.EXERCISE.check(pickle_baseline.EXERCISE.solution(n_workers, sent),
                                          n_workers=n_workers, sent=sent) is None


@pytest.mark.parametrize("n_workers", range(2, 17))
def test_one_pickle_per_worker_is_rejected_at_any_worker_count(n_workers):
    """The chunks' pool has 2 workers and 3 tasks: "one pickle per worker" (2 arrays, or the lesson's
    N_WORKERS where that is not 3) fails however many workers the lesson runs."""
    sent = pickle_baseline.arrays_pickled(np.random.default_rng(3).random(MiB // 8), n_workers)
    for per_worker in {float(pickle_baseline.CHUNK_POOL), float(n_workers)} - {3.0}:
        answer = {"strided": 1.0, "chunks": per_worker, "pairs": 6.0}
        assert pickle_baseline.EXERCISE.check(answer, n_workers=n_workers, sent=sent) is not None


@pytest.mark.parametrize("n_workers", [0, -1, 2.5])
def test_a_bad_worker_count_is_refused_clearly(n_workers):
    with pytest.raises(ValueError, match="n_workers must be a whole number"):
        pickle_baseline.split_ways(np.zeros(8), n_workers)


@pytest.mark.parametrize("ratio, text", [(9447.2, "9,400"), (75.04, "75"), (2.31, "2.3"),
                                         (0.00085, "0.00085")])
def test_ratios_in_the_prose_keep_two_significant_digits(ratio, text):
    assert pickle_baseline.about(ratio) == text


def test_a_pipe_is_made_to_hold_1_mib_or_the_helper_says_it_cannot():
    got = pickle_baseline.set_pipe_capacity(None, MiB)
    assert got is None or got >= MiB


def test_the_direct_read_and_the_pipe_stage_work_through_a_1_mib_pipe():
    """Lesson 02 times the direct read and the pipe stage again through a 1 MiB pipe (fewer fills)."""
    import multiprocessing as mp

    if pickle_baseline.set_pipe_capacity(None, MiB) is None:
        pytest.skip("pipes cannot be resized here")
    context, array = mp.get_context("spawn"), np.random.default_rng(4).random(2 * MiB // 8)
    with pickle_baseline.sum_server(context, pipe_bytes=MiB) as ask:
        assert ask(array, pickle_baseline.OUT_OF_BAND_DIRECT) == pytest.approx(float(np.sum(array)))
    stage = pickle_baseline.time_pipe_stage(array, context, MiB, repeat=2)
    assert len(stage.runs) == 2 and stage.min > 0
