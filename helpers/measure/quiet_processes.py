"""Worker processes that ignore Ctrl-C, so only the program that started them handles it.

A terminal sends SIGINT to the whole foreground process group: the program *and* its workers.
Workers that die of ``KeyboardInterrupt`` mid-task print tracebacks of their own and break their
pool, while the program is still unwinding. ``quiet_context(start_method)`` is a
``multiprocessing`` context (for ``ProcessPoolExecutor(mp_context=...)``, ``Process``, ``Pipe``)
whose processes ignore SIGINT: the program gets ``KeyboardInterrupt`` alone and shuts its pools
down (their ``with`` blocks) and unlinks its segments in order.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.context
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked for the block (main thread only): a Ctrl-C arriving meanwhile is held, then
    raises KeyboardInterrupt here when the block ends. (Ignoring it instead would lose it: the kernel
    discards a signal whose action is SIG_IGN, blocked or not.) A child started meanwhile inherits
    the blocked mask, through fork and through exec alike."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class _QuietStart:
    """Mixin for a Process class: the child starts with SIGINT blocked (inherited) and, from the
    first line of ``run()`` on, ignores it: setting SIG_IGN discards a Ctrl-C held meanwhile, then
    SIGINT is unblocked. The parent keeps its Ctrl-C (see ``_sigint_blocked``)."""

    def start(self) -> None:
        with _sigint_blocked():
            super().start()

    def run(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        super().run()


class QuietForkProcess(_QuietStart, multiprocessing.context.ForkProcess):
    pass


class QuietSpawnProcess(_QuietStart, multiprocessing.context.SpawnProcess):
    pass


class QuietForkServerProcess(_QuietStart, multiprocessing.context.ForkServerProcess):
    pass


class QuietForkContext(multiprocessing.context.ForkContext):
    Process = QuietForkProcess


class QuietSpawnContext(multiprocessing.context.SpawnContext):
    Process = QuietSpawnProcess


class QuietForkServerContext(multiprocessing.context.ForkServerContext):
    Process = QuietForkServerProcess


QUIET_CONTEXTS = {"fork": QuietForkContext, "spawn": QuietSpawnContext, "forkserver": QuietForkServerContext}


def quiet_context(start_method: str) -> multiprocessing.context.BaseContext:
    """A ``multiprocessing`` context for ``start_method`` whose processes ignore SIGINT (see
    ``_QuietStart``); ValueError naming the methods this platform has for any other name."""
    multiprocessing.get_context(start_method)  # raises the ValueError
    return QUIET_CONTEXTS[start_method]()
