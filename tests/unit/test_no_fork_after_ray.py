"""Issue 13: a process in which Ray has run must never fork afterwards (a forked child that runs Ray's
destructors waits forever on a lock held by one of Ray's gRPC threads, which the child does not
have). The fork-started strategies and lesson helpers refuse with the reason instead of hanging,
and the showdown runs the Ray strategies in a spawned process of their own, so the process that
runs it never runs Ray and may fork again and again.

What runs Ray here runs in a subprocess (with a time limit: a hang fails, it does not hold the run);
the pytest process never runs Ray. The autouse fixture in conftest.py checks each test for /dev/shm
entries and temp folders left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import psutil
import pytest
from every_strategy import forks_recorded

from helpers.bench import showdown, strategies
from helpers.lessons import fork_copy_on_write, ray_session
from helpers.measure.units import MiB

ROOT = Path(__file__).resolve().parents[2]
FACTS = "FACTS: "  # the line of a script's output that holds its JSON
SCRIPT_TIMEOUT = 240  # seconds: one Ray start-up, then every fork-started strategy refused three times
ROUNDS = 3
SHOWDOWN_BYTES = 4 * MiB
N_WORKERS = 2
FORK_NAMES = [name for name, s in strategies.STRATEGIES.items() if s.start_method == "fork"]
needs_fork = pytest.mark.skipif(not fork_copy_on_write.has_fork(), reason="this platform cannot fork")
needs_ray = pytest.mark.skipif(ray_session.ray_installed() is not None,
                               reason=str(ray_session.ray_installed()))

AFTER_RAY_SCRIPT = textwrap.dedent('''
    import json, multiprocessing, os, sys

    import numpy as np

    from helpers.bench import strategies
    from helpers.lessons import fork_copy_on_write, ray_object_store, ray_session
    from helpers.lessons import send_once_and_managers
    from helpers.measure import leftovers

    ROUNDS = int(sys.argv[1])


    def refusal(call):
        """The RuntimeError's message if ``call()`` refused, None if it ran."""
        try:
            call()
        except RuntimeError as error:
            return str(error)
        return None


    def fork_fan_out():
        fork_copy_on_write.fan_out("fork", "idle", 1)


    def fork_installed_pool():
        with send_once_and_managers.installed_pool(multiprocessing.get_context("fork"), 1, [1.0]):
            pass


    if __name__ == "__main__":
        before = leftovers.snapshot()
        facts = {"ran_before": ray_session.ray_has_run()}
        with ray_session.ray_session(num_cpus=1, object_store_bytes=ray_session.RAY_MINIMUM_STORE_BYTES):
            import ray

            task = ray_object_store.remote(ray_object_store.sum_array)
            facts["task_sum"] = ray.get(task.remote(np.ones(1000)))
        forks = []
        os.register_at_fork(before=lambda: forks.append(os.getpid()))  # os.fork: what a fork pool does
        array = np.random.default_rng(0).random(1 << 17)  # 1 MiB
        names = [name for name, s in strategies.STRATEGIES.items() if s.start_method == "fork"]
        rounds = []
        for _ in range(ROUNDS):
            row = {name: strategies.run_strategy(name, array, 2, repeat=1).skipped for name in names}
            row["fan_out"] = refusal(fork_fan_out)
            row["installed_pool"] = refusal(fork_installed_pool)
            rounds.append(row)
        spawned = strategies.run_strategy("pickle", array, 2, repeat=1).skipped  # spawn is still fine
        facts.update(ran_after=ray_session.ray_has_run(), names=names, rounds=rounds, spawned=spawned,
                     forks=len(forks), left=leftovers.new_since(before))
        print("FACTS: " + json.dumps(facts), flush=True)
''')

USER_RAY_SCRIPT = textwrap.dedent('''
    import json, sys, types

    from helpers.bench import strategies
    from helpers.lessons import ray_session

    ray = types.ModuleType("ray")  # stands in for a Ray the user started with ray.init()
    ray.is_initialized = lambda: True
    facts = {"before": ray_session.ray_has_run()}
    sys.modules["ray"] = ray
    facts["running"] = ray_session.ray_has_run()
    facts["reason"] = strategies.STRATEGIES["fork_cow"].unavailable(1 << 20, 2)
    ray.is_initialized = lambda: False  # the user's ray.shutdown(): its threads' locks may live on
    facts["after_shutdown"] = ray_session.ray_has_run()
    print("FACTS: " + json.dumps(facts), flush=True)
