"""``SharedMemoryExecutor``: a ``ProcessPoolExecutor`` whose big ndarrays travel through shared memory.

Drop-in: same constructor (and its checks), ``submit``, ``map`` (``chunksize``, ``timeout``),
``shutdown``, context manager, exceptions and ``BrokenProcessPool``; nothing global is patched. A call
and its result are pickled as the stdlib pickles them (``multiprocessing``'s pickler and protocol,
so pickle's memo keeps identity: an array passed or returned twice arrives as one object, cycles
and arrays inside any object cross too), except that every plain ndarray of at least
``min_shared_bytes`` crosses as a handle (``sharedarrays.transit``):

- An argument the caller shares on purpose (a ``SharedNDArray`` it made, or a view of one)
  crosses as its handle: no copy, and the worker's writes reach the caller. An earlier result
  passed back in crosses as its handle too, but the worker maps it copy-on-write: it reads the
  caller's pages without a copy, and what it writes stays its own, as in the stdlib's unpickled
  copy (a worker that keeps it pays the copy then, so the caller's later writes do not reach it).
  Anything else is copied into a segment lent by a ``SegmentPool``, which keeps segments
  mapped and warm, so the copy runs at warm-memcpy speed after the first calls (a new segment
  costs a page fault and a zeroed page per 4 KiB). The copy is laid out as unpickling would lay it
  out (byte order, memory order, writability), so the worker sees what the stdlib's worker sees.
- Within one ``map`` call, an array passed as an argument of several calls (``map(f, [a] * 4)``)
  is copied once: every task maps that one copy copy-on-write, as an earlier result passed back in,
  so its writes stay its own and a result that views it is copied, as the stdlib's unpickled copy
  would be. One array in ``/dev/shm`` and in the tree's PSS, not one per task. (Separate
  ``submit`` calls copy it each time: the same object may have changed in between.)
- A result that views an argument's segment comes back as a view of that same memory (what the
  function would return if called here); other big results are written by the worker into one
  new segment per task (named by the parent, registered with the resource tracker by the worker
  before it exists), which the parent maps without copying; it is unlinked when the caller's
  arrays on it are gone, and until then they too cross to later tasks as handles (copy-on-write).
  A result that views an argument's pooled copy is copied again when passed back in.
- A pooled segment goes back to the pool only when nobody views it any more. The parent holds it
  while the task runs and while a result views it. A worker that still views it when the task
  ends (the function kept its argument, e.g. in a module-level cache, or forked a child that
  inherited it) says so in its reply, and the parent *retires* it: it is never lent again, and it
  is unlinked once the parent's own views are gone (a mapping outlives an unlink, so the worker
  keeps its data; its memory goes when the worker lets go). So is every segment of a task that
  raised (it cannot say what it kept) and every segment lent when this process forks (the child
  inherits the views). No lock, no count in shared memory. A result that views a private copy the
  worker kept is copied here, so the caller's array never shares memory with the worker's, as with
  the stdlib.
- Where /dev/shm has no room, idle pooled segments are unlinked first (also to leave room for a
  result as big as the arguments); what still does not fit, an argument or a result, is pickled
  as the stdlib pickles it. ``pickled_fallbacks`` counts those arrays, and the first one is said
  once per executor, as a WARNING of the ``sharedarrays`` logger (a log record, not a warning, so
  that ``-W error`` cannot turn it into an exception where the stdlib returns a value).
- Calls and results are pickled with the executor's own dispatch table: switching on the
  reductions of ``sharedarrays.reducers`` does not change how it ships arrays.

By design, memory the caller shares on purpose is shared, not copied: a worker's writes into an
argument that is a ``SharedNDArray`` (or a view of one) reach the caller, the caller's later writes
reach a worker that kept it, a result that views it views the caller's memory, and its dtype, byte
order and writability stay as they are (read-only stays read-only). The stdlib would give the
worker a private, unpickled copy instead. To share a result with workers on purpose, copy it into a
``SharedNDArray`` (``SharedNDArray.copy_of(result)``).

Also by design, a call or a result that raises (or calls ``sys.exit``) while it is unpickled fails
its own future, where the stdlib's whole pool breaks (``BrokenProcessPool``): both are unpickled
inside the task here.

A call that cannot be pickled fails its own future with the error the stdlib gives (the same
exception, its traceback as the ``__cause__``), but never through the stdlib's path for it: there,
a ``shutdown(wait=False)`` at the same moment can deadlock the pool's threads and leave the
future pending forever (CPython gh-125451, fixed in 3.12.8 and 3.13.1, not in 3.11; gh-116685 with
``cancel_futures=True``). Here the call is pickled when the pool's feeder thread pickles the task;
if that raises, the task settles the caller's future itself and the feeder sends a no-op in its
place, so nothing the stdlib does meanwhile can keep the future pending.

No segment outlives its use: leases are returned and per-task result segments unlinked in the
future's done callback, which runs after success, an exception, cancellation, ``shutdown`` with
pending work and a broken pool alike; every segment is registered with the resource tracker
(shared by the parent and its workers: the constructor starts the parent's before any worker is
forked) before it exists, so the tracker unlinks them if the program is killed (workers leave
once orphaned, so the tracker is not kept waiting).
"""

