"""What the cluster suite runs on the nodes of a Ray or Dask cluster: the task every worker runs, and
the probes that read a node's memory and its network counters. Sizes are bytes, times seconds.

The cluster is the reader's own: its workers need not have this course installed. The suite sends
these functions by value (``cloudpickle.register_pickle_by_value``), so this module imports only
what a Ray or a Dask worker already has (the standard library, NumPy, psutil; Ray itself only inside
a Ray worker) and nothing of the course's. A reader's own task (``--task module:function``) is sent
the same way.

What a probe reads, per node:

- its processes' PSS (``/proc/<pid>/smaps_rollup``): for a Ray node, the raylet (whose object store
  is mapped in it and in the workers) and every process it started; for a Dask worker, the worker
  process. PSS splits each shared page between the processes that map it, so the sum over a node's
  processes counts the node's store pages once; ``Pss_Shmem`` is the part in shared memory (a Ray
  store on ``/dev/shm``). Where the kernel has no ``smaps_rollup``, psutil's PSS, unsplit.
- the bytes its network interfaces received (``psutil.net_io_counters``, every interface and the
  loopback summed): what crossed into that machine's network stack, whoever sent it. Nodes that
  share a machine share these counters (a cluster on localhost moves everything over the loopback),
  so the suite counts them once per machine (``host``).
- for a Ray node, the bytes its object store holds, by the store's own usage report (every object
  there: created there, or pulled there to be read). Ray 2.60 gives a node's report over gRPC only
  with its dashboard's packages (``ray memory``); a worker on the node reads it from its own store
  (``log_plasma_usage``, which writes it to the logger ``ray._raylet``, where the probe catches it).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time

import numpy as np
import psutil


def host() -> str:
    """The machine this runs on: its hostname and boot id (two containers may share a hostname)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as file:
            boot = file.read().strip()
    except OSError:
        boot = "no boot id"
    return f"{socket.gethostname()} ({boot[:8]})"


def network_bytes_received() -> int:
    """Bytes every network interface of this machine has received since it started, the loopback
    included (each byte sent over the loopback is received once)."""
    return int(sum(counters.bytes_recv for counters in psutil.net_io_counters(pernic=True).values()))


