"""Lesson 10's Dask mechanisms behind ``helpers.bench.harness.Mechanism``: tasks on a Dask
``LocalCluster`` of spawned worker processes (``helpers.lessons.dask_cluster.dask_cluster``: one
thread per worker, no dashboard, closed and cleaned up on exit), the array scattered to every
worker once (``client.scatter(array, broadcast=True)``: one copy in each worker's data store) or
sent inside every task (``client.submit(f, array)``: the scheduler keeps each task's serialized
copy until it is done, the worker unpickles its own).

The scheduler and the nannies run in the measuring process, the workers are its children, so the
tree's PSS counts them all. After the cluster closed, Dask leaves one idle thread in this process
(``Dask-Offload_0``, the pool it offloads (de)serialization to): a process that forks afterwards
is a multi-threaded process that forks (Python 3.12+ warns). So the benchmark measures them in the
spawned process it runs Ray's in (``own_process``, ``helpers.bench.ray_child``). Sizes are bytes.
"""

from __future__ import annotations

import itertools
import warnings

from helpers.bench.harness import Mechanism, Needs, Workers, warm
from helpers.lessons import dask_cluster
from helpers.measure.units import MiB

DASK_RAM_PER_WORKER = 150 * MiB  # a worker's interpreter with Dask, NumPy and this package, roughly
DASK_RAM = 100 * MiB  # the scheduler and the nannies in this process


class DaskWorkers(Workers):
    """Tasks on a ``DaskSession``: each submit is pinned to the next worker in turn (so any
    ``n_workers`` submits in a row reach every worker once) and impure (run every time)."""

    def __init__(self, session: dask_cluster.DaskSession):
        self.session = session
        self.next_worker = itertools.cycle(session.workers)

    def submit(self, fn, *args):
        with warnings.catch_warnings():  # the array inside a task is what DaskByValue measures
            warnings.filterwarnings("ignore", message=dask_cluster.LARGE_GRAPH_WARNING, category=UserWarning)
            return self.session.client.submit(fn, *args, workers=[next(self.next_worker)],
                                              allow_other_workers=False, pure=False)

    def result(self, token, timeout=None):
        return token.result(timeout=timeout)

    def done(self, token):
        return token.done()


class DaskByValue(Mechanism):
    """Lesson 10: ``client.submit(f, array)``: the array travels inside every task."""

    start_method = "spawn"
    own_process = True  # Dask leaves a thread here: measured in a spawned process of its own
    notes = ("a Dask LocalCluster (scheduler and nannies in this process, workers spawned); the array "
             "is serialized into every task; the scheduler keeps each task's copy until it is done")

    @classmethod
    def missing(cls):
        return dask_cluster.dask_available()

    @classmethod
    def needs(cls, array_bytes, n_workers):
        """A copy per task in the scheduler and in each worker, the caller's array and a result."""
        return Needs(ram=(2 * n_workers + 3) * array_bytes + DASK_RAM + n_workers * DASK_RAM_PER_WORKER)

    def start(self, data, stack):
        session = stack.enter_context(dask_cluster.dask_cluster(self.n_workers))
        started = DaskWorkers(session)
        warm(started, self.n_workers)
        self.session = session
        return started


class DaskScatter(DaskByValue):
    """Lesson 10: ``future = client.scatter(array, broadcast=True)`` once; tasks get the future and
    read the copy in their worker's data store."""

    notes = ("a Dask LocalCluster (scheduler and nannies in this process, workers spawned); setup is "
             "one client.scatter(array, broadcast=True): one copy in each worker's data store, sent "
             "to one worker and fetched from it by the others")

    @classmethod
    def needs(cls, array_bytes, n_workers):
        """A copy in each worker, the caller's array, a result and a copy in transit."""
        return Needs(ram=(n_workers + 3) * array_bytes + DASK_RAM + n_workers * DASK_RAM_PER_WORKER)

    def setup(self):
        future = self.session.client.scatter(self.array, broadcast=True)
        self.stack.callback(lambda: vars(self).pop("future", None))  # released before the cluster closes
        self.future = future
        return future
