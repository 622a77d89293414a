"""Send NumPy arrays through ``multiprocessing`` queues, pipes and pools via shared memory, not pickles.

``multiprocessing`` pickles everything it sends with ``multiprocessing.reduction.ForkingPickler``;
registering a *reduction* for ``np.ndarray`` there changes how every array crosses a
``Queue``, ``Pipe``, ``Pool``, ``ProcessPoolExecutor`` or a spawned ``Process``'s arguments,
without touching the code that sends them:

- ``share_arrays_with_torch()``: the array's bytes go into a shared torch storage (one copy) and
  torch's own reduction sends that storage (``sharedarrays.torch_reduction``).
- ``share_arrays_with_shared_memory(idle_cap_bytes=None, idle_seconds=None)``: the same without
  torch, in a segment lent by a pool of warm segments (``sharedarrays.lent_segments``, which
  states the contract).
- In both, an array that already lives in shared memory crosses as a small description (O(1),
  no copy), and the receiver's array views shared memory, so sending it on costs nothing either.
- ``stop_sharing_arrays()`` undoes either: the ``np.ndarray`` entry of
  ``ForkingPickler._extra_reducers`` is back to what it was (none, normally); a torch-free pool
  is closed (its segments unlinked). ``sharing_arrays(how)`` is the context-manager form.

Only ``ForkingPickler`` changes: ``pickle.dumps`` and ``copyreg`` are untouched, and only exact
``np.ndarray`` objects are affected (subclasses such as ``np.memmap`` pickle as before). Calling
an enabler again while the same way is active does nothing; enabling the other way raises
RuntimeError (one reduction per type). A spawned worker must enable the way itself (e.g. as a
``Pool`` initializer) to send arrays back through shared memory; it can always receive them. A
forked child inherits the registration and gets a pool of its own. Importing this module does
not import torch.

A worker that ends normally unlinks the segments it lent (exit hooks). One that is killed
(``Pool.terminate()`` sends SIGTERM, which cannot be caught reliably: NumPy's BLAS threads may take
the signal while the main thread waits on a lock) cannot; this process then unlinks the segments
of the dead processes it received arrays from when it stops sharing, when it lets go of one of
their arrays, and when it exits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.reduction import ForkingPickler

import numpy as np

from sharedarrays import lent_segments
from sharedarrays.segment_pool import SegmentPool

WAYS = ("torch", "shared_memory")
_MISSING = object()

_active_way: str | None = None
_previous_reducer: object = _MISSING  # the np.ndarray reducer registered before ours
_our_reducer: Callable | None = None
_lock = threading.Lock()


def active_way() -> str | None:
    """'torch' or 'shared_memory' while one is registered in this process, else None."""
    return _active_way


def share_arrays_with_torch() -> None:
    """Send every ndarray through a shared torch storage (first share: one copy; already shared:
    none). Imports torch now; raises ImportError with the alternative if it is not installed
    (after the RuntimeError for the other way already active, which torch would not change)."""
    with _lock:
        _refuse_another_way("torch")
    try:
        from sharedarrays import torch_reduction
    except ImportError as error:
        raise ImportError(
            f"share_arrays_with_torch() needs PyTorch, which could not be imported ({error}). "
            "Install it (pip install torch), or use share_arrays_with_shared_memory(), which "
            "needs only NumPy."
        ) from error
    _start("torch", torch_reduction.reduce_with_torch)


def share_arrays_with_shared_memory(idle_cap_bytes: int | None = None,
                                    idle_seconds: float | None = None) -> None:
    """Send every ndarray through a POSIX shared-memory segment lent from a pool of warm ones.

    ``idle_cap_bytes``: bytes of returned segments kept mapped for reuse (default: 1 GiB, or half
    of what /dev/shm and RAM can spare if that is less, ``segment_pool.default_idle_cap_bytes``);
    0 keeps none (every first share then writes fresh pages).
    ``idle_seconds``: a returned segment idle this long is unlinked at the next send, or by
    ``stop_sharing_arrays()`` (default 5 s; ``math.inf``: kept until then). No thread does it on
    time: pickling through a pipe starts none, so neither does this; a program that stops sending
    keeps at most ``idle_cap_bytes`` until it sends again or stops sharing.
    """
    _start("shared_memory", lent_segments.reduce_with_shared_memory, idle_cap_bytes, idle_seconds)


def share_arrays(how: str, *, idle_cap_bytes: int | None = None, idle_seconds: float | None = None) -> None:
    """Enable the way named ``how`` ('torch' or 'shared_memory'); usable as a Pool initializer.
    ``idle_cap_bytes`` and ``idle_seconds`` (the torch-free way only): bytes of returned segments
    kept for reuse, and how long one may stay idle (``share_arrays_with_shared_memory``)."""
    if how == "torch":
        if idle_cap_bytes is not None or idle_seconds is not None:
            raise ValueError("idle_cap_bytes and idle_seconds apply to the 'shared_memory' way only: "
                             "torch keeps no pool")
        share_arrays_with_torch()
    elif how == "shared_memory":
        share_arrays_with_shared_memory(idle_cap_bytes, idle_seconds)
    else:
        raise ValueError(f"how must be one of {WAYS}, got {how!r}")


def stop_sharing_arrays() -> None:
    """Undo ``share_arrays_with_*``: restore the previous ndarray reducer and close the pool of
    segments (items not yet received can no longer be). Does nothing when no way is active."""
    global _active_way, _our_reducer, _previous_reducer
    with _lock:
        if _active_way is None:
            return
        if ForkingPickler._extra_reducers.get(np.ndarray) is _our_reducer:
            if _previous_reducer is _MISSING:
                del ForkingPickler._extra_reducers[np.ndarray]
            else:
                ForkingPickler._extra_reducers[np.ndarray] = _previous_reducer
        pool = lent_segments.current_pool()
        lent_segments.set_pool(None)
        if pool is not None:
            pool.close()
        lent_segments.unlink_segments_of_dead_lenders()
        _active_way, _our_reducer, _previous_reducer = None, None, _MISSING


@contextmanager
def sharing_arrays(how: str, *, idle_cap_bytes: int | None = None,
                   idle_seconds: float | None = None) -> Iterator[None]:
    """Share arrays the way ``how`` names inside the block; undo it after (unless it was already on)."""
    if how not in WAYS:
        raise ValueError(f"how must be one of {WAYS}, got {how!r}")
    already = _active_way == how
    share_arrays(how, idle_cap_bytes=idle_cap_bytes, idle_seconds=idle_seconds)
    try:
        yield
    finally:
        if not already:
            stop_sharing_arrays()


def shared_memory_pool() -> SegmentPool | None:
    """The pool the torch-free way lends from in this process (``created``, ``reused``), or None."""
    return lent_segments.current_pool()


def _refuse_another_way(how: str) -> None:
    """Raise RuntimeError if a way other than ``how`` is active (the caller holds ``_lock``)."""
    if _active_way not in (None, how):
        raise RuntimeError(
            f"arrays are already shared the {_active_way!r} way; call stop_sharing_arrays() first "
            "(ForkingPickler holds one reduction per type)"
        )


def _start(how: str, reducer: Callable, idle_cap_bytes: int | None = None,
           idle_seconds: float | None = None) -> None:
    global _active_way, _our_reducer, _previous_reducer
    with _lock:
        if _active_way == how:
            return
        _refuse_another_way(how)
        _previous_reducer = ForkingPickler._extra_reducers.get(np.ndarray, _MISSING)
        if how == "shared_memory":
            lent_segments.set_pool(SegmentPool(idle_cap_bytes, idle_seconds))
        ForkingPickler.register(np.ndarray, reducer)
        _active_way, _our_reducer = how, reducer

