"""The cluster suite's measurement, the same for Ray and for Dask: for each way of handing every worker
on every node one array, the time until all of them hold it, the bytes that crossed the network, and
the memory each node added; beside the floor, one plain transfer of the same bytes between two nodes
by the engine's own transport, measured in the same run. Seconds and bytes throughout.

An engine (``helpers.bench.cluster_ray.RayEngine``, ``helpers.bench.cluster_dask.DaskEngine``) says
which nodes there are, times its floor once, starts a fan-out of one way (one task per worker slot on
every node) and waits for it, and reads every node's memory and its machine's network counter
(``helpers.bench.cluster_probes``). What a fan-out put in the cluster is released when it ends,
whatever ends it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

HOLD_MIN_SECONDS = 1.0  # the memory run's tasks keep the array at least this long
HOLD_MULTIPLE = 3.0  # ... or this many times the way's median fan-out, so every task overlaps
POLL_SECONDS = 0.1  # how often the memory run reads the nodes
SETTLE_SECONDS = 0.5  # after the timed runs, at least this long before the memory run's baseline
SETTLE_MAX_SECONDS = 10.0  # ... and at most this long for every store to be back to its idle bytes


class ClusterError(Exception):
    """The cluster cannot be measured (refused, too few nodes, a node lost, another version): the
    message is the one line the reader sees."""


def check_enough_nodes(engine: str, address: str, nodes: list, least: int) -> None:
    """ClusterError unless the cluster has at least ``least`` nodes with workers."""
    if len(nodes) < least:
        raise ClusterError(
            f"the {engine} cluster at {address} has {len(nodes)} node(s) with workers; a multi-node "
            f"measurement needs at least {least}"
        )


@dataclass(frozen=True)
class Node:
    """One node: its label ('node 1 (head)'), the engine's key for it, its machine, its worker slots."""

    label: str
    key: str
    host: str
    slots: int


@dataclass
class WayResult:
    """One way at one size: its timed runs, what crossed, what each node added; or why it failed."""

    engine: str
    way: str
    size_bytes: int
    runs_s: list[float] = field(default_factory=list)
    network_bytes_per_run: float | None = None
    # node label -> {"pss_bytes", "store_bytes", "copies_read"}: bytes added, and how many distinct copies
    # of the array the node's tasks read (``cluster_probes.buffer_identity``)
    node_added: dict[str, dict] = field(default_factory=dict)
    every_task_held_at_once: bool | None = None
    task_result: str | None = None
    error: str | None = None

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.runs_s) if self.runs_s else None


def network_by_host(snapshots: dict[str, dict]) -> dict[str, int]:
    """Each machine's network counter (bytes received), once per machine, from node snapshots."""
    return {snapshot["host"]: snapshot["network_bytes"] for snapshot in snapshots.values()}


def network_crossed(before: dict[str, int], after: dict[str, int]) -> int:
    """Bytes received over the network stack between two readings, summed over the machines."""
    return sum(max(0, after[host] - before[host]) for host in after if host in before)


def memory_added(baseline: dict[str, dict], peaks: dict[str, dict]) -> dict[str, dict]:
    """Per node: the peak of its processes' PSS and of its store's bytes during the memory run, less
    their baseline (bytes). The store's bytes are the engine's own count (Ray: the bytes the node's
    object store holds by its own usage report, copies pulled there to be read included; Dask: the
    bytes of the data the worker holds), None where the engine could not read them (not measured); the
    PSS is the kernel's, and misses pages a store had touched before and kept (Ray's does)."""
    added = {}
    for node, peak in peaks.items():
        base = baseline[node]
        store = (
            None
            if peak.get("store_bytes") is None or base.get("store_bytes") is None
            else peak["store_bytes"] - base["store_bytes"]
        )
        added[node] = {"pss_bytes": peak["pss_bytes"] - base["pss_bytes"], "store_bytes": store}
    return added


