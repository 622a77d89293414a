"""helpers.lessons.exercises: an unanswered exercise fails nothing, a wrong answer fails its check
cell with the hint, a right one passes, and LAB_SOLVE_EXERCISES checks the worked solution; every
lesson's exercise names the misconceptions it exists to catch."""

import importlib
import pkgutil
from pathlib import Path

import pytest

import helpers.lessons
from helpers.lessons import exercises

FASTER = exercises.Exercise(
    name="which is faster",
    question="which of 'a' and 'b' took less time?",
    check=lambda answer, a, b: None if answer == ("a" if a < b else "b") else "compare the two times",
    solution=lambda a, b: "a" if a < b else "b",
    explanation="The smaller time wins.",
)


def test_an_unanswered_exercise_prints_the_question_and_fails_nothing(monkeypatch, capsys):
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)
    assert exercises.grade(FASTER, None, a=1.0, b=2.0) is False
    assert "which of 'a' and 'b'" in capsys.readouterr().out


def test_a_wrong_answer_raises_with_the_hint_and_a_right_one_passes(monkeypatch, capsys):
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)
    with pytest.raises(exercises.WrongAnswer, match="compare the two times"):
        exercises.check(FASTER, "b", a=1.0, b=2.0)
    assert exercises.grade(FASTER, "a", a=1.0, b=2.0) is True
    assert "The smaller time wins." in capsys.readouterr().out


@pytest.mark.parametrize("value, solves", [("1", True), ("0", False), ("", False)])
def test_lab_solve_exercises_checks_the_worked_solution(monkeypatch, capsys, value, solves):
    monkeypatch.setenv(exercises.SOLVE_VARIABLE, value)
    assert exercises.grade(FASTER, None, a=3.0, b=2.0) is solves
    assert (f"{exercises.SOLVE_VARIABLE} is set" in capsys.readouterr().out) is solves


@pytest.mark.parametrize("times, holds", [({"a": 1.0, "b": 2.0}, True), ({"a": 2.0, "b": 1.0}, False)])
def test_an_unanswered_exercise_says_whether_the_worked_solution_holds_without_giving_it(
        monkeypatch, capsys, times, holds):
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)
    always_a = exercises.Exercise(FASTER.name, FASTER.question, FASTER.check, lambda a, b: "a")
    exercises.check(always_a, None, **times)
    out = capsys.readouterr().out
    assert (exercises.SOLUTION_HOLDS in out) is holds and (exercises.SOLUTION_FAILS in out) is not holds
    assert "'a'" not in out.split("\n", 1)[1] and "compare the two times" not in out  # no answer, no hint


def test_the_worked_solution_verdict_swallows_the_checks_printout_and_reports_an_error(monkeypatch, capsys):
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)

    def noisy(answer, a, b):
        print("a race ran: lost 0")
        return FASTER.check(answer, a, b)

    talkative = exercises.Exercise(FASTER.name, FASTER.question, noisy, FASTER.solution)
    exercises.check(talkative, None, a=1.0, b=2.0)
    assert "a race ran" not in capsys.readouterr().out
    broken = exercises.Exercise(FASTER.name, FASTER.question, FASTER.check, lambda a, b: 1 / 0)
    exercises.check(broken, None, a=1.0, b=2.0)
    assert f"{exercises.SOLUTION_FAILS}: its check raised ZeroDivisionError." in capsys.readouterr().out


def test_the_check_cell_shows_only_the_printed_verdict(monkeypatch, capsys):
    """check() returns nothing: a notebook would show a returned bool as a bare True or False."""
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)
    assert exercises.check(FASTER, None, a=1.0, b=2.0) is None
    assert exercises.check(FASTER, "a", a=1.0, b=2.0) is None
    assert "Your turn" in capsys.readouterr().out


def lesson_exercises() -> dict[str, exercises.Exercise]:
    """Every lesson module's EXERCISE, by module name: the modules of helpers.lessons whose source
    defines one (only those are imported)."""
    found = {}
    for module in pkgutil.iter_modules(helpers.lessons.__path__):
        source = Path(helpers.lessons.__path__[0], f"{module.name}.py")
        if source.is_file() and "EXERCISE = Exercise(" in source.read_text():
            found[module.name] = importlib.import_module(f"helpers.lessons.{module.name}").EXERCISE
    return found


def test_every_lesson_exercise_names_its_misconceptions():
    found = lesson_exercises()
    assert len(found) == 12, sorted(found)  # one "Your turn" per lesson
    for name, exercise in found.items():
        assert isinstance(exercise, exercises.Exercise), name
        assert exercise.misconceptions, f"{name}'s exercise names no misconception"
        for answer, misconception in exercise.misconceptions:
            assert answer is not None, name  # None is the unanswered exercise, not a wrong answer
            assert isinstance(misconception, str) and misconception.strip(), (name, answer)


def test_reveal_prints_once_answered_and_collapses_before(monkeypatch, capsys):
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)
    exercises.reveal(1.0, "whole: 2.00 arrays")
    assert capsys.readouterr().out == "whole: 2.00 arrays\n"
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj.data))
    exercises.reveal(None, "a ``b`` c")
    assert capsys.readouterr().out == ""
    assert shown[0].startswith(f"<details><summary>{exercises.REVEAL_SUMMARY}</summary>")
    assert "```text\na ``b`` c\n```" in shown[0] and shown[0].endswith("</details>")
    exercises.reveal(None, "four ```` ticks")
    assert "`````text\nfour ```` ticks\n`````" in shown[1]
    exercises.reveal(None, "**Found.** 45×", markdown=True)
    assert shown[2] == f"<details><summary>{exercises.REVEAL_SUMMARY}</summary>\n\n**Found.** 45×\n</details>"
    exercises.reveal({"fastest": "proxy"}, "**Found.** 45×", markdown=True)
    assert shown[3] == "**Found.** 45×"
    monkeypatch.setenv(exercises.SOLVE_VARIABLE, "1")
    exercises.reveal(None, "solved")
    assert capsys.readouterr().out == "solved\n"
