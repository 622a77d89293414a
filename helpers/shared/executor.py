"""``SharedMemoryExecutor``: a ``ProcessPoolExecutor`` whose big ndarrays travel through shared memory.

Drop-in: same constructor, ``submit``, ``map`` (``chunksize``, ``timeout``), ``shutdown``, context
manager, exceptions and ``BrokenProcessPool``; nothing global is patched. What changes is how
arrays of at least ``min_shared_bytes`` (also inside tuples, lists and dicts) cross:

- An argument that already lives in shared memory (a ``SharedNDArray``, or an earlier result)
  crosses as its handle: no copy. Anything else is copied once into a segment lent by a
  ``SegmentPool``, which keeps segments mapped and warm, so the copy runs at warm-memcpy speed
  after the first calls (a new segment costs a page fault and a zeroed page per 4 KiB).
- A result that views an argument's segment comes back as a view of that same memory (what the
  function would return if called here); other big results are written by the worker into one
  new segment per task (named by the parent, registered with the resource tracker by the worker
  before it exists), which the parent maps without copying; it is unlinked when the caller's
  arrays on it are gone, and until then they too cross to later tasks as handles.
- A pooled segment goes back to the pool when the task is over and no result views it any more.

No segment outlives its use: leases are returned and per-task result segments unlinked in the
future's done callback, which runs after success, an exception, cancellation, ``shutdown`` with
pending work and a broken pool alike; every segment is registered with the resource tracker
(shared by the parent and its workers) before it exists, so the tracker unlinks them if the
program is killed (workers leave once orphaned, so the tracker is not kept waiting).
"""

from __future__ import annotations

import _posixshmem
import os
import threading
import time
import weakref
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import resource_tracker

import numpy as np

from helpers.shared._segments import Mapping, new_name, process_alive
from helpers.shared.room import SHM_DIR
from helpers.shared.segment_pool import SegmentPool
from helpers.shared.shm import ArrayHandle, handle_of
from helpers.shared.transit import WorkerSide, pack_result, rebuild, root_of, view_on
from helpers.shared.units import MiB

DEFAULT_MIN_SHARED_BYTES = 1 * MiB
ORPHAN_CHECK_SECONDS = 0.5


class _Task:
    """What the parent holds for one submitted call until its future is done."""

    def __init__(self, executor: SharedMemoryExecutor, args: tuple, kwargs: dict):
        self.executor = executor
        self.args, self.kwargs = args, kwargs
        self.result_name = new_name()
        self.adopted = False  # the parent mapped and unlinked the worker's result segment
        self.roots: dict[str, np.ndarray] = {}  # segment name -> array over its whole mapping

    def __reduce__(self):
        """Pickled when the call is queued to a worker: that is when arrays are put in shared memory."""
        payload = self.executor._pack((self.args, self.kwargs), self.roots)
        return (_payload, (payload, self.result_name, self.executor.min_shared_bytes))

    def finish(self) -> None:
        """Drop this task's hold on its segments; unlink a result segment nobody adopted."""
        self.roots.clear()
        self.args = self.kwargs = None
        if not self.adopted and (SHM_DIR / self.result_name).exists():
            _release_result_segment(self.result_name)  # the task failed after writing its result


def _release_result_segment(name: str) -> None:
    """Unlink a worker's result segment and drop the tracker entry the worker made for it."""
    try:
        _posixshmem.shm_unlink("/" + name)
    except FileNotFoundError:
        return
    resource_tracker.unregister("/" + name, "shared_memory")


def _start_worker(creator_pid: int, initializer, initargs: tuple) -> None:
    """Worker start-up: watch for the death of the process that made the executor, then run the
    caller's initializer.

    A stdlib worker whose parent was killed waits for work forever, and so keeps the resource
    tracker (which would unlink the dead program's segments) waiting too. Ours exits within a
    second of being orphaned: its parent changed (the creator, or the forkserver that leaves with
    it, died), or the creator is gone or a zombie (it died before this worker even started).
    """
    parent_pid = os.getppid()

    def exit_when_orphaned() -> None:
        while os.getppid() == parent_pid and process_alive(creator_pid):
            time.sleep(ORPHAN_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=exit_when_orphaned, name="exit-when-orphaned", daemon=True).start()
    if initializer is not None:
        initializer(*initargs)


def _payload(payload, result_name: str, min_shared_bytes: int):
    return payload, result_name, min_shared_bytes


def _run_in_worker(fn, task) -> object:
    """Worker side: attach the shared arguments, call ``fn``, put big results in shared memory."""
    (packed_args, packed_kwargs), result_name, min_shared_bytes = task
    with WorkerSide() as side:
        args = side.unpack(packed_args)
        kwargs = side.unpack(packed_kwargs)
        result = fn(*args, **kwargs)
        del args, kwargs
        return pack_result(result, result_name, min_shared_bytes)


class _SharedFuture(Future):
    """The caller's future: settled from the worker's future once results are unpacked."""

    def __init__(self, inner: Future):
        super().__init__()
        self._inner = inner

    def cancel(self) -> bool:
        inner = self._inner
        if inner is not None and inner.cancel():
            return Future.cancel(self)
        return self.cancelled()

    def running(self) -> bool:
        inner = self._inner
        return inner is not None and inner.running() and not self.done()


