"""helpers.lessons.ray_session, ray_object_store (with the functions its workers run) and
helpers.measure.ray_processes with a real Ray: a local instance and a local two-node cluster, real
worker processes, real object stores.

Ray never runs in the pytest process (a process in which Ray has run must not fork afterwards,
and later tests fork): each of the two is started once, in a subprocess running ``SCRIPT``, which
measures what the class's tests check and prints it as JSON (class-scoped fixtures; Ray takes
seconds to start). The one-node session is left with Ctrl-C (KeyboardInterrupt raised inside the
``with``): the clean-up must work on that path too. After each, the subprocess reports what Ray
left (nothing, checked by a test); the autouse fixture in conftest.py still checks each test for
/dev/shm entries and temp folders left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.lessons import ray_session
from helpers.measure import leftovers, ray_processes
from helpers.measure.units import MiB

pytestmark = pytest.mark.skipif(ray_session.ray_installed() is not None,
                                reason=str(ray_session.ray_installed()))

ROOT = Path(__file__).resolve().parents[2]
ARRAY_BYTES = 8 * MiB
STORE_BYTES = ray_session.RAY_MINIMUM_STORE_BYTES + 32 * MiB
SCRIPT_TIMEOUT = 240  # seconds: a Ray start-up (or a cluster's two) and the measurements, on 2 busy cores
FACTS = "FACTS: "  # the line of the script's output that holds its JSON

SCRIPT = textwrap.dedent('''
    import json, os, sys, time, traceback

    import psutil

    from helpers.lessons import dask_cluster, ray_object_store, ray_session
    from helpers.measure import leftovers, ray_processes
    from helpers.measure.units import MiB

    MODE, ARRAY_BYTES, STORE_BYTES = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    facts = {}


    def section(name, measure, nodes):
        try:
            facts[name] = measure(nodes)
        except Exception:
            facts[name] = {"error": traceback.format_exc()}


    def in_our_tree(nodes):
        import ray

        table = ray_processes.ray_process_table(nodes)
        return {"initialized": ray.is_initialized(), "roles": sorted({row.role for row in table}),
                "worker_parents": [row.parent for row in table if row.role.startswith("worker")],
                "raylet_pid": nodes.head.raylet_pid,
                "raylet_parent_is_driver": psutil.Process(nodes.head.raylet_pid).ppid() == os.getpid(),
                "temp_dir_name": nodes.temp_dir.name}


    def put_array(nodes):
        import ray

        array = ray_object_store.random_array(ARRAY_BYTES)
        ref = ray.put(array)
        got = ray.get(ray_object_store.remote(ray_object_store.facts_after_get).remote([ref]))
        total = ray.get(ray_object_store.remote(ray_object_store.sum_array).remote(ref))
        caught = [pitfall.message for pitfall in ray_object_store.read_only_pitfalls(ref)]
        zeroed = ray_object_store.zeroed_in_a_copy(ref)
        del ref
        return {"facts": got, "driver_pid": os.getpid(), "sum": total, "expected_sum": float(array.sum()),
                "pitfalls": caught, "zeroed": zeroed, "expected_zeroed": int((array < 0.5).sum())}


    def fan_out_memory(nodes):
        # Ray frees the objects of the parts before this one asynchronously: wait until its store is
        # empty, or one being freed while we put ours would hide ours in the store's accounting
        deadline = time.monotonic() + 30
        while ray_processes.store_bytes_used() and time.monotonic() < deadline:
            time.sleep(0.1)
        array = ray_object_store.random_array(ARRAY_BYTES)
        # held long enough that both tasks overlap even when the second worker starts late
        by_reference, by_value = ray_object_store.compare_fan_out_memory(array, 2, hold_seconds=1.5)
        return {"by_reference": by_reference.store_bytes, "by_value": by_value.store_bytes}


    def dtypes(nodes):
        return ray_object_store.what_workers_get(ray_object_store.dtype_variants(MiB))


    def second_session(nodes):
        import ray

        try:
            with ray_session.ray_session(num_cpus=1):
                refused = None
        except RuntimeError as error:
            refused = str(error)
        try:
            with dask_cluster.dask_cluster(1, start_method="fork"):
                dask_refused = None
        except RuntimeError as error:
            dask_refused = str(error)
        return {"refused": refused, "initialized": ray.is_initialized(), "put_get": ray.get(ray.put(7)),
                "dask_fork_refused": dask_refused}


    def reads(nodes):
        array = ray_object_store.random_array(ARRAY_BYTES)
        done = ray_object_store.reads_across_nodes(nodes, array, [("head", 0), ("remote", 1), ("again", 1)])
        return [{"copies_on": r.copies_on, "in_object_store": r.in_object_store, "get_seconds": r.get_seconds,
                 "fastest_get_seconds": r.fastest_get_seconds} for r in done]


    def resources(nodes):
        import ray

        by_id = {entry["NodeID"]: entry["Resources"] for entry in ray.nodes() if entry["Alive"]}
        return [{"cpus": by_id[node.node_id].get("CPU"),
                 "store": by_id[node.node_id].get("object_store_memory")} for node in nodes.nodes]


    def per_node(nodes):
        rows = ray_object_store.put_and_get_per_node(nodes, MiB, repeat=1)
        return {"rows": [rows[node.index] for node in nodes.nodes],
                "folders": [str(folder) for folder in nodes.folders],
                "second_node_pss": ray_processes.node_memory(nodes.nodes[1]).pss}


    def one_node():
        children_before = {child.pid for child in ray_session.ray_descendants()}
        interrupted = False
        try:
            with ray_session.ray_session(num_cpus=2, object_store_bytes=STORE_BYTES) as nodes:
                ray_object_store.warm_up(nodes, 2)
                for name, measure in (("tree", in_our_tree), ("put", put_array), ("memory", fan_out_memory),
                                      ("dtypes", dtypes), ("second", second_session)):
                    section(name, measure, nodes)
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            interrupted = True
        left = [child for child in ray_session.ray_descendants() if child.pid not in children_before]
        return nodes, {"interrupted": interrupted, "left": [" ".join(c.cmdline())[:200] for c in left]}


    def two_nodes():
        with ray_session.local_cluster(n_nodes=2, object_store_bytes=ray_session.RAY_MINIMUM_STORE_BYTES,
                                       disk_store_nodes=1, head_cpus=2,
                                       head_store_bytes=STORE_BYTES) as nodes:
            ray_object_store.warm_up(nodes, 1)
            section("resources", resources, nodes)
            section("reads", reads, nodes)
            section("per_node", per_node, nodes)
        return nodes, {}


    if __name__ == "__main__":
        unavailable = ray_session.ray_available()
        if unavailable is None:
            before = leftovers.snapshot()
            nodes, after = one_node() if MODE == "one_node" else two_nodes()
            import ray

            facts["after"] = {**after, "initialized": ray.is_initialized(),
                              "what_ray_left": ray_processes.what_ray_left(nodes),
                              "leftovers": leftovers.new_since(before)}
        print("FACTS: " + json.dumps({"unavailable": unavailable, **facts}), flush=True)
''')


def run_ray_script(mode: str, env: dict[str, str] | None = None) -> dict:
    """Run ``SCRIPT`` in a subprocess (Ray lives and dies there); its facts, or skip if Ray is unusable."""
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode, str(ARRAY_BYTES), str(STORE_BYTES)], cwd=ROOT,
                          capture_output=True, text=True, timeout=SCRIPT_TIMEOUT, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith(FACTS)]
    assert done.returncode == 0 and lines, (f"exit {done.returncode}\n{done.stdout[-3000:]}\n"
                                            f"{done.stderr[-3000:]}")
    facts = json.loads(lines[-1][len(FACTS):])
    if facts["unavailable"]:
        pytest.skip(facts["unavailable"])
    return facts


def part(facts: dict, name: str):
    """One section of the script's facts; fails with the script's traceback if that section raised."""
    value = facts[name]
    assert not (isinstance(value, dict) and "error" in value), value.get("error")
    return value


@pytest.fixture(scope="class")
def session():
    """What a local Ray (2 CPUs, a small store) showed in a subprocess, left with Ctrl-C."""
    return run_ray_script("one_node")


@pytest.fixture(scope="class")
def cluster(tmp_path_factory):
    """What a local two-node cluster (the second node's store on disk) showed in a subprocess, on a
    machine where Ray has run before: its home holds ~/.ray/auth_token from an earlier program."""
    home = tmp_path_factory.mktemp("home")
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text("an earlier Ray program's token")
    return run_ray_script("two_nodes", env={**os.environ, "HOME": str(home)})


def test_object_store_bytes_for_fits_the_fan_out_and_respects_rays_minimum():
    assert ray_session.object_store_bytes_for(1 * MiB, 2) == ray_session.RAY_MINIMUM_STORE_BYTES
    size = ray_session.object_store_bytes_for(64 * MiB, 2)
    assert size >= 4 * 64 * MiB and size % MiB == 0
    with pytest.raises(ValueError):
        ray_session.object_store_bytes_for(MiB, 0)


@pytest.mark.timeout(SCRIPT_TIMEOUT + 60)
class TestOneNode:
    def test_rays_processes_are_in_our_tree_and_workers_are_children_of_the_raylet(self, session):
        tree = part(session, "tree")
        assert tree["initialized"]
        roles = tree["roles"]
        assert "raylet (runs the object store)" in roles and "GCS server (cluster metadata)" in roles
        parents = tree["worker_parents"]
        assert len(parents) >= 2 and all(parent == tree["raylet_pid"] for parent in parents)
        assert tree["raylet_parent_is_driver"]
        assert tree["temp_dir_name"].startswith(f"{leftovers.TEMP_PREFIX}ray-")

    def test_a_put_array_reaches_a_task_as_a_read_only_view_into_the_store(self, session):
        put = part(session, "put")
        facts = put["facts"]
        assert facts["in_object_store"] and not facts["writeable"] and "plasma" in facts["mapping"]
        assert facts["pid"] != put["driver_pid"]
        assert put["sum"] == pytest.approx(put["expected_sum"])
        assert put["pitfalls"] == ["assignment destination is read-only"] * 2
        assert put["zeroed"] == put["expected_zeroed"]

    def test_by_value_stores_one_copy_per_task_and_put_stores_one(self, session):
        memory = part(session, "memory")
        assert memory["by_value"] >= 1.5 * ARRAY_BYTES
        assert 0.5 * ARRAY_BYTES <= memory["by_reference"] <= 1.5 * ARRAY_BYTES

    def test_structured_arrays_are_zero_copy_but_recarray_and_datetime64_are_pickled(self, session):
        rows = part(session, "dtypes")
        zero_copy = {name for name, row in rows.items() if row["in_object_store"] and not row["writeable"]}
        assert zero_copy == {"float64", "structured (f8, i8)", "recarray.view(np.ndarray)",
                             "datetime64.view('i8')"}
        assert len({row["bytes"] for row in rows.values()}) == 1  # every row the same size
        recarray = rows["np.recarray (f8, i8)"]
        assert recarray["type"] == "recarray" and recarray["writeable"]
        strided = rows["float64[::2] (strided)"]  # not contiguous: pickled in band, a copy per reader
        assert not strided["out_of_band_buffers"] and not strided["in_object_store"] and strided["writeable"]
        assert {name for name, row in rows.items() if row["out_of_band_buffers"]} == zero_copy

    def test_a_second_session_in_the_same_process_is_refused_before_starting_anything(self, session):
        second = part(session, "second")
        assert second["refused"] is not None and "already running" in second["refused"]
        assert second["initialized"] and second["put_get"] == 7  # the running one is untouched
        assert "would start with fork" in second["dask_fork_refused"]  # Dask's nannies, after Ray ran

    def test_leaving_the_session_with_ctrl_c_leaves_nothing(self, session):
        after = part(session, "after")
        assert after["interrupted"] and not after["initialized"]
        assert after["what_ray_left"] == []
        assert after["left"] == []
        assert after["leftovers"] == []


@pytest.mark.timeout(SCRIPT_TIMEOUT + 60)
class TestTwoNodes:
    def test_a_read_on_the_second_node_copies_the_object_into_its_store_once(self, cluster):
        reads = part(cluster, "reads")
        assert [read["copies_on"] for read in reads] == [[0], [0, 1], [0, 1]]
        assert all(read["in_object_store"] for read in reads)
        assert reads[1]["get_seconds"] > reads[2]["fastest_get_seconds"]  # a transfer, then a mapping
        # the remote read's later gets found the copy in node 1's store
        assert reads[1]["fastest_get_seconds"] < reads[1]["get_seconds"]
        assert all(read["fastest_get_seconds"] <= read["get_seconds"] for read in reads)

    def test_the_head_gets_its_own_cpus_and_store(self, cluster):
        head, second = part(cluster, "resources")
        assert (head["cpus"], second["cpus"]) == (2, 1)
        assert head["store"] == pytest.approx(STORE_BYTES, rel=0.05)
        assert second["store"] == pytest.approx(ray_session.RAY_MINIMUM_STORE_BYTES, rel=0.05)

    def test_the_second_nodes_store_is_a_file_on_disk_and_is_mapped(self, cluster):
        per_node = part(cluster, "per_node")
        head, disk = per_node["rows"]
        assert head["store_directory"] == "/dev/shm"
        assert disk["store_directory"] == per_node["folders"][1]
        assert all(m.startswith(per_node["folders"][1]) for m in disk["mappings"])
        for row in (head, disk):  # each timed put sorted by the store pages it wrote first
            assert 1 <= len(row["fresh_bytes"]) == len(row["puts"]) <= 3  # until one went into written pages
            counts = row["written_puts"] + row["fresh_puts"]
            assert counts == (0 if row["fresh_bytes"][0] is None else len(row["puts"]))
        assert per_node["second_node_pss"] > 0

    def test_shutting_the_cluster_down_leaves_nothing_and_ignores_what_ray_had_left_before(self, cluster):
        after = part(cluster, "after")
        assert not after["initialized"]
        assert after["what_ray_left"] == []
        assert after["leftovers"] == []


def test_ray_never_ran_in_the_pytest_process():
    assert not ray_session.ray_has_run()
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()


def test_rays_default_paths_count_only_where_made_or_changed_after_the_session_began(tmp_path, monkeypatch):
    """Lesson 10's clean-up check: a token an earlier Ray program left is not the lesson's leftover;
    one the session wrote, or changed, is."""
    monkeypatch.setenv("HOME", str(tmp_path))
    token = tmp_path / ".ray" / "auth_token"
    token.parent.mkdir()
    token.write_text("an earlier program's")
    nodes = ray_session.RayNodes((), "", (tmp_path / "gone",), ray_processes.ray_default_paths())
    assert not [line for line in ray_processes.what_ray_left(nodes) if ".ray" in line]
    os.utime(token, ns=(token.stat().st_atime_ns, token.stat().st_mtime_ns + 10**9))
    assert [line for line in ray_processes.what_ray_left(nodes) if str(token) in line]
    nothing_before = ray_session.RayNodes((), "", (tmp_path / "gone",), {})
    assert [line for line in ray_processes.what_ray_left(nothing_before) if str(token) in line]


RETRY_SCRIPT = textwrap.dedent('''
    import json, sys
    import ray
    import numpy as np
    from helpers.lessons import ray_object_store, ray_session
    from helpers.measure import leftovers

    before = leftovers.snapshot()
    real_init, calls = ray.init, []

    def init_that_times_out_once(**settings):
        """ray.init, whose first call starts Ray's processes, then fails as a busy machine makes it."""
        calls.append(sorted(settings))
        if len(calls) == 1:
            real_init(**settings)  # a real start, whose processes the retry must stop
            raise Exception("The current node timed out during startup. This could happen because ...")
        return real_init(**settings)

    ray.init = init_that_times_out_once
    with ray_session.ray_session(num_cpus=1, object_store_bytes=ray_session.RAY_MINIMUM_STORE_BYTES):
        started = ray.is_initialized()
        total = ray.get(ray_object_store.remote(ray_object_store.sum_array).remote(np.arange(4.0)))
    alive = [f"{p.pid} {p.name()}" for p in ray_session.ray_descendants()]
    print("FACTS: " + json.dumps({"calls": len(calls), "started": started, "total": total, "alive": alive,
                                  "left": leftovers.new_since(before)}))
''')


def test_a_start_up_that_timed_out_is_stopped_and_started_once_more():
    """Ray's node waits a fixed 30 s for its raylet: a busy machine outlasts it. ray_session stops
    what that start began and starts once more, saying so; nothing of either start is left."""
    done = subprocess.run([sys.executable, "-c", RETRY_SCRIPT], cwd=ROOT, capture_output=True, text=True,
                          timeout=SCRIPT_TIMEOUT)
    lines = [line for line in done.stdout.splitlines() if line.startswith(FACTS)]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    facts = json.loads(lines[-1][len(FACTS):])
    assert facts == {"calls": 2, "started": True, "total": 6, "alive": [], "left": []}, facts
    assert "starting it once more" in done.stderr


def test_rays_ip_probe_warning_is_dropped_from_stderr_and_every_other_line_kept(capfd):
    """Where no route leads outside, Ray's core warns on the driver's stderr each time it looks for
    this machine's address (harmless on one machine): those lines go, anything else written meanwhile
    comes back when the block ends."""
    probe = (f"[2026-11-29 22:30:22,169 W 2130 2130] network_util.cc:330: {ray_session.IP_PROBE_WARNING} "
             "to: 8.8.8.8:53, [2001:4860:4860::8888]:53, falling back to hostname resolution\n")
    with ray_session._ip_probe_warnings_dropped():
        os.write(2, probe.encode())
        os.write(2, b"a line of Ray's that matters\n")
        os.write(2, probe.encode())
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "a line of Ray's that matters\nafter\n"
