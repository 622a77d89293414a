"""Lesson 03's "Your turn" (the Keras post's race): a wrong prediction fails its check, the worked
solution passes, and the race's three ways run in real spawned pools with a real Manager."""

import multiprocessing as mp

import pytest
from exercise_asserts import assert_misconception_rejected

from helpers.lessons import exercises, send_once_and_managers
from helpers.lessons.send_once_and_managers import EXERCISE

SPAWN = mp.get_context("spawn")
RACE = {"every_task": 0.4, "proxy": 0.004, "installed": 0.0003}  # seconds per task, as measured once


@pytest.fixture(autouse=True)
def no_child_outlives_the_test(monkeypatch):
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)
    yield
    assert mp.active_children() == []


@pytest.mark.parametrize("answer, hint", [
    ({"fastest": "proxy", "proxy_speedup": 100}, "not the fastest"),
    ({"fastest": "installed", "proxy_speedup": 10}, "gained more than that"),
    ({"fastest": "installed", "proxy_speedup": 1000}, "gained less than that"),
    ({"fastest": "installed", "proxy_speedup": 300}, "not from the post's 300×"),  # within 3×, not 2×
    ({"fastest": "installed", "proxy_speedup": "a lot"}, "positive number"),
    ("installed", "answer with a dict"),
])
def test_a_wrong_prediction_fails_with_a_hint(answer, hint):
    with pytest.raises(exercises.WrongAnswer, match=hint):
        exercises.check(EXERCISE, answer, **RACE)


@pytest.mark.parametrize("answer, misconception", EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(answer, misconception, monkeypatch):
    assert_misconception_rejected(EXERCISE, answer, misconception, monkeypatch, **RACE)


@pytest.mark.parametrize("speedup", [55, 100, 190])
def test_a_prediction_within_a_factor_of_two_and_the_worked_solution_pass(speedup, monkeypatch, capsys):
    assert exercises.grade(EXERCISE, {"fastest": "installed", "proxy_speedup": speedup}, **RACE) is True
    assert EXERCISE.solution(**RACE) == {"fastest": "installed", "proxy_speedup": pytest.approx(100)}
    assert exercises.grade(EXERCISE, None, **RACE) is False  # unanswered: the question, no failure
    monkeypatch.setenv(exercises.SOLVE_VARIABLE, "1")
    assert exercises.grade(EXERCISE, None, **RACE) is True
    assert "worked solution" in capsys.readouterr().out


def test_the_race_runs_each_way_in_real_processes():
    items = send_once_and_managers.post_items(1000)
    assert len(items) == 1000 and items[7] == ("test_string", [1, 3, 4])
    with SPAWN.Pool(1) as pool, SPAWN.Manager() as manager:
        proxy = manager.list(items)
        assert pool.apply(send_once_and_managers.item_at, (items, 5)) == items[5]
        assert pool.apply(send_once_and_managers.item_at, (proxy, 5)) == items[5]
    with send_once_and_managers.installed_pool(SPAWN, 1, items) as pool:
        assert pool.apply(send_once_and_managers.installed_item_at, (5,)) == items[5]


def test_prose_figures_keep_two_significant_digits():
    assert send_once_and_managers.approx_seconds(0.4312) == "430 ms"
    assert [send_once_and_managers.approx_ratio(x) for x in (1.234, 143.2, 1523)] == ["1.2", "140", "1,500"]
    assert send_once_and_managers.break_even_verdict(None) == "dearer even with no read at all"
    assert send_once_and_managers.break_even_verdict(0.5) == "dearer from the first read on"
    assert send_once_and_managers.break_even_verdict(201.4) == "cheaper below 201 reads per task"
