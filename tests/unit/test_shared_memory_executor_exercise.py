"""Lesson 08's "Your turn" on a real fan-out (spawned workers, real shared memory): a wrong prediction
fails the check cell with a hint, the worked solution passes. Also the lesson's correctness tour and
its too-big array, through the real executor."""

import mmap
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from exercise_asserts import (
    assert_misconception_rejected,
    assert_worked_solution_passes,
    assert_wrong_answer_fails,
)

from helpers.lessons import exercises, shared_memory_executor, shared_memory_executor_tour
from helpers.measure.units import MiB
from sharedarrays.executor import SharedMemoryExecutor

pytestmark = pytest.mark.timeout(180)
SPAWN = mp.get_context("spawn")
FAN_COUNTS, ARRAY_BYTES = (1, 3), 16 * MiB  # as the lesson measures; PSS_NOISE a quarter of an array
PSS_NOISE = 4 * MiB


@pytest.fixture(scope="module")
def measured():
    source = np.random.default_rng(1).random(ARRAY_BYTES // 8)
    fans = {n: shared_memory_executor.fan_outs(SPAWN, n, source) for n in FAN_COUNTS}
    return {"noise_arrays": PSS_NOISE / ARRAY_BYTES,
            **{way: {n: fans[n][way].pss_added_in_arrays for n in FAN_COUNTS}
               for way in shared_memory_executor.FAN_OUT_WAYS}}


@pytest.mark.parametrize("wrong, hint", [
    (lambda n: {"stdlib": n, "private": 0, "shared": 0}, "with 'private'"),  # "ours never copies"
    (lambda n: {"stdlib": 1, "private": 1, "shared": 0}, "with 'stdlib'"),  # "one copy for all"
    (lambda n: {"stdlib": n + 1, "private": n + 1, "shared": 0}, "ours keeps no pickled bytes"),
    (lambda n: {"stdlib": n, "private": n, "shared": n}, "with 'shared'"),  # "RSS thinking"
    (lambda n: {"stdlib": 3, "private": 2, "shared": 0}, "and 1 task"),  # right at 2 tasks only
    (lambda n: {"stdlib": n, "private": n}, "function of n"),
    (lambda n: {"stdlib": "n", "private": n, "shared": 0}, "function of n"),
    ({"stdlib": 3, "private": 2, "shared": 0}, "function of n"),  # numbers, not a function of n
])
def test_a_wrong_prediction_fails_the_check_cell_with_a_hint(measured, wrong, hint, monkeypatch):
    assert_wrong_answer_fails(shared_memory_executor.EXERCISE, wrong, hint, monkeypatch, **measured)


@pytest.mark.parametrize("answer, misconception", shared_memory_executor.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(measured, answer, misconception, monkeypatch):
    assert_misconception_rejected(shared_memory_executor.EXERCISE, answer, misconception, monkeypatch,
                                  **measured)


def test_the_worked_solution_passes(measured, monkeypatch, capsys):
    assert_worked_solution_passes(shared_memory_executor.EXERCISE, monkeypatch, capsys, **measured)


def test_an_unanswered_exercise_asks_the_question_and_fails_nothing(measured, monkeypatch, capsys):
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)
    assert exercises.grade(shared_memory_executor.EXERCISE, None, **measured) is False
    assert "Your turn" in capsys.readouterr().out


def test_the_tour_sees_what_the_stdlib_would_and_what_sharing_promises():
    source = np.random.default_rng(2).random(2 * MiB // 8)
    tour = shared_memory_executor_tour.correctness_tour(SPAWN, 1, source, MiB, 8 * MiB)
    assert tour.raised.startswith("ValueError: ") and tour.lent_after_error == 0
    lines = tour.lines()
    assert len(lines) == 12 and lines[0].startswith("submit(") and f"got: {tour.raised};" in lines[1]
    assert lines[-1].endswith("changed: no")
    assert tour.containers_kept and tour.big_ones_shared and tour.small_ones_pickled and tour.table_same
    assert tour.result_views_argument and tour.new_result_right
    assert tour.writes_to_shared_seen and not tour.writes_to_private_seen


def test_the_table_holds_at_least_the_bytes_asked_for():
    table = shared_memory_executor_tour.make_table(MiB)
    assert table.nbytes >= MiB and table.dtype == shared_memory_executor_tour.ROW
    assert set(np.unique(table["ticker"])) <= {"AAPL", "MSFT", "NVDA", "SPY"}


def test_a_thread_waiting_on_a_stdlib_future_gets_the_handle_before_a_done_callback_swaps_it():
    array = np.random.default_rng(3).random(MiB // 8)
    race = shared_memory_executor_tour.unpack_in_a_done_callback(SPAWN, array)
    assert race.waiter_got == "ArrayHandle" and race.after_callback == "ndarray"
    assert race.own_future_waiter_got == "ndarray"  # a future of our own, set after unpacking


def test_our_own_future_carries_the_tasks_error_and_the_unpacked_result():
    with ProcessPoolExecutor(1, mp_context=SPAWN) as pool:
        ours = shared_memory_executor_tour.submit_then_unpack(pool, pow, 2, 10, unpack=lambda n: n + 1)
        assert ours.result(timeout=60) == 1025
        failed = shared_memory_executor_tour.submit_then_unpack(pool, int, "x", unpack=lambda value: value)
        with pytest.raises(ValueError):
            failed.result(timeout=60)


@pytest.mark.parametrize("executor_class", [ProcessPoolExecutor, SharedMemoryExecutor])
def test_a_private_argument_is_copied_when_its_task_is_sent_not_at_submit(executor_class):
    array = np.random.default_rng(5).random(2 * MiB // 8)  # over min_shared_bytes: ours copies it
    seen = shared_memory_executor_tour.write_after_submit_seen(executor_class, SPAWN, 2, array, 0.2)
    assert seen


def test_an_array_larger_than_dev_shm_is_pickled_or_refused_and_the_executor_goes_on():
    source = np.random.default_rng(4).random(MiB // 8)
    too_big = shared_memory_executor_tour.submit_too_big(SPAWN, source, 8 * MiB)
    if too_big.outcome.startswith("pickled"):
        assert too_big.fallbacks == 1 and len(too_big.notices) == 1
    else:  # larger than the memory available too: refused before a byte is written
        assert too_big.outcome.startswith("MemoryError: ") and "pickling it instead" in too_big.outcome
    assert too_big.still_works
    assert too_big.shm_free is not None and too_big.claimed_bytes > too_big.shm_free and too_big.available > 0


def test_the_default_idle_cap_keeps_an_array_only_if_its_segment_fits_under_it():
    cap, keeps = shared_memory_executor.default_cap_keeps(MiB)
    assert 0 < cap <= 1 << 30 and keeps == (cap >= MiB + mmap.PAGESIZE - 64)  # a 64-byte header, whole pages
    assert shared_memory_executor.default_cap_keeps(cap + 1) == (cap, False)
