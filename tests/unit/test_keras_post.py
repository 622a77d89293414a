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


def test_the_posts_own_figures_per_task():
    assert keras_post.post_per_task() == pytest.approx({"every task": 0.38654, "proxy": 0.00111})


@pytest.mark.parametrize("here, cpus, alone, says", [
    ({"every task": 0.39, "proxy": 0.005}, 2, 0.0015,
     "cost about as much per task here as in the post, and a proxy read more. A proxy read is a round trip "
     "to the manager, which waits for a CPU when 5 workers and the manager share 2 (one task at a time: "
     "1.5 ms)."),
    ({"every task": 0.05, "proxy": 0.0015}, 2, 0.0015,
     "A proxy read is a round trip to the manager, and one task at a time it cost about as much (1.5 ms): "
     "this machine's round trip, not the five workers."),
    ({"every task": 0.1, "proxy": 0.0011}, 8, 0.0011,
     "cost less per task here than in the post, and a proxy read about as much. Sending the list is pickling "
     "speed"),
    ({"every task": 0.39, "proxy": 0.0011}, 8, 0.0011, "the two machines agree."),
    ({"every task": 0.39, "proxy": 0.0001}, 2, 0.0001,
     "read less. A proxy read is a round trip to the manager."),
])
def test_the_sentence_names_only_the_costs_that_moved(here, cpus, alone, says):
    assert says in keras_post.why_the_factor_differs(here, keras_post.post_per_task(), cpus, alone)


def test_a_dearer_proxy_is_blamed_on_the_five_workers_only_if_it_cost_less_one_task_at_a_time():
    posted = keras_post.post_per_task()
    same = keras_post.why_the_factor_differs({"every task": 0.05, "proxy": 0.0015}, posted, 2, 0.0015)
    slower_pipelined = keras_post.why_the_factor_differs({"every task": 0.05, "proxy": 0.004}, posted, 2,
                                                         0.0015)
    assert "not the five workers" in same and "waits for a CPU" not in same
    assert "waits for a CPU" in slower_pipelined and "not the five workers" not in slower_pipelined


def test_pipelined_against_one_at_a_time_names_each_change_and_labels_its_reason():
    alone = {"every task": 0.073, "proxy": 0.00081}
    both = keras_post.against_one_at_a_time({"every task": 0.050, "proxy": 0.0014}, alone, 2)
    assert both == ("One task at a time (the race's medians), they cost 73 ms and 810 µs (90×); "
                    "pipelined, likely, the list gains as one task's pickling overlaps another's unpickling, "
                    "and the proxy loses as 5 workers wait for 2 CPUs.")
    on_many_cpus = keras_post.against_one_at_a_time({"every task": 0.073, "proxy": 0.0014}, alone, 8)
    assert on_many_cpus == ("One task at a time (the race's medians), they cost 73 ms "
                            "and 810 µs (90×).")
    assert keras_post.against_one_at_a_time(alone, alone, 2) == ""
    proxy_as_alone = keras_post.against_one_at_a_time({"every task": 0.050, "proxy": 0.0009}, alone, 2)
    assert proxy_as_alone.endswith("the proxy gains nothing as 5 workers wait for 2 CPUs.")


def test_a_proxy_dearer_pipelined_is_not_explained_twice_when_the_sentence_before_said_it():
    posted = {"every task": 0.387, "proxy": 0.00111}
    at_post = {"every task": 0.049, "proxy": 0.0018}
    said = keras_post.why_the_factor_differs(at_post, posted, 2, 0.00095, pipelining_said=True)
    assert "waits for a CPU" not in said and "a proxy read more." in said
    assert "waits for a CPU" in keras_post.why_the_factor_differs(at_post, posted, 2, 0.00095)
    only_proxy = keras_post.why_the_factor_differs({"every task": 0.387, "proxy": 0.0018}, posted, 2, 0.00095,
                                                   pipelining_said=True)
    assert only_proxy.endswith("and a proxy read more.") and "agree" not in only_proxy