def _keep_peaks(peaks: dict[str, dict], snapshots: dict[str, dict]) -> None:
    for node, snapshot in snapshots.items():
        peak = peaks.setdefault(node, dict(snapshot))
        for key in ("pss_bytes", "shm_pss_bytes", "store_bytes"):
            if snapshot.get(key) is not None and peak.get(key) is not None:
                peak[key] = max(peak[key], snapshot[key])


def store_bytes(snapshots: dict[str, dict]) -> dict[str, int | None]:
    """Each node's store bytes in snapshots (None: not measured)."""
    return {node: snapshot.get("store_bytes") for node, snapshot in snapshots.items()}


def settled_snapshots(engine, idle: dict[str, int | None]) -> dict[str, dict]:
    """The nodes' snapshots once every store holds no more than ``idle`` (its bytes before the suite
    put anything there): what the timed runs put is gone, the copies pulled for it too (Ray frees
    those in batches, about once a second). After ``SETTLE_MAX_SECONDS``, whatever they hold."""
    time.sleep(SETTLE_SECONDS)
    deadline = time.monotonic() + SETTLE_MAX_SECONDS
    while True:
        snapshots = engine.snapshots()
        now = store_bytes(snapshots)
        if time.monotonic() > deadline or all(
            idle.get(node) is None or used is None or used <= idle[node] for node, used in now.items()
        ):
            return snapshots
        time.sleep(POLL_SECONDS)


FLOOR_MIN_REPEAT = 7  # the floor is cheap and a transfer's time varies: at least this many runs


def measure_floor(engine, array, repeat: int) -> list[float]:
    """At least ``FLOOR_MIN_REPEAT`` runs of the engine's floor (one transfer of ``array`` between two
    nodes), seconds, after a warm-up run."""
    engine.floor_once(array)  # warm: connections made, workers started
    return [engine.floor_once(array) for _ in range(max(repeat, FLOOR_MIN_REPEAT))]


def measure_way(
    engine,
    way: str,
    array,
    task,
    repeat: int,
    time_limit: float,
    idle: dict[str, int | None],
    progress: Callable[[str], None] = lambda text: None,
) -> WayResult:
    """One way at the size of ``array``: a warm-up fan-out, ``repeat`` timed fan-outs (network
    counters read before and after them), then, once the stores are back to ``idle`` (each node's
    store bytes before the suite put anything), a memory run whose tasks hold the array while the
    nodes are read. A task that raises ends the way with its error; a lost node, a refusal or the
    time limit raise ClusterError (the suite stops there)."""
    result = WayResult(engine.name, way, int(array.nbytes))
    try:
        progress(f"{engine.name} {way}: warm-up")
        result.task_result = engine.fan_out(way, array, task, 0.0, time_limit)[0]
        before = network_by_host(engine.snapshots())
        for run in range(repeat):
            progress(f"{engine.name} {way}: run {run + 1} of {repeat}")
            started = time.perf_counter()
            engine.fan_out(way, array, task, 0.0, time_limit)
            result.runs_s.append(time.perf_counter() - started)
        after = network_by_host(engine.snapshots())
        result.network_bytes_per_run = network_crossed(before, after) / repeat
        progress(f"{engine.name} {way}: memory while every task holds it")
        baseline = settled_snapshots(engine, idle)
        hold = max(HOLD_MIN_SECONDS, HOLD_MULTIPLE * (result.median_s or 0.0))
        peaks: dict[str, dict] = {}
        held = engine.fan_out(
            way,
            array,
            task,
            hold,
            time_limit,
            while_waiting=lambda: _keep_peaks(peaks, engine.snapshots()),
            poll_seconds=POLL_SECONDS,
        )
        result.node_added = memory_added(baseline, {n: peaks.get(n, baseline[n]) for n in baseline})
        for node, added in result.node_added.items():
            added["copies_read"] = len({h[4] for h in held[1] if h[0] == node})
        ended, released = [h[1] for h in held[1]], [h[2] for h in held[1]]
        result.every_task_held_at_once = max(ended) <= min(released)
    except engine.task_error as error:  # the reader's task raised in a worker
        result.error = engine.describe_task_error(error)
    return result
