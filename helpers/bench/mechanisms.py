"""The mechanisms of lessons 01-09 behind ``helpers.bench.harness.Mechanism``: one small class each,
built from each lesson's finished helpers. Ray's two (lesson 10) are in ``helpers.bench.ray_strategies``.

Every pool uses an explicit start method and a ``helpers.measure.quiet_processes`` context (workers
ignore Ctrl-C; the caller shuts them down in order). A pool is closed and joined at teardown, so
its workers run their exit hooks (the torch-free reduction unlinks what its workers lent); on an
error or Ctrl-C it is terminated. ``needs`` are bytes at the worst moment, besides the caller's
own array: a generous count of copies plus each worker's own interpreter. A fork-started pool is
refused (RuntimeError) in a process where Ray has run (``helpers.lessons.ray_session``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from helpers.bench import tasks
from helpers.bench.harness import STAND_IN, ExecutorWorkers, Mechanism, Needs, PoolWorkers, Workers, warm
from helpers.lessons import fork_copy_on_write, memmap, ray_session, send_once_and_managers, sharedctypes
from helpers.measure.quiet_processes import quiet_context
from helpers.measure.units import MiB
from sharedarrays import reducers
from sharedarrays.executor import SharedMemoryExecutor
from sharedarrays.shm import SharedNDArray

WORKER_RAM = 64 * MiB  # one idle spawned worker with NumPy imported (about 30-40 MiB here), rounded up
TORCH_WORKER_RAM = 400 * MiB  # one with torch imported too


@contextlib.contextmanager
def pool_of(context, n_workers: int, initializer=None, initargs: tuple = ()) -> Iterator:
    """A ``context.Pool``: closed and joined when the block ends, terminated if it raises."""
    pool = context.Pool(n_workers, initializer=initializer, initargs=initargs)
    try:
        yield pool
    except BaseException:
        pool.terminate()
        pool.join()
        raise
    pool.close()
    pool.join()


def start_pool(mechanism: Mechanism, stack: contextlib.ExitStack, initializer=None,
               initargs: tuple = ()) -> Workers:
    """Start the mechanism's pool on ``stack`` and warm every worker (never forked after Ray ran here)."""
    ray_session.refuse_fork_after_ray(mechanism.start_method, f"the pool of {type(mechanism).__name__}")
    context = quiet_context(mechanism.start_method)
    pool = stack.enter_context(pool_of(context, mechanism.n_workers, initializer, initargs))
    started = PoolWorkers(pool)
    warm(started, mechanism.n_workers)
    return started


def _ram(array_bytes: int, copies: float, n_workers: int, per_worker: int = WORKER_RAM) -> int:
    return int(copies * array_bytes) + (n_workers + 1) * per_worker


class Threads(Mechanism):
    """Lesson 01: a ``ThreadPoolExecutor`` of this process. Every thread reads the caller's array
    itself: nothing is sent or copied, and ``np.sum`` lets go of the GIL, so the sums run at once."""

    start_method = "thread"
    notes = ("threads of this process: nothing is set up, sent or copied; the round trip's result is the "
             "new array one thread made, handed over as is")

    @classmethod
    def needs(cls, array_bytes, n_workers):
        return Needs(ram=_ram(array_bytes, 2, 0))  # the round trip's result, and a spare

    def start(self, data, stack):
        pool = stack.enter_context(ThreadPoolExecutor(self.n_workers, thread_name_prefix="bench-thread"))
        started = ExecutorWorkers(pool)
        warm(started, self.n_workers)
        return started


class Pickle(Mechanism):
    """Lesson 02: every task pickles the array (Pool.starmap), each worker unpickles its copy."""

    notes = "nothing is set up: the array is pickled with every task, and the result pickled back"

    @classmethod
    def needs(cls, array_bytes, n_workers):
        return Needs(ram=_ram(array_bytes, 2 * n_workers + 3, n_workers))

    def start(self, data, stack):
        return start_pool(self, stack)


class SendOnce(Mechanism):
    """Lesson 03: ``Pool(initializer=send_once_and_managers.install, initargs=(array,))``: one copy
    per worker."""

    late = True
    setup_is_start = True
    reach = staticmethod(tasks.reach_installed)
    notes = ("setup_s is the extra start-up time of a pool whose initializer receives the array over one "
             "that receives an 8-item stand-in (a difference of two start-ups: noisy, 0 if negative); "
             "the round trip sends nothing and pickles the result back")

    @classmethod
    def needs(cls, array_bytes, n_workers):
        return Needs(ram=_ram(array_bytes, 2 * n_workers + 3, n_workers))

    def setup(self):
        return None

    def start(self, data, stack):
        return start_pool(self, stack, send_once_and_managers.install, (data,))


