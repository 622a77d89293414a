"""On a platform without what the library needs (Windows: no POSIX shared memory at all; a Linux
container without /dev/shm), it imports, then fails at the first use with an error that names what
is missing, and leaves no segment behind. Without ``os.posix_fallocate`` (macOS) it works as
``multiprocessing.shared_memory`` does there: segments sized by ``ftruncate``, not reserved (said
once). Without /proc (macOS, FreeBSD, hardened containers) it works. Each platform is simulated in a
fresh interpreter by taking the missing piece away: ``os.posix_fallocate`` before the library is
imported; CPython's ``_posixshmem`` from the library's one module that uses it (taking it out of
``sys.modules`` would also break the stdlib's resource tracker, which imports it on every POSIX
system but not on Windows)."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from sharedarrays.room import SEGMENT_PREFIX, SHM_DIR

PROGRAM = """
import os, sys
{take_away}
import sharedarrays as shared
from sharedarrays import SharedMemoryExecutor, SharedNDArray, sweep  # imports work
{after_import}
sweep()
try:
    SharedNDArray.create(1000)
except OSError as error:
    print("refused:", error)
else:
    print("created a segment")
"""

# The standard library's own modules that import fcntl on POSIX (and not on Windows) are imported
# first; then fcntl is taken away, so that the library's own import of it fails as on Windows.
STDLIB_FIRST = "import concurrent.futures.process, multiprocessing.connection, subprocess"

PLATFORMS = {
    # Windows: no fcntl and no os.register_at_fork, taken away before the import (the library must
    # import without them); no POSIX shared memory, taken from the library's module after it
    "no POSIX shared memory, fcntl or fork hooks (Windows)": (
        f"{STDLIB_FIRST}; sys.modules['fcntl'] = None; del os.register_at_fork",
        "import sharedarrays._names as names; names._posixshmem = None",
        "POSIX shared memory"),
    "no fcntl": (f"{STDLIB_FIRST}; sys.modules['fcntl'] = None", "", "file locks (fcntl)"),
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


NO_FALLOCATE_PROGRAM = """
import logging, multiprocessing as mp, os, sys
del os.posix_fallocate  # macOS has none
logging.basicConfig(format="notice: %(message)s")
import numpy as np
from sharedarrays import SharedMemoryExecutor, SharedNDArray, attach, handle_of
array = np.arange(1 << 18, dtype=np.float64)
with SharedNDArray.copy_of(array) as shared, SharedNDArray.create(1000) as second:
    assert np.array_equal(shared.array, array) and not second.array.any()
    assert os.fstat(os.open("/dev/shm/" + shared.name, os.O_RDONLY)).st_size == array.nbytes
    with attach(handle_of(shared.array)) as view:
        assert np.array_equal(view, array)
    with SharedMemoryExecutor(2, mp.get_context(sys.argv[1])) as executor:
        assert executor.submit(np.sum, shared.array).result() == array.sum()
        assert np.array_equal(executor.submit(np.negative, array).result(), -array)
print("worked without posix_fallocate")
"""


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
@pytest.mark.timeout(120)
def test_without_posix_fallocate_segments_are_sized_as_the_stdlib_does_and_it_says_so_once(method):
    before = _ours()
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(NO_FALLOCATE_PROGRAM), method],
                         capture_output=True, text=True, timeout=100)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "worked without posix_fallocate" in run.stdout
    notices = [line for line in run.stderr.splitlines() if "no os.posix_fallocate" in line]
    assert len(notices) == 1 and "ftruncate" in notices[0], run.stderr[-3000:]
    assert _ours() == before


# Without /proc (macOS, FreeBSD, hardened containers): liveness comes from the kernel (kill(pid, 0)),
# so the executor's watchdogs do not see every worker as dead and sweep() leaves live segments alone.
NO_PROC_PROGRAM = """
import multiprocessing as mp, os, subprocess, sys
import numpy as np
from sharedarrays import SharedMemoryExecutor, SharedNDArray, sweep
from sharedarrays.room import available_memory
from sharedarrays.shm import process_alive

assert not os.path.exists("/proc/self"), "/proc is still there"
assert process_alive(os.getpid())
ended = subprocess.Popen([sys.executable, "-c", "pass"])
ended.wait()
assert not process_alive(ended.pid)
assert available_memory() > 0
array = np.random.default_rng(0).random(1 << 18)
with SharedNDArray.copy_of(array) as shared:
    assert shared.name not in sweep() and os.path.exists("/dev/shm/" + shared.name)
    with SharedMemoryExecutor(2, mp.get_context(sys.argv[1])) as executor:
        assert executor.submit(np.sum, shared.array).result() == array.sum()
        assert np.array_equal(executor.submit(np.negative, array).result(), -array)
        assert list(executor.map(np.sum, [array] * 3)) == [array.sum()] * 3
print("worked without /proc")
"""

needs_root_and_unshare = pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                                            reason="needs root and unshare for a private mount namespace")


@needs_root_and_unshare
@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
@pytest.mark.timeout(120)
def test_without_proc_the_executor_works_and_sweep_keeps_a_live_segment(method):
    before = _ours()
    script = f'mount -t tmpfs -o size=1m tmpfs /proc && exec {sys.executable} -c "$0" "$@"'
    run = subprocess.run(["unshare", "--mount", "sh", "-c", script, textwrap.dedent(NO_PROC_PROGRAM), method],
                         capture_output=True, text=True, timeout=100)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "worked without /proc" in run.stdout
    assert "BrokenProcessPool" not in run.stderr
    assert _ours() == before


NO_DEV_SHM_PROGRAM = PROGRAM.format(take_away="", after_import='assert not os.path.exists("/dev/shm")')


@needs_root_and_unshare
@pytest.mark.timeout(120)
def test_without_dev_shm_the_first_use_names_what_is_missing(tmp_path):
    """A /dev of its own (a tmpfs with only /dev/null bound in) hides /dev/shm from the program."""
    old_dev = tmp_path / "dev"
    old_dev.mkdir()
    script = (f"mount --bind /dev {old_dev} && mount -t tmpfs -o size=1m tmpfs /dev && touch /dev/null && "
              f'mount --bind {old_dev}/null /dev/null && exec {sys.executable} -c "$0"')
    run = subprocess.run(["unshare", "--mount", "sh", "-c", script, textwrap.dedent(NO_DEV_SHM_PROGRAM)],
                         capture_output=True, text=True, timeout=100)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("refused:"), run.stdout
    assert "a /dev/shm folder" in run.stdout and "tested on Linux only" in run.stdout
    assert "never created" not in run.stdout