def _pss_of(pid: int) -> tuple[int, int | None]:
    """(PSS, the part of it in shared memory) of one process, bytes; (0, 0) when it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as file:
            next(file)  # the address range of the rollup
            fields = dict(line.split(":", 1) for line in file if ":" in line)
        return (int(fields["Pss"].split()[0]) * 1024, int(fields.get("Pss_Shmem", "0 kB").split()[0]) * 1024)
    except FileNotFoundError:
        pass
    except (OSError, KeyError, ValueError):
        return 0, 0
    try:
        return int(psutil.Process(pid).memory_full_info().pss), None
    except (psutil.Error, AttributeError):
        return 0, 0


def tree_memory(root_pid: int, extra_pids: tuple[int, ...] = ()) -> dict:
    """PSS and its shared-memory part (bytes) summed over ``root_pid``, its descendants and
    ``extra_pids``; the shared part is None where the kernel does not split PSS."""
    pids = {root_pid, *extra_pids}
    try:
        pids |= {child.pid for child in psutil.Process(root_pid).children(recursive=True)}
    except psutil.Error:
        pass
    pss, shm = 0, 0
    for pid in sorted(pids):
        total, shared = _pss_of(pid)
        pss += total
        shm = None if shm is None or shared is None else shm + shared
    return {"pss_bytes": pss, "shm_pss_bytes": shm, "processes": len(pids)}


def raylet_pid() -> int:
    """The raylet of the node this Ray worker runs on: the nearest ancestor named 'raylet'."""
    process = psutil.Process()
    for ancestor in process.parents():
        if ancestor.name() == "raylet":
            return ancestor.pid
    raise RuntimeError(f"process {os.getpid()} has no raylet among its ancestors")


STORE_HOLDS = ("bytes in use", "bytes evictable", "bytes unsealed")  # every object, in one of these states


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def ray_store_bytes() -> int | None:
    """Inside a Ray worker: the bytes of every object in its node's object store (in use, evictable
    or still being written; a copy pulled from another node included), from the store's own usage
    report; None where this Ray gives none (not measured)."""
    import ray

    logger = logging.getLogger("ray._raylet")
    keep, level, propagate = _Keep(), logger.level, logger.propagate
    logger.addHandler(keep)
    logger.setLevel(logging.WARNING)
    logger.propagate = False  # caught here, not written to the worker's log
    try:
        ray._private.worker.global_worker.core_worker.log_plasma_usage()
    except Exception:
        return None
    finally:
        logger.removeHandler(keep)
        logger.setLevel(level)
        logger.propagate = propagate
    found = dict(re.findall(r"- (bytes [a-z ]+): (\d+)", "".join(keep.messages)))
    if not all(name in found for name in STORE_HOLDS):
        return None
    return sum(int(found[name]) for name in STORE_HOLDS)


def ray_node_snapshot(extra_pids: tuple[int, ...] = ()) -> dict:
    """Inside a Ray task on one node: the node's processes' memory (the raylet's tree, plus
    ``extra_pids``: the driver, where it maps this node's store), the bytes its object store holds,
    its machine and network counter."""
    return {
        "host": host(),
        "network_bytes": network_bytes_received(),
        **tree_memory(raylet_pid(), extra_pids),
        "store_bytes": ray_store_bytes(),
        "at": time.time(),
    }


class RayNodeProbe:
    """A Ray actor of zero CPUs on one node that reads it (``ray_node_snapshot``): its own process
    stays the same from the baseline to the peak, where a probe task would start a new worker."""

    def snapshot(self, extra_pids: tuple[int, ...] = ()) -> dict:
        return ray_node_snapshot(extra_pids)


def dask_worker_snapshot(dask_worker) -> dict:
    """In a Dask worker (``client.run``): the worker process's memory, the bytes of the data Dask
    holds for it (its own accounting), its machine and network counter."""
    return {
        "host": host(),
        "network_bytes": network_bytes_received(),
        **tree_memory(os.getpid()),
        "store_bytes": int(dask_worker.state.nbytes),
        "at": time.time(),
    }


def sum_whole(array: np.ndarray, worker_index: int, n_workers: int) -> float:
    """The default task: sum the whole array (every worker reads every page)."""
    return float(array.sum())


def buffer_identity(array: np.ndarray) -> str:
    """Which copy of the array this is, the same in every process of a machine that maps it: where
    its first byte lies in a mapped file (a Ray store's file, a memory-mapped .npy), else in this
    process's own memory (a copy of its own)."""
    address = array.__array_interface__["data"][0]
    try:
        with open("/proc/self/maps") as file:
            for line in file:
                fields = line.split()
                start, end = (int(part, 16) for part in fields[0].split("-"))
                if start <= address < end and len(fields) >= 6 and fields[5].startswith("/"):
                    device, inode = fields[3], fields[4]
                    return f"{host()} file {device}:{inode} at {address - start + int(fields[2], 16)}"
    except OSError:
        pass
    return f"{host()} process {os.getpid()} at {address}"


def run_and_hold(
    task, array: np.ndarray, worker_index: int, n_workers: int, hold_seconds: float
) -> tuple[float, float, str, str]:
    """Run ``task(array, worker_index, n_workers)``, then keep the array (and what the task returned)
    for ``hold_seconds``; return when the task ended and when the hold ended (time.time()), a short
    summary of the result (a value's repr or an array's shape and dtype) and which copy of the array
    this task read (``buffer_identity``)."""
    identity = buffer_identity(array)
    result = task(array, worker_index, n_workers)
    ended = time.time()
    time.sleep(hold_seconds)
    summary = f"array {result.shape} {result.dtype}" if isinstance(result, np.ndarray) else repr(result)[:60]
    del result
    return ended, time.time(), summary, identity


def arrived(array: np.ndarray) -> int:
    """The floor's task: the array has arrived on this node (Ray fetched it before the task began);
    return its size in bytes, reading nothing."""
    return int(array.nbytes)
