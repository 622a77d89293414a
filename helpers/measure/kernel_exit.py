"""A lesson's kernel ends as a Python program does when JupyterLab shuts it down.

JupyterLab's "Shut Down Kernel" (and a JupyterLab server that stops) asks the kernel to exit.
ipykernel first ends its child processes, but multiprocessing's resource tracker ignores SIGTERM,
so ipykernel is still waiting for it when jupyter_client, 2.5 s later, sends the kernel itself
SIGTERM, which kills it without running its exit handlers: the folder a forkserver's socket lives
in (``/tmp/pymp-*``) stays behind. ``exit_normally_on_sigterm()`` turns SIGTERM into ``SystemExit``
in this process, so the kernel ends through its exit handlers; it removes that folder first, before
any other exit work, so that a SIGKILL that comes before the rest of the exit is done (a busy CPU)
leaves nothing. Children forked from it get SIGTERM's default back at once: ``Pool.terminate()``
and the lessons' kills still end them as before.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

_installed_in: int | None = None  # the pid that installed the handler


def remove_multiprocessing_folder_now() -> bool:
    """Run now multiprocessing's exit finalizer that removes this process's temp folder (``/tmp/pymp-*``,
    where a forkserver's or a manager's socket lives), once (the finalizer unregisters itself). True
    when there was one to run. The SIGTERM handler runs it first of the exit's work: on a busy CPU the
    rest of a kernel's exit (other exit handlers, tearing down a large interpreter) can outlast the
    2.5 s jupyter_client allows after SIGTERM, and the SIGKILL that follows then leaves nothing of ours."""
    from multiprocessing import util

    # multiprocessing's own private names (3.8 to 3.13): where a Python lacks them, nothing runs early
    # and the exit removes the folder as before; a signal handler must never raise over them.
    remove_temp_dir = getattr(util, "_remove_temp_dir", None)
    registry = getattr(util, "_finalizer_registry", {})
    removers = [finalizer for finalizer in list(registry.values())
                if remove_temp_dir is not None and getattr(finalizer, "_callback", None) is remove_temp_dir]
    for finalizer in removers:
        try:
            finalizer()
        except Exception:  # never let the removal stop the exit; the folder stays, as before
            pass
    return bool(removers)


def _exit_normally(signum: int, frame) -> None:
    if os.getpid() != _installed_in:  # a child that inherited it some other way: die as by default
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    remove_multiprocessing_folder_now()
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