from __future__ import annotations

import contextlib
import os
import threading
import traceback
import weakref
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool, _RemoteTraceback
from multiprocessing import resource_tracker
from multiprocessing.context import BaseContext
from typing import Any, TypeVar

import numpy as np

from sharedarrays._names import segment_exists
from sharedarrays._segments import (
    PLACEMENT_FAILURES,
    Mapping,
    OnceNotice,
    finalizer_safe,
    mapping_under,
    new_name,
    placement_failure,
    settle_tracker,
)
from sharedarrays.executor_workers import (
    payload,
    release_result_segment,
    run_in_worker,
    start_worker,
    unlink_when_gone,
)
from sharedarrays.segment_holds import is_held_here
from sharedarrays.segment_pool import HEADER_BYTES, SegmentPool
from sharedarrays.shm import handle_of
from sharedarrays.transit import (
    ArrayRef,
    Packed,
    as_received,
    copy_as_unpickled,
    is_big_array,
    pack,
    pickling_fits,
    root_of,
    too_big_to_pickle,
    unpack,
    view_on,
)
from sharedarrays.units import MiB

DEFAULT_MIN_SHARED_BYTES = 1 * MiB
T = TypeVar("T")
# The mappings of the workers' result segments in this process: memory the caller did not share on
# purpose, so an earlier result passed back in reaches a worker copy-on-write, never writable.
_RESULT_MAPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# The segment pools of this process's executors: a segment one of them lent is not memory the caller
# shares on purpose (it crosses to another task as a private copy), and a fork retires what they lent.
_POOLS: weakref.WeakSet[SegmentPool] = weakref.WeakSet()
_FORK_HOOK_REGISTERED = []


def _lent_by_an_executor(name: str) -> bool:
    """True when segment ``name`` is lent by the pool of one of this process's executors."""
    return any(pool.is_lent(name) for pool in tuple(_POOLS))


def _retire_lent_before_fork() -> None:
    """About to fork: the child inherits every view of every segment lent now, so none of them may be
    lent again (each is unlinked once this process lets go: the child's mappings stay valid)."""
    for pool in tuple(_POOLS):
        pool.retire_every_lent()


def _watch_forks_of_this_process() -> None:
    """Register ``_retire_lent_before_fork`` once, when this process makes its first executor."""
    if not _FORK_HOOK_REGISTERED and hasattr(os, "register_at_fork"):  # no fork on Windows
        os.register_at_fork(before=_retire_lent_before_fork)
        _FORK_HOOK_REGISTERED.append(True)


class _Fallbacks:
    """How many big arrays an executor pickled for want of shared memory; the first is said once."""

    def __init__(self):
        self.count = 0
        self.reason: str | None = None  # why an argument could not be placed, when not for want of room
        self._lock = threading.Lock()
        self._notice = OnceNotice()

    def add(self, n_arrays: int) -> None:
        if not n_arrays:
            return
        with self._lock:
            self.count += n_arrays
        if self.reason is None:
            self._notice.say(
                f"SharedMemoryExecutor: /dev/shm had no room for {n_arrays} big array(s) of a call or its "
                "result, so they were pickled through the pipe as ProcessPoolExecutor does (slower, same "
                "values). Said once per executor; executor.pickled_fallbacks counts every such array. "
                "Free /dev/shm, send smaller arrays, or give the container a larger --shm-size.")
        else:
            self._notice.say(
                f"SharedMemoryExecutor: {self.reason}, so {n_arrays} big array(s) of a call were pickled "
                "through the pipe as ProcessPoolExecutor does (slower, same values). Said once per "
                "executor; executor.pickled_fallbacks counts every such array.")


