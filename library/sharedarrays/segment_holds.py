"""Who still views a segment the torch-free reduction lent: a count of *holders* in its header.

Internal to ``sharedarrays``: not part of its API (``sharedarrays.__all__``), and may change
between versions.

A segment ``sharedarrays.lent_segments`` lends goes through any ``Queue``, ``Pipe`` or ``Pool`` to
any process, which may send it on: only a count kept in the segment itself can tell the lender when
nobody views it any more. The count is an int64 at byte ``HOLDERS_OFFSET`` of the segment's header,
updated under an exclusive ``flock`` on the segment so that processes never lose one. Every process
that views one counts once for each reception still alive (``hold_segment``); the last one to let
go marks the segment returned, and only then does its pool lend it again. A forked child is counted
for what it inherits by the parent, before ``fork`` (the parent may let go as soon as ``fork``
returns), and watches it under its own pid; a process that exits (also through ``os._exit``, via
``multiprocessing.util``'s exit hooks) lets go of what it holds. The fork hooks are registered when
this process first holds such a segment: a program that never receives one runs none of this.

(``SharedMemoryExecutor`` needs none of it: its segments go to its own workers only, and a worker
says in its reply what it kept; see ``sharedarrays.executor``.)
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import weakref
from collections.abc import Callable
from multiprocessing import util

import numpy as np

try:
    import fcntl  # file locks: absent on Windows, where the library imports and its first use says why
except ImportError:
    fcntl = None

from sharedarrays._segments import ExitHook, finalizer_safe, mapping_under, open_existing
from sharedarrays.segment_pool import HEADER_BYTES, mark_returned

EXIT_PRIORITY = -10  # multiprocessing exit hooks: after queues' feeder threads flushed (-5)
HOLDERS_OFFSET = 8  # header byte where the int64 count of holders lives (after the pool's state word)

_HOLDS: dict[int, weakref.finalize] = {}  # this process's receptions of pooled segments still alive
_AFTER_RELEASE: dict[int, Callable[[str], None]] = {}  # token -> what to call once its hold is let go
_FORKING: list[tuple[int, str, np.ndarray]] = []  # (token, name, header) counted for the child being forked
_FORK_HOOKS_REGISTERED: list[bool] = []  # [True] once this process registered its fork hooks
_hold_tokens = itertools.count()
# Held while a thread holds a segment's flock, and across fork(): a child must not inherit a lock
# that a thread of its parent holds through a descriptor the child also inherited.
_flock_guard = threading.Lock()
# Per thread: .inside (it is in count_holders or forking: it holds or wants the guard) and
# .deferred (releases a finalizer asked for meanwhile, run once the guard is let go).
_counting = threading.local()


def count_holders(name: str, header: np.ndarray, delta: int) -> int | None:
    """Add ``delta`` to the holders of pooled segment ``name`` (``header``: its first bytes, uint8)
    under an exclusive flock; return the new count, or None if the segment is gone."""
    holders = header[HOLDERS_OFFSET:HOLDERS_OFFSET + 8].view(np.int64)
    # Anything that allocates in here may start the cyclic GC, which may run a release finalizer
    # on this thread: that one must not wait for the locks this thread holds (it would wait forever),
    # so it queues itself (release_later) and runs right after they are let go.
    _start_counting()
    try:
        with _flock_guard:
            try:
                fd = open_existing(name)
            except FileNotFoundError:
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                holders[0] += delta
                return int(holders[0])
            finally:
                os.close(fd)  # the only fd of this open file: closing it releases the lock
    finally:
        _stop_counting()


def _start_counting() -> None:
    """This thread is about to take the guard: from now, releases wait (``release_later``). Its queue
    exists before the flag is up, so nothing in ``release_later`` has to allocate one."""
    if getattr(_counting, "deferred", None) is None:
        _counting.deferred = []
    _counting.inside = True


def _stop_counting() -> None:
    """The guard is let go: run what waited, each release on its own (one that fails is reported,
    as a finalizer's error is, and the others still run)."""
    _counting.inside = False
    queue = _counting.deferred
    while queue:
        release, args = queue.pop()
        try:
            release(*args)
        except Exception:
            sys.excepthook(*sys.exc_info())


def release_later(release: Callable, *args) -> bool:
    """True, with ``release(*args)`` queued, when this thread is inside ``count_holders`` (a finalizer
    the GC ran there) or forking; it then runs as soon as the guard is let go."""
    if getattr(_counting, "inside", False):
        _counting.deferred.append((release, args))
        return True
    return False


def header_of(root: np.ndarray) -> np.ndarray:
    """The first ``HEADER_BYTES`` of the segment ``root`` views, through an export of their own (so
    holding the header does not keep ``root`` alive)."""
    return np.frombuffer(mapping_under(root), np.uint8, count=HEADER_BYTES)


def holders_of(array: np.ndarray) -> np.ndarray:
    """A live int64 view of the holder count in the header of the pooled segment ``array`` views."""
    return header_of(array)[HOLDERS_OFFSET:HOLDERS_OFFSET + 8].view(np.int64)


def hold_segment(name: str, root: np.ndarray, *, counted: bool = False,
                 after_release: Callable[[str], None] | None = None) -> None:
    """Count this process as a holder of lent segment ``name`` for as long as ``root`` (bytes of
    its whole mapping) or any view of it lives. ``counted``: the sender counted this reception
    already (an item in flight that this process now takes over). ``after_release(name)`` runs in
    this process once the hold is let go."""
    _register_fork_hooks()  # before the count: a fork from another thread from now on counts the child
    header = header_of(root)
    if not counted:
        count_holders(name, header, +1)
    token = _watch(root.base, name, header)
    if after_release is not None:
        _AFTER_RELEASE[token] = after_release


def _watch(buffer: object, name: str, header: np.ndarray, token: int | None = None) -> int:
    """Take this process's holder of ``name`` off when ``buffer`` (the views' export) goes."""
    token = next(_hold_tokens) if token is None else token
    _HOLDS[token] = weakref.finalize(buffer, _release_hold_finalizer, token, name, header, os.getpid())
    _exit_hook.ensure()
    return token


def _holds_alive() -> dict[int, tuple[weakref.finalize, object, str, np.ndarray]]:
    """This process's live holds by token: (finalizer, the buffer it watches, segment name, header)."""
    alive = {}
    for token, finalizer in list(_HOLDS.items()):
        found = finalizer.peek()  # (object, function, args, kwargs), or None once it ran
        if found is not None:
            buffer, _, (_, name, header, _), _ = found
            alive[token] = (finalizer, buffer, name, header)
    return alive


def is_held_here(name: str) -> bool:
    """True when this process holds pooled segment ``name`` (so a receiver must count itself too)."""
    return any(held == name for _, _, held, _ in _holds_alive().values())


def _release_hold(token: int, name: str, header: np.ndarray, pid: int) -> None:
    """A reception's views are all gone: take its holder off; the last one returns the segment.

    Only in the process that counted it: a forked child whose copy of a parent's view dies before
    the child counted it (fork frees other threads' frames) must not take the parent's holder off.
    """
    if release_later(_release_hold, token, name, header, pid):
        return
    _HOLDS.pop(token, None)
    after_release = _AFTER_RELEASE.pop(token, None)
    if pid != os.getpid():
        return
    if count_holders(name, header, -1) == 0:
        mark_returned(header)
    if after_release is not None:
        after_release(name)


_release_hold_finalizer = finalizer_safe(_release_hold)  # what it tells the tracker waits (_names)


def release_every_hold() -> None:
    """Let go of every pooled segment this process still views (at exit: the views die with it)."""
    for finalizer in list(_HOLDS.values()):
        finalizer()


_exit_hook = ExitHook(release_every_hold, EXIT_PRIORITY)  # in place while this process holds any


def _before_fork() -> None:
    """About to fork: count the child as a holder of everything this process holds, now, so that this
    process may let go the moment ``fork`` returns (the child takes them over). Then take the guard
    (a child must not inherit it held) with this thread marked as counting, so a release the GC runs
    in the fork's other hooks waits instead of waiting on the guard."""
    _FORKING[:] = [(token, name, header) for token, (_, _, name, header) in _holds_alive().items()]
    for _, name, header in _FORKING:
        count_holders(name, header, +1)
    _start_counting()
    _flock_guard.acquire()


def _after_fork_in_parent() -> None:
    _flock_guard.release()
    _stop_counting()
    _FORKING.clear()


def _after_fork_in_child() -> None:
    """Watch, under this pid, what the parent counted for this child; what already died here (fork
    frees other threads' frames) is let go at once. What runs after a release is the parent's
    business, not the child's."""
    _flock_guard.release()
    _stop_counting()  # what waited was the parent's (its pid): a no-op here
    _AFTER_RELEASE.clear()
    holds = _holds_alive()
    for token, name, header in _FORKING:
        buffer = None
        if token in holds:
            finalizer, buffer, _, _ = holds[token]
            finalizer.detach()
        if buffer is not None:
            _watch(buffer, name, header, token)
        elif count_holders(name, header, -1) == 0:
            mark_returned(header)
    _FORKING.clear()


def _after_multiprocessing_fork() -> None:
    """multiprocessing clears a forked child's exit hooks after ``os.fork`` returns: add ours back."""
    if _HOLDS:
        _exit_hook.ensure()


def _register_fork_hooks() -> None:
    """Register this module's fork hooks, once per process (inherited by forked children), when it
    first holds a segment."""
    if _FORK_HOOKS_REGISTERED:
        return
    _FORK_HOOKS_REGISTERED.append(True)
    if hasattr(os, "register_at_fork"):  # absent where there is no fork (Windows)
        os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                            after_in_child=_after_fork_in_child)
    util.register_after_fork(_after_multiprocessing_fork, lambda hook: hook())
