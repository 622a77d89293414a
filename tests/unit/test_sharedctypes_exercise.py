"""Lesson 05's "Your turn": the learner predicts whether the item loop (``counter[0] += 1``) loses
updates, checked against the run's counts before anything runs; then the learner's loop body runs in
real spawned workers that share one real counter; a wrong prediction, or a line that loses updates,
adds the wrong amount, fails or is not Python, fails the check cell with a hint; the worked solution
passes."""

import multiprocessing as mp

import pytest
from exercise_asserts import assert_misconception_rejected, assert_worked_solution_passes

from helpers.lessons import exercises, sharedctypes

pytestmark = pytest.mark.timeout(120)

SPAWN = mp.get_context("spawn")
MEASURED = {"context": SPAWN, "n_workers": 2, "iterations": 2_000, "item_lost": [150_000, 0, 120_000]}


def predicted(line, item_loses=True):
    """The answer dict: the item loop's prediction and the loop body."""
    return {"item_loses": item_loses, "line": line}


@pytest.fixture(autouse=True)
def answers_are_checked_as_given(monkeypatch):
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)


@pytest.mark.parametrize("wrong, hint", [
    ("with lock: view[0] += 2", "past the expected total"),  # under the lock: never loses, always over
    ("pass", "stayed at 0"),
    ("view[0] +=", "not valid Python"),
    ("", "must be a line of Python"),
    (1, "must be a line of Python"),
    ("lock.release()", "failed in a worker"),  # releasing a lock nobody holds raises ValueError
])
def test_a_wrong_line_fails_the_check_cell_with_a_hint(wrong, hint):
    with pytest.raises(exercises.WrongAnswer, match=hint):
        exercises.check(sharedctypes.EXERCISE, predicted(wrong), **MEASURED)


@pytest.mark.parametrize("wrong, hint", [
    ("with lock: view[0] += 1", "answer with a dict"),  # the line alone, no prediction
    ({"line": "with lock: view[0] += 1"}, "answer with a dict"),
    (predicted("with lock: view[0] += 1", item_loses="yes"), "must be True or False"),
    (predicted("with lock: view[0] += 1", item_loses=False), "lost updates in 2 of this run's 3 rounds"),
])
def test_a_missing_or_wrong_prediction_fails_before_any_worker_runs(wrong, hint, monkeypatch):
    monkeypatch.setattr(sharedctypes, "CounterPool", None)  # the line is never run
    with pytest.raises(exercises.WrongAnswer, match=hint):
        exercises.check(sharedctypes.EXERCISE, wrong, **MEASURED)


def test_predicting_no_loss_fails_even_when_the_run_lost_none():
    """A race that lost nothing in these rounds was lucky: counter[0] += 1 can still lose updates."""
    with pytest.raises(exercises.WrongAnswer, match="by luck"):
        exercises.check(sharedctypes.EXERCISE, predicted("with lock: view[0] += 1", item_loses=False),
                        **{**MEASURED, "item_lost": [0, 0, 0]})


def test_the_unlocked_line_loses_updates_and_fails_the_check():
    """The race itself: two spawned workers, enough increments that their loops overlap."""
    with pytest.raises(exercises.WrongAnswer, match="updates were lost"):
        exercises.check(sharedctypes.EXERCISE, predicted("view[0] += 1"),
                        **{**MEASURED, "iterations": 200_000})


@pytest.mark.parametrize("right", ["with lock: view[0] += 1", "with lock:\n    counter[0] += 1"])
def test_a_line_that_holds_the_lock_passes(right, capsys):
    assert exercises.grade(sharedctypes.EXERCISE, predicted(right), **MEASURED) is True
    assert "lost 0, 0, 0" in capsys.readouterr().out


def test_a_line_without_the_lock_fails_even_when_it_lost_nothing(capsys):
    """One worker cannot race: no update is lost, and the line still fails, for taking no lock."""
    with pytest.raises(exercises.WrongAnswer, match="by luck: your line never takes the lock"):
        exercises.check(sharedctypes.EXERCISE, predicted("view[0] += 1"), **{**MEASURED, "n_workers": 1})
    assert "lost 0, 0, 0" in capsys.readouterr().out


@pytest.mark.parametrize("answer, misconception", sharedctypes.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(answer, misconception, monkeypatch):
    assert_misconception_rejected(sharedctypes.EXERCISE, answer, misconception, monkeypatch, **MEASURED)


def test_the_worked_solution_passes(monkeypatch, capsys):
    assert_worked_solution_passes(sharedctypes.EXERCISE, monkeypatch, capsys, **MEASURED)


def test_a_bad_way_is_refused_before_any_worker_waits():
    with sharedctypes.CounterPool(SPAWN, 2) as counters, pytest.raises(ValueError, match="not valid Python"):
        counters.run("line", 10, "view[0] +=")
