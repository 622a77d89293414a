"""The cluster suite's Dask side: join a running Dask cluster as a client (``Client(address)``), never
starting, stopping or reconfiguring it (``close``, never ``shutdown``), and measure on its workers.
Each worker process counts as a node (a machine that runs several has several). Seconds and bytes.

Ways: ``dask_by_value`` (the array inside every task: it travels client, scheduler, worker for each
task) and ``dask_scatter`` (``client.scatter(array, broadcast=True)`` once, every task gets the
future: every worker holds one copy in its data, which its tasks share). Every task is pinned to
its worker (``workers=[address]``, ``allow_other_workers=False``), one per thread, and impure. The
floor: the array scattered to one worker, then ``client.replicate`` to a second one (one transfer
between two workers, by Dask's own worker-to-worker transport), timed at the client.

What the suite puts in the cluster (scattered data, tasks) it cancels as each fan-out ends, whatever
ends it. Everything it sends goes by value (cloudpickle), so the workers need NumPy and psutil only.
On a cluster whose active memory manager runs (Dask's default), its ReduceReplicas policy may drop
``broadcast=True``'s extra copies while the suite runs: what the suite measures there is what that
cluster does.
"""

from __future__ import annotations

import contextlib
import time
import uuid
import warnings
from collections.abc import Callable

import numpy as np

from helpers.bench import cluster_probes
from helpers.bench.cluster_measure import ClusterError, Node, check_enough_nodes
from helpers.bench.cluster_ray import check_reachable as _check_host_port

WAYS = ("dask_by_value", "dask_scatter")
CONNECT_TIMEOUT_SECONDS = 10.0
LOST_CHECK_SECONDS = 0.5  # how often a fan-out's wait checks that its workers are still there


class DaskTaskError(Exception):
    """A reader's task raised in a Dask worker: the message is its exception's line."""


def check_reachable(address: str) -> None:
    """ClusterError unless something accepts a TCP connection at ``address`` ('tcp://host:port')."""
    try:
        _check_host_port(address.removeprefix("tcp://"))
    except ClusterError as error:
        reason = str(error).partition("(")[2].partition(")")[0]
        if "takes host:port" in str(error) or not reason:
            raise ClusterError(
                f"--dask-scheduler takes tcp://host:port (e.g. tcp://10.0.0.5:8786), got {address!r}"
            ) from None
        raise ClusterError(
            f"nothing answers at Dask scheduler address {address} ({reason}); is the cluster up "
            "(dask scheduler, dask worker), and is the address its scheduler's "
            "tcp://host:port?"
        ) from None


