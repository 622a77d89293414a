"""Lesson 04's start-up explanation: the page tables of a process (VmPTE, which forking copies) grow
with the memory it maps, and the forkserver the lesson compares with is found among its children."""

import multiprocessing
import os
import sys

import numpy as np
import pytest

from helpers.lessons import fork_copy_on_write
from helpers.measure.units import MiB

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmPTE is Linux's")]


def test_page_tables_grow_with_the_memory_mapped_and_a_gone_process_reads_none():
    before = fork_copy_on_write.page_table_bytes(os.getpid())
    array = np.ones(64 * MiB // 8)  # 16,384 pages touched: 128 KiB of page-table entries at least
    after = fork_copy_on_write.page_table_bytes(os.getpid())
    assert before is not None and after - before >= 64 * 1024, (before, after)
    del array
    assert fork_copy_on_write.page_table_bytes(2**22 + 1) is None  # above any pid_max default


def test_the_forkserver_is_found_once_it_runs():
    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("no forkserver here")
    fork_copy_on_write.fan_out("forkserver", "idle", 1)
    server = fork_copy_on_write.forkserver_pid()
    assert server is not None and fork_copy_on_write.page_table_bytes(server) > 0
