"""Who still views a pooled segment: a count of *holders* in the segment's header.

Pooled segments (``sharedarrays.segment_pool``) carry the count in their header
(``sharedarrays.lent_segments``' layout and lock): every process that views one counts once for
each reception still alive (``hold_segment``); the last one to let go marks the segment returned,
and only then does its pool lend it again. A process that views a segment only while another holder
is sure to hold it too (a worker, during a task the parent holds it for) may wait to count itself
until it knows whether it keeps a view (``view_uncounted``, then ``settle_uncounted``): most tasks
keep none, and so take no lock at all. A forked child is counted for what it inherits (by the
parent, before ``fork``: the parent may let go as soon as it returns); a process that exits (also
through ``os._exit``, via ``multiprocessing.util``'s exit hooks) lets go of what it holds.
``sharedarrays.transit`` (the worker's side) and ``sharedarrays.executor`` (the parent's) count.
"""

from __future__ import annotations

import itertools
import os
import weakref
from multiprocessing import util

import numpy as np

from sharedarrays._segments import ExitHook, mapping_under
from sharedarrays.lent_segments import EXIT_PRIORITY, HOLDERS_OFFSET, count_holders, release_later
from sharedarrays.segment_pool import HEADER_BYTES, mark_returned

_HOLDS: dict[int, weakref.finalize] = {}  # this process's receptions of pooled segments still alive
_UNCOUNTED: dict[int, tuple[weakref.ref, str]] = {}  # token -> (views' export, name): viewed, not counted yet
_FORKING: list[tuple[int, str, np.ndarray]] = []  # (token, name, header) counted for the child being forked
_hold_tokens = itertools.count()


def header_of(root: np.ndarray) -> np.ndarray:
    """The first ``HEADER_BYTES`` of the segment ``root`` views, through an export of their own (so
    holding the header does not keep ``root`` alive)."""
    return np.frombuffer(mapping_under(root), np.uint8, count=HEADER_BYTES)


def hold_segment(name: str, root: np.ndarray, *, first: bool = False) -> None:
    """Count this process as a holder of pooled segment ``name`` for as long as ``root`` (bytes of
    its whole mapping) or any view of it lives. ``first``: the segment was just lent to this
    process, nobody else holds it, so the count starts at 1."""
    header = header_of(root)
    if first:
        header[HOLDERS_OFFSET:HOLDERS_OFFSET + 8].view(np.int64)[0] = 1
    else:
        count_holders(name, header, +1)
    _watch(root.base, name, header)


def _watch(buffer: object, name: str, header: np.ndarray) -> None:
    """Take this process's holder of ``name`` off when ``buffer`` (the views' export) goes."""
    token = next(_hold_tokens)
    _HOLDS[token] = weakref.finalize(buffer, _release_hold, token, name, header, os.getpid())
    _exit_hook.ensure()


def view_uncounted(name: str, root: np.ndarray) -> int:
    """Let this process view pooled segment ``name`` through ``root`` (bytes of its whole mapping)
    without counting itself as a holder yet; return a token for ``settle_uncounted``.

    Only while another holder surely holds the segment (the parent, for the task's duration) and
    ``settle_uncounted`` runs before that holder may let go (before the worker's reply is sent). A
    child forked meanwhile is counted for it, as for a hold.
    """
    token = next(_hold_tokens)
    _UNCOUNTED[token] = (weakref.ref(root.base), name)
    return token


def settle_uncounted(token: int) -> bool:
    """Count this process as a holder of the segment given to ``view_uncounted`` if a view of its root
    still lives (the caller dropped its own references first: what lives was kept); True if it did.
    No lock at all when nothing was kept. (In a child forked meanwhile: nothing, it counted already.)

    The token leaves ``_UNCOUNTED`` only once the hold is watched: a fork from another thread in
    between counts the child for one or both (and the child watches what it was counted for).
    """
    export, name = _UNCOUNTED.get(token, (None, ""))
    buffer = export() if export is not None else None
    if buffer is not None:
        header = _header_of_export(buffer)
        count_holders(name, header, +1)
        _watch(buffer, name, header)
    _UNCOUNTED.pop(token, None)
    return buffer is not None


def _header_of_export(buffer: object) -> np.ndarray:
    """The first ``HEADER_BYTES`` of the mapping under ``buffer`` (a root's ``.base``), through an
    export of their own."""
    mapped = buffer.obj if isinstance(buffer, memoryview) else buffer
    return np.frombuffer(mapped, np.uint8, count=HEADER_BYTES)


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


def holders_seen(root: np.ndarray) -> int:
    """The holder count in the header of the segment ``root`` (bytes of its whole mapping) views,
    read without the lock: a snapshot, exact for every count made before something this process
    received from the counter (a worker counts itself before it replies)."""
    return int(root[HOLDERS_OFFSET:HOLDERS_OFFSET + 8].view(np.int64)[0])


def _release_hold(token: int, name: str, header: np.ndarray, pid: int) -> None:
    """A reception's views are all gone: take its holder off; the last one returns the segment.

    Only in the process that counted it: a forked child whose copy of a parent's view dies before
    the child counted it (fork frees other threads' frames) must not take the parent's holder off.
    """
    if release_later(_release_hold, token, name, header, pid):
        return
    _HOLDS.pop(token, None)
    if pid == os.getpid() and count_holders(name, header, -1) == 0:
        mark_returned(header)


def release_every_hold() -> None:
    """Let go of every pooled segment this process still views (at exit: the views die with it)."""
    for finalizer in list(_HOLDS.values()):
        finalizer()


_exit_hook = ExitHook(release_every_hold, EXIT_PRIORITY)  # in place while this process holds any


def _before_fork() -> None:
    """About to fork: count the child as a holder of everything this process holds or views uncounted,
    now, so that this process may let go the moment ``fork`` returns (the child takes them over)."""
    _FORKING[:] = [(token, name, header) for token, (_, _, name, header) in _holds_alive().items()]
    for token, (export, name) in list(_UNCOUNTED.items()):
        buffer = export()
        if buffer is not None:
            _FORKING.append((token, name, _header_of_export(buffer)))
    for _, name, header in _FORKING:
        count_holders(name, header, +1)


def _after_fork_in_parent() -> None:
    _FORKING.clear()


def _after_fork_in_child() -> None:
    """Watch, under this pid, what the parent counted for this child (its holds and its uncounted
    views alike: the child counts for both); what already died here (fork frees other threads'
    frames) is let go at once."""
    holds = _holds_alive()
    uncounted = {token: export() for token, (export, _) in _UNCOUNTED.items()}
    _UNCOUNTED.clear()  # the child is not in the parent's task: what it views is counted above
    for token, name, header in _FORKING:
        if token in holds:
            finalizer, buffer, _, _ = holds[token]
            finalizer.detach()
        else:
            buffer = uncounted.get(token)
        if buffer is not None:
            _watch(buffer, name, header)
        elif count_holders(name, header, -1) == 0:
            mark_returned(header)
    _FORKING.clear()


def _after_multiprocessing_fork() -> None:
    """multiprocessing clears a forked child's exit hooks after ``os.fork`` returns: add ours back."""
    if _HOLDS:
        _exit_hook.ensure()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
util.register_after_fork(_after_multiprocessing_fork, lambda hook: hook())
