"""helpers.lessons.ray_session, ray_demos, ray_processes and ray_tasks with a real Ray: a local instance and a
local two-node cluster, real worker processes, real object stores.

Ray takes seconds to start, so each of the two is started once (class-scoped fixtures: one runs at
a time, as one process can drive only one Ray) and its tests share it; the autouse fixture in
conftest.py still checks each test for /dev/shm entries and temp folders left behind, and the
fixtures and the last test check that shutting down left nothing at all.
"""

from __future__ import annotations

import os

import psutil
import pytest

from helpers.lessons import ray_object_store, ray_session, ray_tasks
from helpers.measure import leftovers, ray_processes
from helpers.measure.units import MiB

pytestmark = pytest.mark.skipif(ray_session.ray_available() is not None,
                                reason=str(ray_session.ray_available()))

ARRAY_BYTES = 8 * MiB
STORE_BYTES = ray_session.RAY_MINIMUM_STORE_BYTES + 32 * MiB


@pytest.fixture(scope="class")
def session():
    """A local Ray for the class's tests, left with Ctrl-C (KeyboardInterrupt raised inside the
    ``with``): the clean-up must work on that path too, and leave nothing."""
    import ray

    before = leftovers.snapshot()
    children_before = {child.pid for child in ray_session.ray_descendants()}  # e.g. an earlier forkserver
    with pytest.raises(KeyboardInterrupt):
        with ray_session.ray_session(num_cpus=2, object_store_bytes=STORE_BYTES) as nodes:
            ray_object_store.warm_up(nodes, 2)
            yield nodes
            raise KeyboardInterrupt
    assert not ray.is_initialized()
    assert ray_processes.what_ray_left(nodes) == []
    left = [child for child in ray_session.ray_descendants() if child.pid not in children_before]
    assert left == [], [" ".join(child.cmdline())[:200] for child in left]
    assert leftovers.new_since(before) == []


@pytest.fixture(scope="class")
def cluster():
    before = leftovers.snapshot()
    with ray_session.local_cluster(n_nodes=2, object_store_bytes=ray_session.RAY_MINIMUM_STORE_BYTES,
                               disk_store_nodes=1) as nodes:
        ray_object_store.warm_up(nodes, 1)
        yield nodes
    assert ray_processes.what_ray_left(nodes) == []
    assert leftovers.new_since(before) == []


def test_object_store_bytes_for_fits_the_fan_out_and_respects_rays_minimum():
    assert ray_session.object_store_bytes_for(1 * MiB, 2) == ray_session.RAY_MINIMUM_STORE_BYTES
    size = ray_session.object_store_bytes_for(64 * MiB, 2)
    assert size >= 4 * 64 * MiB and size % MiB == 0
    with pytest.raises(ValueError):
        ray_session.object_store_bytes_for(MiB, 0)


class TestOneNode:
    def test_rays_processes_are_in_our_tree_and_workers_are_children_of_the_raylet(self, session):
        import ray

        assert ray.is_initialized()
        table = ray_processes.ray_process_table(session)
        roles = {row.role for row in table}
        assert "raylet (runs the object store)" in roles and "GCS server (cluster metadata)" in roles
        workers = [row for row in table if row.role.startswith("worker")]
        assert len(workers) >= 2 and all(row.parent == session.head.raylet_pid for row in workers)
        assert psutil.Process(session.head.raylet_pid).ppid() == os.getpid()
        assert session.temp_dir.name.startswith(f"{leftovers.TEMP_PREFIX}ray-")

    def test_a_put_array_reaches_a_task_as_a_read_only_view_into_the_store(self, session):
        import ray

        array = ray_object_store.random_array(ARRAY_BYTES)
        ref = ray.put(array)
        facts = ray.get(ray_object_store.remote(ray_tasks.facts_after_get).remote([ref]))
        assert facts["in_object_store"] and not facts["writeable"] and "plasma" in facts["mapping"]
        assert facts["pid"] != os.getpid()
        assert ray.get(ray_object_store.remote(ray_tasks.sum_array).remote(ref)) == pytest.approx(array.sum())
        caught = ray_object_store.read_only_pitfalls(ref)
        assert [p.message for p in caught] == ["assignment destination is read-only"] * 2
        assert ray_object_store.zeroed_in_a_copy(ref) == int((array < 0.5).sum())
        del ref

    def test_by_value_stores_one_copy_per_task_and_put_stores_one(self, session):
        array = ray_object_store.random_array(ARRAY_BYTES)
        by_reference, by_value = ray_object_store.compare_fan_out_memory(array, 2, hold_seconds=0.5)
        assert by_value.store_bytes >= 1.5 * ARRAY_BYTES
        assert 0.5 * ARRAY_BYTES <= by_reference.store_bytes <= 1.5 * ARRAY_BYTES

    def test_structured_arrays_are_zero_copy_but_recarray_and_datetime64_are_pickled(self, session):
        rows = ray_object_store.what_workers_get(ray_object_store.dtype_variants(MiB))
        zero_copy = {name for name, row in rows.items() if row["in_object_store"] and not row["writeable"]}
        assert zero_copy == {"float64", "structured (f8, i8)"}
        recarray = rows["np.recarray (f8, i8)"]
        assert recarray["type"] == "recarray" and recarray["writeable"]
        assert {name for name, row in rows.items() if row["out_of_band_buffers"]} == zero_copy


    def test_a_second_session_in_the_same_process_is_refused_before_starting_anything(self, session):
        import ray

        with pytest.raises(RuntimeError, match="already running"), ray_session.ray_session(num_cpus=1):
            pass
        assert ray.is_initialized() and ray.get(ray.put(7)) == 7  # the running one is untouched


class TestTwoNodes:
    def test_a_read_on_the_second_node_copies_the_object_into_its_store_once(self, cluster):
        array = ray_object_store.random_array(ARRAY_BYTES)
        reads = ray_object_store.reads_across_nodes(cluster, array,
                                                    [("head", 0), ("remote", 1), ("again", 1)])
        assert [read.copies_on for read in reads] == [[0], [0, 1], [0, 1]]
        assert all(read.in_object_store for read in reads)
        assert reads[1].get_seconds > reads[2].get_seconds  # a transfer, then a mapping

    def test_the_second_nodes_store_is_a_file_on_disk_and_is_mapped(self, cluster):
        rows = ray_object_store.put_and_get_per_node(cluster, MiB, repeat=1)
        assert rows[0]["store_directory"] == "/dev/shm"
        disk = rows[1]
        assert disk["store_directory"] == str(cluster.folders[1])
        assert all(m.startswith(str(cluster.folders[1])) for m in disk["mappings"])
        assert ray_processes.node_memory(cluster.nodes[1]).pss > 0