class SharedMemoryExecutor(ProcessPoolExecutor):
    """A ``ProcessPoolExecutor`` that moves big ndarrays through shared memory (module docstring).

    ``min_shared_bytes``: arrays smaller than this are pickled as usual (default 1 MiB).
    ``pool_bytes``: how many bytes of idle, warm segments to keep for reuse (default: half
    of what /dev/shm and RAM can spare now); 0 frees every segment right after its task.
    """

    def __init__(self, max_workers=None, mp_context=None, initializer=None, initargs=(), *,
                 max_tasks_per_child=None, min_shared_bytes: int = DEFAULT_MIN_SHARED_BYTES,
                 pool_bytes: int | None = None):
        super().__init__(max_workers, mp_context, _start_worker, (os.getpid(), initializer, tuple(initargs)),
                         max_tasks_per_child=max_tasks_per_child)
        self.min_shared_bytes = int(min_shared_bytes)
        self.segment_pool = SegmentPool(pool_bytes)
        self._outstanding = 0
        self._closing = False
        self._count_lock = threading.Lock()
        self._close_pool = weakref.finalize(self, self.segment_pool.close)

    def submit(self, fn, /, *args, **kwargs) -> Future:
        task = _Task(self, args, kwargs)
        # Counted before the pool can see it: a shutdown() from another thread between the two
        # would otherwise find nothing outstanding and close the segment pool under the queued task.
        with self._count_lock:
            self._outstanding += 1
        try:
            inner = super().submit(_run_in_worker, fn, task)
        except BaseException:
            task.finish()
            self._task_over()
            raise
        outer = _SharedFuture(inner)
        inner.add_done_callback(lambda done: self._settle(outer, done, task))
        return outer

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        with self._count_lock:
            self._closing = True
            idle = self._outstanding == 0
        if idle:
            self._close_pool()  # else the last task to finish closes it

    def _task_over(self) -> None:
        """Count one task less; the last one to end after ``shutdown`` closes the segment pool."""
        with self._count_lock:
            self._outstanding -= 1
            close = self._closing and self._outstanding == 0
        if close:
            self._close_pool()

    def _settle(self, outer: _SharedFuture, inner: Future, task: _Task) -> None:
        """Done callback (any thread): unpack the result, release the task's segments, and only
        then settle the caller's future (so a caller that submits again finds them back in the pool)."""
        value = error = None
        try:
            if not inner.cancelled():
                error = inner.exception()
                if error is None:
                    value = self._unpack(inner.result(), task)
        except BaseException as unpack_error:
            error = unpack_error
        finally:
            task.finish()
            self._task_over()
        outer._inner = None  # break the cycle outer -> inner -> callback -> outer (it holds the result)
        if error is not None and error.__traceback__ is not None:
            # An error raised while the call was pickled (e.g. MemoryError from /dev/shm) carries
            # the queue feeder's frames, which would keep the call queue and its semaphores alive
            # for as long as the caller keeps the error; its text survives in __cause__.
            error = error.with_traceback(None)
        if inner.cancelled():
            Future.cancel(outer)
            outer.set_running_or_notify_cancel()
        elif error is not None:
            outer.set_exception(error)
        else:
            outer.set_result(value)

    def _pack(self, value, roots: dict[str, np.ndarray]):
        """Replace big arrays in ``value`` by handles; copy private ones into pooled segments."""

        def share(array: np.ndarray) -> ArrayHandle:
            handle = handle_of(array)
            if handle is not None:
                roots.setdefault(handle.name, root_of(array))
                return handle
            lease = self.segment_pool.lease(array.nbytes)
            root = np.frombuffer(lease.shared.mapped_buffer(), np.uint8)
            weakref.finalize(root.base, self.segment_pool.give_back, lease)
            roots[lease.name] = root
            fortran = array.flags.f_contiguous and not array.flags.c_contiguous
            view = view_on(root, lease.handle(array.shape[::-1] if fortran else array.shape, array.dtype))
            view = view.T if fortran else view
            np.copyto(view, array, casting="no")
            return handle_of(view)

        return rebuild(value, self.min_shared_bytes, share)

    def _unpack(self, value, task: _Task):
        """Turn the worker's handles into arrays: views of known segments, adopted new segments."""
        mapped: dict[str, np.ndarray] = dict(task.roots)

        def array_of(handle: ArrayHandle) -> np.ndarray:
            root = mapped.get(handle.name)
            if root is None:
                mapping = Mapping(handle.name, create_bytes=None)
                root = np.frombuffer(mapping.map, np.uint8)
                mapping.close()  # the root's export keeps it mapped as long as an array needs it
                if handle.name == task.result_name:  # ours now: unlinked when its arrays are gone
                    weakref.finalize(root.base, _release_result_segment, handle.name)
                    task.adopted = True
                mapped[handle.name] = root
            return view_on(root, handle)

        return rebuild(value, None, array_of)

