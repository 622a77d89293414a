"""Lesson 04's "Your turn" on a real measurement (forked workers iterating over inherited rows, as is
and after gc.freeze(), their USS read from /proc): a wrong prediction fails the check cell with a
hint, the worked solution passes. 'collect' is a worker's gc.collect() with the rows, beyond one
with the rows freed; 'frozen collect' a worker's whole gc.collect() after gc.freeze()."""

import numpy as np
import pytest
from exercise_asserts import (
    assert_misconception_rejected,
    assert_worked_solution_passes,
    assert_wrong_answer_fails,
)

from helpers.lessons import fork_copy_on_write
from helpers.measure.units import MiB

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not fork_copy_on_write.has_fork(), reason="this platform cannot fork")]
N_WORKERS, ARRAY_BYTES = 2, 16 * MiB


@pytest.fixture(scope="module")
def measured():
    array = np.random.default_rng(4).random(ARRAY_BYTES // 8)
    rows = fork_copy_on_write.rows_of_floats(array, ARRAY_BYTES // 256)
    size = fork_copy_on_write.footprint(rows)
    with fork_copy_on_write.installed(rows=rows):
        fans = {"plain": fork_copy_on_write.fan_out("fork", "iterate inherited rows", N_WORKERS),
                "collect": fork_copy_on_write.fan_out("fork", "collect garbage", N_WORKERS)}
        with fork_copy_on_write.frozen_gc():
            fans["frozen"] = fork_copy_on_write.fan_out("fork", "iterate inherited rows", N_WORKERS)
            fans["frozen_collect"] = fork_copy_on_write.fan_out("fork", "collect garbage", N_WORKERS)
    del rows
    no_rows = fork_copy_on_write.fan_out("fork", "collect garbage", N_WORKERS)
    share = {name: float(np.mean([w.uss_growth for w in fan.workers])) / size for name, fan in fans.items()}
    share["collect"] -= float(np.mean([w.uss_growth for w in no_rows.workers])) / size
    return share


@pytest.mark.parametrize("wrong, hint", [
    # "nothing is copied, as with the array"
    ({"plain": 0.0, "frozen": 0.0, "collect": 0.0, "frozen collect": 0.0}, "'plain'.*reference count"),
    # "gc.freeze() keeps the rows shared"
    ({"plain": 1.0, "frozen": 0.0, "collect": 0.5, "frozen collect": 0.0}, "'frozen'.*gc.freeze"),
    # "only what a child touches is copied"
    ({"plain": 1.0, "frozen": 1.0, "collect": 0.0, "frozen collect": 0.0}, "'collect'.*header"),
    # "a collection writes every object"
    ({"plain": 1.0, "frozen": 1.0, "collect": 1.0, "frozen collect": 0.0}, "'collect'.*floats"),
    # "gc.freeze() is useless"
    ({"plain": 1.0, "frozen": 1.0, "collect": 0.5, "frozen collect": 0.5}, "'frozen collect'.*skips"),
    # "the whole parent is copied"
    ({"plain": 5.0, "frozen": 5.0, "collect": 5.0, "frozen collect": 5.0}, "'plain'"),
    ({"plain": 1.0, "frozen": 1.0, "collect": 0.5}, "dict of four numbers"),
    ([1.0, 1.0, 0.5, 0.0], "dict of four numbers"),
    ({"plain": "all", "frozen": 1.0, "collect": 0.5, "frozen collect": 0.0}, "dict of four numbers"),
])
def test_a_wrong_prediction_fails_the_check_cell_with_a_hint(measured, wrong, hint, monkeypatch):
    assert_wrong_answer_fails(fork_copy_on_write.EXERCISE, wrong, hint, monkeypatch, **measured)


@pytest.mark.parametrize("answer, misconception", fork_copy_on_write.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(measured, answer, misconception, monkeypatch):
    assert_misconception_rejected(fork_copy_on_write.EXERCISE, answer, misconception, monkeypatch, **measured)


def test_the_worked_solution_passes(measured, monkeypatch, capsys):
    assert_worked_solution_passes(fork_copy_on_write.EXERCISE, monkeypatch, capsys, **measured)


def test_section_2_checks_hold_on_the_solutions_figures_and_fail_on_a_misconception():
    rows = 64 * MiB
    least = {"iterate": rows, "iterate, gc.freeze()": rows, "gc.collect()": 60 * MiB,
             "gc.collect(), rows freed": 29 * MiB}
    most = {"gc.collect(), gc.freeze()": MiB}
    assert all(fork_copy_on_write.section_2_checks(least, most, 0.5 * rows, rows).values())
    frozen_spares_iterating = {**least, "iterate, gc.freeze()": 0}
    held = fork_copy_on_write.section_2_checks(frozen_spares_iterating, most, 0.5 * rows, rows)
    assert not held["frozen-iterating-copies"]
    assert not fork_copy_on_write.section_2_checks(least, most, rows, rows)["collection-spares-floats"]
