"""Start and stop Ray for the lessons: a local instance or a local multi-node cluster, sized from
``helpers.measure.config``, in temp folders of ours, and torn down completely (processes, folders) on exit.

``ray_available`` says whether Ray imports, ``object_store_bytes_for`` sizes an object store
(bytes), ``ray_session`` and ``local_cluster`` are the context managers; both yield a
``RayNodes`` (the nodes, head first, each with its raylet's pid and where its store lives).
Ray is imported lazily, so importing ``helpers`` never needs it.

What Ray 2.60 would leave behind without care, and what we do about it: a token file
(~/.ray/auth_token; we hand Ray a token in ``RAY_AUTH_TOKEN`` instead), /tmp/ray (sessions, logs,
sockets, ``ray_current_cluster``; we point ``RAY_TMPDIR`` and ``_temp_dir`` at a ``sal-ray-*``
folder and remove it), worker processes that outlive the raylet for a moment (we wait for every
process Ray started, and kill by pid what is still there after 10 s). The store's file in
/dev/shm is unlinked by Ray as soon as it is mapped, so ``ls /dev/shm`` never shows it. Where no
route leads outside, Ray's core warns on stderr each time the driver looks up this machine's address;
its fallback (the host name's address) serves nodes on one machine, and those lines are dropped
(``IP_PROBE_WARNING``).

A process in which Ray has run must never fork afterwards: Ray's gRPC threads hold locks, and a
forked child that runs Ray's destructors waits forever on a lock held by a thread that does not
exist in the child. ``ray_session`` and ``local_cluster`` record that Ray has run here;
``ray_has_run`` also sees a Ray the user started (``ray.init()``); the lessons' and the
benchmark's fork-started helpers call ``refuse_fork_after_ray`` (a RuntimeError saying why and
what to do) instead of hanging. ``ray_installed`` tells whether Ray is there without importing it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from helpers.measure import ray_processes, system
from helpers.measure.leftovers import TEMP_PREFIX
from helpers.measure.units import MiB

# Ray refuses a smaller object store (ray._private.ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES).
RAY_MINIMUM_STORE_BYTES = 75 * MiB
# Copies of the array a lesson's store must hold at once: one per task of a by-value fan-out
# (Ray stores each large argument once per call), one ray.put, one to spare; then 25% headroom.
SPARE_COPIES = 2
HEADROOM = 1.25
MAX_SHARE_OF_AVAILABLE = 0.5  # never give the store more than this share of the memory available
SHUTDOWN_TIMEOUT_SECONDS = 10.0
# Ray waits a fixed 30 s for a new node's raylet to register; on a machine busy enough, a start-up
# outlasts it ("The current node timed out during startup"). ray_session then stops what that
# start began and starts once more, once.
STARTUP_TRIES = 2
STARTUP_TIMED_OUT = "timed out during startup"
FORK_AFTER_RAY = ("Ray has run in this process; forking now can deadlock (Ray's gRPC threads' locks). "
                  "Use spawn or forkserver, or restart the kernel")
# What Ray's C++ core logs in the driver when it looks for this machine's address where no route leads
# outside (an offline laptop, a sandbox): harmless for nodes on one machine (_ip_probe_warnings_dropped).
IP_PROBE_WARNING = "Failed to determine local IP via external connectivity"
_STORE_LINE = re.compile(r"\] \(raylet\) store_runner\.cc:\d+: Starting object store with directory ([^,]+),")


def ray_available() -> str | None:
    """None if Ray imports here, else the reason it does not (a sentence for the reader)."""
    try:
        import ray  # noqa: F401
    except Exception as error:  # ImportError, or a broken install raising something else
        return f"Ray is not usable here ({type(error).__name__}: {error}); install it with pip install 'ray'"
    return None


def ray_installed() -> str | None:
    """None if a ``ray`` package is installed here, else why not; unlike ``ray_available`` it does not
    import Ray (a process that must never run Ray can ask)."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        found = False
    return None if found else "Ray is not installed here; install it with pip install 'ray'"


