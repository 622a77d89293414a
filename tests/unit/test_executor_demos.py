"""helpers.lessons.shared_memory_executor: lesson 08's hand-built version, its measurements and its
demonstrations.

Real worker processes and real /dev/shm segments throughout; the autouse fixture in conftest.py
fails any test that leaves a segment behind.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import psutil
import pytest

from helpers.lessons import shared_memory_executor, workers
from helpers.measure.leftovers import SEGMENT_PREFIX, SHM_DIR
from helpers.measure.units import MiB
from sharedarrays.executor import SharedMemoryExecutor
from sharedarrays.shm import SharedNDArray, handle_of

SPAWN = mp.get_context("spawn")


def random_array(n_bytes: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random(n_bytes // 8)


def segments_of(pid: int) -> list[str]:
    return [name for name in os.listdir(SHM_DIR) if name.startswith(f"{SEGMENT_PREFIX}{pid}_")]


@pytest.fixture(scope="module")
def stdlib_pool():
    with ProcessPoolExecutor(1, mp_context=SPAWN) as pool:
        yield pool


def test_submit_with_handles_returns_the_workers_answer_and_unlinks(stdlib_pool):
    array = random_array(2 * MiB)
    assert shared_memory_executor.submit_with_handles(stdlib_pool, workers.sum_array, array) == pytest.approx(
        float(array.sum()))
    assert segments_of(os.getpid()) == []


def test_submit_with_handles_unlinks_when_the_task_raises(stdlib_pool):
    with pytest.raises(ValueError):
        shared_memory_executor.submit_with_handles(stdlib_pool, workers.fill_in_place, random_array(MiB),
                                           "not a number")
    assert segments_of(os.getpid()) == []


def test_round_trips_of_both_executors():
    array = random_array(2 * MiB)
    with SharedMemoryExecutor(1, SPAWN) as ours:
        trips = shared_memory_executor.time_round_trips(ours, array, repeat=2)
        assert ours.segment_pool.created == 1 and ours.segment_pool.reused >= 2  # first call made it
    assert trips.first > 0 and len(trips.warm.runs) == 2 and trips.shared is not None
    assert len(trips.warm_copy.runs) == 2  # floor (a), timed in turns with the warm calls
    with ProcessPoolExecutor(1, mp_context=SPAWN) as stdlib:
        stdlib_trips = shared_memory_executor.time_round_trips(stdlib, array, repeat=2, shared=False)
    assert stdlib_trips.shared is None and stdlib_trips.warm.median > 0


def test_a_new_big_result_is_timed_with_its_own_segment_unlinked_each_call():
    array = random_array(2 * MiB)
    with SharedMemoryExecutor(1, SPAWN) as ours:
        names = []
        timing = shared_memory_executor.time_new_results(ours, array, repeat=2, result_segments=names)
        assert ours.segment_pool.created == 1  # the argument's, reused; each result had a segment of its own
        assert len(segments_of(os.getpid())) == 1  # the results' were unlinked as they were dropped
    assert len(timing.runs) == 2 and timing.min > 0
    assert len(names) == 3 and None not in names and len(set(names)) == 3, names  # warm-up included


def test_each_first_call_makes_a_new_segment_and_the_parts_of_a_new_result_are_timed():
    array = random_array(2 * MiB)
    with SharedMemoryExecutor(1, SPAWN) as ours:
        ours.submit(workers.echo, array).result()  # a warm segment the first calls must not reuse
        alone = []
        firsts = shared_memory_executor.time_first_calls(ours, array, repeat=2, segments=alone)
        assert ours.segment_pool.created == 5  # a new segment for each call and each lone segment
        parts = shared_memory_executor.time_new_result_parts(ours, array, repeat=2)
    assert len(firsts.runs) == 2 and firsts.min > 0 and len(alone) == 2 and min(alone) > 0
    assert all(len(timing.runs) == 2 for timing in parts) and parts.read.min > 0 and parts.read_shared.min > 0


def test_a_hand_built_call_and_what_it_contains_are_timed_in_turns():
    array = random_array(4 * MiB)
    with ProcessPoolExecutor(1, mp_context=SPAWN) as pool:
        parts = shared_memory_executor.time_call_and_parts(pool, array, repeat=2)
    timings = (parts.warm, parts.new_segment, parts.segment_steps, parts.copy_of, parts.release, parts.call,
               parts.segment_steps_cpu, parts.call_cpu)
    assert all(len(timing.runs) == 2 for timing in timings), timings
    within = zip(parts.segment_steps.runs, parts.copy_of.runs, parts.release.runs, strict=True)
    for steps, made, released in within:  # copy_of, then close and unlink: timed inside the steps' run
        assert made + released <= steps
    assert parts.call.min > parts.warm.min  # a call copies the array into new pages, then a round trip
    # this thread's CPU: the call does the steps' work (freeing the pages may fall to the worker), no waiting
    assert parts.call_cpu.min >= 0.75 * parts.segment_steps_cpu.min, (parts.call_cpu, parts.segment_steps_cpu)
    assert parts.call_cpu.min <= parts.call.min


def test_fan_out_memory_sees_a_copy_per_worker_only_when_the_array_is_private():
    array = random_array(16 * MiB)
    copied = shared_memory_executor.fan_out_memory(ProcessPoolExecutor, SPAWN, 2, array, hold_seconds=0.5)
    with SharedNDArray.copy_of(array) as shared:
        attached = shared_memory_executor.fan_out_memory(SharedMemoryExecutor, SPAWN, 2, shared.array,
                                                 hold_seconds=0.5)
    assert copied.pss_added_in_arrays >= 1.5
    assert attached.pss_added_in_arrays <= 0.5
    assert {"idle holding", "fan-out end"} <= set(attached.report.marks)


@pytest.mark.timeout(120)
def test_one_map_call_holds_one_copy_of_an_array_it_passes_to_every_call():
    """``map(f, [array] * n)``: one copy in /dev/shm and in the tree's PSS, where separate submits
    (and the stdlib's map) hold one per worker."""
    array = random_array(16 * MiB)
    by_map = shared_memory_executor.fan_out_memory(SharedMemoryExecutor, SPAWN, 2, array, hold_seconds=0.5,
                                                   by_map=True)
    by_submit = shared_memory_executor.fan_out_memory(SharedMemoryExecutor, SPAWN, 2, array, hold_seconds=0.5)
    stdlib_map = shared_memory_executor.fan_out_memory(ProcessPoolExecutor, SPAWN, 2, array, hold_seconds=0.5,
                                                       by_map=True)
    assert 0.7 <= by_map.pss_added_in_arrays <= 1.3, by_map.grew
    assert by_submit.pss_added_in_arrays >= 1.7 and stdlib_map.pss_added_in_arrays >= 1.5, (
        by_submit.grew, stdlib_map.grew)
    shm_grew = by_map.grew["/dev/shm bytes"] / array.nbytes
    assert 0.7 <= shm_grew <= 1.3 and by_submit.grew["/dev/shm bytes"] / array.nbytes >= 1.7, (
        by_map.grew, by_submit.grew)


@pytest.mark.timeout(120)
def test_the_stdlib_keeps_the_last_pickled_task_in_this_process_until_the_next_one_is_sent():
    """Lesson 08 says so of the stdlib's third array: each worker holds its copy, and this process
    the bytes of the last task pickled, which the call queue's feeder thread keeps until it sends
    another (multiprocessing.queues.Queue._feed)."""
    array = random_array(64 * MiB)  # above glibc's mmap threshold: freed bytes go back at once
    me = psutil.Process()
    with ProcessPoolExecutor(1, mp_context=SPAWN) as stdlib:
        stdlib.submit(len, b"").result()  # the worker and the feeder thread have started
        before = me.memory_full_info().uss
        assert stdlib.submit(len, array).result() == len(array)
        kept = me.memory_full_info().uss - before
        stdlib.submit(len, b"").result()  # the next task replaces the kept bytes
        released = me.memory_full_info().uss - before
    assert kept >= 0.9 * array.nbytes and released <= 0.1 * array.nbytes, (kept, released)
    fan = shared_memory_executor.fan_out_memory(ProcessPoolExecutor, SPAWN, 2, array, hold_seconds=0.5)
    by_role = fan.added_by_role()
    workers_added = sum(added for role, added in by_role.items() if role.startswith("worker"))
    assert abs(by_role["parent"] - 1) < 0.2 and abs(workers_added - 2) < 0.3, by_role


def test_callers_see_arrays_and_the_segment_is_back_before_done():
    with SharedMemoryExecutor(1, SPAWN) as executor:
        seen = shared_memory_executor.callers_view(executor, random_array(2 * MiB), n_threads=3)
    assert seen.callback_saw == "ndarray" and seen.threads_saw == ["ndarray"] * 3
    assert seen.lent_bytes_in_callback == 0


def test_a_namedtuple_of_arrays_crosses_with_its_type():
    batch = shared_memory_executor.Batch(random_array(2 * MiB), np.arange(10))
    with SharedMemoryExecutor(1, SPAWN) as executor:
        echoed = executor.submit(workers.echo, batch).result()
        assert type(echoed) is shared_memory_executor.Batch and handle_of(echoed.images) is not None
        assert np.array_equal(echoed.images, batch.images) and np.array_equal(echoed.labels, batch.labels)
        del echoed


def test_using_the_executor_patches_nothing_global():
    assert all(shared_memory_executor.globals_after_use().values())


def test_a_program_killed_mid_task_leaves_nothing_with_the_executor():
    outcome = shared_memory_executor.kill_program_mid_task(2 * MiB, way="executor", n_tasks=2)
    assert len(outcome.segments) == 2
    assert outcome.left_after == [] and outcome.seconds_to_clean is not None and outcome.orphans == []
    assert outcome.left_at_end == [] and outcome.gone_after_orphans_ended is not None
    assert any("shared_memory" in line for line in outcome.tracker_warnings)


def test_the_hand_built_version_killed_mid_task_is_cleaned_up_by_the_demonstration():
    outcome = shared_memory_executor.kill_program_mid_task(MiB, way="hand-built", n_tasks=1, wait_seconds=0.5)
    assert len(outcome.segments) == 1
    assert outcome.left_after == outcome.segments and len(outcome.orphans) == 1  # a stdlib worker lingers
    creator_pid = int(outcome.segments[0].split("_")[1])
    assert segments_of(creator_pid) == []  # gone once the helper has ended the orphan
    assert outcome.left_at_end == [] and outcome.gone_after_orphans_ended is not None
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in outcome.orphans)


def test_kill_program_mid_task_names_its_ways():
    with pytest.raises(ValueError, match="hand-built"):
        shared_memory_executor.kill_program_mid_task(MiB, way="fork bomb")