class Manager(Mechanism):
    """Lesson 03: the array in a ``Manager().dict()``; every read through the proxy is a pickled copy."""

    reach = staticmethod(tasks.reach_manager)
    notes = ("the manager holds one copy; each worker's read of the proxy gets its own; the round trip "
             "stores the result in the manager, and the caller reads it from there")

    @classmethod
    def needs(cls, array_bytes, n_workers):
        return Needs(ram=_ram(array_bytes, 3 * n_workers + 4, n_workers + 1))

    def start(self, data, stack):
        manager = stack.enter_context(quiet_context(self.start_method).Manager())
        self.shared = manager.dict()
        return start_pool(self, stack)

    def setup(self):
        self.shared["array"] = self.array
        return self.shared

    def round_trip(self, workers_, proxy):
        workers_.result(workers_.submit(tasks.strategy_plus_one_into, self.reach, proxy,
                                        tasks.reach_manager_result, (proxy, self.array.shape)))
        return proxy["result"]


class ForkCow(Mechanism):
    """Lesson 04: a module global (``helpers.lessons.fork_copy_on_write.ARRAY``) inherited by forked
    workers, pages shared."""

    start_method = "fork"
    late = True
    setup_is_start = True
    reach = staticmethod(tasks.reach_inherited)
    notes = ("setup_s is the extra start-up time of the forked pool over one forked with an 8-item stand-in "
             "(0 if negative): nothing is copied; the round trip pickles the result back")

    @classmethod
    def missing(cls):
        if "fork" not in multiprocessing.get_all_start_methods():
            return "this platform has no fork start method (copy-on-write inheritance needs fork)"
        return None

    @classmethod
    def needs(cls, array_bytes, n_workers):
        return Needs(ram=_ram(array_bytes, 5, n_workers))

    def setup(self):
        self.stack.enter_context(fork_copy_on_write.installed(array=self.array))
        return None

    def start(self, data, stack):
        if data is STAND_IN:
            with fork_copy_on_write.installed(array=STAND_IN):
                return start_pool(self, stack)
        return start_pool(self, stack)


class SharedCtypes(Mechanism):
    """Lesson 05: a ``RawArray`` copy, received by each worker's initializer at start-up (spawn)."""

    late = True
    reach = staticmethod(tasks.reach_sharedctypes)
    notes = ("the workers get the RawArray when they start (spawn); the round trip writes into a second "
             "RawArray made before the measurement, which the caller views")

    @classmethod
    def needs(cls, array_bytes, n_workers):
        return Needs(ram=_ram(array_bytes, 3, n_workers))

    def prepare(self):
        context = quiet_context(self.start_method)
        self.result_raw = context.RawArray("d", self.array.size)  # zero-filled: its pages exist now
        self.result = sharedctypes.as_array(self.result_raw)
        self.stack.callback(self.__dict__.clear)  # drops every view and RawArray: the arenas are freed

    def setup(self):
        self.shared, _ = sharedctypes.shared_copy_of(quiet_context(self.start_method), self.array)
        return None

    def start(self, data, stack):
        if data is STAND_IN:
            context = quiet_context(self.start_method)
            shared, _ = sharedctypes.shared_copy_of(context, STAND_IN)
            initargs = (shared, context.RawArray("d", STAND_IN.size))
        else:
            initargs = (self.shared, self.result_raw)
        return start_pool(self, stack, tasks.init_sharedctypes_strategy, initargs)

    def round_trip(self, workers_, arg):
        workers_.result(workers_.submit(tasks.strategy_plus_one_into, self.reach, None,
                                        tasks.reach_sharedctypes_result, None))
        return self.result


