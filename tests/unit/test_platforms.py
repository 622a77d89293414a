"""On a platform without what the library needs (macOS: no os.posix_fallocate; Windows: no POSIX
shared memory at all), it imports, then fails at the first use with an error that names what is
missing, and leaves no segment behind. Each platform is simulated in a fresh interpreter by taking
the missing piece away: ``os.posix_fallocate`` before the library is imported; CPython's
``_posixshmem`` from the library's one module that uses it (taking it out of ``sys.modules`` would
also break the stdlib's resource tracker, which imports it on every POSIX system but not on
Windows)."""

import subprocess
import sys
import textwrap

import pytest

from helpers.shared.room import SEGMENT_PREFIX, SHM_DIR

PROGRAM = """
import os, sys
{take_away}
import helpers.shared as shared
from helpers.shared import SharedMemoryExecutor, SharedNDArray, sweep  # imports work
{after_import}
sweep()
try:
    SharedNDArray.create(1000)
except OSError as error:
    print("refused:", error)
else:
    print("created a segment")
"""

PLATFORMS = {
    "no posix_fallocate (macOS)": ("del os.posix_fallocate", "", "os.posix_fallocate"),
    "no POSIX shared memory (Windows)": (
        "", "import helpers.shared._segments as core; core._posixshmem = None", "POSIX shared memory"),
}


def _ours() -> set[str]:
    return {p.name for p in SHM_DIR.iterdir() if p.name.startswith(SEGMENT_PREFIX)}


@pytest.mark.parametrize("platform", list(PLATFORMS))
def test_a_missing_piece_is_named_at_first_use_and_nothing_is_left(platform):
    take_away, after_import, named = PLATFORMS[platform]
    before = _ours()
    program = textwrap.dedent(PROGRAM.format(take_away=take_away, after_import=after_import))
    run = subprocess.run([sys.executable, "-c", program],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("refused:"), run.stdout
    assert named in run.stdout and "tested on Linux only" in run.stdout
    assert "AttributeError" not in run.stdout + run.stderr
    assert _ours() == before
