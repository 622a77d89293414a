"""A Ray or a Dask cluster on this machine made of separate processes, as a reader's cluster is: for
the cluster suite's default run (no address given) and for its tests. Sizes are bytes.

``ray_cluster`` runs ``ray start --head`` and then ``ray start --address`` once per further node,
each a node of its own (its raylet, its object store, its workers) on 127.0.0.1; ``dask_cluster``
runs ``dask scheduler`` and one ``dask worker`` process per node. Both yield what a driver needs to
join (the address, and for Ray the environment: a fresh authentication token, our temp folder) and
the pids that make each node, so a test can take a node away; on exit both end every process they
started (``ray stop`` would end every Ray node of the machine, the reader's too, so we end ours by
pid) and remove their folders.

Ray 2.60 keeps its sockets, logs and ``ray_current_cluster`` under ``RAY_TMPDIR`` and writes a token
to ~/.ray/auth_token unless it is given one: the cluster and its driver get a ``sal-rayc-*`` folder
and a token of their own in their environment, so nothing is written outside our folder.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from helpers.measure.leftovers import TEMP_PREFIX

START_TIMEOUT_SECONDS = 120.0
MIN_STORE_BYTES = 80 * 2**20  # Ray refuses an object store under 75 MiB
STOP_TIMEOUT_SECONDS = 10.0
STOP_GRACE_SECONDS = 3.0  # a process of our cluster told to end gets this long, then is killed
HOST = "127.0.0.1"


@dataclass
class LocalCluster:
    """A running cluster of ours: its address, the environment a driver joins it with (for Ray), the
    pids of each node's processes (for Ray the raylet's, for Dask the worker's), its folder."""

    engine: str
    address: str
    env: dict[str, str]
    node_pids: list[int]
    folder: Path
    started: list[psutil.Process] = field(default_factory=list)

    def driver_env(self) -> dict[str, str]:
        """This process's environment with what a driver of this cluster needs."""
        return {**os.environ, **self.env}


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _ray_command() -> list[str]:
    return [sys.executable, "-m", "ray.scripts.scripts"]


def _run(command: list[str], env: dict[str, str], what: str) -> None:
    """Run a start command to its end; RuntimeError with the last lines of its output if it fails."""
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=START_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what} did not finish within {START_TIMEOUT_SECONDS:.0f} s") from None
    if done.returncode != 0:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-4:])
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {tail}")


def _processes_naming(folder: Path) -> list[psutil.Process]:
    """Processes whose command line names ``folder`` (raylets, GCS, Ray's agents), and their descendants
    (workers rename themselves ``ray::...`` and lose it)."""
    found: dict[int, psutil.Process] = {}
    for process in psutil.process_iter(["cmdline"]):
        if str(folder) in " ".join(process.info["cmdline"] or []):
            found[process.pid] = process
            with contextlib.suppress(psutil.Error):
                found.update((child.pid, child) for child in process.children(recursive=True))
    return list(found.values())


def _raylet_pids(folder: Path) -> list[int]:
    return sorted(p.pid for p in _processes_naming(folder) if _name(p) == "raylet")


def _name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.Error:
        return ""


