"""Clean up after a crash: ``sweep()`` removes what killed programs left in /dev/shm.

Standard library only (``python -m sharedarrays sweep`` runs without NumPy). See ``sweep``.
"""

from __future__ import annotations

import os
import warnings

from sharedarrays._names import (
    creator_namespace,
    creator_pid,
    forget_in_resource_tracker,
    process_alive,
    segment_names,
    unlink,
)
from sharedarrays.room import SHM_DIR, pid_namespace

__all__ = ["orphaned_semaphores", "sweep"]

MP_SEMAPHORE_PREFIX = "sem.mp-"  # multiprocessing's named semaphores (queues, locks), spawn and forkserver


def sweep(everything: bool = False, semaphores: bool = False) -> list[str]:
    """Remove our segments whose creating process is dead (all of ours if ``everything``), and with
    ``semaphores=True`` the ``multiprocessing`` named semaphores no process maps any more.

    Returns the names removed. Use it after a crash: a SIGKILLed owner cannot unlink, and when the
    whole program was killed, its resource tracker (which would have unlinked both) died with it.
    A segment made in another pid namespace that shares this /dev/shm (a container started with
    ``--ipc=host``, a pod's containers) is left alone unless ``everything``: its creator's pid
    means nothing here. A removed segment that this program's resource tracker knows of (a killed
    worker's) is struck from its list, so it does not warn of a leak at exit.

    Semaphores only when asked: under spawn and forkserver every queue and lock of a pool is a
    ``sem.mp-*`` file in /dev/shm with nothing in its name that says whose it is. One of this user's
    counts as an orphan when no process this user can see maps it (``/proc/*/maps``), and a live
    pool in a process /proc does not show (another container sharing this /dev/shm, where everyone
    is root) looks the same: its next worker would fail to open the semaphore. Pass
    ``semaphores=True`` only where no such process can be, as after a crash on your own machine.
    A file this user may not remove (another user's, in a shared sticky /dev/shm) is skipped, and
    one ``RuntimeWarning`` names every file skipped so.
    """
    removed, not_allowed = [], []
    here = pid_namespace()
    for name in segment_names():
        pid, namespace = creator_pid(name), creator_namespace(name)
        if not everything and namespace is not None and namespace != here:
            continue  # another pid namespace's: its creator cannot be looked up from here
        if not everything and pid is not None and process_alive(pid):
            continue
        try:
            if unlink(name):
                removed.append(name)
                forget_in_resource_tracker(name)
        except PermissionError:
            not_allowed.append(name)
    for name in orphaned_semaphores() if semaphores else []:
        try:
            (SHM_DIR / name).unlink()
            removed.append(name)
        except FileNotFoundError:
            pass
        except PermissionError:
            not_allowed.append(name)
    if not_allowed:
        warnings.warn(f"sweep() may not remove {len(not_allowed)} file(s) of another user, left in "
                      f"place: {', '.join(not_allowed)}", RuntimeWarning, stacklevel=2)
    return removed


def orphaned_semaphores() -> list[str]:
    """Names of this user's ``multiprocessing`` semaphores in /dev/shm that no process maps (empty
    where /proc cannot tell)."""
    candidates = {}
    for path in SHM_DIR.glob(MP_SEMAPHORE_PREFIX + "*"):
        try:
            found = path.stat()
        except FileNotFoundError:
            continue
        if found.st_uid == os.geteuid():
            candidates[path.name] = (os.major(found.st_dev), os.minor(found.st_dev), found.st_ino)
    if not candidates:
        return []
    mapped = _files_mapped_by_readable_processes()
    if mapped is None:
        return []
    return sorted(name for name, file_id in candidates.items() if file_id not in mapped)


def _files_mapped_by_readable_processes() -> set[tuple[int, int, int]] | None:
    """(device major, minor, inode) of every file mapped now by a process whose ``/proc/<pid>/maps``
    this user may read; None where there is no /proc. Inodes, not paths: glibc maps a new
    semaphore under a temporary name, then renames it, so its path in the maps is not its name."""
    try:
        pids = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except FileNotFoundError:
        return None
    mapped: set[tuple[int, int, int]] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as maps:
                for line in maps:
                    fields = line.split(None, 5)  # address, perms, offset, dev, inode, path
                    if len(fields) == 6 and fields[4] != "0":
                        major, minor = fields[3].split(":")
                        mapped.add((int(major, 16), int(minor, 16), int(fields[4])))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # it ended meanwhile, or it is not this user's to read
    return mapped
