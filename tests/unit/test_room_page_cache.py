"""The room check counts page cache the kernel would reclaim as available, as the kernel's own
``MemAvailable`` does: in a memory cgroup (Binder, Docker) that has just read a file nearly its
limit's size, a shared array that fits once the cache is dropped is created, not refused. A real
cgroup (v1 or v2, root only), a real file on disk, a real segment."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.browser.memory_cgroup import memory_cgroup

MiB = 1 << 20
LIMIT_BYTES = 512 * MiB
FILE_BYTES = 400 * MiB
ARRAY_BYTES = 200 * MiB

IN_THE_CGROUP = """
import os, sys
import numpy as np
from sharedarrays import SharedNDArray
from sharedarrays.room import available_memory, cgroup_memory_usage, cgroup_reclaimable_file_bytes

path, file_bytes, array_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.stdin.readline()  # moved into the cgroup by now
block = os.urandom(1 << 20)
with open(path, "wb") as data:
    for _ in range(file_bytes >> 20):
        data.write(block)
    data.flush()
    os.fsync(data.fileno())
with open(path, "rb") as data:
    while data.read(1 << 22):
        pass  # the file's pages now sit in the page cache, charged to this cgroup
print(f"charged {cgroup_memory_usage() >> 20} MiB, reclaimable file pages "
      f"{(cgroup_reclaimable_file_bytes() or 0) >> 20} MiB, available {available_memory() >> 20} MiB",
      flush=True)
with SharedNDArray.copy_of(np.ones(array_bytes // 8)) as shared:
    assert shared.array.sum() == array_bytes // 8
print("created", flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a memory cgroup needs root")
@pytest.mark.timeout(120)
def test_page_cache_in_a_memory_cgroup_counts_as_available(tmp_path):
    try:
        made = memory_cgroup(LIMIT_BYTES, name=f"sal-page-cache-{os.getpid()}")
        cgroup = made.__enter__()
    except (RuntimeError, OSError) as error:
        pytest.skip(f"no memory cgroup here: {error}")
    try:
        with subprocess.Popen([sys.executable, "-c", textwrap.dedent(IN_THE_CGROUP), str(tmp_path / "data"),
                               str(FILE_BYTES), str(ARRAY_BYTES)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) as child:
            cgroup.add(child.pid)
            stdout, stderr = child.communicate("go\n", timeout=100)
    finally:
        made.__exit__(None, None, None)
    print(stdout)
    assert child.returncode == 0, stderr[-3000:]
    assert "created" in stdout
