"""``python -m helpers.bench --suite cluster``: every worker on every node of a Ray or Dask cluster needs
one array; what does each way cost there, against that network's own floor?

Pointed at a running cluster (``--ray-address``, ``--dask-scheduler``, or Ray's ``RAY_ADDRESS`` and
Dask's ``DASK_SCHEDULER_ADDRESS``), the suite joins it as a driver and measures on it; without an
address it starts a cluster of separate processes on this machine (``helpers.bench.cluster_local``:
two Ray nodes, two Dask workers) and ends it afterwards. The shipped reference was made that way,
on localhost: its "network" is the loopback. Per engine and size: the floor (one transfer between
two nodes by the engine's own transport), then each way (``helpers.bench.cluster_measure``) with its
time as a multiple of the floor, the bytes that crossed (in arrays), and what each node added.
Seconds and bytes.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from helpers.bench import cluster_local, cluster_probes, report
from helpers.bench.cluster_measure import measure_floor, measure_way, store_bytes
from helpers.measure.units import MiB, format_bytes, format_seconds

RESULTS = Path(__file__).resolve().parents[2] / "results"
PATTERN = "*-cluster.json"
DEFAULT_SIZES = "16,64"
DEFAULT_REPEAT = 3
ENGINES = ("dask", "ray")  # Dask first: Ray must be the last thing this process runs (it never forks after)
LOCAL_NODES = 2
LOCAL_NODE_WORKERS = 2  # two per node: by value, the two tasks of a node read two copies; shared, one
MIN_NODES = 2
RAY_ENV = "RAY_ADDRESS"
DASK_ENV = "DASK_SCHEDULER_ADDRESS"
WAY_TEXT = {
    "ray_by_value": "Ray, the array as every task's argument",
    "ray_put_once": "Ray, ray.put once, every task gets the reference",
    "dask_by_value": "Dask, the array inside every task",
    "dask_scatter": "Dask, scatter(broadcast=True) once, every task gets the future",
}
GUIDE_NAMES = {
    "ray_by_value": "ray_by_value",
    "ray_put_once": "ray_object_store",
    "dask_by_value": "dask_by_value",
    "dask_scatter": "dask_scatter",
}
STORE_HEADROOM = 1.25  # a local Ray node's store: every task's argument, a ray.put and a spare, and this


def addresses(
    ray_address: str | None, dask_scheduler: str | None, engines: list[str]
) -> dict[str, str | None]:
    """Each engine to measure and its cluster's address (None: start a local one). Given addresses
    (options, else the engines' own environment variables) choose the engines; with none, ``engines``."""
    ray_address = ray_address or os.environ.get(RAY_ENV) or None
    dask_scheduler = dask_scheduler or os.environ.get(DASK_ENV) or None
    given = {name: value for name, value in (("dask", dask_scheduler), ("ray", ray_address)) if value}
    if given:
        return given
    return {name: None for name in ENGINES if name in engines}


def task_of(spec: str | None) -> tuple[Callable, tuple]:
    """The task every worker runs (the reader's ``module:function`` or ``sum_whole``) and the modules
    to send by value with it."""
    if spec is None:
        return cluster_probes.sum_whole, ()
    from helpers.bench import own_task

    function = own_task.check_task(spec)
    return function, (importlib.import_module(spec.partition(":")[0]),)


def local_store_bytes(largest_bytes: int, n_nodes: int, node_workers: int) -> int:
    """Object store bytes for each node of a local Ray cluster: by value, the driver's node holds every
    task's argument at once; then a ``ray.put``, a spare, and headroom."""
    copies = n_nodes * node_workers + 2
    return max(cluster_local.MIN_STORE_BYTES, int(STORE_HEADROOM * copies * largest_bytes))


@contextlib.contextmanager
def local_clusters(
    engines: list[str], largest_bytes: int, n_nodes: int, node_workers: int
) -> Iterator[dict[str, cluster_local.LocalCluster]]:
    """The local clusters of separate processes for the engines given no address, sized for the
    largest array; their Ray environment is set in this process while they run."""
    with contextlib.ExitStack() as stack:
        clusters = {}
        if "dask" in engines:
            clusters["dask"] = stack.enter_context(cluster_local.dask_cluster(n_nodes, threads=node_workers))
        if "ray" in engines:
            store = local_store_bytes(largest_bytes, n_nodes, node_workers)
            ray = stack.enter_context(cluster_local.ray_cluster(n_nodes, node_workers, store))
            clusters["ray"] = ray
            saved = {name: os.environ.get(name) for name in ray.env}
            os.environ.update(ray.env)
            stack.callback(_restore, saved)
        yield clusters


def _restore(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _engine(name: str, address: str, modules: tuple):
    """The engine joined to the cluster at ``address``; ClusterError (nothing left there) when it has
    fewer than ``MIN_NODES`` nodes with workers."""
    if name == "ray":
        from helpers.bench.cluster_ray import RayEngine

        return RayEngine(address, modules, MIN_NODES)
    from helpers.bench.cluster_dask import DaskEngine

    return DaskEngine(address, modules, MIN_NODES)


def describe_nodes(engine) -> list[dict]:
    return [{"label": node.label, "host": node.host, "workers": node.slots} for node in engine.nodes]


def run(
    arrays: list[np.ndarray],
    engine_addresses: dict[str, str | None],
    task_spec: str | None,
    repeat: int,
    time_limit: float,
    n_local_nodes: int = LOCAL_NODES,
    local_node_workers: int = LOCAL_NODE_WORKERS,
    progress: Callable[[str], None] = lambda t: None,
) -> tuple[list[dict], dict]:
    """Every row of the suite (floors and ways, size after size, engine after engine) and what each
    cluster was (address, who started it, its nodes). ClusterError when a cluster cannot be measured."""
    task, modules = task_of(task_spec)
    # A memory-mapped .npy (--array) goes as a plain ndarray view of the mapping (no copy): pickled, an
    # np.memmap travels inside the pickle, and each Ray task would unpickle a private copy of it
    arrays = [np.asarray(array) for array in arrays]
    rows: list[dict] = []
    clusters: dict[str, dict] = {}
    local = [name for name, address in engine_addresses.items() if address is None]
    largest = max(array.nbytes for array in arrays)
    with local_clusters(local, largest, n_local_nodes, local_node_workers) as started:
        for name in ENGINES:
            if name not in engine_addresses:
                continue
            address = engine_addresses[name] or started[name].address
            progress(f"{name}: joining the cluster at {address}")
            with _engine(name, address, modules) as engine:
                idle = store_bytes(engine.snapshots())
                clusters[name] = {
                    "address": address,
                    "started_by_suite": name in started,
                    "nodes": describe_nodes(engine),
                }
                for array in arrays:
                    progress(f"{name}: floor at {format_bytes(array.nbytes)}")
                    floor = measure_floor(engine, array, repeat)
                    floor_row = {
                        "name": f"{name}_floor",
                        "engine": name,
                        "size_bytes": int(array.nbytes),
                        "runs_s": floor,
                        "median_s": float(np.median(floor)),
                    }
                    rows.append(floor_row)
                    for way in engine.ways:
                        result = measure_way(engine, way, array, task, repeat, time_limit, idle, progress)
                        rows.append(way_row(result, floor_row["median_s"]))
    return rows, clusters


def way_row(result, floor_s: float) -> dict:
    """The JSON row of one way at one size (see results/README.md)."""
    median = result.median_s
    crossed = result.network_bytes_per_run
    return {
        "name": result.way,
        "engine": result.engine,
        "size_bytes": result.size_bytes,
        "runs_s": result.runs_s,
        "median_s": median,
        "ratio_to_floor": None if median is None else median / floor_s,
        "network_bytes_per_run": crossed,
        "network_arrays_per_run": None if crossed is None else crossed / result.size_bytes,
        "node_added": result.node_added,
        "every_task_held_at_once": result.every_task_held_at_once,
        "task_result": result.task_result,
        "error": result.error,
    }


def _arrays(value: float | None, size: int) -> str:
    return "-" if value is None else f"{value / size:+.2f}"


def format_table(rows: list[dict], clusters: dict[str, dict]) -> str:
    """Per engine and size: the floor, then each way's time, multiple of the floor, arrays that
    crossed the network per run, and arrays each node added (its processes' PSS / its store)."""
    lines = []
    for engine, cluster in clusters.items():
        nodes = cluster["nodes"]
        who = "started by the suite on this machine" if cluster["started_by_suite"] else "yours"
        lines.append(
            f"{engine} cluster at {cluster['address']} ({who}): "
            + ", ".join(f"{n['label']}: {n['workers']} worker(s)" for n in nodes)
        )
        for floor in (r for r in rows if r["engine"] == engine and r["name"].endswith("_floor")):
            size = floor["size_bytes"]
            lines.append(
                f"  {format_bytes(size)}: floor (one transfer between two nodes) "
                f"{format_seconds(floor['median_s'])}"
            )
            lines.append(
                f"    {'way':<15} {'time':>9} {'x floor':>8} {'crossed':>8}  per node: copies its "
                "tasks read; arrays added to PSS / store ('-': not measured)"
            )
            for row in rows:
                if row["engine"] != engine or row["size_bytes"] != size or row["name"].endswith("_floor"):
                    continue
                if row["error"]:
                    lines.append(f"    {row['name']:<15} {row['error']}")
                    continue
                added = "; ".join(
                    f"{label.split(' (')[0]}: {v.get('copies_read', '-')}; "
                    f"{_arrays(v['pss_bytes'], size)} / {_arrays(v['store_bytes'], size)}"
                    for label, v in row["node_added"].items()
                )
                crossed = row["network_arrays_per_run"]
                lines.append(
                    f"    {row['name']:<15} {format_seconds(row['median_s']):>9} "
                    f"{row['ratio_to_floor']:>7.2f}x {'-' if crossed is None else f'{crossed:.2f}':>8}  "
                    f"{added}"
                )
    return "\n".join(lines)


def ranking(rows: list[dict]) -> list[dict]:
    """At the largest size measured, every way that ran, fastest first: by its median time, which
    compares across engines because both ran on the same nodes in the same run (each way's multiple
    of its own engine's floor, kept beside it, is what compares across machines)."""
    ran = [r for r in rows if not r["name"].endswith("_floor") and r["median_s"] is not None]
    if not ran:
        return []
    largest = max(r["size_bytes"] for r in ran)
    return sorted(
        (
            {
                "name": r["name"],
                "engine": r["engine"],
                "size_bytes": largest,
                "ratio_to_floor": r["ratio_to_floor"],
                "median_s": r["median_s"],
            }
            for r in ran
            if r["size_bytes"] == largest
        ),
        key=lambda r: r["median_s"],
    )


def format_ranking(ranked: list[dict]) -> str:
    if not ranked:
        return "no way ran"
    size = format_bytes(ranked[0]["size_bytes"])
    lines = [f"ranking at {size}, fastest first (and each as a multiple of its own engine's floor):"]
    for place, row in enumerate(ranked, start=1):
        lines.append(
            f"  {place}. {row['name']} ({WAY_TEXT[row['name']]}): {format_seconds(row['median_s'])}, "
            f"{row['ratio_to_floor']:.2f}x"
        )
    return "\n".join(lines)


def guide_rows(rows: list[dict], clusters: dict[str, dict]) -> dict[str, str]:
    """The decision guide's multi-node answer for each way measured, from this run (largest size)."""
    answers = {}
    for row in ranking(rows):
        cluster = clusters[row["engine"]]
        full = next(r for r in rows if r["name"] == row["name"] and r["size_bytes"] == row["size_bytes"])
        copies = [v["copies_read"] for v in full["node_added"].values()]
        answers[GUIDE_NAMES[row["name"]]] = (
            f"yes: every worker on {len(cluster['nodes'])} nodes held {format_bytes(row['size_bytes'])} in "
            f"{row['ratio_to_floor']:.1f}x one transfer between two nodes; "
            f"{full['network_arrays_per_run']:.1f} arrays crossed the network per run"
            + f"; {_copies(copies)} per node"
        )
    return answers


def _copies(copies: list[int]) -> str:
    low, high = min(copies), max(copies)
    return f"{low} cop{'y' if low == 1 else 'ies'}" if low == high else f"{low} to {high} copies"


def format_guide(answers: dict[str, str]) -> str:
    lines = ["the decision guide's multi-node rows, from this run:"]
    lines += [f"  {name}: {text}" for name, text in answers.items()]
    return "\n".join(lines)


def format_comparison(rows: list[dict], reference: dict) -> str:
    """This run's multiples of the floor beside a reference run's, way by way and size by size."""
    theirs = {(r["name"], r["size_bytes"]): r for r in reference["rows"] if r.get("ratio_to_floor")}
    lines = [
        f"against {reference.get('machine', {}).get('host', 'the reference')} "
        f"({reference.get('created', '?')}), multiples of each run's own floor:"
    ]
    for row in rows:
        other = theirs.get((row["name"], row["size_bytes"]))
        if row.get("ratio_to_floor") is None or other is None:
            continue
        lines.append(
            f"  {row['name']:<15} {format_bytes(row['size_bytes']):>9}: here {row['ratio_to_floor']:.2f}x, "
            f"reference {other['ratio_to_floor']:.2f}x"
        )
    if len(lines) == 1:
        lines.append("  no way and size in common")
    return "\n".join(lines)


def plot_document(doc: dict, path: Path, reference: dict | None = None) -> Path:
    """Two panels of bars per way and size: left, the time until every worker on every node held the
    array (seconds, this run); right, that time as a multiple of its engine's floor, with a reference
    run's multiples as dots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ways = [r for r in doc["rows"] if r.get("ratio_to_floor") is not None]
    names = sorted({r["name"] for r in ways}, key=list(WAY_TEXT).index)
    sizes = sorted({r["size_bytes"] for r in ways})
    figure, (seconds_axes, ratio_axes) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / max(1, len(sizes))
    reference_rows = (reference or {}).get("rows", [])
    theirs = {(r["name"], r["size_bytes"]): r.get("ratio_to_floor") for r in reference_rows}
    for k, size in enumerate(sizes):
        by_name = {r["name"]: r for r in ways if r["size_bytes"] == size}
        x = np.arange(len(names)) + k * width
        seconds_axes.bar(x, [by_name[n]["median_s"] if n in by_name else 0.0 for n in names], width,
                         label=format_bytes(size))
        ratio_axes.bar(x, [by_name[n]["ratio_to_floor"] if n in by_name else 0.0 for n in names], width,
                       label=format_bytes(size))
        dots = [(i + k * width, theirs[(n, size)]) for i, n in enumerate(names) if theirs.get((n, size))]
        if dots:
            ratio_axes.scatter(*zip(*dots, strict=True), color="black", zorder=3, s=12,
                               label="reference" if k == 0 else None)
    ratio_axes.axhline(1.0, color="grey", linestyle="--",
                       label="its engine's floor: one transfer between two nodes")
    for axes in (seconds_axes, ratio_axes):
        axes.set_xticks(np.arange(len(names)) + width * (len(sizes) - 1) / 2, names, fontsize=8)
        axes.legend(fontsize=7)
    seconds_axes.set_ylabel("seconds until every worker holds it")
    ratio_axes.set_ylabel("the same / its engine's floor")
    figure.suptitle("every worker on every node holds the array (median of the runs)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def sizes_fit(sizes: list[int], local_engines: list[str], n_nodes: int, node_workers: int) -> str | None:
    """Why these sizes cannot run here (None: they can): this process holds the array and a pickled
    copy; a local Ray cluster's stores and a local Dask cluster's workers (a copy per task by value)
    hold copies of the largest on this machine too."""
    from helpers.measure import system

    largest = max(sizes)
    needed = 3 * largest
    if "ray" in local_engines:
        needed += n_nodes * local_store_bytes(largest, n_nodes, node_workers)
    if "dask" in local_engines:
        needed += n_nodes * (node_workers + 2) * largest
    available = system.available_memory()
    if needed > available:
        return (
            f"size {largest / MiB:g} MiB does not fit: this run needs about {format_bytes(needed)} of RAM "
            f"here, {format_bytes(available)} is available"
        )
    return None


def newest_reference(folder: Path = RESULTS) -> Path | None:
    """The newest shipped result of this suite (``results/<host>-<date>-cluster.json``), or None."""
    found = sorted(folder.glob(PATTERN), key=lambda path: path.stem.rsplit("-", 4)[-4:])
    return found[-1] if found else None


def reference_summary(path: Path | None = None) -> str:
    """A reference run read for a reader (lesson 10): where it ran; per engine, the largest size's floor
    and each way's time (seconds, and as a multiple of that engine's own floor), the arrays that crossed
    the network per run and the copies each node's tasks read; then the ranking by time. Or why there
    is none."""
    path = path or newest_reference()
    if path is None:
        return (f"No cluster reference shipped in results/ ({PATTERN}): "
                "run python -m helpers.bench --suite cluster")
    doc = report.load_reference(path)
    machine, sizes = doc["machine"], ", ".join(format_bytes(n) for n in doc["options"]["sizes_bytes"])
    lines = [f"{path.name}: host {machine.get('host', '?')} ({machine.get('logical_cpus', '?')} CPUs), "
             f"{doc['created'][:10]}, array sizes {sizes}"]
    for engine, cluster in doc["clusters"].items():
        where = ("started by the suite on one machine (its network is the loopback)"
                 if cluster["started_by_suite"] else f"at {cluster['address']}")
        tasks = sorted({node["workers"] for node in cluster["nodes"]})
        each = f"{tasks[0]} tasks each" if len(tasks) == 1 else "tasks per node: " + ", ".join(
            str(node["workers"]) for node in cluster["nodes"])
        unit = ("one per CPU Ray counts on the node; the driver's node is listed first" if engine == "ray"
                else "one per thread of the node's one Dask worker process")
        lines.append(f"{engine}: {len(cluster['nodes'])} nodes, {each} ({unit}), {where}")
        rows = [r for r in doc["rows"] if r["engine"] == engine]
        size = max(r["size_bytes"] for r in rows)
        floor = next(r for r in rows if r["name"] == f"{engine}_floor" and r["size_bytes"] == size)
        lines.append(f"  at {format_bytes(size)}, {engine}'s transfer floor (one transfer between two "
                     "nodes): "
                     f"{format_seconds(floor['median_s'])}")
        for row in rows:
            if row["size_bytes"] != size or row["name"] == floor["name"]:
                continue
            if row["error"]:
                lines.append(f"  {row['name']:<14} {row['error']}")
                continue
            copies = ", ".join(str(v["copies_read"]) for v in row["node_added"].values())
            lines.append(f"  {row['name']:<14} {format_seconds(row['median_s']):>8} "
                         f"({row['ratio_to_floor']:.2f}x that floor), "
                         f"{row['network_arrays_per_run']:.1f} arrays crossed, "
                         f"copies read per node: {copies}")
    ranked = doc.get("ranking") or ranking(doc["rows"])
    if ranked:
        lines.append(f"fastest first at {format_bytes(ranked[0]['size_bytes'])}, in seconds (both engines "
                     "ran on the same machine): " + ", ".join(row["name"] for row in ranked))
    return "\n".join(lines)


def copies_read(doc: dict) -> dict[str, tuple[list[int], list[int]]]:
    """Per way at the largest size of a result: the copies each node's tasks read, and each node's
    workers (tasks), in node order."""
    largest = max(doc["options"]["sizes_bytes"])
    found = {}
    for row in doc["rows"]:
        if row["size_bytes"] != largest or row["name"].endswith("_floor") or row["error"]:
            continue
        workers = [node["workers"] for node in doc["clusters"][row["engine"]]["nodes"]]
        found[row["name"]] = ([added["copies_read"] for added in row["node_added"].values()], workers)
    return found
