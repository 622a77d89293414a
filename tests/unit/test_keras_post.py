"""helpers.lessons.keras_post: the Keras post's race at its own setting (Pool(5), a Queue(10) of
apply_async promises emptied by a consumer thread), and the sentence that says why its factor differs."""

import multiprocessing as mp

import pytest

from helpers.lessons import keras_post
from helpers.lessons import send_once_and_managers as send_once

pytestmark = pytest.mark.timeout(120)


def test_the_pipeline_runs_every_task_through_a_bounded_queue_of_promises():
    items = send_once.post_items(1_000)
    with mp.get_context("spawn").Pool(2) as pool:
        send_once.answers_from_every_worker(pool, 2)
        seconds = keras_post.pipelined_seconds(pool, send_once.item_at, [(items, i) for i in range(25)])
        with pytest.raises(IndexError):  # a task that fails: raised once every task has ended, no deadlock
            keras_post.pipelined_seconds(pool, send_once.item_at, [(items, i) for i in range(995, 1020)])
        assert pool.apply(send_once.item_at, (items, 3)) == ("test_string", [1, 3, 4])  # the pool still works
    assert seconds > 0


@pytest.mark.parametrize("here, post, says", [(44, 350, "as in the post; by a smaller factor."),
                                              (3000, 350, "as in the post; by a larger factor."),
                                              (300, 350, "by about the post's factor."),
                                              (0.5, 350, "Unlike in the post, the proxy lost here")])
def test_the_direction_and_the_size_of_the_factor_are_read_from_both_ratios(here, post, says):
    assert says in keras_post.direction_and_size(here, post)


def test_the_posts_own_figures_per_task():
    assert keras_post.post_per_task() == pytest.approx({"every task": 0.38654, "proxy": 0.00111})


@pytest.mark.parametrize("here, cpus, says", [
    ({"every task": 0.39, "proxy": 0.005}, 2,
     "cost about as much per task here as in the post, and a proxy read more: a proxy read is a round trip "
     "to the manager, which waits for a CPU when 5 workers and the manager share 2."),
    ({"every task": 0.1, "proxy": 0.0011}, 8,
     "cost less per task here than in the post, and a proxy read about as much: sending the list is pickling "
     "speed"),
    ({"every task": 0.39, "proxy": 0.0011}, 8, "the two machines agree."),
    ({"every task": 0.39, "proxy": 0.0001}, 2, "read less: a proxy read is a round trip to the manager."),
])
def test_the_sentence_names_only_the_costs_that_moved(here, cpus, says):
    assert says in keras_post.why_the_factor_differs(here, keras_post.post_per_task(), cpus)