''')


def run_script(code: str, *args: str) -> dict:
    """Run ``code`` in a subprocess with a time limit (a hang fails here); the JSON it printed."""
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=SCRIPT_TIMEOUT)
    lines = [line for line in done.stdout.splitlines() if line.startswith(FACTS)]
    assert done.returncode == 0 and lines, (f"exit {done.returncode}\n{done.stdout[-3000:]}\n"
                                            f"{done.stderr[-3000:]}")
    return json.loads(lines[-1][len(FACTS):])


@needs_fork
@needs_ray
@pytest.mark.timeout(SCRIPT_TIMEOUT + 60)
def test_after_ray_every_fork_started_strategy_and_helper_refuses_round_after_round():
    facts = run_script(AFTER_RAY_SCRIPT, str(ROUNDS))
    assert not facts["ran_before"] and facts["task_sum"] == 1000.0 and facts["ran_after"]
    assert facts["names"] == FORK_NAMES and FORK_NAMES
    assert len(facts["rounds"]) == ROUNDS
    for row in facts["rounds"]:
        for name in FORK_NAMES:
            assert row[name] == ray_session.FORK_AFTER_RAY, name
        for helper in ("fan_out", "installed_pool"):
            assert row[helper] is not None and ray_session.FORK_AFTER_RAY in row[helper], row[helper]
    assert facts["forks"] == 0  # nothing forked after Ray: refused before any os.fork
    assert facts["spawned"] is None  # a spawn-started strategy still runs there
    assert facts["left"] == []


@needs_fork
def test_a_ray_the_user_started_is_seen_and_remembered():
    facts = run_script(USER_RAY_SCRIPT)
    assert facts == {"before": False, "running": True, "reason": ray_session.FORK_AFTER_RAY,
                     "after_shutdown": True}


def test_the_refusal_says_what_to_do():
    message = ray_session.FORK_AFTER_RAY
    assert "Ray has run in this process" in message and "deadlock" in message
    assert "spawn or forkserver" in message and "restart the kernel" in message


@needs_fork
@pytest.mark.timeout(900)
def test_every_strategy_then_the_showdown_run_in_one_process_which_never_runs_ray_and_forks_only_before_it(
        every_strategy_run):
    """Every strategy as the benchmark runs them (the run test_strategies checks, shared: Ray's
    strategies start Ray twice in a spawned process of their own, Dask a cluster), then lesson 11's
    showdown of the fork strategies in this process (the panel's second run): the fork strategies
    fork here both times, Ray never runs here. The second run is of the fork strategies alone: what it
    must show is that this process still forks after Ray ran beside it (test_widgets runs the panel's
    showdown with Ray, then again)."""
    ray_imported = "ray" in sys.modules
    children_before = {child.pid for child in psutil.Process().children(recursive=True)}
    first = every_strategy_run
    array = np.random.default_rng(13).random(SHOWDOWN_BYTES // 8)
    with forks_recorded() as forks:
        second = showdown.run_showdown(FORK_NAMES, array, N_WORKERS, repeat=1)
        forks = list(forks)
    for results in (first.results, {result.name: result for result in second}):
        for name in FORK_NAMES:
            assert results[name].skipped is None and results[name].fan_out.median > 0, results[name].skipped
    assert [result.name for result in second] == FORK_NAMES
    if ray_session.ray_installed() is None:
        for name in ("ray_by_value", "ray_object_store"):
            # Ray ran beside this process (or its start-up timed out there: test_strategies reruns it)
            skipped = first.results[name].skipped
            assert skipped is None or skipped.startswith("failed here"), skipped
    for run_forks in (first.forks, forks):
        assert run_forks and not any(run_forks)  # this process forked, each time with no Ray having run here
    assert not ray_session.ray_has_run()
    assert ("ray" in sys.modules) == ray_imported  # the showdown did not even import Ray here
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
    left = [" ".join(child.cmdline())[:160] for child in psutil.Process().children(recursive=True)
            if child.pid not in children_before and child.is_running()
            and child.status() != psutil.STATUS_ZOMBIE]
    assert [line for line in left if "resource_tracker" not in line and "forkserver" not in line] == []