class _RayRecord:
    """Whether Ray has run in this process (set before ``ray.init`` starts its threads; never reset)."""

    ran = False


_record = _RayRecord()


def ray_has_run() -> bool:
    """True once Ray has run in this process: a ``ray_session``/``local_cluster`` of ours started, or a
    Ray that someone started with ``ray.init()`` is running now (seen once, remembered). Never
    imports Ray. (A Ray the user started and shut down before anything asked is not seen.)"""
    if not _record.ran:
        ray = sys.modules.get("ray")
        is_initialized = getattr(ray, "is_initialized", None)
        try:
            _record.ran = bool(is_initialized is not None and is_initialized())
        except Exception:  # a half-imported or broken Ray: it has not run
            pass
    return _record.ran


def _note_ray_runs() -> None:
    _record.ran = True


def fork_refusal(start_method: str) -> str | None:
    """``FORK_AFTER_RAY`` when ``start_method`` is fork and Ray has run in this process, else None."""
    return FORK_AFTER_RAY if start_method == "fork" and ray_has_run() else None


def refuse_fork_after_ray(start_method: str, what: str) -> None:
    """Raise RuntimeError (naming the cause and the fix) if ``what`` would fork now that Ray has run
    in this process; do nothing for spawn or forkserver, or when Ray has not run here."""
    reason = fork_refusal(start_method)
    if reason is not None:
        raise RuntimeError(f"{what} would start with fork: {reason}")


