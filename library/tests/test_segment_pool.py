"""SegmentPool's byte counts are read under its lock: a thread that lends and files segments while
another reads ``idle_bytes`` and ``lent_bytes`` never makes the reader fail (a dict iterated while it
changes size raises RuntimeError), and the counts add up when the lending stops."""

from __future__ import annotations

import threading
import time

import pytest

from sharedarrays.segment_pool import SegmentPool

SEGMENT_BYTES = 1 << 16


@pytest.mark.timeout(60)
def test_byte_counts_can_be_read_while_another_thread_lends_and_gives_back():
    pool = SegmentPool(idle_cap_bytes=64 * SEGMENT_BYTES)
    stop = threading.Event()
    errors: list[BaseException] = []

    def lend_and_give_back() -> None:
        try:
            while not stop.is_set():
                leases = [pool.lease(SEGMENT_BYTES * (1 + n % 3)) for n in range(8)]
                for lease in leases:
                    pool.give_back(lease)
                pool.collect()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)

    lender = threading.Thread(target=lend_and_give_back)
    lender.start()
    reads = 0
    try:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert pool.idle_bytes >= 0 and pool.lent_bytes >= 0
            reads += 1
    finally:
        stop.set()
        lender.join(timeout=30)
        pool.collect()
        lent_at_the_end = pool.lent_bytes
        pool.close()
    assert not errors, errors
    assert reads > 100 and lent_at_the_end == 0