def end_processes(processes: list[psutil.Process]) -> None:
    """SIGTERM, then after ``STOP_GRACE_SECONDS`` SIGKILL, each of ``processes`` still alive; wait for
    them (reaping ours)."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(processes, timeout=STOP_GRACE_SECONDS)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=STOP_TIMEOUT_SECONDS)


def ray_start_command(*arguments: str, report_version: str | None = None) -> list[str]:
    """``ray start ARGUMENTS`` run by this Python; ``report_version``: the head writes this Ray version
    into the cluster's metadata instead of its own (the tests' way to make a version mismatch)."""
    if report_version is None:
        return [*_ray_command(), "start", *arguments]
    code = (
        "import sys, ray; ray.__version__ = sys.argv.pop(1); "
        "from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()"
    )
    return [sys.executable, "-c", code, report_version, "start", *arguments]


@contextlib.contextmanager
def ray_cluster(
    n_nodes: int = 2,
    cpus_per_node: int = 1,
    store_bytes: int = 256 * 2**20,
    report_version: str | None = None,
    count_every_copy: bool = False,
) -> Iterator[LocalCluster]:
    """``n_nodes`` Ray nodes on this machine, each started by ``ray start`` (head first) with
    ``cpus_per_node`` CPUs and an object store of ``store_bytes``; yields a LocalCluster; always ends
    every process and removes the folder. ``count_every_copy``: each node's ``object_store_memory``
    resource counts every object in its store, a copy pulled there included (Ray's
    ``scheduler_report_pinned_bytes_only`` off; by default it counts the copies created there): the
    tests' witness, from outside, of what a run left in the stores."""
    if n_nodes < 1:
        raise ValueError(f"n_nodes must be at least 1, got {n_nodes}")
    folder = Path(
        tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}rayc-", dir="/tmp" if os.path.isdir("/tmp") else None)
    )
    env = {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "RAY_TMPDIR": str(folder),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    port = _free_port()
    address = f"{HOST}:{port}"
    common = [
        f"--num-cpus={cpus_per_node}",
        f"--object-store-memory={store_bytes}",
        f"--node-ip-address={HOST}",
        "--disable-usage-stats",
    ]
    cluster = LocalCluster("ray", address, env, [], folder)
    node_env = {**os.environ, **env}
    if count_every_copy:
        node_env["RAY_scheduler_report_pinned_bytes_only"] = "0"
    try:
        _run(
            ray_start_command(
                "--head",
                f"--port={port}",
                f"--temp-dir={folder}",
                "--include-dashboard=false",
                *common,
                report_version=report_version,
            ),
            node_env,
            "ray start --head",
        )
        for index in range(1, n_nodes):
            _run(
                ray_start_command(f"--address={address}", *common),
                node_env,
                f"ray start --address (node {index + 1})",
            )
        cluster.node_pids = _raylet_pids(folder)
        yield cluster
    finally:
        end_processes(_processes_naming(folder))
        end_processes(_processes_naming(folder))  # a worker started while the first ones ended
        shutil.rmtree(folder, ignore_errors=True)


def dask_worker_command(
    scheduler: str, folder: Path, name: str, report_package: tuple[str, str] | None = None, threads: int = 1
) -> list[str]:
    """``dask worker`` for one worker process of ``threads`` threads, without a nanny (the process is the
    worker: ending it loses the node); ``report_package``: (package, version)
    that worker reports instead of the installed one (the tests' way to make a version mismatch)."""
    arguments = [
        scheduler,
        "--no-nanny",
        "--nthreads",
        str(threads),
        "--name",
        name,
        "--no-dashboard",
        "--local-directory",
        str(folder),
        "--memory-limit",
        "0",
        "--host",
        HOST,
    ]
    if report_package is None:
        return [sys.executable, "-m", "distributed.cli.dask_worker", *arguments]
    code = (
        "import sys; from distributed import versions; package, fake = sys.argv.pop(1), sys.argv.pop(1); "
        "real = versions.get_package_info; "
        "versions.get_package_info = lambda pkgs: {**real(pkgs), package: fake}; "
        "from distributed.cli.dask_worker import main; main()"
    )
    return [sys.executable, "-c", code, *report_package, *arguments]


_WAIT_FOR_WORKERS = """
import sys, warnings
from distributed import Client
warnings.simplefilter("ignore")
with Client(sys.argv[1], timeout=float(sys.argv[3]), set_as_default=False) as client:
    client.wait_for_workers(int(sys.argv[2]), timeout=float(sys.argv[3]))
"""


def _wait_for_workers(address: str, n_workers: int, processes: list[subprocess.Popen]) -> None:
    """Return once the scheduler lists ``n_workers`` workers (asked from a process of its own: a Dask
    client leaves an event-loop thread in the process that used it, and this one may fork later)."""
    waiting = subprocess.Popen(
        [sys.executable, "-c", _WAIT_FOR_WORKERS, address, str(n_workers), str(START_TIMEOUT_SECONDS)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS + 10
    while waiting.poll() is None:
        if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
            waiting.kill()
            waiting.wait()
            raise RuntimeError(
                f"the Dask cluster did not start {n_workers} workers (a process ended, or "
                f"{START_TIMEOUT_SECONDS:.0f} s passed)"
            )
        time.sleep(0.1)
    if waiting.returncode != 0:
        raise RuntimeError(
            f"the Dask cluster did not start {n_workers} workers: "
            f"{waiting.stderr.read().decode(errors='replace').strip().splitlines()[-1:]}"
        )
    waiting.stderr.close()


@contextlib.contextmanager
def dask_cluster(
    n_workers: int = 2, report_package: tuple[str, str] | None = None, threads: int = 1
) -> Iterator[LocalCluster]:
    """``dask scheduler`` and ``n_workers`` ``dask worker`` processes on this machine, each worker a node
    of ``threads`` threads; yields a LocalCluster; always ends every process and removes the folder. The last
    worker reports ``report_package`` when given (see ``dask_worker_command``)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}daskc-"))
    port = _free_port()
    address = f"tcp://{HOST}:{port}"
    env = {
        **os.environ,
        "DASK_TEMPORARY_DIRECTORY": str(folder),
        "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED": "error",
    }
    processes: list[subprocess.Popen] = []
    cluster = LocalCluster("dask", address, {}, [], folder)
    try:
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "distributed.cli.dask_scheduler",
                    "--host",
                    HOST,
                    "--port",
                    str(port),
                    "--no-dashboard",
                    "--no-show",
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=folder,
            )
        )
        for index in range(n_workers):
            fake = report_package if index == n_workers - 1 else None
            processes.append(
                subprocess.Popen(
                    dask_worker_command(address, folder, f"node-{index + 1}", fake, threads),
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    cwd=folder,
                )
            )
        _wait_for_workers(address, n_workers, processes)
        cluster.node_pids = [p.pid for p in processes[1:]]
        yield cluster
    finally:
        every = []
        for process in processes:
            with contextlib.suppress(psutil.Error):
                parent = psutil.Process(process.pid)
                every += [*parent.children(recursive=True), parent]
        end_processes(every)
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_TIMEOUT_SECONDS)
        shutil.rmtree(folder, ignore_errors=True)