def object_store_bytes_for(array_bytes: int, n_workers: int) -> int:
    """Object-store size in bytes for a fan-out of ``array_bytes`` to ``n_workers`` tasks.

    Room for ``n_workers + 2`` copies with 25% headroom, never below Ray's minimum (75 MiB) and
    never above half the memory available now (whole MiB). On Binder (64 MiB /dev/shm) even the
    minimum does not fit in /dev/shm: Ray then keeps the store in a file under its temp folder.
    """
    if array_bytes < 0 or n_workers < 1:
        raise ValueError(f"need array_bytes >= 0 and n_workers >= 1, got {array_bytes}, {n_workers}")
    wanted = int((n_workers + SPARE_COPIES) * array_bytes * HEADROOM)
    cap = int(system.available_memory() * MAX_SHARE_OF_AVAILABLE)
    size = max(RAY_MINIMUM_STORE_BYTES, min(wanted, cap))
    return -(-size // MiB) * MiB


def shm_fits(object_store_bytes: int) -> bool:
    """True when /dev/shm has room for a store of this many bytes: Ray's own test before it
    falls back to a file in its temp folder (with a warning in the log)."""
    free = system.shm_free()
    return free is not None and free >= object_store_bytes


@dataclass(frozen=True)
class RayNode:
    """One Ray node: its id (hex), its raylet's pid, and the folder its object store lives in."""

    index: int
    node_id: str
    raylet_pid: int
    store_directory: str

    def pinned(self):
        """A scheduling strategy that runs a task on this node and nowhere else."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return NodeAffinitySchedulingStrategy(self.node_id, soft=False)


@dataclass(frozen=True)
class RayNodes:
    """What ``ray_session``/``local_cluster`` started: the nodes (head first), the address to
    connect to, the folders of ours Ray writes in (removed on exit; the temp folder first), and the
    state of Ray's default paths as it began (``ray_processes.ray_default_paths``): what was there
    before is not ours to report or remove."""

    nodes: tuple[RayNode, ...]
    address: str
    folders: tuple[Path, ...]
    ray_defaults_before: dict[str, int | None] = field(default_factory=dict)  # as the session began

    @property
    def temp_dir(self) -> Path:
        return self.folders[0]

    @property
    def head(self) -> RayNode:
        return self.nodes[0]


def ray_descendants(include_zombies: bool = False) -> list[psutil.Process]:
    """Every descendant of this process: Ray's gcs_server, raylets, their workers, ... Zombies
    (exited, not yet reaped by their parent) only with ``include_zombies``."""
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    if include_zombies:
        return children
    return [child for child in children if _status(child) not in (psutil.STATUS_ZOMBIE, "gone")]


def _status(process: psutil.Process) -> str:
    try:
        return process.status()
    except psutil.Error:
        return "gone"


def _store_directory(session_dir: str, raylet_pid: int) -> str:
    """Where this raylet put its object store, read from its log line 'Starting object store ...'."""
    for log in sorted(Path(session_dir, "logs").glob("raylet*.out")):
        for line in log.read_text(errors="replace").splitlines():
            match = _STORE_LINE.search(line)
            if match and f" {raylet_pid} {raylet_pid}]" in line:
                return match.group(1)
    return "unknown"


def _describe_node(index: int, node) -> RayNode:
    """A RayNode from one of Ray's ``ray._private.node.Node`` objects (our process started it)."""
    raylet_pid = node.all_processes["raylet"][0].process.pid
    return RayNode(index, node.node_id, raylet_pid, _store_directory(node.get_session_dir_path(), raylet_pid))


@contextlib.contextmanager
def _ray_environment(temp_dir: Path) -> Iterator[None]:
    """Environment for Ray while a session runs, restored on exit.

    Ray 2.60 turns token authentication on for a new local cluster and writes a token to
    ~/.ray/auth_token (a file that outlives the session): we keep the authentication but hand
    Ray a fresh token in ``RAY_AUTH_TOKEN``, so nothing is written. ``RAY_TMPDIR`` keeps every
    default folder (``ray_current_cluster`` too) in ours. Usage statistics stay off.
    """
    wanted = {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "RAY_TMPDIR": str(temp_dir),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    saved = {name: os.environ.get(name) for name in wanted}
    ray_logger = logging.getLogger("ray")
    saved_level = ray_logger.level
    os.environ.update(wanted)
    _reload_ray_settings()
    ray_logger.setLevel(logging.WARNING)  # Ray's INFO lines (e.g. about the store folder) stay quiet
    try:
        yield
    finally:
        ray_logger.setLevel(saved_level)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        _reload_ray_settings()


def _reload_ray_settings() -> None:
    """Make this process's Ray re-read RAY_AUTH_* (it caches them on import), as Ray itself does."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


@contextlib.contextmanager
def _ip_probe_warnings_dropped() -> Iterator[None]:
    """Keep Ray's ``IP_PROBE_WARNING`` lines off this process's stderr while Ray starts and connects.

    Ray finds this machine's address by a UDP "connect" to 8.8.8.8:53 (nothing is sent); where no
    route leads outside, its C++ core writes "Failed to determine local IP via external connectivity
    to: 8.8.8.8:53, ... falling back to hostname resolution" to stderr, each time (four times for a
    two-node cluster), before any setting of Ray's logging applies in the driver. The fallback finds
    the address nodes on one machine use. Everything else written to stderr (file descriptor 2)
    meanwhile is written back when the block ends; Ray's own processes write to their log files.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = [line for line in caught.read().decode(errors="replace").splitlines(keepends=True)
                    if IP_PROBE_WARNING not in line]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


@contextlib.contextmanager
def _cleaned_up(folders: list[Path], stop) -> Iterator[None]:
    """On exit: ``stop()`` Ray, wait for (or kill, by pid) every process it started, remove ``folders``."""
    before = {process.pid for process in ray_descendants(include_zombies=True)}
    started: dict[int, psutil.Process] = {}

    def remember() -> list[psutil.Process]:
        """Add descendants not seen yet (zombies too: waiting on them reaps them); return them."""
        new = [p for p in ray_descendants(include_zombies=True) if p.pid not in before | started.keys()]
        started.update((process.pid, process) for process in new)
        return new

    try:
        yield
    finally:
        remember()
        try:
            stop()
        finally:
            _wait_or_kill(list(started.values()))
            while new := remember():  # a process started while Ray stopped (a worker, a reaper)
                _wait_or_kill(new)
            for folder in folders:
                _remove_folder(folder)


