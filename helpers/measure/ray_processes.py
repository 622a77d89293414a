"""Ray's processes and object stores, seen from the driver: who is who in our process tree, the
memory each Ray node holds, the bytes Ray counts in each object store, where an object's copies
are, and what a finished session left behind. Sizes are bytes.

A ``ray.init()`` or ``local_cluster()`` started from this process makes gcs_server, the raylets
(each raylet runs its node's object store in-process) and a few Python services children of this
process; each raylet starts its node's workers, so the workers are our grandchildren: inside the
tree ``helpers.measure.memory.track_memory`` samples. (A driver that joins a cluster started elsewhere,
``ray start`` then ``ray.init(address=...)``, has none of them in its tree.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import psutil

from helpers.measure.proctree import ProcessMemory, descendant_pids, process_memory, tree_pss_by_kind

_SERVICES = (  # what a Python process of Ray's is, from a piece of its command line
    ("dashboard/dashboard.py", "API server (dashboard.py --minimal)"),
    ("autoscaler/_private/monitor.py", "autoscaler monitor"),
    ("log_monitor.py", "log monitor"),
)


def role_of(process: psutil.Process) -> str:
    """What one of Ray's processes does: 'raylet (runs the object store)', 'worker (ray::IDLE)', ..."""
    try:
        name, cmdline = process.name(), " ".join(process.cmdline())
    except psutil.Error:
        return "gone"
    if name == "raylet":
        return "raylet (runs the object store)"
    if name == "gcs_server":
        return "GCS server (cluster metadata)"
    if cmdline.startswith("ray::"):
        title = cmdline.split()[0]
        return {"ray::DashboardAgent": "dashboard agent", "ray::RuntimeEnvAgent": "runtime-env agent"}.get(
            title, f"worker ({title})")
    for marker, role in _SERVICES:
        if marker in cmdline:
            return role
    return name


@dataclass(frozen=True)
class RayProcess:
    """One process of the tree: pid, parent pid, role, memory (bytes) and which Ray node it serves."""

    pid: int
    parent: int
    role: str
    memory: ProcessMemory
    node: int | None  # index of the node whose raylet started it; None for head-wide services


def ray_process_table(nodes) -> list[RayProcess]:
    """This process and every descendant, with their roles and PSS/RSS (bytes). ``nodes`` is a
    ``RayNodes``: a process is attributed to the node whose raylet is it or its ancestor."""
    me = os.getpid()
    node_of = {}
    for node in nodes.nodes:
        for pid in [node.raylet_pid, *descendant_pids(node.raylet_pid)]:
            node_of[pid] = node.index
    rows = []
    for pid in [me, *descendant_pids(me)]:
        memory = process_memory(pid)
        if memory is None:
            continue
        try:
            process = psutil.Process(pid)
            parent = process.ppid()
        except psutil.Error:
            continue
        role = "this process (the driver)" if pid == me else role_of(process)
        rows.append(RayProcess(pid, parent, role, memory, node_of.get(pid)))
    return rows


def node_memory(node) -> ProcessMemory:
    """Sum of RSS/USS/PSS (bytes) over one node's raylet and the processes it started (its
    workers and agents): the node's object store lives in these mappings."""
    totals = [process_memory(pid) for pid in [node.raylet_pid, *descendant_pids(node.raylet_pid)]]
    present = [t for t in totals if t is not None]
    return ProcessMemory(sum(t.rss for t in present), sum(t.uss for t in present),
                         sum(t.pss for t in present))


def node_pss_by_kind(node) -> dict[str, int]:
    """PSS (bytes) of one node's raylet and the processes it started, split by kind of page
    (``proctree.PSS_KINDS``): a store on /dev/shm is shared memory, one in a file on disk is file
    pages, and what the raylet and its workers allocate for themselves is anonymous. Empty where
    the kernel does not split PSS."""
    return tree_pss_by_kind(node.raylet_pid) or {}


def store_bytes_used(node_id: str | None = None) -> int:
    """Bytes Ray counts in use in one node's object store (``node_id``) or in all of them.

    Ray's own accounting: the node's ``object_store_memory`` resource, total minus available.
    It counts primary copies (what ``ray.put`` and task arguments create); a copy pulled to
    another node to be read there is not counted. Raylets report every ~100 ms, so it lags.
    """
    from ray._private import state

    total, available = state.total_resources_per_node(), state.available_resources_per_node()
    used = {node: int(total[node].get("object_store_memory", 0)
                      - available.get(node, {}).get("object_store_memory", 0)) for node in total}
    return used.get(node_id, 0) if node_id is not None else sum(used.values())


def copies_on(ref, nodes) -> list[int]:
    """Indexes of the nodes whose object store holds a copy of ``ref`` (Ray's object directory)."""
    import ray

    locations = ray.experimental.get_object_locations([ref])[ref]["node_ids"]
    return sorted(node.index for node in nodes.nodes if node.node_id in locations)


def what_ray_left(nodes) -> list[str]:
    """What a finished session or cluster left behind: live processes that served it (a raylet,
    gcs_server or worker still running from our tree or naming its temp folder), its folders, and
    Ray's default paths where they were made or changed after it began (``ray_default_paths``)."""
    left = []
    folder = str(nodes.temp_dir)
    for process in psutil.process_iter(["pid", "name", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if folder in cmdline or process.pid in {node.raylet_pid for node in nodes.nodes}:
            left.append(f"process {process.pid} ({process.info['name']})")
    for pid in descendant_pids(os.getpid()):
        try:
            name = psutil.Process(pid).name()
        except psutil.Error:
            continue
        if name in ("raylet", "gcs_server") or name.startswith("ray::"):
            left.append(f"process {pid} ({name})")
    left += [f"folder {path}" for path in nodes.folders if path.exists()]
    before = getattr(nodes, "ray_defaults_before", None) or {}
    for path, state in ray_default_paths().items():
        if state is not None and state != before.get(path):
            left.append(f"{path} (Ray's default, made or changed since the session began)")
    return sorted(set(left))


def ray_default_paths() -> dict[str, int | None]:
    """Where Ray writes when not told otherwise (~/.ray/auth_token, /tmp/ray), each with its last
    change (st_mtime_ns) or None where it does not exist. A session of ours records them as it
    starts, so what was there before (any earlier Ray program's) is never taken for ours."""
    states = {}
    for path in (Path.home() / ".ray" / "auth_token", Path("/tmp/ray")):
        try:
            states[str(path)] = path.stat().st_mtime_ns
        except OSError:
            states[str(path)] = None
    return states
