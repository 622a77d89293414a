"""Idle memory is given back: a pool keeps at most ``idle_cap_bytes`` of warm segments (1 GiB by
default, or half of what can be spared), each for at most ``idle_seconds`` of idleness. The
executor's pool unlinks them on time from a thread that runs only while the pool holds segments;
the reductions' pool starts no thread and unlinks them at its next call. Real segments, real
processes; waits are for a condition, with a deadline far beyond what a busy machine needs."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from sharedarrays import SharedMemoryExecutor, sharing_arrays
from sharedarrays.room import available_memory, shm_free
from sharedarrays.segment_pool import (
    DEFAULT_IDLE_CAP_BYTES,
    DEFAULT_IDLE_SECONDS,
    SegmentPool,
    default_idle_cap_bytes,
    mark_returned,
)

SEGMENT_BYTES = 1 << 20
SHORT_IDLE = 0.3  # seconds: short enough to wait for, long beside a lease and a give-back
DEADLINE = 30.0  # seconds to wait for what must happen soon after SHORT_IDLE


def _exists(name: str) -> bool:
    return os.path.exists(f"/dev/shm/{name}")


def _expiry_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "sharedarrays-idle-expiry"]


def _wait_until(condition: Callable[[], bool], seconds: float = DEADLINE) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_the_default_cap_is_at_most_1_gib_and_half_of_what_can_be_spared():
    room = available_memory()
    free = shm_free()
    spare = room if free is None else min(room, free)
    assert 0 < default_idle_cap_bytes() <= DEFAULT_IDLE_CAP_BYTES == 1 << 30
    assert default_idle_cap_bytes() <= spare  # half of it, measured a moment earlier
    assert SegmentPool().idle_seconds == DEFAULT_IDLE_SECONDS == 5.0


@pytest.mark.parametrize("idle_seconds", [-1, float("nan")])
def test_a_negative_or_nan_idle_time_is_refused(idle_seconds):
    with pytest.raises(ValueError, match="idle_seconds"):
        SegmentPool(idle_seconds=idle_seconds)


@pytest.mark.timeout(60)
def test_the_background_thread_unlinks_an_idle_segment_on_time_and_then_ends():
    with SegmentPool(idle_seconds=SHORT_IDLE, expire_in_background=True) as pool:
        assert not _expiry_threads()  # nothing held, no thread
        lease = pool.lease(SEGMENT_BYTES)
        name = lease.name
        assert len(_expiry_threads()) == 1
        pool.give_back(lease)
        del lease
        assert _wait_until(lambda: not _exists(name)), "an idle segment outlived idle_seconds"
        assert _wait_until(lambda: not _expiry_threads()), "the expiry thread outlived the segments"
        assert pool.names() == [] and pool.idle_bytes == 0


@pytest.mark.timeout(60)
def test_a_segment_used_again_within_idle_seconds_is_the_warm_one():
    with SegmentPool(idle_seconds=60.0, expire_in_background=True) as pool:
        first = pool.lease(SEGMENT_BYTES)
        name = first.name
        pool.give_back(first)
        second = pool.lease(SEGMENT_BYTES)
        assert second.name == name and (pool.created, pool.reused) == (1, 1)
        pool.give_back(second)


@pytest.mark.timeout(60)
def test_a_lent_segment_never_expires_and_one_a_borrower_returns_does():
    with SegmentPool(idle_seconds=SHORT_IDLE, expire_in_background=True) as pool:
        lease = pool.lease(SEGMENT_BYTES)
        time.sleep(4 * SHORT_IDLE)  # several looks of the thread: a lent segment stays
        assert _exists(lease.name) and pool.names() == [lease.name]
        mark_returned(lease.shared.array)  # what a borrower in another process writes
        name = lease.name
        del lease
        assert _wait_until(lambda: not _exists(name))


@pytest.mark.timeout(60)
def test_close_ends_the_thread_at_once_and_unlinks_everything():
    pool = SegmentPool(idle_seconds=3600.0, expire_in_background=True)
    lease = pool.lease(SEGMENT_BYTES)
    pool.give_back(lease)
    names = [lease.name]
    del lease
    pool.collect()
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 30.0  # not the hour the thread would sleep: it was woken
    assert not _expiry_threads() and not any(_exists(name) for name in names)


def test_without_background_expiry_no_thread_runs_and_the_next_call_unlinks():
    with SegmentPool(idle_seconds=SHORT_IDLE) as pool:
        lease = pool.lease(SEGMENT_BYTES)
        name = lease.name
        pool.give_back(lease)
        del lease
        time.sleep(2 * SHORT_IDLE)
        assert not _expiry_threads() and _exists(name)  # nobody looked yet
        pool.collect()
        assert not _exists(name) and pool.names() == []


def test_an_infinite_idle_time_keeps_segments_until_close_and_starts_no_thread():
    with SegmentPool(idle_seconds=math.inf, expire_in_background=True) as pool:
        lease = pool.lease(SEGMENT_BYTES)
        pool.give_back(lease)
        pool.collect()
        assert not _expiry_threads() and pool.idle_bytes == lease.capacity
        name = lease.name
    assert not _exists(name)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_an_executor_gives_its_shared_memory_back_when_calls_stop(method):
    array = np.arange(4 * SEGMENT_BYTES // 8, dtype=np.float64)
    with SharedMemoryExecutor(2, mp.get_context(method), idle_seconds=SHORT_IDLE) as executor:
        assert executor.submit(np.sum, array).result() == array.sum()
        assert not _expiry_threads() or executor.segment_pool.names()  # a thread only while it holds some
        names = executor.segment_pool.names()
        assert names, "the call's copy went through the pool"
        assert _wait_until(lambda: not any(_exists(name) for name in names))
        assert _wait_until(lambda: not _expiry_threads())
        assert executor.submit(np.sum, array).result() == array.sum()  # works on after, in a new segment
    assert not _expiry_threads()


@pytest.mark.timeout(120)
def test_the_reductions_start_no_thread_and_unlink_an_idle_segment_at_the_next_send():
    array = np.arange(4 * SEGMENT_BYTES // 8, dtype=np.float64)
    threads_before = threading.active_count()
    with sharing_arrays("shared_memory", idle_seconds=SHORT_IDLE):
        from sharedarrays.reducers import shared_memory_pool

        receiving, sending = mp.Pipe(duplex=False)
        sending.send(array)
        received = receiving.recv()
        assert np.array_equal(received, array)
        del received  # the segment goes back to the pool
        pool = shared_memory_pool()
        pool.collect()
        names = pool.names()
        assert names and threading.active_count() == threads_before
        time.sleep(2 * SHORT_IDLE)
        assert all(_exists(name) for name in names)  # no thread looked
        sending.send(array)  # the next send that leases unlinks the expired one first
        received = receiving.recv()
        assert not any(_exists(name) for name in names)
        del received
        receiving.close()
        sending.close()
    assert threading.active_count() == threads_before
