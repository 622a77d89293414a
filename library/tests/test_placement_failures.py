"""Where the stdlib pickles and succeeds, so do we (issue 32, item 2): any failure to make a new
segment, not only a full /dev/shm, makes the array cross pickled (said once), with the executor and
with the reductions on a Queue, a Pipe and a Pool, under fork, spawn and forkserver. Each case runs
in a private mount namespace whose /dev/shm is made to fail after the pools started (their
semaphores made, as the stdlib's pool needs them): a read-only bind mount over it (EROFS), out of inodes
(ENOSPC on a tmpfs with a handful of inodes), or this process out of file descriptors (EMFILE; the
workers' results, which this process must attach, are small there: attaching still raises).
Real processes, real mounts and limits; needs root for unshare."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from optional_torch import TORCH

from sharedarrays.reducers import active_way

PROGRAM = """
import errno, faulthandler, logging, multiprocessing as mp, os, resource, subprocess, sys, threading
import numpy as np
faulthandler.dump_traceback_later(120, exit=True)  # a hang prints where it is and fails the test
logging.basicConfig(format="notice: %(message)s")
from sharedarrays import SharedMemoryExecutor, sharing_arrays

method, failure, ways = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
context = mp.get_context(method)
array = np.arange(1 << 18, dtype=np.float64)  # 2 MiB: over every threshold
kept_open = []


def fail_now():
    if failure == "read-only":
        # a read-only bind mount over it: the pools' semaphores, open through the mount below, still work
        subprocess.run(["mount", "--bind", "/dev/shm", "/dev/shm"], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", "/dev/shm"], check=True)
    elif failure == "no inodes":
        for n in range(10_000):
            try:
                kept_open.append(open(f"/dev/shm/filler-{n}", "w"))
                kept_open[-1].close()
            except OSError as error:
                assert error.errno == errno.ENOSPC, error
                break
    elif failure == "no file descriptors":
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
        try:
            while True:
                kept_open.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as error:
            assert error.errno == errno.EMFILE, error


# Out of descriptors, a warm pooled segment would still be lent, and counting its holders opens it
# (flock): not yet without a descriptor (issue 32, item 10), so that case keeps no warm segment.
idle_cap_bytes = 0 if failure == "no file descriptors" else None
with SharedMemoryExecutor(2, context, idle_cap_bytes=idle_cap_bytes) as executor:
    assert executor.submit(np.sum, np.ones(10)).result() == 10.0  # the pool runs
    pool = context.Pool(1)
    queue = context.Queue()
    reader, writer = context.Pipe(duplex=False)
    assert pool.apply(np.sum, (np.ones(3),)) == 3.0
    if failure == "no file descriptors":
        # one round that works first, so that every module a round imports is imported: an import
        # needs a file descriptor too, which this case leaves none of
        assert executor.submit(np.sum, array).result() == array.sum()
        for way in ways:
            with sharing_arrays(way):
                queue.put(array)
                assert np.array_equal(queue.get(timeout=60), array)
    fail_now()
    if failure == "no file descriptors":  # a result this process would have to attach: kept small
        assert executor.submit(np.sum, array).result() == array.sum()
    else:
        assert np.array_equal(executor.submit(np.negative, array).result(), -array)
    assert executor.pickled_fallbacks >= 1, executor.pickled_fallbacks
    for way in ways:
        with sharing_arrays(way):
            queue.put(array)
            assert np.array_equal(queue.get(timeout=60), array)
            received = []  # a pickled array is bigger than a pipe's buffer: read while it is sent
            receiver = threading.Thread(target=lambda: received.append(reader.recv()))
            receiver.start()
            writer.send(array)
            receiver.join(60)
            assert np.array_equal(received[0], array)
            assert pool.apply(np.sum, (array,)) == array.sum()
    if failure == "read-only":  # writable again, so the stdlib can unlink its semaphores as it ends
        subprocess.run(["umount", "/dev/shm"], check=True)
    pool.close()
    pool.join()
for fd in kept_open if failure == "no file descriptors" else []:
    os.close(fd)
print("survived", failure, method, flush=True)
"""

FAILURES = ["read-only", "no inodes", "no file descriptors"]


needs_root_and_unshare = pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                                            reason="needs root and unshare for a private /dev/shm")


@needs_root_and_unshare
@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("way", ["shared_memory", TORCH])
@pytest.mark.timeout(180)
def test_a_segment_that_cannot_be_made_crosses_pickled_as_with_the_stdlib(failure, method, way):
    if way == "torch" and failure == "no file descriptors":
        pytest.skip("out of descriptors, torch's own reduction of the storage (its file_descriptor "
                    "strategy) needs one to send it after the array is placed; that error is torch's "
                    "and is not turned into pickling")
    inodes = ",nr_inodes=400" if failure == "no inodes" else ""
    script = (f"mount -t tmpfs -o size=256m{inodes} tmpfs /dev/shm && "
              f'exec {sys.executable} -c "$0" "$@"')
    run = subprocess.run(["unshare", "--mount", "sh", "-c", script, textwrap.dedent(PROGRAM), method, failure,
                          way], capture_output=True, text=True, timeout=170)
    assert run.returncode == 0, run.stderr[-4000:]
    assert f"survived {failure} {method}" in run.stdout
    notices = [line for line in run.stderr.splitlines() if line.startswith("notice:")]
    assert notices, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-4000:]
    assert active_way() is None  # nothing switched on here
