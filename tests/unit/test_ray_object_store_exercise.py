"""Lesson 10's "Your turn" (``dask_cluster.EXERCISE``: how many copies the workers get with
``client.scatter(array, broadcast=True)``'s future and with the array itself in every task): a wrong
pair fails the check cell with a hint, the worked solution passes on the same measurements (as the
lesson's check cell is called)."""

import pytest
from exercise_asserts import (
    assert_misconception_rejected,
    assert_worked_solution_passes,
    assert_wrong_answer_fails,
)

from helpers.lessons import dask_cluster

N_WORKERS = 2
TASKS = dask_cluster.TASKS_PER_WORKER * N_WORKERS
MEASURED = {"copies": (N_WORKERS, TASKS), "n_workers": N_WORKERS}  # one per worker; one per task


@pytest.mark.parametrize("wrong, hint", [
    ((1, 1), "got 2 and 6 copies"),  # Ray's ray.put both ways: one per node
    ((N_WORKERS, N_WORKERS), "got 2 and 6 copies"),  # one per worker both ways
    ((TASKS, N_WORKERS), "got 2 and 6 copies"),  # the two ways swapped
    ((dask_cluster.TASKS_PER_WORKER, TASKS), "got 2 and 6 copies"),  # the question's number, guessed
    (N_WORKERS, "two whole numbers"),  # the old exercise's answer, one number
    ((2, "six"), "two whole numbers"),
    ((True, 6), "two whole numbers"),
    ((2, 6, 0), "two whole numbers"),
])
def test_a_wrong_answer_fails_the_exercise(wrong, hint, monkeypatch):
    assert_wrong_answer_fails(dask_cluster.EXERCISE, wrong, hint, monkeypatch, **MEASURED)


def test_a_list_answers_as_a_tuple_does():
    assert dask_cluster.EXERCISE.check([N_WORKERS, TASKS], **MEASURED) is None


@pytest.mark.parametrize("answer, misconception", dask_cluster.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(answer, misconception, monkeypatch):
    assert_misconception_rejected(dask_cluster.EXERCISE, answer, misconception, monkeypatch, **MEASURED)


def test_the_worked_solution_passes(monkeypatch, capsys):
    assert_worked_solution_passes(dask_cluster.EXERCISE, monkeypatch, capsys, **MEASURED)


def test_a_nodes_growth_is_split_into_its_store_and_its_raylets_heap():
    from helpers.lessons import ray_object_store

    assert ray_object_store.store_page_kind("/dev/shm") == "shared memory"
    growth = {"anonymous": 150.0, "files (code, libraries)": 128.0, "shared memory": 0.0}
    split = ray_object_store.growth_by_kind_markdown
    assert split(growth, "files (code, libraries)", 128) == ": 1.0 in its store and 1.2 of private memory"
    assert split({}, "shared memory", 128) == ""
    # the raylet kept all of the node's private growth: one figure
    assert split(growth, "files (code, libraries)", 128, raylet_heap=148.0) == (
        ": 1.0 in its store and 1.2 of heap its raylet kept after the transfer")
    # the workers grew too: both figures
    assert split(growth, "files (code, libraries)", 128, raylet_heap=115.2) == (
        ": 1.0 in its store and 1.2 of private memory, 0.9 of it heap its raylet kept after the transfer")


def test_pss_beyond_the_stores_copies_is_named_only_when_there_is_some():
    from helpers.lessons import ray_object_store

    def memory(tree_pss, driver_pss):
        return ray_object_store.FanOutMemory("by value", 256, tree_pss, 512.0, None, driver_pss)

    beyond = ray_object_store.pss_beyond_store
    assert beyond(memory(258.0, 129.0), 128, 128.0) == ""  # 2.0 and 2.0 at one decimal: nothing to say
    assert beyond(memory(320.0, 192.0), 128, 128.0) == (
        " (0.5 beyond the store's, 0.5 of it the driver's own memory)")
    assert beyond(memory(320.0, 130.0), 128, 128.0) == (  # not in the driver
        " (0.5 beyond the store's: other memory in the tree moves too)")
    assert beyond(memory(279.0, 130.0), 128, 128.0) == (  # 2.2 against 2.0: as the conclusion prints them
        " (0.2 beyond the store's: other memory in the tree moves too)")
    assert beyond(memory(239.0, 120.0), 128, 128.0) == (  # PSS grew less than the store held
        " (0.1 below the store's: other memory in the tree moves too)")


def test_a_put_figure_says_how_many_puts_it_is_the_median_of():
    from helpers.lessons import ray_object_store

    figure = ray_object_store.put_figure
    assert figure(0.00776, 1) == "7.76 ms (1 put)"  # one sample is no median
    assert figure(0.0554, 2) == "55.4 ms (median of 2)"
    assert figure(None, 0) == "-"


def test_node_1s_put_splits_the_transfer_as_the_figures_are_shown():
    from helpers.lessons import ray_object_store

    node = {"written_put_seconds": 0.00776, "fresh_put_seconds": 0.05538, "put_seconds": 0.02,
            "puts": [0.0] * 5, "written_puts": 3, "fresh_puts": 2}
    head = {"written_put_seconds": 0.00893, "fresh_put_seconds": None, "put_seconds": 0.00893,
            "puts": [0.0] * 3, "written_puts": 3, "fresh_puts": 0}
    text = ray_object_store.node_put_markdown(0.15260, node, head, head_in_shm=True)
    assert text == ("A put into node 1's file store took 7.76 ms into pages already written (0.9× the "
                    "head's `/dev/shm`, 8.93 ms; medians of 3 and 3 puts) and 55.4 ms into fresh ones "
                    "(median of 2). The transfer's other 97.6 ms we did not split: TCP and the raylet "
                    "heap below.")  # 153 - 55.4 as shown, not 152.6 - 55.38
    one = {**node, "written_puts": 1}  # one sample: too few to say which store is faster
    assert "(0.9× the head's `/dev/shm`, 8.93 ms; 1 put against 3: too few to rank the stores)" in (
        ray_object_store.node_put_markdown(0.15260, one, head, head_in_shm=True))
    unsplit = {**node, "written_put_seconds": None, "fresh_put_seconds": None,
               "written_puts": 0, "fresh_puts": 0}  # the kernel does not split PSS
    assert ray_object_store.node_put_markdown(0.15260, unsplit, head, head_in_shm=False).endswith(
        "(2.2× the head's store, 8.93 ms; medians of 5 and 3 puts). The transfer's other 133 ms "
        "we did not split: TCP, fresh pages and the raylet heap below.")
    assert ray_object_store.node_put_markdown(0.05, node, head, head_in_shm=True).endswith(
        "That put took as long as the whole transfer: nothing is left to split.")
