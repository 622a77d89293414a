"""Lesson 10's two mechanisms behind ``helpers.bench.harness.Mechanism``: Ray tasks that get the array
by value (``f.remote(array)``: Ray stores it once per call) or by reference (``ray.put`` once).

They run in the Ray strategies' own spawned process (``helpers.bench.ray_child``; the registry in
``helpers.bench.strategies`` sends them there), never in the caller's: a process in which Ray has
run must not fork afterwards. There Ray runs in a ``helpers.lessons.ray_session.ray_session`` (a
local instance, shut down and cleaned up on exit, also on error or Ctrl-C). Its processes (GCS,
raylet, the workers) are descendants of that process, so the tree's PSS it measures counts them;
its workers read arrays zero-copy from the object store, which lives in one file (in /dev/shm
when it fits). Ray does not give freed pages of that file back, so the store's bytes are read as
the file's allocated bytes (``st_blocks``) halfway through the holding window, when every object
of the fan-out is alive. Sizes are bytes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import psutil

from helpers.bench import ray_child
from helpers.bench.harness import Mechanism, Needs, RayWorkers, warm
from helpers.lessons import ray_session
from helpers.measure.units import GiB

RAY_RAM = 1 * GiB  # GCS, raylet, its agents and the workers' interpreters, roughly
START_ATTEMPTS = 2  # a busy 2-core machine sometimes misses Ray's start-up deadline once
SHARED_MEMORY_NOTE = ("memory not measured: it reused the Ray instance of the Ray strategy before it, whose "
                      "store pages were already touched (a fresh store: python -m helpers.bench, lesson 10)")


class _SharedSession:
    """A Ray instance that several Ray strategies run on in turn (``shared_ray_session``)."""

    def __init__(self) -> None:
        self.stack: contextlib.ExitStack | None = None
        self.users = 0


_shared = _SharedSession()


@contextlib.contextmanager
def shared_ray_session() -> Iterator[None]:
    """Let the Ray strategies run inside this block share one Ray instance: the first one starts it,
    the block's end shuts it down. Saves a Ray start-up (seconds) per strategy; the cost is that only
    the first one's memory can be measured (a used store's pages are already touched), so the others
    report no memory and say why. Times are unaffected: every strategy warms its workers first.
    ``strategies.run_all(share_ray_session=True)`` opens it in the Ray strategies' own process."""
    if _shared.stack is not None:
        raise RuntimeError("a shared Ray session is already open")
    _shared.stack, _shared.users = contextlib.ExitStack(), 0
    try:
        with _shared.stack:
            yield
    finally:
        _shared.stack, _shared.users = None, 0


def _start_ray(n_workers: int, store: int, stack: contextlib.ExitStack) -> None:
    for attempt in range(START_ATTEMPTS):
        try:
            stack.enter_context(ray_session.ray_session(num_cpus=n_workers, object_store_bytes=store))
            return
        except Exception as error:  # Ray's own "timed out during startup" on a busy machine
            if attempt + 1 == START_ATTEMPTS or "startup" not in str(error):
                raise


def object_store_file_bytes() -> float | None:
    """Bytes of RAM (or disk) the object store's file of our Ray instance holds now: the pages
    touched so far. Ray unlinks the file once mapped, so it is read through the raylet's
    ``/proc/<pid>/map_files`` entry. None when no raylet of ours maps a store file."""
    for process in psutil.Process().children(recursive=True):
        try:
            if process.name() != "raylet":
                continue
            with open(f"/proc/{process.pid}/maps") as maps:
                ranges = {line.split()[0] for line in maps if "/plasma" in line}
            sizes = {}
            for mapped in ranges:
                info = os.stat(f"/proc/{process.pid}/map_files/{mapped}")
                sizes[(info.st_dev, info.st_ino)] = info.st_blocks * 512
        except (psutil.Error, OSError):
            continue
        if sizes:
            return float(sum(sizes.values()))
    return None


class RayByValue(Mechanism):
    """Lesson 10: ``f.remote(array)``: every call puts the array into the object store anew."""

    start_method = "ray"
    notes = ("Ray ran in a spawned process of its own, which measured its tree (Ray's processes "
             "included); each call stores the array anew; workers read it zero-copy; the result goes "
             "through the store")

    @classmethod
    def missing(cls):
        """Why Ray cannot run here: in the Ray strategies' process Ray is imported to be sure; anywhere
        else it must not even be imported, so only its installation is looked for."""
        if ray_child.in_ray_child():
            return ray_session.ray_available()
        return ray_session.ray_installed()

    @classmethod
    def store_bytes(cls, array_bytes: int, n_workers: int) -> int:
        return ray_session.object_store_bytes_for(array_bytes, n_workers)

    @classmethod
    def needs(cls, array_bytes, n_workers):
        """The store, a few copies, Ray's processes, and the Ray strategies' process with its own copy."""
        store = cls.store_bytes(array_bytes, n_workers)
        return Needs(ram=store + 4 * array_bytes + RAY_RAM + ray_child.CHILD_RAM)

    @classmethod
    def too_big(cls, array_bytes: int, n_workers: int) -> str | None:
        """Why the object store cannot hold this fan-out (its size is capped by the RAM available)."""
        store = cls.store_bytes(array_bytes, n_workers)
        if store < (n_workers + 2) * array_bytes:
            return (f"Ray's object store can get {store / GiB:.2g} GiB here (half the RAM available), "
                    f"too little for {n_workers + 2} copies of a {array_bytes / GiB:.2g} GiB array")
        return None

    def start(self, data, stack):
        store = self.store_bytes(self.array.nbytes, self.n_workers)
        if _shared.stack is None:
            _start_ray(self.n_workers, store, stack)
        else:
            if _shared.users == 0:
                _start_ray(self.n_workers, store, _shared.stack)
            else:
                self.memory_note = SHARED_MEMORY_NOTE
            _shared.users += 1
        started = RayWorkers()
        warm(started, self.n_workers)
        return started

    def hold_extra(self):
        return {"object_store_bytes": object_store_file_bytes()}


class RayObjectStore(RayByValue):
    """Lesson 10: ``ref = ray.put(array)`` once; tasks get the reference, workers read it zero-copy."""

    notes = ("Ray ran in a spawned process of its own, which measured its tree (Ray's processes "
             "included); setup is one ray.put; workers read the stored array zero-copy; the result goes "
             "through the store")

    def setup(self):
        import ray

        reference = ray.put(self.array)
        self.stack.callback(lambda: vars(self).pop("reference", None))  # freed before Ray shuts down
        self.reference = reference
        return reference
