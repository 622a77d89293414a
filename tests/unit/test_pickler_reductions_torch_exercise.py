"""Lesson 09's "Your turn": which arrays made from a received array cross again without a copy,
measured with both reductions on a real array in real shared memory; a wrong or malformed
prediction fails the check cell with a hint, the worked solution passes."""

import numpy as np
import pytest
from exercise_asserts import (
    assert_misconception_rejected,
    assert_worked_solution_passes,
    assert_wrong_answer_fails,
)

from helpers.lessons import exercises, pickler_reductions_torch
from helpers.measure.units import MiB
from sharedarrays import reducers

pytestmark = pytest.mark.timeout(120)
RIGHT = {"received[10::3]": "shared", "received.view(np.uint8)": "shared",
         "np.ascontiguousarray(received[10::3])": "copied", "received * 1.0": "copied"}


@pytest.fixture(scope="module")
def measured():
    array = np.random.default_rng(9).random(MiB // 8)
    copied = pickler_reductions_torch.copied_on_resend(array)
    assert reducers.active_way() is None
    return {"copied": copied}


def test_views_cross_again_as_descriptions_and_new_arrays_are_copied_both_ways(measured):
    for way in reducers.WAYS:
        assert {expression: "copied" if was_copied else "shared"
                for expression, was_copied in measured["copied"][way].items()} == RIGHT, way
    assert pickler_reductions_torch.RESEND_ANSWER == RIGHT  # the answer its misconceptions vary


@pytest.mark.parametrize("wrong, hint", [
    ({**RIGHT, "received.view(np.uint8)": "copied"}, "another dtype is still a view"),  # "a new dtype copies"
    ({**RIGHT, "np.ascontiguousarray(received[10::3])": "shared"}, "not contiguous"),  # "it is a view"
    ({**RIGHT, "received * 1.0": "shared"}, "arithmetic makes a new"),
    ({**RIGHT, "received[10::3]": True}, "answer 'copied' or 'shared'"),
    ({"received[10::3]": "shared"}, "'copied' or 'shared' for each of"),
    (["shared", "shared", "copied", "copied"], "'copied' or 'shared' for each of"),
])
def test_a_wrong_prediction_fails_the_check_cell_with_a_hint(measured, wrong, hint, monkeypatch):
    assert_wrong_answer_fails(pickler_reductions_torch.EXERCISE, wrong, hint, monkeypatch, **measured)


@pytest.mark.parametrize("answer, misconception", pickler_reductions_torch.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(measured, answer, misconception, monkeypatch):
    assert_misconception_rejected(pickler_reductions_torch.EXERCISE, answer, misconception, monkeypatch,
                                  **measured)


def test_the_right_prediction_and_the_worked_solution_pass(measured, monkeypatch, capsys):
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)
    assert exercises.grade(pickler_reductions_torch.EXERCISE, RIGHT, **measured) is True
    assert_worked_solution_passes(pickler_reductions_torch.EXERCISE, monkeypatch, capsys, **measured)


def test_kept_torch_free_arrays_hold_one_open_file_each_before_python_3_13_and_none_after():
    import sys

    held = pickler_reductions_torch.open_files_held_torch_free(10)
    expected = 0 if sys.version_info >= (3, 13) else 10
    assert held is not None and expected <= held <= expected + 2, held


def test_ratios_keep_two_significant_digits_with_their_trailing_zeros():
    values = (150.3, 9.97, 6.5, 1.0, 0.0904, 0.00039)  # 9.97: '10', not '10.'
    assert [pickler_reductions_torch.format_ratio(value) for value in values] == [
        "150", "10", "6.5", "1.0", "0.090", "0.00039"]


def test_the_reveal_table_names_each_expression_shared_or_copied_each_way(measured):
    lines = pickler_reductions_torch.format_resends(measured["copied"]).splitlines()
    assert lines[0].split() == ["sent", "on", *reducers.WAYS]
    for line, (expression, word) in zip(lines[1:], RIGHT.items(), strict=True):
        words = line.split()[-len(reducers.WAYS):]
        assert line.startswith(expression) and words == [word] * len(reducers.WAYS), line

