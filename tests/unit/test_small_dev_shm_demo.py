"""Lesson 08's demonstration on a private 64 MiB /dev/shm: ours pickles what does not fit and is right."""

from __future__ import annotations

import pytest

from helpers.lessons import small_dev_shm


@pytest.mark.skipif(small_dev_shm.why_not_here() is not None, reason=str(small_dev_shm.why_not_here()))
@pytest.mark.timeout(180)
def test_on_64_mib_ours_gives_every_right_answer_the_stdlib_gives_and_says_it_pickled():
    run = small_dev_shm.run_with_small_dev_shm("forkserver")
    assert run.stdlib_right == [True] * 7
    assert run.ours_right == run.stdlib_right
    assert run.pickled_fallbacks > 0 and len(run.notices) == 1 and "pickled_fallbacks" in run.notices[0]
    assert len(run.pickled_by_task) == 7 and sum(map(sum, run.pickled_by_task)) == run.pickled_fallbacks
    assert "the results of tasks" in run.which_pickled()  # no room left for a result once some are held
    assert run.left == []
    lines = run.task_lines()
    assert len(lines) == 7 and lines[0].startswith("task 1 (20 MiB): argument in a new segment")


def test_a_reason_is_one_line_or_none():
    reason = small_dev_shm.why_not_here()
    assert reason is None or (reason and "\n" not in reason)


def test_which_pickled_names_the_tasks_by_kind():
    run = small_dev_shm.SmallShmRun(64, [True] * 3, [True] * 3, 3, [[0, 0], [1, 1], [0, 1]], ["n"], [])
    assert run.which_pickled() == "the arguments of task 2 and the results of tasks 2, 3"
    assert small_dev_shm.SmallShmRun(64, [], [], 0, [[0, 0]], [], []).which_pickled() == "none"


def test_task_lines_say_what_the_pool_did_for_each_task():
    steps = [{"mib": 20, "new": 1, "reused": 0, "unlinked": 0, "result_shared": True, "used_mib": 40.2},
             {"mib": 24, "new": 1, "reused": 0, "unlinked": 1, "result_shared": False, "used_mib": 24.0}]
    run = small_dev_shm.SmallShmRun(64, [True] * 2, [True] * 2, 1, [[0, 0], [0, 1]], ["n"], [], steps)
    assert run.task_lines() == [
        "task 1 (20 MiB): argument in a new segment; result shared; "
        "/dev/shm used while its result was held: 40 MiB",
        "task 2 (24 MiB): argument in a new segment, 1 idle segment unlinked; result pickled (40.0 MiB free: "
        "short of a 24 MiB segment plus its header); /dev/shm used while its result was held: 24 MiB"]
