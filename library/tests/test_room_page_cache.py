"""The room check counts page cache the kernel would reclaim as available, as the kernel's own
``MemAvailable`` does: in a memory cgroup (Binder, Docker) that has just read a file nearly its
limit's size, a shared array that fits once the cache is dropped is created, not refused. A real
cgroup (v1 or v2, root only), a real file on disk, a real segment; the v2 format of ``memory.stat``
also as text, since a machine whose memory controller is v1 cannot make a v2 memory cgroup."""

import os
import subprocess
import sys
import textwrap

import pytest
from memory_cgroup import memory_cgroup

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
            (cgroup / "cgroup.procs").write_text(str(child.pid))
            stdout, stderr = child.communicate("go\n", timeout=100)
    finally:
        made.__exit__(None, None, None)
    print(stdout)
    assert child.returncode == 0, stderr[-3000:]
    assert "created" in stdout


# memory.stat as the kernel writes it (the keys and their order from the kernel's cgroup documentation;
# values in bytes): v2 has one set of counters, v1 its own and the hierarchical total_ ones.
V2_MEMORY_STAT = """anon 1048576
file 838860800
kernel 4194304
shmem 2097152
active_anon 524288
inactive_anon 2621440
active_file 419430400
inactive_file 417333248
unevictable 0
"""
V1_MEMORY_STAT = """cache 8192
rss 4096
shmem 0
inactive_file 4096
active_file 4096
total_cache 838860800
total_shmem 2097152
total_inactive_file 417333248
total_active_file 419430400
"""


@pytest.mark.parametrize("text, reclaimable", [(V2_MEMORY_STAT, 836763648), (V1_MEMORY_STAT, 836763648),
                                               ("anon 4096\nshmem 4096\n", None)])
def test_reclaimable_file_pages_are_read_from_v2_and_v1_memory_stat(text, reclaimable):
    """cgroup v2 is simulated here (the test machine's memory controller is v1): its memory.stat
    format, read by the same function the real v1 cgroup above exercises."""
    from sharedarrays.room import reclaimable_file_bytes_in

    assert reclaimable_file_bytes_in(text) == reclaimable


def test_a_sysconf_name_the_platform_does_not_know_is_no_value_not_an_error():
    """macOS has no SC_AVPHYS_PAGES: os.sysconf raises ValueError for it; the room check must go on."""
    from sharedarrays import room

    assert room._sysconf("SC_NO_SUCH_NAME_ON_ANY_PLATFORM") is None
    assert room._sysconf("SC_PAGE_SIZE") > 0