def _remove_folder(folder: Path) -> None:
    """Remove ``folder``; again, a few times, while something of Ray's still ending writes into it (a
    ``ray.init`` that timed out leaves processes whose last files can land after the first pass)."""
    for _ in range(5):
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            return
        time.sleep(0.2)


def _wait_or_kill(processes: list[psutil.Process]) -> None:
    """Wait for ``processes`` to end (reaping our children), kill by pid what is left after 10 s."""
    _, alive = psutil.wait_procs(processes, timeout=SHUTDOWN_TIMEOUT_SECONDS)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=SHUTDOWN_TIMEOUT_SECONDS)


def _new_temp_dir(parent: str | Path | None = None) -> Path:
    """A fresh ``sal-ray-*`` folder (short: Ray's socket paths must stay under 108 characters)."""
    if parent is None:
        parent = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
    return Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}ray-", dir=parent))


def _settings(num_cpus: int | None, object_store_bytes: int | None) -> tuple[int, int]:
    from helpers.measure import config

    if ray_available() is not None:
        raise RuntimeError(ray_available())
    import ray

    if ray.is_initialized():
        raise RuntimeError("Ray is already running in this process; call ray.shutdown() first")
    num_cpus = num_cpus or config.n_workers()
    if object_store_bytes is None:
        object_store_bytes = object_store_bytes_for(config.array_bytes(), num_cpus)
    return num_cpus, object_store_bytes


@contextlib.contextmanager
def ray_session(num_cpus: int | None = None, object_store_bytes: int | None = None,
                **init_kwargs) -> Iterator[RayNodes]:
    """Start a local Ray with ``ray.init``; yield its ``RayNodes``; always shut it down.

    ``num_cpus`` defaults to ``config.n_workers()``, ``object_store_bytes`` to
    ``object_store_bytes_for(config.array_bytes(), num_cpus)``. The dashboard is off, workers'
    output is not forwarded, everything Ray writes goes to a ``sal-ray-*`` temp folder that is
    removed on exit with every process Ray started (also on error or Ctrl-C). Where /dev/shm is
    too small for the store, Ray itself puts it in a file in that folder and logs a warning.
    """
    num_cpus, object_store_bytes = _settings(num_cpus, object_store_bytes)
    import ray

    defaults_before = ray_processes.ray_default_paths()
    temp_dir = _new_temp_dir()
    settings = {
        "num_cpus": num_cpus,
        "object_store_memory": object_store_bytes,
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.WARNING,
        "_temp_dir": str(temp_dir),
        **init_kwargs,
    }
    _note_ray_runs()  # from here on Ray's settings load, its processes and threads start
    with _ray_environment(temp_dir), _cleaned_up([temp_dir], ray.shutdown):
        with _ip_probe_warnings_dropped():
            context = _init(settings)
        node = ray._private.worker._global_node
        yield RayNodes((_describe_node(0, node),), context.address_info["address"], (temp_dir,),
                       defaults_before)


