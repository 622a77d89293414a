"""Every segment name the library makes fits macOS's limit (30 characters: PSHMNAMLEN, 31, counts the
leading "/"), at the longest pid and pid-namespace tag, and still carries its creator's pid and
namespace for sweep(); the names the executor, the reductions and the segment pool make in real
processes are checked too."""

from __future__ import annotations

import multiprocessing as mp
import re

import numpy as np
import pytest

from sharedarrays import SharedMemoryExecutor, SharedNDArray, handle_of, sharing_arrays
from sharedarrays._segments import creator_namespace, creator_pid, new_name
from sharedarrays.room import (
    NAME_LIMIT,
    NAMESPACE_TAG_CHARS,
    SEGMENT_PREFIX,
    base36,
    creator_prefix,
    pid_namespace,
)
from sharedarrays.segment_pool import SegmentPool

LONGEST_PID = 4_194_304  # Linux's largest pid_max (2**22); macOS's pids have at most 5 digits
SANITIZED = re.compile(r"\bsal_[0-9a-zA-Z_]+")  # how the course's stored outputs hide names


def test_a_new_name_has_30_characters_and_names_its_creator():
    names = {new_name() for _ in range(1000)}
    assert len(names) == 1000
    for name in names:
        assert len(name) == NAME_LIMIT == 30 and name.startswith(creator_prefix())
        assert SANITIZED.fullmatch(name)
        assert creator_pid(name) is not None and creator_namespace(name) == pid_namespace()


def test_the_longest_prefix_leaves_eight_random_characters():
    longest_tag = base36(2**32 - 1)  # a pid namespace's inode is a 32-bit number on Linux
    assert len(longest_tag) == NAMESPACE_TAG_CHARS
    longest_prefix = f"{SEGMENT_PREFIX}{LONGEST_PID}_ns{longest_tag}_"
    assert NAME_LIMIT - len(longest_prefix) == 8  # 36**8: about 41 bits within one process
    assert len(pid_namespace()) <= NAMESPACE_TAG_CHARS


@pytest.mark.parametrize("number", [0, 1, 35, 36, 2**32 - 1, 4_026_531_836])
def test_base36_round_trips(number):
    assert int(base36(number), 36) == number


@pytest.mark.timeout(120)
def test_the_names_made_in_real_processes_fit(tmp_path):
    array = np.arange(1 << 18, dtype=np.float64)  # 2 MiB: over every threshold
    names = []
    with SharedNDArray.copy_of(array) as shared:
        names.append(shared.name)
        with SharedMemoryExecutor(1, mp.get_context("spawn")) as executor:
            result = executor.submit(np.negative, array).result()  # a segment the worker made
            names.append(handle_of(result).name)
            del result
        with sharing_arrays("shared_memory"):
            reader, writer = mp.get_context("spawn").Pipe(duplex=False)
            writer.send(array)
            received = reader.recv()
            names.append(handle_of(received).name)
            del received
            reader.close()
            writer.close()
    with SegmentPool(idle_cap_bytes=1 << 20) as pool:
        lease = pool.lease(1 << 16)
        names.append(lease.name)
        pool.give_back(lease)
    assert len(names) == 4 and all(len(name) == NAME_LIMIT for name in names), names
