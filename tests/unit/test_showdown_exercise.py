"""Lesson 11's "Your turn" on a real, small showdown (four strategies, real workers and shared memory):
a wrong set of names fails the check cell with a hint naming the strategy to look at again, the
worked solution passes."""

import numpy as np
import pytest
from exercise_asserts import (
    assert_misconception_rejected,
    assert_worked_solution_passes,
    assert_wrong_answer_fails,
)

from helpers.bench import showdown
from helpers.lessons import showdown_lesson
from helpers.measure import leftovers
from helpers.measure.units import MiB

pytestmark = pytest.mark.timeout(180)
MEASURED = ("pickle", "send_once", "fork_cow", "sharedctypes")


@pytest.fixture(scope="module")
def measured():
    """What four strategies added to the tree's PSS (arrays) while 2 workers held an 8 MiB array."""
    before = leftovers.snapshot()
    array = np.random.default_rng(11).random(8 * MiB // 8)
    results = showdown.run_showdown(MEASURED, array, 2, repeat=1)
    assert not leftovers.new_since(before)
    return {"added_arrays": showdown.added_arrays(results)}


def test_the_measurement_gives_the_lessons_answer(measured):
    assert set(measured["added_arrays"]) == set(MEASURED), measured
    assert showdown_lesson.at_most_one_array(measured["added_arrays"]) == {"fork_cow", "sharedctypes"}


def test_a_copy_per_worker_named_as_one_array_fails(monkeypatch, measured):
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, {"pickle", "fork_cow", "sharedctypes"},
                              "pickle added .* arrays here", monkeypatch, **measured)


def test_a_shared_copy_left_out_fails(monkeypatch, measured):
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, {"sharedctypes"}, "fork_cow added only",
                              monkeypatch, **measured)


def test_names_that_are_not_choices_or_not_a_set_fail(monkeypatch, measured):
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, {"threads"}, "not one of the choices",
                              monkeypatch, **measured)
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, "fork_cow", "give a set", monkeypatch, **measured)


@pytest.mark.parametrize("answer, misconception", showdown_lesson.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(measured, answer, misconception, monkeypatch):
    assert_misconception_rejected(showdown_lesson.EXERCISE, answer, misconception, monkeypatch, **measured)


def test_the_worked_solution_passes_and_skipped_strategies_are_not_asked(monkeypatch, capsys, measured):
    assert_worked_solution_passes(showdown_lesson.EXERCISE, monkeypatch, capsys, **measured)
    monkeypatch.delenv("LAB_SOLVE_EXERCISES", raising=False)
    # shared_memory and memmap_tmpfs did not run here: naming them is neither right nor wrong
    answer = {"fork_cow", "sharedctypes", "shared_memory", "memmap_tmpfs"}
    assert showdown_lesson.EXERCISE.check(answer, **measured) is None
