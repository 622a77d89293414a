"""Find and remove what our code may leave behind in /dev/shm and the temp folder.

Segments and temporary files the helpers make carry a prefix, so a check can tell ours from
anyone else's (the segment prefix and folder are the library's: ``sharedarrays.room``). The test
suite takes a ``snapshot()`` before it runs and fails if ``new_since(snapshot)`` is not empty
afterwards. This module and what it imports use the standard library only, so ``make clean`` can
run it without the virtual environment.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from sharedarrays.room import SEGMENT_PREFIX, SHM_DIR

# Names of temporary files and folders the helpers create start with this.
TEMP_PREFIX = "sal-"


def temp_dir() -> Path:
    """The temp folder Python uses here (``$TMPDIR`` or /tmp)."""
    return Path(tempfile.gettempdir())


def temp_dirs() -> list[Path]:
    """Every folder our temporary entries may be in: the temp folder, and the folders
    ``helpers.lessons.memmap.disk_parent`` falls back to when the temp folder is in memory."""
    found: list[Path] = []
    for folder in (temp_dir(), Path("/var/tmp"), Path.home()):
        if folder.is_dir() and folder not in found:
            found.append(folder)
    return found


def _ours_in_temp_dirs() -> set[str]:
    return {str(folder / name) for folder in temp_dirs()
            for name in _entries(folder) if name.startswith(TEMP_PREFIX)}


def _entries(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def snapshot() -> dict[str, set[str]]:
    """Names now in /dev/shm (all of them) and paths of ours in the temp folders."""
    return {"shm": _entries(SHM_DIR), "temp": _ours_in_temp_dirs()}


def new_since(before: dict[str, set[str]]) -> list[str]:
    """Paths present now that were not in ``before``: segments or temp files left behind."""
    now = snapshot()
    left = [str(SHM_DIR / name) for name in sorted(now["shm"] - before["shm"])]
    left += sorted(now["temp"] - before["temp"])
    return left


def ours() -> list[Path]:
    """Every segment and temp entry whose name carries our prefix, whoever is using it."""
    found = [SHM_DIR / name for name in sorted(_entries(SHM_DIR)) if name.startswith(SEGMENT_PREFIX)]
    found += [Path(path) for path in sorted(_ours_in_temp_dirs())]
    return found


def remove_ours() -> list[Path]:
    """Delete every segment and temp entry of ours (for ``make clean``); return what was removed.

    An entry this user may not remove (another user's, in a shared sticky /dev/shm or /tmp) is
    skipped, and one ``RuntimeWarning`` names every entry skipped so.
    """
    removed, not_allowed = [], []
    for path in ours():
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
        except FileNotFoundError:
            continue
        except PermissionError:
            not_allowed.append(str(path))
    if not_allowed:
        warnings.warn(f"may not remove {len(not_allowed)} entr(y/ies) of another user, left in place: "
                      f"{', '.join(not_allowed)}", RuntimeWarning, stacklevel=2)
    return removed


# multiprocessing's own temp folders (``multiprocessing.util.get_temp_dir``): a process that starts a
# forkserver, a manager or a listener makes one for its socket and removes it in its exit handlers.
# A process killed with SIGKILL never runs them and leaves its folder behind.
MULTIPROCESSING_TEMP_PREFIX = "pymp-"


def multiprocessing_temp_dirs() -> set[str]:
    """Paths of the ``pymp-*`` folders now in the temp folder, whoever made them, except this
    process's own, which its exit handlers remove after any check could run."""
    own = multiprocessing.process.current_process()._config.get("tempdir")  # set by get_temp_dir
    folder = temp_dir()
    return {str(folder / name) for name in _entries(folder)
            if name.startswith(MULTIPROCESSING_TEMP_PREFIX) and str(folder / name) != own}
