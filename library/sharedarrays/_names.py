"""Our segments' names and their creators, and the POSIX calls on a segment's name: standard library
only, so ``sweep()`` and ``python -m sharedarrays sweep`` run without NumPy.

Private to ``sharedarrays``. A name carries our prefix, the creating process's pid and its pid
namespace (``sal_<pid>_ns<namespace>_<random>``, 30 characters: macOS's limit), so ``sweep()`` can
tell a dead owner's segments from a live one's, and leaves alone those of processes in another pid
namespace, whose pids mean nothing here. This is the library's one module that calls CPython's
``_posixshmem`` (``shm_open``, ``shm_unlink``).
"""

from __future__ import annotations

import collections
import functools
import os
import secrets
import sys
import threading
from multiprocessing import resource_tracker, util

try:
    import _posixshmem  # CPython's shm_open/shm_unlink; absent where there is no POSIX shared memory
except ImportError:
    _posixshmem = None

from sharedarrays.room import (
    NAME_DIGITS,
    NAME_LIMIT,
    SEGMENT_PREFIX,
    SEGMENTS_IN_A_FOLDER,
    SHM_DIR,
    base36,
    creator_prefix,
)

OWNER_ONLY = 0o600  # no other user can read or write a segment we make


def new_name() -> str:
    """A fresh segment name of ``NAME_LIMIT`` (30) characters, which every platform takes: our
    prefix, this process's pid and pid namespace, and random base-36 digits for the rest (8 at the
    longest prefix: about 41 bits, within one process)."""
    prefix = creator_prefix()
    digits = max(NAME_LIMIT - len(prefix), 6)
    return prefix + base36(secrets.randbelow(len(NAME_DIGITS) ** digits)).rjust(digits, NAME_DIGITS[0])


def creator_pid(name: str) -> int | None:
    """The pid written into one of our segment names, or None when the name is not ours."""
    if not name.startswith(SEGMENT_PREFIX):
        return None
    try:
        return int(name[len(SEGMENT_PREFIX):].split("_", 1)[0])
    except ValueError:
        return None


def creator_namespace(name: str) -> str | None:
    """The pid namespace tag written into one of our segment names (``room.pid_namespace()`` of
    its creator), or None for a name without one."""
    fields = name[len(SEGMENT_PREFIX):].split("_")
    if name.startswith(SEGMENT_PREFIX) and len(fields) >= 3 and fields[1].startswith("ns"):
        return fields[1][2:]
    return None


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs in this pid namespace; one that exited but is not reaped yet (a
    zombie) is dead. The kernel answers (``kill(pid, 0)``, on every POSIX system); /proc, where
    there is one, only tells a zombie from a running process."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    except OverflowError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            return stat_file.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except FileNotFoundError:  # it ended since kill() answered, or this /proc shows no pids
        return not os.path.isdir(f"/proc/{os.getpid()}")
    except (OSError, IndexError):
        return True  # no readable /proc: kill() is the answer


# What finalizers asked to tell the resource tracker: (what, name), told by the next ``settle_tracker``.
_TRACKER_LATER: collections.deque[tuple[str, str]] = collections.deque()
_in_finalizer = threading.local()  # .on: this thread runs a finalizer (``finalizer_safe``)
TRACKER_EXIT_PRIORITY = -20  # multiprocessing exit hooks: after the holds let go at exit (-10)
_exit_hook_pid = 0


def finalizer_safe(function):
    """``function`` as a finalizer runs it: what it tells the resource tracker (``tell_tracker``) waits
    for the next ``settle_tracker``. A garbage collection may run a finalizer on any thread at any
    moment, also inside a tracker call of that thread, which the tracker refuses (``ReentrantCallError``:
    a lost call, then "leaked shared_memory" warnings at exit); so no finalizer calls into it."""

    @functools.wraps(function)
    def run(*args):
        outer = getattr(_in_finalizer, "on", False)
        _in_finalizer.on = True
        try:
            return function(*args)
        finally:
            _in_finalizer.on = outer

    return run


def tell_tracker(what: str, name: str) -> None:
    """Tell the resource tracker that segment ``name`` is gone: ``what`` is 'unregister' (this program
    registered it) or 'forget' (``forget_in_resource_tracker``). Now, with whatever finalizers left
    waiting, unless this thread runs a finalizer: then at the next ``settle_tracker`` (every call of
    the library that may make or free a segment, and this process's exit)."""
    _TRACKER_LATER.append((what, name))
    if getattr(_in_finalizer, "on", False):
        _ensure_exit_hook()
    else:
        settle_tracker()


def settle_tracker() -> None:
    """Tell the resource tracker what finalizers left waiting (never from a finalizer itself)."""
    if not _TRACKER_LATER or getattr(_in_finalizer, "on", False):  # nothing waits: every round trip
        return
    while True:
        try:
            what, name = _TRACKER_LATER.popleft()
        except IndexError:
            return
        if what == "unregister":
            resource_tracker.unregister("/" + name, "shared_memory")
        else:
            forget_in_resource_tracker(name)


