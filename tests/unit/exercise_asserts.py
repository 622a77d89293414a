"""The two checks every lesson's "Your turn" gets in its unit test: a wrong answer fails the check
cell with a hint (so the check can fail), and the worked solution passes on the same measurements
(so the exercise can be solved), as `make test` runs it with LAB_SOLVE_EXERCISES=1."""

import pytest

from helpers.lessons import exercises


def assert_wrong_answer_fails(exercise, answer, hint, monkeypatch, **measured):
    """``answer`` raises WrongAnswer whose message matches the regular expression ``hint``, with the
    worked solutions switched off (as a learner runs the lesson)."""
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)
    with pytest.raises(exercises.WrongAnswer, match=hint):
        exercises.check(exercise, answer, **measured)


def assert_worked_solution_passes(exercise, monkeypatch, capsys, **measured):
    """With LAB_SOLVE_EXERCISES=1 an unanswered exercise checks its worked solution, which passes and
    says so."""
    monkeypatch.setenv(exercises.SOLVE_VARIABLE, "1")
    assert exercises.grade(exercise, None, **measured) is True
    assert "worked solution" in capsys.readouterr().out
