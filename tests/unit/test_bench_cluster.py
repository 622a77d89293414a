"""``python -m helpers.bench --suite cluster`` on real clusters of separate processes on this machine:
``ray start --head`` and ``ray start --address`` as node processes, ``dask scheduler`` and ``dask
worker`` as processes of their own (``helpers.bench.cluster_local``), each started and ended by the
test. The suite joins them as a reader's cluster, measures, and must leave them as they were: the
same nodes, nothing in their stores, no task or actor of ours. A refused address, a cluster of one
node, a node lost mid-run and a version mismatch each end the run with one clear line (exit code 2),
the cluster untouched; Ctrl-C exits with 130, the cluster untouched.

This process never imports Ray nor opens a Dask client (it forks later, in other tests): every
driver and every check of a cluster's state runs in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from helpers.bench import cluster_local, cluster_suite

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(600)

RAY_STATE = """
import json, os, ray
from ray._private import state
if os.environ.get("REPORT_VERSION"):
    ray.__version__ = os.environ["REPORT_VERSION"]  # a driver of the version the cluster reports
ray.init(address=os.environ["ADDRESS"], log_to_driver=False, logging_level="ERROR")
# the tests' clusters count every copy in a node's store in this resource (count_every_copy)
total, available = state.total_resources_per_node(), state.available_resources_per_node()
used = sum(total[n].get("object_store_memory", 0) - available.get(n, {}).get("object_store_memory", 0)
           for n in total)
actors = [a for a in state.actors().values() if a.get("State") == "ALIVE"]
print(json.dumps({"nodes": sum(1 for n in ray.nodes() if n["Alive"]), "store_used": used,
                  "actors": len(actors)}))
"""
DASK_STATE = """
import json, os, warnings
warnings.simplefilter("ignore")
from distributed import Client
with Client(os.environ["ADDRESS"], timeout=30, set_as_default=False) as client:
    workers = client.scheduler_info(n_workers=-1)["workers"]
    tasks = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
    data = sum(client.run(lambda dask_worker: len(dask_worker.data)).values())
print(json.dumps({"nodes": len(workers), "tasks": tasks, "data": data}))
"""


def cluster_state(cluster: cluster_local.LocalCluster, report_version: str = "") -> dict:
    """What the cluster holds now, asked by a driver of its own (of Ray ``report_version``, if given)."""
    code = RAY_STATE if cluster.engine == "ray" else DASK_STATE
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**cluster.driver_env(), "ADDRESS": cluster.address, "REPORT_VERSION": report_version},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def settled_state(cluster: cluster_local.LocalCluster, expected: dict, seconds: float = 30, **how) -> dict:
    """The cluster's state once it is ``expected``, or after ``seconds``: a cluster lets go of some
    things in the background (Dask forgets a cancelled task, Ray frees a copy pulled to another node
    in batches)."""
    deadline = time.monotonic() + seconds
    while (state := cluster_state(cluster, **how)) != expected and time.monotonic() < deadline:
        time.sleep(1)
    return state


def saved_array(folder: Path, mib: int) -> Path:
    """A .npy file of ``mib`` MiB of float64 in ``folder``, for --array."""
    path = folder / "array.npy"
    np.save(path, np.arange(mib * 2**20 // 8, dtype=np.float64))
    return path


def bench(
    cluster: cluster_local.LocalCluster | None, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess:
    env = cluster.driver_env() if cluster is not None else dict(os.environ)
    return subprocess.run(
        [sys.executable, "-m", "helpers.bench", "--suite", "cluster", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def bench_until(cluster: cluster_local.LocalCluster, args: list[str], seen: str, then) -> tuple[int, str]:
    """Run the suite on ``cluster``; once ``seen`` is on its stderr, call ``then(process)``; return its
    exit code and stderr."""
    with subprocess.Popen(
        [sys.executable, "-m", "helpers.bench", "--suite", "cluster", *args],
        cwd=ROOT,
        env=cluster.driver_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as process:
        stderr: list[str] = []
        reader = threading.Thread(target=lambda: stderr.extend(iter(lambda: process.stderr.read(1), "")))
        reader.start()
        deadline = time.monotonic() + 240
        while seen not in "".join(stderr) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert seen in "".join(stderr), "".join(stderr)[-2000:]
        time.sleep(0.5)
        then(process)
        process.wait(timeout=240)
        reader.join()
    return process.returncode, "".join(stderr)


def hanging_run(cluster: cluster_local.LocalCluster, address_option: str, tmp_path: Path) -> list[str]:
    """The suite's arguments for a run on ``cluster`` whose task hangs (then a node is lost, or Ctrl-C)."""
    return [address_option, cluster.address, "--sizes", "1", "--task", "helpers.bench.example_tasks:hangs",
            "--out", str(tmp_path / "x.json")]


