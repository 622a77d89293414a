"""Lesson 11's "Your turn" on a real, small showdown (its six ways, real workers and shared memory):
a wrong count of arrays for a way fails the check cell with a hint naming that way and its measured
figure, every named misconception fails, the worked solution passes."""

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
MEASURED = showdown_lesson.CHOICES
N_WORKERS = 2  # the misconceptions' answers are written for 2 workers


@pytest.fixture(scope="module")
def measured():
    """What the six ways asked added to the tree's PSS (arrays) while 2 workers held an 8 MiB array."""
    before = leftovers.snapshot()
    array = np.random.default_rng(11).random(8 * MiB // 8)
    results = showdown.run_showdown(MEASURED, array, N_WORKERS, repeat=1)
    assert not leftovers.new_since(before)
    return {"added_arrays": showdown.added_arrays(results), "n_workers": N_WORKERS}


def right_answer(measured) -> dict:
    return showdown_lesson.arrays_per_way(**measured)


def test_the_measurement_gives_the_lessons_answer(measured):
    assert set(measured["added_arrays"]) == set(MEASURED), measured
    rounded = {name: showdown_lesson.whole_arrays(added, N_WORKERS)
               for name, added in measured["added_arrays"].items()}
    assert rounded == {"send_once": 2, "fork_cow": 0, "sharedctypes": 1, "memmap_tmpfs": 1,
                       "shared_memory": 1, "executor": 2}, measured
    per_worker = showdown_lesson.PER_WORKER_ANSWER
    assert right_answer(measured) == {name: per_worker if whole == N_WORKERS else whole
                                      for name, whole in rounded.items()}


def test_a_copy_per_worker_written_as_the_workers_count_fails(monkeypatch, measured):
    """With 2 workers, 2 is send_once's count, but not its rule: the check wants "N" (one per worker),
    and a way that maps one copy given "N" fails (its count does not grow with the workers)."""
    answer = {**right_answer(measured), "send_once": N_WORKERS}
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, answer,
                              'send_once: 2 holds with 2 workers; .*Write "N"', monkeypatch, **measured)
    one_worker = {name: added / N_WORKERS if name in showdown_lesson.PER_WORKER else added
                  for name, added in measured["added_arrays"].items()}  # as one worker would measure
    answer = {**right_answer(measured), "shared_memory": "N"}
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, answer, "shared_memory: its count does not grow",
                              monkeypatch, added_arrays=one_worker, n_workers=1)


def test_a_copy_per_worker_counted_as_one_array_fails(monkeypatch, measured):
    answer = {**right_answer(measured), "send_once": 1}
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, answer, "send_once added .* arrays here .*, not 1",
                              monkeypatch, **measured)


def test_a_shared_copy_counted_as_nothing_fails(monkeypatch, measured):
    answer = {**right_answer(measured), "sharedctypes": 0}
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, answer, "sharedctypes added .*, not 0", monkeypatch,
                              **measured)


def test_names_that_are_not_asked_missing_counts_and_not_a_dict_fail(monkeypatch, measured):
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, {**right_answer(measured), "threads": 0},
                              "not one of the ways asked", monkeypatch, **measured)
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, {"fork_cow": 0}, "give a count for", monkeypatch,
                              **measured)
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, {**right_answer(measured), "fork_cow": 0.5},
                              "whole number", monkeypatch, **measured)
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, {**right_answer(measured), "executor": "n"},
                              "whole number", monkeypatch, **measured)
    assert_wrong_answer_fails(showdown_lesson.EXERCISE, {"fork_cow", "sharedctypes"}, "give a dict",
                              monkeypatch, **measured)


@pytest.mark.parametrize("answer, misconception", showdown_lesson.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(measured, answer, misconception, monkeypatch):
    assert_misconception_rejected(showdown_lesson.EXERCISE, answer, misconception, monkeypatch, **measured)


def test_the_worked_solution_passes_and_skipped_strategies_are_not_asked(monkeypatch, capsys, measured):
    assert_worked_solution_passes(showdown_lesson.EXERCISE, monkeypatch, capsys, **measured)
    monkeypatch.delenv("LAB_SOLVE_EXERCISES", raising=False)
    # had shared_memory and memmap_tmpfs not run, their counts would be neither right nor wrong
    ran = {name: added for name, added in measured["added_arrays"].items()
           if name not in ("shared_memory", "memmap_tmpfs")}
    answer = {**right_answer(measured), "shared_memory": 5}
    assert showdown_lesson.EXERCISE.check(answer, added_arrays=ran, n_workers=N_WORKERS) is None


def test_whole_arrays_rounds_to_the_nearest_and_caps_at_a_copy_per_worker():
    assert [showdown_lesson.whole_arrays(x, 2) for x in (-0.1, 0.04, 0.5, 0.51, 1.5, 1.6, 2.76, 9.0)] == [
        0, 0, 0, 1, 1, 2, 2, 2]


def test_each_way_asked_is_described_before_the_question_by_its_mechanism_never_its_count():
    """Lesson 11, cold read 11 round 3 (F1): the exercise named ways the page gave only as code
    names; section 1 now prints how each shares (``HOW``), with no count of arrays in it."""
    import re

    from helpers.bench import strategies

    assert set(showdown_lesson.HOW) == set(showdown_lesson.CHOICES)
    for name, how in showdown_lesson.HOW.items():
        # round 5: the API or mechanism and its lesson, never how many copies or per what
        assert how.endswith(f" (lesson {strategies.STRATEGIES[name].lesson})"), (name, how)
        mechanism = how.removesuffix(f" (lesson {strategies.STRATEGIES[name].lesson})")
        assert not re.search(r"\d|\b(N|one|two|none|zero|no|once|twice|per|each worker|cop(y|ies))\b",
                             mechanism, re.I), (name, how)