class DaskEngine:
    """A client of a running Dask cluster (see the module's docstring)."""

    name = "dask"
    ways = WAYS
    task_error = DaskTaskError

    def __init__(self, address: str, task_modules: tuple = (), min_nodes: int = 1):
        from distributed import Client

        self.address = address
        self.client = None
        check_reachable(address)
        with contextlib.suppress(ImportError):
            import cloudpickle

            for module in (cluster_probes, *task_modules):
                cloudpickle.register_pickle_by_value(module)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the version warning: checked below, as an error
                self.client = Client(address, timeout=CONNECT_TIMEOUT_SECONDS, set_as_default=False)
        except Exception as error:
            raise ClusterError(
                f"could not join the Dask cluster at {address}: {type(error).__name__}: {error}"
            ) from None
        try:
            self._check_versions()
            self.nodes = self._nodes()
            check_enough_nodes("dask", address, self.nodes, min_nodes)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> DaskEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_versions(self) -> None:
        """ClusterError when the client, the scheduler or a worker runs another Python (major.minor) or
        another version of a package Dask requires on every side, or of NumPy (the suite sends arrays).
        Dask itself only warns ("Mismatched versions found") and goes on."""
        from distributed import versions

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = self.client.get_versions(check=False)
        sides = {
            "this client": found["client"],
            "the scheduler": found["scheduler"],
            **{f"worker {address}": info for address, info in found["workers"].items()},
        }
        differ = []
        python = {
            side: ".".join(str((info or {}).get("host", {}).get("python", "?")).split(".")[:2])
            for side, info in sides.items()
        }
        if len(set(python.values())) > 1:
            differ.append("Python " + ", ".join(f"{v} ({side})" for side, v in python.items()))
        for package in (*versions.required_packages, "numpy"):
            seen = {
                side: ((info or {}).get("packages") or {}).get(package, "missing")
                for side, info in sides.items()
            }
            if package not in versions.scheduler_relevant_packages:  # the scheduler never runs a task
                seen.pop("the scheduler")
            if len(set(seen.values())) > 1:
                differ.append(f"{package} " + ", ".join(f"{v} ({side})" for side, v in seen.items()))
        if differ:
            raise ClusterError(
                f"the Dask cluster at {self.address} runs other versions than this client: "
                f"{'; '.join(differ)}; run the benchmark with the cluster's versions"
            )

    def _workers(self) -> dict[str, dict]:
        return self.client.scheduler_info(n_workers=-1)["workers"]

    def _nodes(self) -> list[Node]:
        workers = self._workers()
        ordered = sorted(workers.items(), key=lambda item: (str(item[1].get("name", "")), item[0]))
        return [
            Node(
                f"dask worker {index} ({info.get('name', address)} at {info.get('host', '?')})",
                address,
                info.get("host", "?"),
                int(info.get("nthreads", 1)),
            )
            for index, (address, info) in enumerate(ordered, start=1)
        ]

    def close(self) -> None:
        """Close this client; the cluster keeps running."""
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
            self.client = None

    def lost_nodes(self) -> list[str]:
        """Labels of the workers measured that the scheduler no longer lists."""
        there = set(self._workers())
        return [node.label for node in self.nodes if node.key not in there]

    def snapshots(self) -> dict[str, dict]:
        """Every worker's process memory, data bytes and its machine's network counter."""
        lost = self.lost_nodes()
        if lost:
            raise ClusterError(f"{lost[0]} left the cluster")
        by_address = self.client.run(cluster_probes.dask_worker_snapshot, workers=[n.key for n in self.nodes])

        return {node.label: by_address[node.key] for node in self.nodes}

    def _wait(
        self,
        futures: list,
        deadline: float,
        what: str,
        while_waiting: Callable[[], None] | None,
        poll_seconds: float,
    ) -> None:
        from distributed import wait

        while True:
            try:
                with self.client.as_current():
                    wait(futures, timeout=poll_seconds if while_waiting else LOST_CHECK_SECONDS)
                return
            except TimeoutError:
                pass
            lost = self.lost_nodes()
            if lost:
                raise ClusterError(f"{lost[0]} left the cluster during {what}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{what} did not finish within the time limit (--time-limit)")
            if while_waiting is not None:
                while_waiting()

    def _results(self, futures: list, what: str) -> list:
        failed = [f for f in futures if f.status == "error"]
        if failed:
            error = failed[0].exception()
            if isinstance(error, Exception) and "KilledWorker" not in type(error).__name__:
                raise DaskTaskError(f"{type(error).__name__}: {error}")
            raise ClusterError(f"a worker died during {what} ({type(error).__name__})")
        return self.client.gather(futures)

    def floor_once(self, array: np.ndarray) -> float:
        """Seconds for ``client.replicate`` to copy a scattered array from one worker to a second."""
        if len(self.nodes) < 2:
            raise ClusterError("the Dask cluster has one worker: the floor needs two")
        first, second = self.nodes[0].key, self.nodes[1].key
        [future] = self.client.scatter([array], workers=[first], hash=False)
        try:
            self._wait([future], time.monotonic() + 300.0, "the floor's scatter", None, 0.1)
            started = time.perf_counter()
            self.client.replicate([future], n=2, workers=[first, second])
            return time.perf_counter() - started
        finally:
            self.client.cancel([future])

    def fan_out(
        self,
        way: str,
        array: np.ndarray,
        task: Callable,
        hold_seconds: float,
        time_limit: float,
        while_waiting: Callable[[], None] | None = None,
        poll_seconds: float = 0.1,
    ) -> tuple[str, list[tuple]]:
        """One task per thread of every worker, each given the array ``way``'s way; returns worker 0's
        result summary and every task's (node label, ended, released, summary, copy's identity)."""
        deadline = time.monotonic() + time_limit
        slots = [node for node in self.nodes for _ in range(node.slots)]
        mine: list = []
        try:
            if way == "dask_scatter":
                [argument] = self.client.scatter([array], broadcast=True, hash=False)
                mine.append(argument)
            else:
                argument = array
            run = f"sal-bench-{uuid.uuid4().hex[:8]}"
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Sending large graph")
                for index, node in enumerate(slots):
                    mine.append(
                        self.client.submit(
                            cluster_probes.run_and_hold,
                            task,
                            argument,
                            index,
                            len(slots),
                            hold_seconds,
                            workers=[node.key],
                            allow_other_workers=False,
                            pure=False,
                            key=f"{run}-{index}",
                        )
                    )
            futures = mine[1:] if way == "dask_scatter" else mine
            self._wait(futures, deadline, f"{way}'s fan-out", while_waiting, poll_seconds)
            held = self._results(futures, f"{way}'s fan-out")
        finally:
            with contextlib.suppress(Exception):
                self.client.cancel(mine)
            del mine
        labelled = [(node.label, *values) for node, values in zip(slots, held, strict=True)]
        return held[0][2], labelled

    @staticmethod
    def describe_task_error(error: BaseException) -> str:
        return f"the task raised in a Dask worker: {error}"