class MemmapDisk(Mechanism):
    """Lesson 06: the array written to a file (owner-only, space reserved); workers map it by path."""

    on = "disk"
    reach = staticmethod(tasks.reach_memmap)
    task_reach = staticmethod(tasks.reach_memmap_for_writing)  # a reader's task maps it 'r+' (may write)
    notes = ("setup writes the file through a mapping (into the page cache, not flushed to the disk); the "
             "round trip writes into a second mapped file the caller maps")

    @classmethod
    def missing(cls):
        if cls.on == "disk":
            try:
                memmap.disk_parent()
            except FileNotFoundError as error:
                return str(error)
        return None

    @classmethod
    def needs(cls, array_bytes, n_workers):
        files = 2 * array_bytes
        return Needs(ram=_ram(array_bytes, 3, n_workers), shm=files if cls.on == "tmpfs" else 0,
                     disk=files if cls.on == "disk" else 0)

    def prepare(self):
        self.folder = self.stack.enter_context(
            memmap.temporary_folder(self.on, room_bytes=2 * self.array.nbytes))
        self.result = memmap.owner_only_memmap(self.folder / "result.f64", self.array.shape)
        self.result_spec = memmap.MemmapSpec.of(self.result)
        self.stack.callback(self.__dict__.clear)  # unmap before the folder goes

    def start(self, data, stack):
        return start_pool(self, stack)

    def setup(self):
        target = memmap.owner_only_memmap(self.folder / "array.f64", self.array.shape, self.array.dtype)
        np.copyto(target, self.array)
        spec = memmap.MemmapSpec.of(target)
        del target
        return spec

    def round_trip(self, workers_, spec):
        workers_.result(workers_.submit(tasks.strategy_plus_one_into, self.reach, spec,
                                        tasks.reach_memmap_for_writing, self.result_spec))
        return self.result


class MemmapTmpfs(MemmapDisk):
    """Lesson 06: the same with the file on tmpfs (/dev/shm): its pages are RAM, never written to disk."""

    on = "tmpfs"
    notes = "the file lives in /dev/shm; the round trip writes into a second one the caller maps"


class SharedMemory(Mechanism):
    """Lesson 07: ``SharedNDArray.copy_of(array)``; tasks carry its handle, workers ``attach`` it."""

    reach = staticmethod(tasks.reach_shared)
    notes = "the round trip writes into a second SharedNDArray made before the measurement"

    @classmethod
    def needs(cls, array_bytes, n_workers):
        return Needs(ram=_ram(array_bytes, 3, n_workers), shm=2 * array_bytes)

    def prepare(self):
        self.result = self.stack.enter_context(SharedNDArray.create(self.array.shape, self.array.dtype))

    def start(self, data, stack):
        return start_pool(self, stack)

    def setup(self):
        return self.stack.enter_context(SharedNDArray.copy_of(self.array)).handle

    def round_trip(self, workers_, handle):
        workers_.result(workers_.submit(tasks.strategy_plus_one_into, self.reach, handle,
                                        tasks.reach_shared, self.result.handle))
        return self.result.array


class Executor(Mechanism):
    """Lesson 08: ``SharedMemoryExecutor``, submitting the private array: one copy per task into a
    warm pooled segment; the result comes back in a segment the caller maps."""

    notes = ("the drop-in use: each task copies the private array into a warm pooled segment (an array "
             "already in a SharedNDArray would cross as a handle: the shared_memory row)")

    @classmethod
    def needs(cls, array_bytes, n_workers):
        return Needs(ram=_ram(array_bytes, n_workers + 5, n_workers), shm=(n_workers + 3) * array_bytes)

    def start(self, data, stack):
        executor = stack.enter_context(SharedMemoryExecutor(self.n_workers,
                                                            mp_context=quiet_context(self.start_method)))
        started = ExecutorWorkers(executor)
        warm(started, self.n_workers)
        return started


class ReducerTorch(Mechanism):
    """Lesson 09: ``reducers.share_arrays_with_torch()`` here and in the workers (their initializer):
    each task's array is copied into a new shared torch storage, and so is the result."""

    how = "torch"
    notes = "each task's array, and the result, is copied into a new shared torch storage (fresh pages)"

    @classmethod
    def missing(cls):
        if importlib.util.find_spec("torch") is None:
            return "torch is not installed (pip install torch), so the torch reduction cannot run"
        return None

    @classmethod
    def needs(cls, array_bytes, n_workers):
        return Needs(ram=_ram(array_bytes, n_workers + 5, n_workers, TORCH_WORKER_RAM),
                     shm=(n_workers + 3) * array_bytes)

    def start(self, data, stack):
        stack.enter_context(reducers.sharing_arrays(self.how))  # entered first: undone after the pool
        return start_pool(self, stack, reducers.share_arrays, (self.how,))


class ReducerSharedMemory(ReducerTorch):
    """Lesson 09: the torch-free reduction: each task's array is copied into a warm lent segment."""

    how = "shared_memory"
    notes = "each task's array, and the result, is copied into a segment lent by a pool of warm ones"

    @classmethod
    def missing(cls):
        return None

    @classmethod
    def needs(cls, array_bytes, n_workers):
        return Needs(ram=_ram(array_bytes, n_workers + 5, n_workers), shm=(n_workers + 3) * array_bytes)
