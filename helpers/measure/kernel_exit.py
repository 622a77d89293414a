"""A lesson's kernel ends as a Python program does when JupyterLab shuts it down.

JupyterLab's "Shut Down Kernel" (and a JupyterLab server that stops) asks the kernel to exit.
ipykernel first ends its child processes, but multiprocessing's resource tracker ignores SIGTERM,
so ipykernel is still waiting for it when jupyter_client, 2.5 s later, sends the kernel itself
SIGTERM, which kills it without running its exit handlers: the folder a forkserver's socket lives
in (``/tmp/pymp-*``) stays behind. ``exit_normally_on_sigterm()`` turns SIGTERM into ``SystemExit``
in this process, so the kernel ends through its exit handlers (multiprocessing's remove that
folder). Children forked from it get SIGTERM's default back at once: ``Pool.terminate()`` and the
lessons' kills still end them as before.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

_installed_in: int | None = None  # the pid that installed the handler


def _exit_normally(signum: int, frame) -> None:
    if os.getpid() != _installed_in:  # a child that inherited it some other way: die as by default
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    sys.exit(128 + signum)


def _default_sigterm_in_child() -> None:
    if signal.getsignal(signal.SIGTERM) is _exit_normally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def exit_normally_on_sigterm() -> bool:
    """Make SIGTERM raise ``SystemExit`` in this process (once; only from the main thread and where
    SIGTERM still has its default action: a handler of the program's own is left alone). True when
    the handler is in place."""
    global _installed_in
    current = signal.getsignal(signal.SIGTERM)
    if current is _exit_normally and _installed_in == os.getpid():
        return True
    in_main_thread = threading.current_thread() is threading.main_thread()
    if not in_main_thread or current not in (signal.SIG_DFL, _exit_normally):
        return False
    if _installed_in is None:
        os.register_at_fork(after_in_child=_default_sigterm_in_child)
    _installed_in = os.getpid()
    signal.signal(signal.SIGTERM, _exit_normally)
    return True
