"""The checks every lesson's "Your turn" gets in its unit test: a wrong answer fails the check cell
with a hint (so the check can fail), every misconception the exercise names is rejected (so the check
catches what it exists to catch), and the worked solution passes on the same measurements (so the
exercise can be solved), as `make test` runs it with LAB_SOLVE_EXERCISES=1."""

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


def assert_misconception_rejected(exercise, answer, misconception, monkeypatch, **measured):
    """The answer a learner holding ``misconception`` gives fails the check cell (WrongAnswer) on
    ``measured``, with the worked solutions switched off; ``measured`` must be what the exercise's
    check takes (its worked solution passes there, with the same keys as ``answer`` where both are
    dicts), so that the answer is rejected for what it says, not for its form."""
    solution = exercise.solution(**measured)
    assert exercise.check(solution, **measured) is None, "the worked solution fails on these measurements"
    if isinstance(answer, dict) and isinstance(solution, dict):
        assert set(answer) == set(solution), (sorted(answer), sorted(solution))
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)
    try:
        exercises.check(exercise, answer, **measured)
    except exercises.WrongAnswer:
        return
    pytest.fail(f"the check accepted {answer!r}, the answer of a misconception: {misconception}")