class _MapCopies:
    """The arrays one ``map`` call passes to several of its calls, and the one pooled copy of each
    that every task of the map shares (copy-on-write), made by the first task packed."""

    def __init__(self, repeated: dict[int, np.ndarray]):
        self.repeated = repeated  # id -> the array (held, so that the id stays its own)
        self.copies: dict[int, tuple[str, np.ndarray, ArrayRef]] = {}  # id -> (segment name, root, ref)
        self.lock = threading.Lock()


def _repeated_arrays(calls: list[tuple], min_bytes: int) -> dict[int, np.ndarray]:
    """The big private ndarrays that are an argument of more than one of ``calls`` (by identity)."""
    seen: dict[int, np.ndarray] = {}
    repeated: dict[int, np.ndarray] = {}
    for arguments in calls:
        for value in {id(value): value for value in arguments if is_big_array(value, min_bytes)}.values():
            if id(value) in seen:
                repeated[id(value)] = value
            seen[id(value)] = value
    return repeated


class _Task:
    """What the parent holds for one submitted call until its future is done."""

    def __init__(self, executor: SharedMemoryExecutor, fn, args: tuple, kwargs: dict,
                 map_copies: _MapCopies | None = None):
        self.executor = executor
        self.call = (fn, args, kwargs)
        self.result_name = new_name()
        self.adopted = False  # the parent mapped and unlinked the worker's result segment
        self.roots: dict[str, np.ndarray] = {}  # segment name -> array over its whole mapping
        self.fallbacks = 0  # big arguments pickled for want of shared memory
        self.outer: _SharedFuture | None = None  # the caller's future
        self.unsent = False  # the call could not be pickled: its future was failed here
        self.map_copies = map_copies  # the copies this task shares with the other tasks of its map

    def __reduce__(self):
        """Pickled when the call is queued to a worker (in the pool's feeder thread): that is when
        arrays are put in shared memory. Never raises: a call that cannot be pickled fails the
        caller's future here, and a no-op goes to the worker in its place (module docstring)."""
        try:
            packed = self.executor._pack(self.call, self)
        except Exception as error:  # what the stdlib's feeder would catch
            self.fail_unsent(error)
            packed = None
        return (payload, (packed, self.result_name, self.executor.min_shared_bytes))

    def fail_unsent(self, error: Exception) -> None:
        """Settle the caller's future with ``error`` as the stdlib's feeder does (its traceback as
        the cause, as text), its frames cleared: they hold the call's arrays."""
        lines = traceback.format_exception(type(error), error, error.__traceback__)
        error.__cause__ = _RemoteTraceback('\n"""\n{}"""'.format("".join(lines)))
        traceback.clear_frames(error.__traceback__)
        self.unsent = True
        outer = self.outer
        if outer is not None:
            with contextlib.suppress(InvalidStateError):  # cancelled meanwhile: nothing to tell
                outer.set_exception(error.with_traceback(None))

    def finish(self, answered: bool = False) -> None:
        """Drop this task's hold on its segments; unlink a result segment nobody adopted. ``answered``:
        the worker's reply was unpacked, so a result segment exists only if it was adopted (no
        need to ask /dev/shm)."""
        self.roots.clear()
        self.call = None
        self.map_copies = None
        if not self.adopted and not answered and segment_exists(self.result_name):
            release_result_segment(self.result_name)  # the task failed after writing its result


