"""The cluster suite's Ray side: join a running Ray cluster as a driver (``ray.init(address=...)``),
never starting, stopping or reconfiguring it, and measure on its nodes. Seconds and bytes.

Ways: ``ray_by_value`` (the array is each task's argument: Ray stores it once per call, in the
driver's node's object store, and every other node pulls its task's copy) and ``ray_put_once``
(``ray.put`` once, every task gets the reference: each node pulls one copy, its tasks share it).
Every task is pinned to its node (``NodeAffinitySchedulingStrategy``, not soft), one per CPU of the
node. The floor: one task on another node than the driver's, given by reference an object the
driver has just put (Ray's object manager pulls it there over TCP before the task starts): one
transfer between two nodes and one task's dispatch, timed from submit to result.
The node probes are actors of zero CPUs, one pinned to each node, ended when the driver leaves.
A node's store bytes are what its object store holds by its own usage report, read by the node's
probe (``cluster_probes.ray_store_bytes``): every object there, a copy pulled to be read there
included (the ``object_store_memory`` resource counts only the copies created there).

Ray must never run in a process that forks afterwards (its gRPC threads' locks): the suite joins
Ray last, in ``python -m helpers.bench``'s own process, and the tests run that as a subprocess.
Everything the suite sends (the probes, the reader's task) goes by value (cloudpickle), so the
cluster's workers need NumPy and psutil only. What the suite put in the cluster (its objects) is
owned by this driver: released as each fan-out ends, and by Ray when the driver disconnects.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator

import numpy as np

from helpers.bench import cluster_probes
from helpers.bench.cluster_measure import ClusterError, Node, check_enough_nodes

WAYS = ("ray_by_value", "ray_put_once")
CONNECT_TIMEOUT_SECONDS = 10.0
LOST_CHECK_SECONDS = 0.5  # how often a fan-out's wait checks that its nodes are still alive
CANCEL_WAIT_SECONDS = 5.0  # how long cancelled tasks get to end, before they are killed, then again


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".strip()


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
    """ClusterError unless something accepts a TCP connection at ``address`` ('host:port'; 'auto' and
    'ray://' addresses are left to Ray)."""
    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            pass
    except ValueError:
        raise ClusterError(f"--ray-address takes host:port (e.g. 10.0.0.5:6379), got {address!r}") from None
    except OSError as error:
        raise ClusterError(
            f"nothing answers at Ray address {address} ({error.strerror or error}); is the "
            "cluster up (ray status), and is the address its head's host:port?"
        ) from None


class RayEngine:
    """A driver joined to a running Ray cluster (see the module's docstring)."""

    name = "ray"
    ways = WAYS

    def __init__(self, address: str, task_modules: tuple = (), min_nodes: int = 1):
        import ray

        self.address = address
        self.ray = ray
        self.task_error = ray.exceptions.RayTaskError
        check_reachable(address)
        try:
            import cloudpickle

            for module in (cluster_probes, *task_modules):
                cloudpickle.register_pickle_by_value(module)
        except ImportError:
            pass
        try:
            ray.init(
                address=address,
                log_to_driver=False,
                logging_level="ERROR",
                namespace=f"sal-bench-{os.getpid()}",
            )
        except Exception as error:  # Ray's own: a version mismatch, a refused or wrong address
            with contextlib.suppress(Exception):
                ray.shutdown()  # whatever ray.init had set up in this process
            message = _first_line(error)
            if "ersion mismatch" in str(error):
                detail = " ".join(str(error).split())
                raise ClusterError(
                    f"the Ray cluster at {address} runs another version than this Python "
                    f"({detail[:300]}); run the benchmark with the cluster's Ray and Python"
                ) from None
            raise ClusterError(f"could not join the Ray cluster at {address}: {message}") from None
        self._probes: dict = {}
        try:
            self._remote_run = ray.remote(cluster_probes.run_and_hold)
            self._remote_arrived = ray.remote(cluster_probes.arrived)
            self.driver_node = ray.get_runtime_context().get_node_id()
            self.nodes = self._nodes()
            check_enough_nodes("ray", address, self.nodes, min_nodes)  # before anything is put there
            probe = ray.remote(num_cpus=0)(cluster_probes.RayNodeProbe)
            self._probes = {
                node.label: probe.options(scheduling_strategy=self._on(node)).remote() for node in self.nodes
            }
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RayEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _nodes(self) -> list[Node]:
        alive = [n for n in self.ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
        alive.sort(key=lambda n: (n["NodeID"] != self.driver_node, n["NodeID"]))
        nodes = []
        for index, info in enumerate(alive, start=1):
            where = "the driver's" if info["NodeID"] == self.driver_node else info["NodeManagerAddress"]
            nodes.append(
                Node(
                    f"ray node {index} ({where})",
                    info["NodeID"],
                    info["NodeManagerAddress"],
                    int(info["Resources"]["CPU"]),
                )
            )
        return nodes

    def close(self) -> None:
        """End the probes (actors of ours), disconnect this driver (its objects go with it); the
        cluster keeps running."""
        for probe in self._probes.values():
            with contextlib.suppress(Exception):
                self.ray.kill(probe)
        with contextlib.suppress(Exception):
            self.ray.shutdown()

    def _on(self, node: Node):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return NodeAffinitySchedulingStrategy(node_id=node.key, soft=False)

    def _get(self, refs: list, deadline: float, what: str):
        """ray.get with the time left; a lost node or the time limit as ClusterError."""
        ray = self.ray
        try:
            return ray.get(refs, timeout=max(0.1, deadline - time.monotonic()))
        except ray.exceptions.GetTimeoutError:
            lost = self.lost_nodes()
            if lost:
                raise ClusterError(f"{lost[0]} left the cluster during {what}") from None
            raise ClusterError(f"{what} did not finish within the time limit (--time-limit)") from None
        except self.task_error:
            raise
        except ray.exceptions.RayError as error:
            lost = self.lost_nodes()
            where = f"{lost[0]} left the cluster" if lost else "the cluster failed"
            raise ClusterError(f"{where} during {what} ({_first_line(error)})") from None

    def _wait(
        self,
        refs: list,
        deadline: float,
        what: str,
        while_waiting: Callable[[], None] | None,
        poll_seconds: float,
    ) -> list:
        """The values of ``refs`` once all are ready. Meanwhile, every ``poll_seconds`` (with
        ``while_waiting``) or ``LOST_CHECK_SECONDS``: call ``while_waiting``, raise a task's error as
        soon as one is ready, and ClusterError when a node is lost or the time limit passes."""
        pending = list(refs)
        while pending:
            ready, pending = self.ray.wait(
                pending,
                num_returns=len(pending),
                timeout=poll_seconds if while_waiting else LOST_CHECK_SECONDS,
            )
            if not pending:
                break
            if ready:
                self._get(ready, deadline, what)  # raises the task's error, if one failed
            lost = self.lost_nodes()
            if lost:
                raise ClusterError(f"{lost[0]} left the cluster during {what}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{what} did not finish within the time limit (--time-limit)")
            if while_waiting is not None:
                while_waiting()
        return self._get(refs, deadline, what)

    def lost_nodes(self) -> list[str]:
        """Labels of the nodes measured that Ray no longer lists alive."""
        alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        return [node.label for node in self.nodes if node.key not in alive]

    def snapshots(self) -> dict[str, dict]:
        """Every node's processes' memory, its store's bytes and its machine's network counter (each
        node's probe actor); the driver's node counts the driver too (it maps that node's store)."""
        refs = {
            node.label: self._probes[node.label].snapshot.remote(
                (os.getpid(),) if node.key == self.driver_node else ()
            )
            for node in self.nodes
        }
        values = self._get(list(refs.values()), time.monotonic() + 60.0, "a probe of the nodes' memory")
        return dict(zip(refs, values, strict=True))

    def floor_once(self, array: np.ndarray) -> float:
        """Seconds for one task on another node than the driver's to receive an object the driver has
        put just before (not timed): Ray pulls it to that node before the task starts, so this is one
        transfer between two nodes plus one task's dispatch, the least a fan-out to that node costs."""
        others = [node for node in self.nodes if node.key != self.driver_node]
        if not others:
            raise ClusterError("the driver's node is the cluster's only node with a CPU: the floor needs two")
        ref = self.ray.put(array)
        try:
            started = time.perf_counter()
            done = self._remote_arrived.options(scheduling_strategy=self._on(others[0])).remote(ref)
            self._wait([done], time.monotonic() + 300.0, "the floor (one transfer)", None, 0.1)
            return time.perf_counter() - started
        finally:
            del ref

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
        """One task per CPU of every node, each given the array ``way``'s way; returns worker 0's
        result summary and every task's (node label, ended, released, summary, copy's identity)."""
        deadline = time.monotonic() + time_limit
        slots = [(node, slot) for node in self.nodes for slot in range(node.slots)]
        with self._argument(way, array) as argument:
            refs = [
                self._remote_run.options(scheduling_strategy=self._on(node)).remote(
                    task, argument, index, len(slots), hold_seconds
                )
                for index, (node, _) in enumerate(slots)
            ]
            try:
                held = self._wait(refs, deadline, f"{way}'s fan-out", while_waiting, poll_seconds)
            except BaseException:  # an error, a lost node, Ctrl-C: the tasks still running are cancelled
                self._cancel(refs)
                raise
            finally:
                del refs
        labelled = [(node.label, *values) for (node, _), values in zip(slots, held, strict=True)]
        return held[0][2], labelled

    def _cancel(self, refs: list) -> None:
        """Cancel the tasks of ``refs`` and wait until they have ended (``CANCEL_WAIT_SECONDS``; then a
        task that goes on, such as one in C code, is killed with its worker, a worker leased to this
        driver), so that the nodes have let go of their arguments before the driver leaves: a driver
        that left while its cancelled tasks were still being dispatched left a task's argument pinned
        in a node's store (Ray 2.60, seen in the tests)."""
        for force in (False, True):
            for ref in refs:
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref, force=force)
            with contextlib.suppress(Exception):
                _, refs = self.ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT_SECONDS)
            if not refs:
                return

    @contextlib.contextmanager
    def _argument(self, way: str, array: np.ndarray) -> Iterator[object]:
        if way == "ray_by_value":
            yield array
            return
        ref = self.ray.put(array)
        try:
            yield ref
        finally:
            del ref

    @staticmethod
    def describe_task_error(error: BaseException) -> str:
        """The last line of the worker's traceback: the reader's task's own exception."""
        lines = [line for line in str(error).strip().splitlines() if line.strip()]
        return f"the task raised in a Ray worker: {lines[-1].strip() if lines else type(error).__name__}"