def _init(settings: dict):
    """``ray.init(**settings)``; if the node timed out during start-up (a busy machine outlasting
    Ray's fixed wait), stop what that start began, say so on stderr, and start once more."""
    import ray

    for attempt in range(1, STARTUP_TRIES + 1):
        before = {process.pid for process in ray_descendants(include_zombies=True)}
        try:
            return ray.init(**settings)
        except Exception as error:  # Ray raises a bare Exception for this
            if STARTUP_TIMED_OUT not in str(error) or attempt == STARTUP_TRIES:
                raise
            ray.shutdown()
            _wait_or_kill([p for p in ray_descendants(include_zombies=True) if p.pid not in before])
            print(f"Ray's node {STARTUP_TIMED_OUT} (this machine is busy): starting it once more",
                  file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def local_cluster(n_nodes: int = 2, cpus_per_node: int = 1, object_store_bytes: int | None = None,
                  disk_store_nodes: int = 0, head_cpus: int | None = None,
                  head_store_bytes: int | None = None) -> Iterator[RayNodes]:
    """Start ``n_nodes`` Ray nodes on this machine (``ray.cluster_utils.Cluster``), connect this
    process to the head, yield their ``RayNodes`` (head first); always shut everything down.

    Each node has ``cpus_per_node`` CPUs and its own object store of ``object_store_bytes``
    (default: sized for the lesson's array and one worker); the head may get its own CPUs and store
    bytes (``head_cpus``, ``head_store_bytes``: a head that runs a fan-out, beside small nodes). The
    last ``disk_store_nodes`` nodes keep their store in a file in a folder on disk
    (``helpers.lessons.memmap.disk_parent()``) instead of /dev/shm: what Ray falls back to when
    /dev/shm is too small.
    """
    if n_nodes < 1 or not 0 <= disk_store_nodes <= n_nodes - 1:
        raise ValueError(f"need n_nodes >= 1 and 0 <= disk_store_nodes < n_nodes, got {n_nodes}, "
                         f"{disk_store_nodes}")
    if head_cpus is not None and head_cpus < 1:
        raise ValueError(f"need head_cpus >= 1, got {head_cpus}")
    _, object_store_bytes = _settings(cpus_per_node, object_store_bytes)
    import ray
    from ray.cluster_utils import Cluster

    from helpers.lessons.memmap import disk_parent

    defaults_before = ray_processes.ray_default_paths()
    temp_dir = _new_temp_dir()
    folders = [temp_dir]
    clusters: list[Cluster] = []

    def stop() -> None:
        try:
            ray.shutdown()
        finally:
            for cluster in clusters:
                cluster.shutdown()

    _note_ray_runs()
    with _ray_environment(temp_dir), _cleaned_up(folders, stop):
        cluster = Cluster(shutdown_at_exit=True)
        clusters.append(cluster)
        on_disk = []  # one store folder on disk for each of the last disk_store_nodes nodes
        for _ in range(disk_store_nodes):
            folders.append(_new_temp_dir(disk_parent()))
            on_disk.append(str(folders[-1]))
        with _ip_probe_warnings_dropped():
            added = start_nodes_and_connect(cluster, n_nodes, head_cpus or cpus_per_node,
                                            head_store_bytes or object_store_bytes, cpus_per_node,
                                            object_store_bytes, on_disk, temp_dir / "ray")
        yield RayNodes(tuple(_describe_node(i, node) for i, node in enumerate(added)), cluster.address,
                       tuple(folders), defaults_before)


def start_nodes_and_connect(cluster, n_nodes: int, head_cpus: int, head_store_bytes: int, node_cpus: int,
                            node_store_bytes: int, stores_on_disk: list[str], head_temp_dir: Path) -> list:
    """The working lines of ``local_cluster``: on ``cluster``, a ``ray.cluster_utils.Cluster()``
    (``local_cluster`` makes it, to shut it down whatever happens), start the head node, then
    ``n_nodes - 1`` more, each a raylet with its own object store of the bytes given, reached over
    TCP (the last ``len(stores_on_disk)`` keep their store in a file in those folders on disk); wait
    until all have joined, and connect this process (the driver) to the head. Returns the nodes,
    head first."""
    import ray

    nodes = [cluster.add_node(num_cpus=head_cpus, object_store_memory=head_store_bytes,
                              temp_dir=str(head_temp_dir), include_dashboard=False, no_monitor=True,
                              include_log_monitor=False)]
    first_on_disk = n_nodes - len(stores_on_disk)
    for index in range(1, n_nodes):
        store = {"plasma_directory": stores_on_disk[index - first_on_disk]} if index >= first_on_disk else {}
        nodes.append(cluster.add_node(num_cpus=node_cpus, object_store_memory=node_store_bytes,
                                      include_log_monitor=False, **store))
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
    return nodes
