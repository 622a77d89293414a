"""What every test of the library gets: a check that it left nothing behind, and a time limit.

Each test must clean up after itself, also when it fails: a segment left in /dev/shm, a POSIX
semaphore or a ``pymp-*`` folder (a process killed before its exit handlers ran) fails the test.

A hang fails the run instead of holding it: with pytest-timeout installed its ``timeout`` marker
and option apply as usual; without it (a venv with only the library, NumPy and pytest) this file
registers the marker and ends the run with every thread's stack after the test's limit (its
``timeout`` marker, else ``DEFAULT_LIMIT_SECONDS``), through the standard library's faulthandler.

Worker tasks live in modules of this folder (``array_workers`` and others). pytest puts this folder
on ``sys.path``, which spawn and forkserver children inherit; it is also put on ``PYTHONPATH`` here,
so that a program a test runs with ``python -c`` imports them too.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import sys
from pathlib import Path

import pytest
import shm_leftovers

HERE = Path(__file__).resolve().parent
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))

DEFAULT_LIMIT_SECONDS = 600  # the widest limit any test needs (a Pool under three start methods)
GRACE_SECONDS = 30  # past pytest-timeout's own limit, where it is installed and fires first


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.hasplugin("timeout"):
        config.addinivalue_line("markers", "timeout(seconds): this test's time limit")


@pytest.fixture(autouse=True)
def time_limit(request: pytest.FixtureRequest):
    marker = request.node.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker and marker.args else DEFAULT_LIMIT_SECONDS
    faulthandler.dump_traceback_later(limit + GRACE_SECONDS, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(autouse=True)
def nothing_left_behind_by_this_test():
    before = shm_leftovers.snapshot()
    before_multiprocessing = shm_leftovers.multiprocessing_temp_dirs()
    yield
    gc.collect(1)  # the young generations: most of what the test made and dropped in reference cycles
    left = shm_leftovers.new_since(before)
    if left:  # an older object in a cycle (a closed Pool) may still hold a semaphore: a full
        gc.collect()  # collection, which takes about 0.2 s with everything imported, so only then
        left = shm_leftovers.new_since(before)
    # multiprocessing's pymp-* folders: a process this test started and that ended without its
    # exit handlers (SIGKILL) leaves one; a test that kills one on purpose removes it
    left += sorted(shm_leftovers.multiprocessing_temp_dirs() - before_multiprocessing)
    assert not left, f"this test left these behind: {left}"
