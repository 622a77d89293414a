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
def _sigint_held() -> Iterator[None]:
    """A Ctrl-C arriving during the block is held, then raised here when the block ends (main thread
    only; elsewhere the block runs as is). Two things hold it:

    - SIGINT is blocked in this thread, so a child started meanwhile inherits the blocked mask, through
      fork and through exec alike, and cannot die of it before its ``run()`` ignores it;
    - a handler that only notes the Ctrl-C stands in for this process's own until the block ends. The
      mask alone is not enough: the kernel gives a signal sent to the process to any thread that does
      not block it (a pool's thread, a sampler's), and Python then runs the handler in the main thread
      at once, inside the block.

    At the end the handler that was there is put back and the held Ctrl-C is raised to it, so it is
    never lost. (Ignoring SIGINT instead would lose it: the kernel discards a signal whose action is
    SIG_IGN, blocked or not.) A process that ignores SIGINT keeps ignoring it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous_handler = signal.getsignal(signal.SIGINT)
    stand_in = previous_handler not in (signal.SIG_IGN, None)  # None: a handler not set from Python
    ctrl_c_held = []
    if stand_in:
        signal.signal(signal.SIGINT, lambda signum, frame: ctrl_c_held.append(signum))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one pending here is noted by the stand-in now
        if stand_in:
            signal.signal(signal.SIGINT, previous_handler)
            if ctrl_c_held:
                signal.raise_signal(signal.SIGINT)  # to the handler that was there: KeyboardInterrupt


class _QuietStart:
    """Mixin for a Process class: the child starts with SIGINT blocked (inherited) and, from the
    first line of ``run()`` on, ignores it: setting SIG_IGN discards a Ctrl-C held meanwhile, then
    SIGINT is unblocked. The parent keeps its Ctrl-C (see ``_sigint_held``)."""

    def start(self) -> None:
        with _sigint_held():
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