@pytest.fixture(scope="module")
def dask_two():
    with cluster_local.dask_cluster(2, threads=2) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def ray_two():
    """Two Ray nodes of two CPUs: two tasks on each node, as the shipped reference ran."""
    with cluster_local.ray_cluster(2, 2, 128 * 2**20, count_every_copy=True) as cluster:
        yield cluster


def test_dask_every_way_on_a_running_cluster_with_the_readers_task_and_array_leaves_it_as_it_was(
    dask_two, tmp_path
):
    before = cluster_state(dask_two)
    out = tmp_path / "dask.json"
    reference = cluster_suite.newest_reference()
    done = bench(
        dask_two,
        "--dask-scheduler",
        dask_two.address,
        "--array",
        str(saved_array(tmp_path, 2)),
        "--repeat",
        "2",
        "--task",
        "helpers.bench.example_tasks:sum_slice",
        "--out",
        str(out),
        "--compare",
        str(reference),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert out.with_suffix(".png").exists()
    assert doc["suite"] == "cluster" and doc["clusters"]["dask"]["started_by_suite"] is False
    rows = {row["name"]: row for row in doc["rows"]}
    assert set(rows) == {"dask_floor", "dask_by_value", "dask_scatter"}
    assert rows["dask_floor"]["median_s"] > 0
    for name in ("dask_by_value", "dask_scatter"):
        row = rows[name]
        assert row["error"] is None and len(row["runs_s"]) == 2 and row["every_task_held_at_once"]
        assert row["ratio_to_floor"] == pytest.approx(row["median_s"] / rows["dask_floor"]["median_s"])
        assert len(row["node_added"]) == 2
    # by value, each of the 4 tasks' arrays travels client, scheduler, worker, and each task reads its own
    assert rows["dask_by_value"]["network_arrays_per_run"] >= 4 * 0.9
    assert [added["copies_read"] for added in rows["dask_by_value"]["node_added"].values()] == [2, 2]
    # scattered, each worker holds one copy in its data, which both its tasks read (the memory-mapped
    # .npy went as a plain array)
    for added in rows["dask_scatter"]["node_added"].values():
        assert added["copies_read"] == 1 and added["store_bytes"] >= 0.9 * 2 * 2**20
    assert "ranking at 2 MiB" in done.stdout and "decision guide's multi-node rows" in done.stdout
    assert f"against {json.loads(reference.read_text())['machine']['host']}" in done.stdout
    assert cluster_state(dask_two) == before == {"nodes": 2, "tasks": 0, "data": 0}


def test_a_refused_address_is_one_clear_line(tmp_path):
    free = cluster_local._free_port()
    for option, address in (
        ("--ray-address", f"127.0.0.1:{free}"),
        ("--dask-scheduler", f"tcp://127.0.0.1:{free}"),
    ):
        started = time.monotonic()
        done = bench(None, option, address, "--sizes", "1", "--out", str(tmp_path / "x.json"), timeout=120)
        assert done.returncode == 2, done.stderr[-2000:]
        assert (
            f"nothing answers at {'Ray' if 'ray' in option else 'Dask scheduler'} address {address}"
            in done.stderr
        )
        assert "Traceback" not in done.stderr and time.monotonic() - started < 60
    assert not list(tmp_path.iterdir())


def test_a_cluster_of_one_node_is_refused_and_left_as_it_was(tmp_path):
    for option, start, idle in (
        ("--dask-scheduler", lambda: cluster_local.dask_cluster(1), {"nodes": 1, "tasks": 0, "data": 0}),
        ("--ray-address", lambda: cluster_local.ray_cluster(1, 1, 96 * 2**20, count_every_copy=True),
         {"nodes": 1, "store_used": 0, "actors": 0}),
    ):
        with start() as cluster:
            assert settled_state(cluster, idle) == idle
            done = bench(cluster, option, cluster.address, "--sizes", "1", "--out", str(tmp_path / "x.json"))
            assert done.returncode == 2, done.stderr[-2000:]
            assert "has 1 node(s) with workers; a multi-node measurement needs at least 2" in done.stderr
            assert "Traceback" not in done.stderr
            assert settled_state(cluster, idle) == idle  # no probe actor, no object, no task left
    assert not list(tmp_path.iterdir())


def test_dask_another_version_is_one_clear_line_and_the_cluster_stays(tmp_path):
    """Simulated: the cluster's second worker reports toolz 0.0.1 (Dask checks the versions it reports)."""
    with cluster_local.dask_cluster(2, report_package=("toolz", "0.0.1")) as cluster:
        done = bench(
            cluster, "--dask-scheduler", cluster.address, "--sizes", "1", "--out", str(tmp_path / "x.json")
        )
        assert done.returncode == 2, done.stderr[-2000:]
        assert "runs other versions than this client" in done.stderr and "toolz" in done.stderr
        assert cluster_state(cluster) == {"nodes": 2, "tasks": 0, "data": 0}


def test_dask_a_node_lost_mid_run_is_one_clear_line_and_the_rest_stays(tmp_path):
    with cluster_local.dask_cluster(3) as cluster:
        lost = psutil.Process(cluster.node_pids[-1])
        code, stderr = bench_until(
            cluster,
            hanging_run(cluster, "--dask-scheduler", tmp_path),
            "dask_by_value: warm-up",
            lambda process: lost.kill(),
        )
        assert code == 2, stderr[-2000:]
        assert "left the cluster during dask_by_value's fan-out" in stderr and "Traceback" not in stderr
        # the hanging tasks are cancelled; the scheduler forgets them (their threads run on: Dask cannot
        # stop a task that is running)
        left = {"nodes": 2, "tasks": 0, "data": 0}
        assert settled_state(cluster, left) == left
    assert not list(tmp_path.iterdir())


def test_dask_ctrl_c_mid_run_exits_130_and_leaves_the_cluster_as_it_was(dask_two, tmp_path):
    code, stderr = bench_until(
        dask_two,
        hanging_run(dask_two, "--dask-scheduler", tmp_path),
        "dask_by_value: warm-up",
        lambda process: os.killpg(process.pid, signal.SIGINT),
    )
    assert code == 130, stderr[-2000:]
    # the hanging tasks are cancelled; the scheduler forgets them (their threads run on)
    idle = {"nodes": 2, "tasks": 0, "data": 0}
    assert settled_state(dask_two, idle) == idle
    assert not list(tmp_path.iterdir())


def test_ray_every_way_on_a_running_cluster_with_the_readers_task_and_array_leaves_it_as_it_was(
    ray_two, tmp_path
):
    idle = {"nodes": 2, "store_used": 0, "actors": 0}
    # a cluster just started may still hold a few bytes of its own start-up for a moment (a CI run
    # saw 8.0 bytes of store in use right after the fixture started): wait until it is idle
    assert settled_state(ray_two, idle) == idle
    out = tmp_path / "ray.json"
    done = bench(
        ray_two,
        "--ray-address",
        ray_two.address,
        "--array",
        str(saved_array(tmp_path, 4)),
        "--task",
        "helpers.bench.example_tasks:sum_all",
        "--repeat",
        "2",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(out.read_text())
    rows = {row["name"]: row for row in doc["rows"]}
    assert set(rows) == {"ray_floor", "ray_by_value", "ray_put_once"}
    size = 4 * 2**20
    for name in ("ray_by_value", "ray_put_once"):
        row = rows[name]
        assert row["error"] is None and row["every_task_held_at_once"] and len(row["node_added"]) == 2
    driver, other = rows["ray_by_value"]["node_added"]  # the driver's node first
    assert "the driver's" in driver and "the driver's" not in other
    by_value, put_once = rows["ray_by_value"]["node_added"], rows["ray_put_once"]["node_added"]
    # by value, each task reads an argument of its own: the driver's node stores all four, and each task
    # on the other node pulls its own there (two crossed)
    assert [added["copies_read"] for added in by_value.values()] == [2, 2]
    assert 1.8 <= rows["ray_by_value"]["network_arrays_per_run"]
    assert by_value[driver]["store_bytes"] >= 4 * 0.9 * size
    assert by_value[other]["store_bytes"] >= 2 * 0.9 * size
    # put once (the memory-mapped .npy went as a plain array, out of band): one object on the driver's
    # node, one copy pulled to the other, which its two tasks share
    assert [added["copies_read"] for added in put_once.values()] == [1, 1]
    assert 0.9 <= rows["ray_put_once"]["network_arrays_per_run"]
    for node in (driver, other):
        assert 0.9 * size <= put_once[node]["store_bytes"] <= 1.1 * size, (node, put_once[node])
    assert settled_state(ray_two, idle) == idle


def test_ray_a_task_that_writes_into_its_read_only_array_is_reported_per_way(ray_two, tmp_path):
    out = tmp_path / "ray.json"
    done = bench(
        ray_two,
        "--ray-address",
        ray_two.address,
        "--sizes",
        "1",
        "--repeat",
        "1",
        "--task",
        "helpers.bench.example_tasks:scale_share_in_place",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {row["name"]: row for row in json.loads(out.read_text())["rows"]}
    for name in ("ray_by_value", "ray_put_once"):
        assert "the task raised in a Ray worker" in rows[name]["error"] and "read-only" in rows[name]["error"]
    idle = {"nodes": 2, "store_used": 0, "actors": 0}
    assert settled_state(ray_two, idle) == idle


def test_ray_ctrl_c_mid_run_exits_130_and_leaves_the_cluster_as_it_was(ray_two, tmp_path):
    idle = {"nodes": 2, "store_used": 0, "actors": 0}
    assert settled_state(ray_two, idle) == idle
    code, stderr = bench_until(
        ray_two,
        hanging_run(ray_two, "--ray-address", tmp_path),
        "ray_by_value: warm-up",
        lambda process: os.killpg(process.pid, signal.SIGINT),
    )
    assert code == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    assert settled_state(ray_two, idle) == idle  # no probe actor, nothing in either node's store
    assert not list(tmp_path.iterdir())


def test_ray_a_node_lost_mid_run_is_one_clear_line_and_the_rest_stays(ray_two, tmp_path):
    """Last of the module: it takes the second node away."""
    raylet = psutil.Process(ray_two.node_pids[-1])
    workers = raylet.children(recursive=True)
    code, stderr = bench_until(
        ray_two,
        [*hanging_run(ray_two, "--ray-address", tmp_path), "--time-limit", "150"],
        "ray_by_value: warm-up",
        lambda process: [p.kill() for p in [raylet, *workers] if p.is_running()],
    )
    assert code == 2, stderr[-2000:]
    assert "left the cluster" in stderr and "Traceback" not in stderr
    left = {"nodes": 1, "store_used": 0, "actors": 0}
    assert settled_state(ray_two, left) == left
    assert not list(tmp_path.iterdir())


def test_ray_another_version_is_one_clear_line_and_the_cluster_stays(tmp_path):
    """Simulated: the head writes Ray 2.59.0 into the cluster's metadata, which is what Ray compares."""
    with cluster_local.ray_cluster(
        1, 1, 96 * 2**20, report_version="2.59.0", count_every_copy=True
    ) as cluster:
        idle = {"nodes": 1, "store_used": 0, "actors": 0}
        assert settled_state(cluster, idle, report_version="2.59.0") == idle
        done = bench(
            cluster, "--ray-address", cluster.address, "--sizes", "1", "--out", str(tmp_path / "x.json")
        )
        assert done.returncode == 2, done.stderr[-2000:]
        assert "runs another version than this Python" in done.stderr and "2.59.0" in done.stderr
        assert "Traceback" not in done.stderr
        assert all(psutil.pid_exists(pid) for pid in cluster.node_pids)
        assert settled_state(cluster, idle, report_version="2.59.0") == idle
    assert not list(tmp_path.iterdir())


def test_bad_cluster_options_are_refused_in_one_line_before_anything_starts(tmp_path):
    for args, says in (
        (["--suite", "strategies", "--ray-address", "127.0.0.1:6379"], "go with --suite cluster"),
        (["--suite", "cluster", "--nodes", "1"], "--nodes at least 2"),
        (["--suite", "cluster", "--engines", "spark"], "--engines takes ray and/or dask"),
        (["--suite", "cluster", "--sizes", "1", "--array", "x.npy"], "--array gives the shape"),
        (["--suite", "cluster", "--sizes", "100000000"], "does not fit"),
    ):
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "helpers.bench", *args, "--out", str(tmp_path / "x.json")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and says in done.stderr, (args, done.stderr[-1000:])
        assert len(done.stderr.strip().splitlines()) == 1 and time.monotonic() - started < 60
    assert not list(tmp_path.iterdir())


def test_the_shipped_reference_reads_as_lesson_10_shows_it():
    from helpers.bench import cluster_suite, report

    path = cluster_suite.newest_reference()
    assert path is not None and path.with_suffix(".png").exists()
    doc = report.load_reference(path)
    assert doc["suite"] == "cluster" and set(doc["clusters"]) == {"ray", "dask"}
    assert all(cluster["started_by_suite"] for cluster in doc["clusters"].values())  # localhost, and says so
    summary = cluster_suite.reference_summary(path)
    assert "its network is the loopback" in summary
    for name in ("ray_by_value", "ray_put_once", "dask_by_value", "dask_scatter"):
        assert name in summary
    ranked = cluster_suite.ranking(doc["rows"])
    assert [r["name"] for r in ranked] == [r["name"] for r in doc["ranking"]]
    assert ranked == sorted(ranked, key=lambda r: r["median_s"])
    assert set(cluster_suite.guide_rows(doc["rows"], doc["clusters"])) == {
        "ray_by_value",
        "ray_object_store",
        "dask_by_value",
        "dask_scatter",
    }
    comparison = cluster_suite.format_comparison(doc["rows"], doc)
    assert "no way and size in common" not in comparison and "here" in comparison


def test_a_store_the_engine_could_not_read_is_not_measured_never_zero():
    from helpers.bench.cluster_measure import memory_added

    baseline = {"n1": {"pss_bytes": 10, "store_bytes": 5}, "n2": {"pss_bytes": 10, "store_bytes": None}}
    peaks = {"n1": {"pss_bytes": 30, "store_bytes": 25}, "n2": {"pss_bytes": 40, "store_bytes": None}}
    assert memory_added(baseline, peaks) == {
        "n1": {"pss_bytes": 20, "store_bytes": 20},
        "n2": {"pss_bytes": 30, "store_bytes": None},
    }
    row = {"name": "ray_put_once", "engine": "ray", "size_bytes": 10, "median_s": 1.0, "ratio_to_floor": 2.0,
           "network_arrays_per_run": 1.0, "error": None,
           "node_added": {"n1": {"pss_bytes": 0, "store_bytes": 10, "copies_read": 1},
                          "n2": {"pss_bytes": 0, "store_bytes": None, "copies_read": 1}}}
    floor = {"name": "ray_floor", "engine": "ray", "size_bytes": 10, "median_s": 0.5}
    clusters = {"ray": {"address": "h:1", "started_by_suite": False, "nodes": []}}
    table = cluster_suite.format_table([floor, row], clusters)
    assert "n1: 1; +0.00 / +1.00; n2: 1; +0.00 / -" in table and "'-': not measured" in table


def test_the_memory_run_waits_for_the_stores_to_let_go_of_the_timed_runs():
    from helpers.bench import cluster_measure

    class Engine:  # a node's store holds a pulled copy for two more readings, then lets it go
        def __init__(self):
            self.readings = [100, 100, 0]

        def snapshots(self):
            used = self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]
            return {"n1": {"pss_bytes": 1, "store_bytes": used}}

    assert cluster_measure.settled_snapshots(Engine(), {"n1": 0})["n1"]["store_bytes"] == 0


def test_addresses_come_from_the_options_then_the_engines_own_variables(monkeypatch):
    from helpers.bench import cluster_suite

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    assert cluster_suite.addresses(None, None, ["ray", "dask"]) == {"dask": None, "ray": None}
    assert cluster_suite.addresses(None, None, ["ray"]) == {"ray": None}
    assert cluster_suite.addresses("h:1", None, ["ray", "dask"]) == {"ray": "h:1"}
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://s:8786")
    assert cluster_suite.addresses(None, None, ["ray", "dask"]) == {"dask": "tcp://s:8786"}
    assert cluster_suite.addresses("h:1", None, ["ray"]) == {"dask": "tcp://s:8786", "ray": "h:1"}
