"""The "Your turn" exercises of the lessons: the learner answers in a cell, a check cell says whether
the answer holds on this run's measurements.

Each lesson module defines its exercise as an ``Exercise``: a question, a ``check(answer,
**measured)`` that returns ``None`` for a right answer or one sentence saying what is wrong, and a
``solution(**measured)`` that gives the worked answer from the same measurements (so a right answer
may differ between machines: "the size at which X wins" is read off this run). In the notebook::

    answer = None  # your prediction: replace None
    exercises.check(lesson.EXERCISE, answer, size_mib=..., ratio=...)

A wrong answer raises ``WrongAnswer`` (an ``AssertionError``: the cell fails, as a check cell
does, with the hint as its message); a right one prints why it is right. An answer left at
``None`` prints the question again and fails nothing, so the lesson still runs top to bottom
before the learner has tried (it also says whether the worked solution holds on this run, without
giving it away, so a stored lesson cannot ship a solution its own run contradicts); with
``LAB_SOLVE_EXERCISES=1`` (``make test`` sets it) the worked solution is checked in its place,
which proves that every exercise can be solved on the machine that runs it. The unit tests feed
each exercise a wrong answer, which proves that its check can fail.

Each exercise also names the misconceptions it exists to catch: ``misconceptions``, a tuple of
``(answer, description)`` pairs, where ``answer`` is what a learner holding that misconception would
answer, in the exercise's own answer format, and ``description`` one line naming the misconception,
e.g. ``("300", "the post's figure, measured on another machine and setting")``. Each lesson's unit
test feeds every one of them to the check with that test's typical measurements and expects a
``WrongAnswer``: a check that accepts a named misconception is too loose.

What the run measured that answers an exercise, printed after its check, goes through ``reveal``:
printed once the learner has answered (or ``LAB_SOLVE_EXERCISES`` is set), shown collapsed before
that, so that a reader scrolling the stored lesson does not read the answer by accident::

    exercises.reveal(answer, f"whole: {whole:.2f} arrays; slices: {slices:.2f} arrays")
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SOLVE_VARIABLE = "LAB_SOLVE_EXERCISES"
SOLUTION_HOLDS = "The worked solution, collapsed below, holds on this run."
SOLUTION_FAILS = "On this run the worked solution below does not hold"


class WrongAnswer(AssertionError):
    """The learner's answer does not hold on this run's measurements."""


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``check`` returns None when ``answer`` is right, else a one-sentence hint;
    ``solution`` computes the worked answer from the same keyword measurements.

    ``misconceptions``: the misconceptions the exercise exists to catch, each a pair (the answer a
    learner holding it would give, in the exercise's answer format; one line naming it). The check
    must reject every one of them on typical measurements (each lesson's unit test feeds them)."""

    name: str
    question: str
    check: Callable[..., str | None]
    solution: Callable[..., Any]
    explanation: str = ""
    misconceptions: tuple[tuple[object, str], ...] = ()


def solving() -> bool:
    """True when the worked solutions stand in for unanswered exercises (``LAB_SOLVE_EXERCISES``)."""
    return os.environ.get(SOLVE_VARIABLE, "") not in ("", "0")


def check(exercise: Exercise, answer: Any, **measured: Any) -> None:
    """The check cell's call: ``grade`` without a value to show, so the cell's only output is
    the printed verdict (a returned bool would be displayed under it as a bare True or False)."""
    grade(exercise, answer, **measured)


def worked_solution_verdict(exercise: Exercise, **measured: Any) -> str:
    """One line saying whether the worked solution holds on this run's ``measured`` values, without
    giving it away: the check's own printout is swallowed, its hint (which may name the measured
    answer) is not shown, and a check that raises is reported, not raised; a stored lesson whose
    solution the run contradicts says so (a test reads it)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            problem = exercise.check(exercise.solution(**measured), **measured)
    except Exception as error:  # the lesson goes on; the stored-output test fails on this line
        return f"({SOLUTION_FAILS}: its check raised {type(error).__name__}.)"
    return f"({SOLUTION_HOLDS})" if problem is None else f"({SOLUTION_FAILS}.)"


def grade(exercise: Exercise, answer: Any, **measured: Any) -> bool:
    """Check ``answer`` against this run's ``measured`` values; print the verdict and return True
    when right. Raises ``WrongAnswer`` with the hint when wrong. An answer of None prints the
    question and whether the worked solution holds on this run, and returns False, unless
    ``solving()``: then the worked solution is checked instead."""
    if answer is None:
        if not solving():
            print(f"Your turn ({exercise.name}): {exercise.question}\n"
                  "Replace None in `answer = None`, the cell under 'Your turn', with your answer, "
                  "then run the cells from there down to this one again.\n"
                  + worked_solution_verdict(exercise, **measured))
            return False
        answer = exercise.solution(**measured)
        print(f"({SOLVE_VARIABLE} is set: checking the worked solution.)")
    problem = exercise.check(answer, **measured)
    if problem is not None:
        raise WrongAnswer(f"Not quite: {problem}")
    print(f"Right. {exercise.explanation}".rstrip())
    return True


REVEAL_SUMMARY = "What this run measured (open after predicting)"


def reveal(answer: Any, text: str, summary: str = REVEAL_SUMMARY, markdown: bool = False) -> None:
    """Show ``text`` (what this run measured that answers the exercise): shown when ``answer`` has
    been given or ``solving()``; otherwise displayed collapsed, as a ``<details>`` block whose
    ``summary`` asks the reader to predict first (a stored lesson is read unanswered). ``text`` is
    printed as it is, or with ``markdown`` rendered as Markdown."""
    from IPython.display import Markdown, display

    if answer is not None or solving():
        if markdown:
            display(Markdown(text))
        else:
            print(text)
        return
    if markdown:
        display(Markdown(f"<details><summary>{summary}</summary>\n\n{text}\n</details>"))
        return
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    display(Markdown(f"<details><summary>{summary}</summary>\n\n{fence}text\n{text}\n{fence}\n</details>"))
