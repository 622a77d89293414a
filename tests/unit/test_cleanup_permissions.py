"""sweep() and remove_ours() run as another user: entries they may not remove are skipped and named.

Real files and a real user: the test (as root) creates entries owned by root and by ``nobody``, then
a forked child drops to ``nobody`` and cleans up. /dev/shm and the temp folder are sticky (mode
1777), so ``nobody`` may remove its own entries there but not root's.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.measure import leftovers
from sharedarrays.room import SEGMENT_PREFIX, SHM_DIR
from sharedarrays.shm import sweep

NOBODY = 65534  # uid and gid of the unprivileged user


def _sticky(folder: Path) -> bool:
    return bool(os.stat(folder).st_mode & stat.S_ISVTX)


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: to own entries as root and to become nobody"),
    pytest.mark.skipif(not SHM_DIR.is_dir() or not _sticky(SHM_DIR), reason="needs a sticky /dev/shm"),
]


def _dead_pid() -> int:
    """The pid of a child that has exited and been reaped (so no process runs under it)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    return int(child.stdout)


def _make_file(path: Path, owner: int) -> Path:
    """An empty file at ``path``, mode 0600, owned by ``owner`` (uid and gid)."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        os.fchown(fd, owner, owner)
    finally:
        os.close(fd)
    return path


def _clean_up_as_nobody(clean_up: Callable[[], list], temp_folder: str, answer) -> None:
    """Forked child: become nobody, run ``clean_up`` and send back what it removed and warned."""
    tempfile.tempdir = temp_folder  # the temp folder and home leftovers looks in: this test's own
    os.environ["HOME"] = temp_folder
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            removed, error = [str(entry) for entry in clean_up()], None
        except BaseException as raised:  # reported to the test, which fails on it
            removed, error = [], repr(raised)
    answer.send((removed, [(w.category.__name__, str(w.message)) for w in caught], error))
    answer.close()


def _run_as_nobody(clean_up: Callable[[], list], temp_folder: Path) -> tuple[list[str], list, str | None]:
    """Run ``clean_up`` in a forked child that became nobody: (removed, warnings, error or None)."""
    fork = mp.get_context("fork")
    receive, send = fork.Pipe(duplex=False)
    child = fork.Process(target=_clean_up_as_nobody, args=(clean_up, str(temp_folder), send))
    child.start()
    send.close()
    try:
        return receive.recv()
    finally:
        receive.close()
        child.join(30)
        assert child.exitcode == 0


@pytest.fixture
def sticky_temp_folder():
    """A private folder, sticky like /tmp (mode 1777), for this test's temporary entries."""
    folder = Path(tempfile.mkdtemp(prefix="permissions-"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.fixture
def segments_of_a_dead_owner():
    """Two segment files of a dead creator in /dev/shm: root's (first in name order), nobody's."""
    pid, token = _dead_pid(), secrets.token_hex(4)
    roots = SHM_DIR / f"{SEGMENT_PREFIX}{pid}_a{token}"
    nobodys = SHM_DIR / f"{SEGMENT_PREFIX}{pid}_b{token}"
    try:
        yield _make_file(roots, 0), _make_file(nobodys, NOBODY)
    finally:
        roots.unlink(missing_ok=True)
        nobodys.unlink(missing_ok=True)


def test_sweep_skips_and_names_a_segment_it_may_not_remove(segments_of_a_dead_owner, sticky_temp_folder):
    roots, nobodys = segments_of_a_dead_owner
    removed, caught, error = _run_as_nobody(sweep, sticky_temp_folder)
    assert error is None
    assert nobodys.name in removed and not nobodys.exists()
    assert roots.name not in removed and roots.exists()
    assert len(caught) == 1 and caught[0][0] == "RuntimeWarning"
    assert "may not remove" in caught[0][1] and roots.name in caught[0][1]


def test_remove_ours_skips_and_names_entries_it_may_not_remove(segments_of_a_dead_owner, sticky_temp_folder):
    roots, nobodys = segments_of_a_dead_owner
    roots_temp = _make_file(sticky_temp_folder / f"{leftovers.TEMP_PREFIX}a-root", 0)
    nobodys_temp = sticky_temp_folder / f"{leftovers.TEMP_PREFIX}b-nobody"
    nobodys_temp.mkdir()
    _make_file(nobodys_temp / "inside", NOBODY)
    os.chown(nobodys_temp, NOBODY, NOBODY)
    removed, caught, error = _run_as_nobody(leftovers.remove_ours, sticky_temp_folder)
    assert error is None
    assert {str(nobodys), str(nobodys_temp)} <= set(removed)
    assert not nobodys.exists() and not nobodys_temp.exists()
    assert roots.exists() and roots_temp.exists()
    assert len(caught) == 1 and caught[0][0] == "RuntimeWarning"
    assert str(roots) in caught[0][1] and str(roots_temp) in caught[0][1]