def _ensure_exit_hook() -> None:
    """``settle_tracker`` at this process's exit, also through ``os._exit`` in a multiprocessing child."""
    global _exit_hook_pid
    if _exit_hook_pid != os.getpid():
        _exit_hook_pid = os.getpid()
        util.Finalize(None, settle_tracker, exitpriority=TRACKER_EXIT_PRIORITY)


def _forget_parents_calls() -> None:
    """A forked child does not tell the tracker (shared with its parent) what its parent's finalizers
    left waiting: the parent tells it."""
    global _exit_hook_pid
    _TRACKER_LATER.clear()
    _exit_hook_pid = 0


if hasattr(os, "register_at_fork"):  # absent where there is no fork (Windows)
    os.register_at_fork(after_in_child=_forget_parents_calls)


def forget_in_resource_tracker(name: str) -> None:
    """Make this program's resource tracker forget segment ``name`` if it tracks it (a process of
    this program registered it, then died without unlinking it): registering, then unregistering,
    strikes a name it knew and leaves one it did not know as it was (unregistering an unknown name
    alone makes the tracker print a KeyError). Starts no tracker where this process has none."""
    tracker = getattr(resource_tracker, "_resource_tracker", None)
    if getattr(tracker, "_fd", None) is None:
        return
    resource_tracker.register("/" + name, "shared_memory")
    resource_tracker.unregister("/" + name, "shared_memory")


def segment_names() -> list[str]:
    """Names of our segments now in /dev/shm (sorted), or [] where there is no such folder."""
    try:
        return sorted(name for name in os.listdir(SHM_DIR) if name.startswith(SEGMENT_PREFIX))
    except OSError:
        return []


_PLATFORM_CHECKED = False  # require_posix_shared_memory() passed once in this process: it will again


def require_posix_shared_memory() -> None:
    """Raise a clear error naming what is missing where POSIX shared memory cannot work.

    The library needs ``shm_open`` (CPython's ``_posixshmem``, as ``multiprocessing.shared_memory``
    does), file locks (``fcntl``: the torch-free reduction's holder counts), and on Linux the /dev/shm folder
    glibc keeps segments in. Windows has neither ``shm_open`` nor ``fcntl``. Without
    ``os.posix_fallocate`` (macOS) it works as the stdlib does there: see ``reserve``.
    """
    global _PLATFORM_CHECKED
    if _PLATFORM_CHECKED:
        return
    missing = [what for what, present in (("POSIX shared memory (shm_open, CPython's _posixshmem)",
                                           _posixshmem is not None),
                                          ("file locks (fcntl)", _has_file_locks()),
                                          (f"a {SHM_DIR} folder",
                                           not SEGMENTS_IN_A_FOLDER or os.path.isdir(SHM_DIR)))
               if not present]
    if missing:
        raise OSError(f"sharedarrays needs {' and '.join(missing)}, which this platform ({sys.platform}) "
                      "does not have; it is tested on Linux only. Use multiprocessing.shared_memory "
                      "directly, or run on Linux.")
    _PLATFORM_CHECKED = True


@functools.cache
def _has_file_locks() -> bool:
    """Whether ``fcntl`` imports here (every POSIX system; not Windows)."""
    try:
        import fcntl  # noqa: F401 - only asked whether it imports
    except ImportError:
        return False
    return True


def shm_open(name: str, flags: int, mode: int = OWNER_ONLY) -> int:
    """A file descriptor of segment ``name`` (``os.O_*`` ``flags``), after checking the platform."""
    require_posix_shared_memory()
    return _posixshmem.shm_open("/" + name, flags, mode=mode)


def open_existing(name: str) -> int:
    """A read-write file descriptor of existing segment ``name`` (FileNotFoundError if it is gone)."""
    return shm_open(name, os.O_RDWR, 0)


def unlink(name: str) -> bool:
    """Remove segment ``name``; False when it was already gone."""
    require_posix_shared_memory()
    try:
        _posixshmem.shm_unlink("/" + name)
    except FileNotFoundError:
        return False
    return True


def segment_exists(name: str) -> bool:
    """True while /dev/shm has an entry called ``name``: one ``stat``, without building a ``Path``
    (an executor asks once per failed task; a ``Path`` costs several times the system call). Where
    segments are not files in a folder (macOS), whether ``shm_open`` finds it."""
    try:
        os.stat(os.path.join(SHM_DIR, name))
    except OSError:
        if SEGMENTS_IN_A_FOLDER:
            return False
    else:
        return True
    try:
        fd = shm_open(name, os.O_RDONLY, 0)
    except OSError:
        return False
    os.close(fd)
    return True