class _SharedFuture(Future):
    """The caller's future: settled from the worker's future once results are unpacked."""

    def __init__(self, inner: Future | None = None):
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
    ``idle_cap_bytes``: how many bytes of idle, warm segments to keep for reuse (default: 1 GiB,
    or half of what /dev/shm and RAM can spare now if that is less); 0 keeps none: a segment back
    from its task is unlinked when the pool next looks (the next call, ``segment_pool.collect()``,
    or shutdown).
    ``idle_seconds``: a warm segment left idle this long is unlinked (default 5 s; ``math.inf``
    keeps it until shutdown). A thread of the pool does it, calls or no calls, so an executor
    that has stopped being used gives its shared memory back; the thread runs only while the pool
    holds segments (after a call, like the stdlib's own threads) and ends with ``shutdown``.
    ``pickled_fallbacks``: how many big arrays were pickled because /dev/shm had no room.
    """

    def __init__(self, max_workers: int | None = None, mp_context: BaseContext | None = None,
                 initializer: Callable[..., object] | None = None, initargs: tuple = (), *,
                 max_tasks_per_child: int | None = None, min_shared_bytes: int = DEFAULT_MIN_SHARED_BYTES,
                 idle_cap_bytes: int | None = None, idle_seconds: float | None = None) -> None:
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be a callable")  # the stdlib's check, word for word
        # Workers forked before the parent's resource tracker runs would each start one of their
        # own, which unlinks their result segments under the parent when they exit.
        resource_tracker.ensure_running()
        super().__init__(max_workers, mp_context, start_worker, (os.getpid(), initializer, tuple(initargs)),
                         max_tasks_per_child=max_tasks_per_child)
        self.min_shared_bytes = int(min_shared_bytes)
        self.segment_pool = SegmentPool(idle_cap_bytes, idle_seconds, expire_in_background=True)
        _POOLS.add(self.segment_pool)
        _watch_forks_of_this_process()
        self._fallbacks = _Fallbacks()
        self._outstanding = 0
        self._closing = False
        self._count_lock = threading.Lock()
        # Run by shutdown's end, or by the garbage collector if the executor is dropped without it.
        self._close_pool = weakref.finalize(self, finalizer_safe(self.segment_pool.close))
        self._mapping = threading.local()  # .copies: the map call this thread is submitting, if any

    @property
    def pickled_fallbacks(self) -> int:
        """Big arrays (arguments and results) pickled so far because /dev/shm had no room for them."""
        return self._fallbacks.count

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """``ProcessPoolExecutor.submit``: schedule ``fn(*args, **kwargs)`` in a worker and return a
        ``Future`` of its result. Every plain ndarray of at least ``min_shared_bytes`` in the call
        (an argument, or inside one) crosses as a handle to shared memory, and so does a big result
        (module docstring); the rest is pickled as the stdlib pickles it. Raises ``RuntimeError``
        after ``shutdown`` and ``BrokenProcessPool`` once a worker died, as the stdlib does; a call
        that cannot be pickled fails its own future with the stdlib's error."""
        settle_tracker()  # what finalizers left for the resource tracker (_names.tell_tracker)
        task = _Task(self, fn, args, kwargs, getattr(self._mapping, "copies", None))
        # The caller's future exists before the pool may pickle the task (which may fail it).
        outer = task.outer = _SharedFuture()
        # Counted before the pool can see it: a shutdown() from another thread between the two
        # would otherwise find nothing outstanding and close the segment pool under the queued task.
        with self._count_lock:
            self._outstanding += 1
        try:
            inner = super().submit(run_in_worker, task)
        except BaseException:
            task.finish()
            self._task_over()
            raise
        outer._inner = inner
        # The stdlib may keep ``inner`` and its callbacks after shutdown (Python 3.11 keeps every
        # work item of shutdown(cancel_futures=True)), so the callback lets go of the caller's
        # future, and with it the result's segments, as soon as it has run.
        unsettled = [(outer, task)]
        inner.add_done_callback(lambda done: self._settle(*unsettled.pop(), done))
        return outer

    def map(self, fn: Callable[..., T], *iterables, timeout: float | None = None, chunksize: int = 1,
            **kwargs: Any):
        """``ProcessPoolExecutor.map``: the same results, errors and order. An array that is an
        argument of several calls is copied into shared memory once for them all (module
        docstring). The stdlib takes every argument before it returns, and so does this."""
        if kwargs.get("buffersize") is not None:  # Python 3.14's lazy map: arguments one by one
            return super().map(fn, *iterables, timeout=timeout, chunksize=chunksize, **kwargs)
        calls = list(zip(*iterables, strict=False))  # the stdlib's map stops at the shortest
        repeated = _repeated_arrays(calls, self.min_shared_bytes)
        self._mapping.copies = _MapCopies(repeated) if repeated else None
        try:  # the stdlib's map submits every call before it returns
            return super().map(fn, *zip(*calls, strict=True), timeout=timeout, chunksize=chunksize, **kwargs)
        finally:
            self._mapping.copies = None

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """``ProcessPoolExecutor.shutdown``: accept no more calls; with ``wait``, return once every
        pending call has run and the workers have exited; with ``cancel_futures``, cancel the calls
        not yet running. The pool's segments are unlinked once no call is left (at once if none
        is); a result the caller still holds keeps its own segment until it is dropped."""
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        with self._count_lock:
            self._closing = True
            idle = self._outstanding == 0
        if idle:
            self._close_pool()  # else the last task to finish closes it
        settle_tracker()

    def _task_over(self) -> None:
        """Count one task less; the last one to end after ``shutdown`` closes the segment pool."""
        with self._count_lock:
            self._outstanding -= 1
            close = self._closing and self._outstanding == 0
        if close:
            self._close_pool()

    def _settle(self, outer: _SharedFuture, task: _Task, inner: Future) -> None:
        """Done callback (any thread): unpack the result, release the task's segments, and only
        then settle the caller's future (so a caller that submits again finds them back in the pool).
        Whatever goes wrong here settles the caller's future with that error: it is never left pending."""
        try:
            # a call that could not be sent settled its future then; the no-op's outcome says nothing
            value, error = (None, None) if task.unsent else self._outcome(outer, task, inner)
        except BaseException as unexpected:
            value, error = None, unexpected
        if error is not None:
            # Its traceback keeps its line numbers but not its frames' locals (the unpacked arrays,
            # mapped segments): the caller may keep the error, the segments must still go.
            traceback.clear_frames(error.__traceback__)
        try:
            if isinstance(error, BrokenProcessPool) and not task.adopted:
                self._unlink_late_result(task.result_name)
            task.finish(answered=error is None and not inner.cancelled())
        except BaseException as release_error:
            value, error = None, error or release_error
        try:
            self._task_over()
        except BaseException as close_error:
            value, error = None, error or close_error
        outer._inner = None  # break the cycle outer -> inner -> callback -> outer (it holds the result)
        task.outer = None
        settle_tracker()
        if task.unsent:  # its future was failed when the call could not be pickled
            return
        if inner.cancelled():
            Future.cancel(outer)
            outer.set_running_or_notify_cancel()
        elif error is not None:
            outer.set_exception(error)
        else:
            outer.set_result(value)

    def _outcome(self, outer: _SharedFuture, task: _Task,
                 inner: Future) -> tuple[object, BaseException | None]:
        """(result, error) of a finished worker future; (None, None) when it was cancelled."""
        if inner.cancelled():
            return None, None
        error = inner.exception()
        if error is not None:
            for name in task.roots:  # a worker that raised cannot say what it kept
                self.segment_pool.retire(name)
            # An error raised while the call was pickled (e.g. MemoryError from /dev/shm) carries
            # the queue feeder's frames, which would keep the call queue and its semaphores alive for
            # as long as the caller keeps the error; its text survives in __cause__.
            return None, error.with_traceback(None)
        try:
            packed = inner.result()
            for name in packed.kept:  # the worker still views these: never lent again
                self.segment_pool.retire(name)
            self._fallbacks.add(packed.fallbacks)
            return self._unpack(packed, task), None
        except BaseException as unpack_error:
            return None, unpack_error

    def _unlink_late_result(self, result_name: str) -> None:
        """The pool broke while this task ran: a worker the stdlib has not stopped yet (or that
        outlives its SIGTERM) may still write the result segment. Unlink it once every worker is gone."""
        worker_pids = list((self._processes or {}).keys())
        threading.Thread(target=unlink_when_gone, args=(result_name, worker_pids),
                         name="unlink-late-result", daemon=True).start()

    def _pack(self, call: tuple, task: _Task) -> Packed:
        """Pickle ``call`` with big arrays as handles: shared ones as they are, private ones copied
        into pooled segments (pickled as usual when /dev/shm has no room even after the pool made
        some). Then make room for a result as big as the copies."""
        copied_bytes = 0

        def share(array: np.ndarray) -> ArrayRef | None:
            nonlocal copied_bytes
            handle = handle_of(array)
            if handle is not None and not _lent_by_an_executor(handle.name) and not is_held_here(handle.name):
                if handle.name not in task.roots:
                    task.roots[handle.name] = root_of(array)
                # An earlier result was not shared on purpose: the worker maps it copy-on-write.
                private = mapping_under(array) in _RESULT_MAPS
                return ArrayRef(handle, bool(array.flags.writeable), memmap=type(array) is np.memmap,
                                private=private)
            # Private memory, or a pooled segment an earlier result views (which the caller did not
            # share on purpose either; nor a segment the reductions lent, ``segment_holds``): a copy
            # of its own for this call, as unpickling would give; or one copy for every call of a
            # map that passes it, each mapping it copy-on-write.
            shared_copy = self._map_copy(array, task)
            if shared_copy is not None:
                return shared_copy
            ref = self._copy_into_pool(array, task.roots)
            if ref is None:
                task.fallbacks += 1
            else:
                copied_bytes += array.nbytes
            return ref

        packed = pack(call, self.min_shared_bytes, share)
        self._fallbacks.add(task.fallbacks)
        if copied_bytes:
            self.segment_pool.make_room(copied_bytes)
        return packed

    def _map_copy(self, array: np.ndarray, task: _Task) -> ArrayRef | None:
        """The copy-on-write ref of the one copy of ``array`` that the tasks of ``task``'s map share
        (made now by the first of them), held by ``task`` too; None when ``array`` is not an argument
        of several of its calls, or /dev/shm had no room for it (then pickled, as for one call)."""
        shared = task.map_copies
        if shared is None or shared.repeated.get(id(array)) is not array:
            return None
        with shared.lock:  # the feeder thread packs the tasks, but do not count on it
            known = shared.copies.get(id(array))
            if known is None:
                roots: dict[str, np.ndarray] = {}
                ref = self._copy_into_pool(array, roots)
                if ref is None:
                    return None
                (name, root), = roots.items()
                known = shared.copies[id(array)] = (name, root, ref._replace(pooled=False, copied=False,
                                                                            private=True))
        name, root, ref = known
        task.roots[name] = root
        return ref

    def _copy_into_pool(self, array: np.ndarray, roots: dict[str, np.ndarray]) -> ArrayRef | None:
        """Copy a private array into a pooled segment this process holds until ``roots`` and every
        result viewing it let go; None when /dev/shm has no room for it (pickle it). Raises
        MemoryError, naming both, when the memory available could not hold it pickled either."""
        try:
            lease = self.segment_pool.lease(array.nbytes)
        except PLACEMENT_FAILURES as error:  # no room, or no new segment: pickle it, as the stdlib does
            if not pickling_fits(array.nbytes):  # RAM cannot hold it pickled either: nor could the stdlib
                raise too_big_to_pickle(array.nbytes, "an argument array") from None
            if not isinstance(error, MemoryError):  # want of room has its own, older notice
                self._fallbacks.reason = self._fallbacks.reason or placement_failure(error)
            return None
        root = np.frombuffer(lease.shared.mapped_buffer(), np.uint8)
        # Given back (or unlinked, if retired meanwhile) once this root and every view of it are gone.
        weakref.finalize(root.base, finalizer_safe(self.segment_pool.give_back), lease)
        roots[lease.name] = root
        ref = copy_as_unpickled(array, root, HEADER_BYTES, lease.name)
        return ref._replace(pooled=True, copied=True)

    def _unpack(self, packed: Packed, task: _Task):
        """Turn the worker's handles into arrays: views of known segments, adopted new segments."""
        mapped: dict[str, np.ndarray] = dict(task.roots)
        kept = set(packed.kept)

        def array_of(ref: ArrayRef) -> np.ndarray:
            name = ref.handle.name
            root = mapped.get(name)
            if root is None:
                root = mapped[name] = _map_result_segment(name, task)
            array = view_on(root, ref.handle)
            if ref.copied and name in kept:
                array = array.copy(order="A")  # the worker kept its argument: do not share its memory
            return as_received(array, ref)

        return unpack(packed, array_of)


def _map_result_segment(name: str, task: _Task) -> np.ndarray:
    """Bytes of segment ``name`` mapped here; the task's result segment is adopted: unlinked when
    the caller's arrays on it are gone."""
    mapping = Mapping(name, create_bytes=None)
    _RESULT_MAPS[mapping.map] = True
    root = np.frombuffer(mapping.map, np.uint8)
    mapping.close()  # the root's export keeps it mapped as long as an array needs it
    if name == task.result_name:
        weakref.finalize(root.base, finalizer_safe(release_result_segment), name)
        task.adopted = True
    return root
