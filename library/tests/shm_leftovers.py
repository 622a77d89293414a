"""What a test may leave behind: entries in /dev/shm (segments and POSIX semaphores, ours or the
standard library's) and multiprocessing's ``pymp-*`` temp folders. Standard library only."""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from pathlib import Path

from sharedarrays.room import SHM_DIR

# multiprocessing's own temp folders (``multiprocessing.util.get_temp_dir``): a process that starts a
# forkserver, a manager or a listener makes one for its socket and removes it in its exit handlers.
# A process killed with SIGKILL never runs them and leaves its folder behind.
MULTIPROCESSING_TEMP_PREFIX = "pymp-"


def _entries(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def snapshot() -> dict[str, set[str]]:
    """Names now in /dev/shm, all of them."""
    return {"shm": _entries(SHM_DIR)}


def new_since(before: dict[str, set[str]]) -> list[str]:
    """Paths in /dev/shm now that were not in ``before``: what a test left behind."""
    return [str(SHM_DIR / name) for name in sorted(snapshot()["shm"] - before["shm"])]


def multiprocessing_temp_dirs() -> set[str]:
    """Paths of the ``pymp-*`` folders now in the temp folder, whoever made them, except this
    process's own, which its exit handlers remove after any check could run."""
    own = multiprocessing.process.current_process()._config.get("tempdir")  # set by get_temp_dir
    folder = Path(tempfile.gettempdir())
    return {str(folder / name) for name in _entries(folder)
            if name.startswith(MULTIPROCESSING_TEMP_PREFIX) and str(folder / name) != own}
