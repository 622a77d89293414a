"""helpers.lessons.dask_cluster (the lesson's measurements, the functions its workers run) and
helpers.bench.dask_strategies through the harness, on a real Dask LocalCluster: real spawned worker
processes, real transfers, the tree's real PSS.

Dask never runs in the pytest process: once a LocalCluster has run, Dask leaves a thread in its
process (``Dask-Offload_0``), and later tests fork (Python 3.12+ warns about a fork in a
multi-threaded process, and warnings are errors here). So ``SCRIPT`` runs in a subprocess, once for
the module, measures what the tests check and prints it as JSON; it also leaves one session by an
exception after killing a worker, and reports what each session left. The autouse fixture in
conftest.py still checks each test for /dev/shm entries and temp folders left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.lessons import dask_cluster
from helpers.measure.units import MiB

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(dask_cluster.dask_available() is not None,
                                 reason=str(dask_cluster.dask_available()))]

ROOT = Path(__file__).resolve().parents[2]
ARRAY_BYTES = 16 * MiB
N_WORKERS = 2
SCRIPT_TIMEOUT = 240  # seconds: three cluster start-ups and the measurements, on 2 busy cores
FACTS = "FACTS: "

SCRIPT = textwrap.dedent('''
    import contextlib, json, os, signal, sys, tempfile, threading, time

    import numpy as np
    import psutil

    from helpers.bench import dask_strategies, harness
    from helpers.lessons import dask_cluster
    from helpers.measure import leftovers

    ARRAY_BYTES, N_WORKERS = int(sys.argv[1]), int(sys.argv[2])
    before = leftovers.snapshot()
    scratch = os.path.join(tempfile.gettempdir(), "dask-scratch-space")  # Dask's default, not ours
    scratch_before = os.path.exists(scratch)
    array = np.random.default_rng(0).random(ARRAY_BYTES // 8)
    facts = {"expected_sum": float(array.sum())}
    with dask_cluster.dask_cluster(N_WORKERS) as session:
        facts["workers"] = len(session.workers)
        facts["worker_pids_are_children"] = all(
            psutil.Process(pid).ppid() == os.getpid() for pid in session.worker_pids)
        facts["warning"] = dask_cluster.large_graph_warning(session, array)
        dask_cluster.wait_until_stores_empty(session)
        facts["sums"] = dask_cluster.fan_out(session, array)
        timings = dask_cluster.time_fan_outs(session, array, rounds=1, repeat=2)
        facts["timings"] = {how: list(t.runs) for how, t in timings.items()}
        for how in ("scatter once", "by value"):
            held = dask_cluster.held_fan_out(session, array, how)
            facts[how] = {"tree_pss": held.tree_pss, "role_pss": held.role_pss,
                          "store_bytes": held.store_bytes, "crossed": held.crossed_between_workers,
                          "from_store": held.from_store}
        facts["sources"] = dask_cluster.argument_sources(session, array)
        facts["exercise_copies"] = dask_cluster.scattered_copies(session, array, N_WORKERS)
        facts["copies_each_way"] = dask_cluster.copies_each_way(session, array, N_WORKERS)
        facts["stores_after"] = [f["keys"] for f in dask_cluster.stores(session).values()]
        # Dask's default, the active memory manager on: broadcast's extra copies are dropped
        facts["amm_off_in_session"] = not session.client.amm.running()
        session.client.amm.start()
        future = session.client.scatter(array, broadcast=True)
        holders = [len(session.client.who_has(future)[future.key])]
        deadline = time.monotonic() + 15
        while holders[-1] > 1 and time.monotonic() < deadline:
            time.sleep(0.2)
            holders.append(len(session.client.who_has(future)[future.key]))
        facts["holders_with_amm"] = [holders[0], holders[-1]]
        session.client.amm.stop()
        future.release()
        dask_cluster.wait_until_stores_empty(session)
    facts["left_by_session"] = dask_cluster.what_dask_left(session)

    killed = None
    try:
        with dask_cluster.dask_cluster(N_WORKERS) as broken:
            killed = broken
            os.kill(broken.worker_pids[0], signal.SIGKILL)
            raise KeyError("an error inside the block")
    except KeyError:
        facts["error_propagated"] = True
    facts["left_after_kill_and_error"] = dask_cluster.what_dask_left(killed)

    strategies = {"dask_scatter": dask_strategies.DaskScatter, "dask_by_value": dask_strategies.DaskByValue}
    for name, cls in strategies.items():
        measured = harness.measure(cls(array, N_WORKERS, contextlib.ExitStack()), repeat=1)
        facts[name] = {"pss_added": measured.pss_added, "fan_out": list(measured.fan_out.runs),
                       "round_trip": list(measured.round_trip.runs), "setup_s": measured.setup_s}

    facts["children_left"] = [p.pid for p in psutil.Process().children(recursive=True)
                              if "resource_tracker" not in " ".join(p.cmdline())]
    facts["threads_left"] = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
    facts["leftovers"] = leftovers.new_since(before)
    facts["scratch_left"] = os.path.exists(scratch) and not scratch_before
    facts["sys_path_left"] = [entry for entry in sys.path if "sal-dask" in entry]
    print("FACTS: " + json.dumps(facts))
''')


@pytest.fixture(scope="module")
def facts() -> dict:
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(ARRAY_BYTES), str(N_WORKERS)], cwd=ROOT,
                         capture_output=True, text=True, timeout=SCRIPT_TIMEOUT)
    lines = [line for line in run.stdout.splitlines() if line.startswith(FACTS)]
    assert run.returncode == 0 and lines, f"the script failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return json.loads(lines[-1][len(FACTS):])


def test_the_workers_are_spawned_children_and_sum_right(facts):
    assert facts["workers"] == N_WORKERS and facts["worker_pids_are_children"]
    assert facts["sums"] == pytest.approx([facts["expected_sum"]] * N_WORKERS, rel=1e-9)


def test_an_array_inside_a_task_gets_dasks_warning(facts):
    assert facts["warning"].startswith("Sending large graph")


def test_scatter_keeps_one_copy_per_worker_and_one_crosses_between_workers(facts):
    scattered = facts["scatter once"]
    assert scattered["store_bytes"] == pytest.approx(N_WORKERS * ARRAY_BYTES, rel=0.01)
    assert scattered["crossed"] == pytest.approx((N_WORKERS - 1) * ARRAY_BYTES, rel=0.01)
    assert N_WORKERS - 0.5 <= scattered["tree_pss"] / ARRAY_BYTES <= N_WORKERS + 0.7
    workers = [v for role, v in scattered["role_pss"].items() if role.startswith("worker")]
    assert len(workers) == N_WORKERS and all(0.7 <= v / ARRAY_BYTES <= 1.4 for v in workers)
    assert all(scattered["from_store"]) and all(facts["sources"]["scatter once"])


def test_by_value_holds_a_copy_per_task_in_the_scheduler_and_in_each_worker(facts):
    by_value = facts["by value"]
    assert by_value["store_bytes"] < 0.01 * ARRAY_BYTES and by_value["crossed"] < 0.01 * ARRAY_BYTES
    workers = [v for role, v in by_value["role_pss"].items() if role.startswith("worker")]
    assert len(workers) == N_WORKERS and all(0.7 <= v / ARRAY_BYTES <= 1.4 for v in workers)
    # the scheduler's copies (one per task) land in this process's heap, on pages it may reuse
    assert by_value["tree_pss"] >= 1.3 * facts["scatter once"]["tree_pss"]
    assert not any(by_value["from_store"]) and not any(facts["sources"]["by value"])
    assert len(facts["sources"]["by value"]) == 2 * N_WORKERS


def test_the_exercise_counts_one_copy_per_worker_however_many_tasks_use_it(facts):
    # lesson 10's exercise: broadcast, then TASKS_PER_WORKER tasks on each worker given the future
    assert facts["exercise_copies"] == N_WORKERS
    assert dask_cluster.scattered_copies(None, None, N_WORKERS) == N_WORKERS  # Dask missing
    # and the array itself in as many tasks: every task a copy of its own
    tasks = dask_cluster.TASKS_PER_WORKER * N_WORKERS
    assert tuple(facts["copies_each_way"]) == (N_WORKERS, tasks)  # the facts are cached as JSON: a list
    assert dask_cluster.copies_each_way(None, None, N_WORKERS) == (N_WORKERS, tasks)


def test_the_session_turns_off_the_memory_manager_which_would_drop_broadcasts_copies(facts):
    assert facts["amm_off_in_session"]
    assert facts["holders_with_amm"] == [N_WORKERS, 1]


def test_timings_and_released_futures(facts):
    assert all(len(runs) == 2 and min(runs) > 0 for runs in facts["timings"].values())
    assert facts["stores_after"] == [0] * N_WORKERS


def test_nothing_is_left_also_after_a_killed_worker_and_an_error(facts):
    assert facts["left_by_session"] == []
    assert facts["error_propagated"] and facts["left_after_kill_and_error"] == []
    assert facts["children_left"] == [] and facts["leftovers"] == []
    assert not facts["scratch_left"] and facts["sys_path_left"] == []


def test_the_harness_measures_both_dask_strategies(facts):
    scattered, by_value = facts["dask_scatter"], facts["dask_by_value"]
    for measured in (scattered, by_value):
        assert len(measured["fan_out"]) == 1 and len(measured["round_trip"]) == 1
    # a copy per worker, and up to one more in this process's heap (freed pages glibc keeps)
    assert N_WORKERS - 0.5 <= scattered["pss_added"] / ARRAY_BYTES <= N_WORKERS + 1.5
    assert by_value["pss_added"] >= 1.1 * scattered["pss_added"]


def test_dask_leaves_one_idle_thread_behind(facts):
    """Why the script runs in a subprocess (module docstring); if Dask stops leaving it, say so."""
    # Dask's profiler thread ('Profile') may still be on its way out when the script looks.
    assert "Dask-Offload_0" in facts["threads_left"], facts["threads_left"]
    assert set(facts["threads_left"]) <= {"Dask-Offload_0", "Profile"}, facts["threads_left"]


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="n_workers must be at least 1"):
        with dask_cluster.dask_cluster(0):
            pass
    with pytest.raises(ValueError, match="how must be"):
        dask_cluster.held_fan_out(None, None, "by reference")


def test_the_roles_table_leaves_out_roles_that_did_not_move_and_prints_no_minus_zero():
    def held(how, **role_arrays):
        role_pss = {role.replace("_", " "): arrays * ARRAY_BYTES for role, arrays in role_arrays.items()}
        return dask_cluster.DaskFanOutMemory(how, 0.0, 0.0, role_pss, 0, 0, [], None)

    table = dask_cluster.format_roles(
        {"scatter once": held("scatter once", parent=-0.001, resource_tracker=-0.004, worker_1=1.0),
         "by value": held("by value", parent=2.0, resource_tracker=0.003, worker_1=1.0)}, ARRAY_BYTES)
    assert "resource tracker" not in table and "-0.00" not in table
    assert table.splitlines()[1].split() == ["parent", "0.00", "2.00"]


def test_the_timing_sentence_splits_off_the_scatter_and_the_values_choose_its_verdict():
    from helpers.measure.timing import Timing

    faster = {"by value": Timing((0.6,)), "scatter once": Timing((0.3,)),
              dask_cluster.SCATTER_ALONE: Timing((0.2,))}
    text = dask_cluster._timing_sentence(faster)
    assert "300 ms scattered once (200 ms of it the scatter itself) and 600 ms by value" in text, text
    assert text.endswith(": 2× as long"), text
    # 436 ms and 281 ms as printed: 1.55..., so 1.6×, though the unrounded medians' ratio is 1.548
    close = {"by value": Timing((0.4356,)), "scatter once": Timing((0.2814,))}
    assert dask_cluster._timing_sentence(close).endswith("436 ms by value: 1.6× as long"), close
    even = {"by value": Timing((0.3,)), "scatter once": Timing((0.3,))}
    assert dask_cluster._timing_sentence(even).endswith(": on this run, no slower")


LEFT_OPEN = textwrap.dedent('''
    import atexit, os, sys

    import psutil

    from helpers.lessons import dask_cluster


    def killed_mid_exit():  # what jupyter_client's SIGKILL does to a kernel whose exit is slow
        children = psutil.Process().children(recursive=True)
        for child in children:
            child.kill()
        psutil.wait_procs(children, timeout=10)
        os._exit(0)


    atexit.register(killed_mid_exit)  # registered before the session: it runs after the session's
    kept = dask_cluster.dask_cluster(1)  # entered, never closed: a kernel shut down mid-lesson
    session = kept.__enter__()
    print(session.folder, flush=True)
    sys.exit(0)
''')


def test_a_session_never_closed_removes_its_folder_first_thing_at_exit():
    """A lesson's kernel shut down before its closing cell (after an error, say) runs its exit
    handlers, and is killed if its exit takes longer than jupyter_client waits: the cluster's
    scratch folder goes first, before the cluster's slow close."""
    run = subprocess.run([sys.executable, "-c", LEFT_OPEN], cwd=ROOT, capture_output=True, text=True,
                         timeout=SCRIPT_TIMEOUT)
    assert run.returncode == 0, run.stderr[-3000:]
    folder = Path(run.stdout.split()[0])
    assert folder.name.startswith("sal-dask-") and not folder.exists()
