"""Lesson 08's correctness tour of ``SharedMemoryExecutor``: what comes back from the finished executor
(nested containers, a record array, an exception, a result that views its argument, a worker's writes),
what it does with an array bigger than ``/dev/shm``, when a private argument is copied
(``write_after_submit_seen``), and the race a done callback loses (``unpack_in_a_done_callback``) with
the way that avoids it (``submit_then_unpack``). Sizes are bytes, times seconds.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from helpers.lessons import workers
from helpers.lessons.demos import notices_of_sharedarrays
from helpers.lessons.shared_memory_executor import Batch
from helpers.measure import system
from helpers.measure.units import MiB
from sharedarrays.executor import SharedMemoryExecutor
from sharedarrays.shm import SharedNDArray, handle_of

ROW = np.dtype([("when", "datetime64[s]"), ("price", "float64"), ("ticker", "U8")])
PICKLE_AT_MOST_BYTES = 1024 * MiB  # the too-big array is only sent when pickling it is quick


def make_table(n_bytes: int) -> np.ndarray:
    """A record array of at least ``n_bytes``: a timestamp, a price and a fixed-width ticker per row."""
    n_rows = -(-n_bytes // ROW.itemsize)
    table = np.empty(n_rows, dtype=ROW)
    table["when"] = np.datetime64("2026-01-02T09:30:00") + np.random.default_rng(1).integers(
        0, 250 * 86_400, n_rows).astype("timedelta64[s]")
    table["price"] = 50 + 450 * np.random.default_rng(2).random(n_rows)
    tickers = np.array(["AAPL", "MSFT", "NVDA", "SPY"])
    table["ticker"] = tickers[np.random.default_rng(3).integers(0, len(tickers), n_rows)]
    return table


@dataclass(frozen=True)
class Tour:
    """What the executor gave back; each field says what was seen (True: as the stdlib would give it,
    or as sharing promises)."""

    raised: str  # "Type: message" of the task that raised
    lent_after_error: int  # bytes the pool still had lent after the failed task
    containers_kept: bool  # dict, Batch namedtuple, list and tuple came back as those types, equal
    big_ones_shared: bool  # the big arrays of the result view pooled segments
    small_ones_pickled: bool  # the 100 labels were pickled
    table_same: bool  # the record array came back with the same dtype and bytes
    result_views_argument: bool  # a slice returned by the worker views the caller's SharedNDArray
    new_result_right: bool  # x + 1 computed by the worker equals ours
    writes_to_shared_seen: bool  # a worker's writes into a SharedNDArray reach the caller
    writes_to_private_seen: bool  # a worker's writes into a private array reach the caller (they must not)

    def lines(self) -> list[str]:
        """What the tour saw, one readable line per thing it checked."""
        def yes(flag: bool) -> str:
            return "yes" if flag else "no"

        return [
            'submit(fill_in_place, source, "not a number")   # raises in the worker',
            f"    the caller got: {self.raised}; bytes the segment pool still lent after it: "
            f"{self.lent_after_error}",
            'submit(echo, {"batch": Batch(images=source, labels=np.arange(100)),'
            ' "extras": [source[:source.size // 2], ("tag", 3)]})',
            f"    dict, namedtuple, list and tuple came back as such: {yes(self.containers_kept)}; the big "
            f"arrays in shared memory: {yes(self.big_ones_shared)}; the labels (under 1 MiB) pickled: "
            f"{yes(self.small_ones_pickled)}",
            "submit(echo, table)   # a record array (timestamp, price, ticker per row)",
            f"    came back with its dtype and bytes: {yes(self.table_same)}",
            "submit(plus_one_and_slice, shared.array)   # shared = SharedNDArray.copy_of(source)",
            f"    x + 1 equals ours: {yes(self.new_result_right)}; the slice returned views our "
            f"SharedNDArray: {yes(self.result_views_argument)}",
            "submit(fill_in_place, shared.array, 0.5)",
            f"    our SharedNDArray changed: {yes(self.writes_to_shared_seen)}",
            "submit(fill_in_place, private, 0.5)   # private = source.copy()",
            f"    our private array changed: {yes(self.writes_to_private_seen)}",
        ]


def correctness_tour(context, n_workers: int, source: np.ndarray, small_bytes: int,
                     idle_cap_bytes: int) -> Tour:
    """Send ``source`` through a new executor in every form the lesson tours, and record what came back."""
    table = make_table(small_bytes)
    nested = {"batch": Batch(images=source, labels=np.arange(100)),
              "extras": [source[: source.size // 2], ("tag", 3)]}
    with SharedMemoryExecutor(n_workers, context, idle_cap_bytes=idle_cap_bytes) as executor:
        try:
            executor.submit(workers.fill_in_place, source, "not a number").result()
            raised = "nothing"
        except ValueError as error:
            raised = f"{type(error).__name__}: {error}"
        executor.segment_pool.collect()
        lent_after_error = executor.segment_pool.lent_bytes
        back = executor.submit(workers.echo, nested).result()
        containers_kept = (type(back["batch"]) is Batch and back["extras"][1] == ("tag", 3)
                           and np.array_equal(back["batch"].images, source)
                           and np.array_equal(back["extras"][0], source[: source.size // 2])
                           and np.array_equal(back["batch"].labels, np.arange(100)))
        big_ones_shared = handle_of(back["batch"].images) is not None  # while the executor's pool lives
        small_ones_pickled = handle_of(back["batch"].labels) is None
        table_back = executor.submit(workers.echo, table).result()
        table_same = table_back.dtype == ROW and table_back.tobytes() == table.tobytes()
        private = source.copy()
        executor.submit(workers.fill_in_place, private, 0.5).result()
        with SharedNDArray.copy_of(source) as shared:
            plus_one, second_half = executor.submit(workers.plus_one_and_slice, shared.array).result()
            views = bool(np.shares_memory(second_half, shared.array))
            new_right = bool(np.array_equal(plus_one, shared.array + 1))
            executor.submit(workers.fill_in_place, shared.array, 0.5).result()
            shared_written = bool((shared.array == 0.5).all() and (second_half == 0.5).all())
            del second_half, plus_one
        del back, table_back
    return Tour(raised, lent_after_error, containers_kept, big_ones_shared, small_ones_pickled, table_same,
                views, new_right, shared_written, bool((private == 0.5).any()))


@dataclass(frozen=True)
class TooBig:
    """An array claiming more than the free ``/dev/shm``: what happened ('pickled: N bytes arrived',
    'MemoryError: ...' or 'not run'), the executor's pickled fallbacks and notices, and whether it
    still summed ``source`` right afterwards; ``shm_free`` and ``available``, read before the call:
    /dev/shm's free bytes (None: no /dev/shm) and the memory available (``sys.maxsize``: not told)."""

    claimed_bytes: int
    outcome: str
    fallbacks: int
    notices: list[str]
    still_works: bool
    shm_free: int | None
    available: int


def submit_too_big(context, source: np.ndarray, idle_cap_bytes: int) -> TooBig:
    """Submit a broadcast view (one number, so it uses no memory here) larger than the free ``/dev/shm``:
    by a MiB where pickling that is quick (the executor pickles it), else a MiB larger than the memory
    available too (pickling cannot fit: MemoryError); then check that the executor still works. Not
    run where the machine does not say how much memory is available."""
    shm_free, available = system.shm_free(), system.available_memory()
    too_big_bytes = (shm_free or 0) + MiB
    if too_big_bytes > PICKLE_AT_MOST_BYTES:
        too_big_bytes = max(too_big_bytes, available + MiB)
    too_big = np.broadcast_to(np.random.default_rng(5).random(1), (too_big_bytes // 8,))
    outcome, fallbacks, said = "not run", 0, []
    with SharedMemoryExecutor(1, context, idle_cap_bytes=idle_cap_bytes) as executor:
        if too_big_bytes <= PICKLE_AT_MOST_BYTES or available < sys.maxsize:
            with notices_of_sharedarrays() as said:
                try:
                    arrived = executor.submit(workers.array_nbytes, too_big).result()
                    outcome = f"pickled: {arrived} bytes arrived"
                except MemoryError as error:  # keep its text: the exception holds the pool's queue
                    outcome = f"{type(error).__name__}: {error}"
            fallbacks = executor.pickled_fallbacks
        still_works = bool(np.isclose(executor.submit(workers.sum_array, source).result(), source.sum()))
    return TooBig(too_big.nbytes, outcome, fallbacks, list(said), still_works, shm_free, available)


def write_after_submit_seen(executor_class, context, n_workers: int, array: np.ndarray,
                            busy_seconds: float = 0.3, **executor_kwargs) -> bool:
    """Submit a sum of a private copy of ``array`` behind ``2 * n_workers + 2`` sleeping tasks (more
    than the workers and the pool's call queue take), so that it is not sent yet; then double the
    copy. True when the task summed the doubled copy: the argument was copied (pickled, or into a
    segment) when the task was sent, not when ``submit`` returned."""
    private = np.array(array, copy=True)
    with executor_class(n_workers, mp_context=context, **executor_kwargs) as pool:
        pool.submit(time.sleep, 0).result()  # a worker has started
        ahead = [pool.submit(time.sleep, busy_seconds) for _ in range(2 * n_workers + 2)]
        future = pool.submit(workers.sum_array, private)
        private *= 2  # written after submit returned
        seen = bool(np.isclose(future.result(), private.sum()))
        for sleeper in ahead:
            sleeper.result()
    return seen


def submit_then_unpack(pool, fn, *args, unpack: Callable):
    """Run ``fn(*args)`` in ``pool``; return a future of our own, set to ``unpack(result)`` by a done
    callback on the pool's future: no thread waiting on ours can see the result before it is unpacked."""
    ours = Future()

    def settle(done: Future) -> None:
        try:
            ours.set_result(unpack(done.result()))
        except BaseException as error:  # the task's error or unpack's: ours is never left pending
            ours.set_exception(error)

    pool.submit(fn, *args).add_done_callback(settle)
    return ours


@dataclass(frozen=True)
class CallbackRace:
    """Type names of what a thread already waiting in ``result()`` got (``waiter_got``), of what
    ``result()`` gave once the done callback had run (``after_callback``), and of what a thread
    waiting on ``submit_then_unpack``'s future got while its unpacking was slowed by
    ``unpack_delay`` seconds (``own_future_waiter_got``)."""

    waiter_got: str
    after_callback: str
    own_future_waiter_got: str
    unpack_delay: float


def unpack_in_a_done_callback(context, array: np.ndarray, unpack_delay: float = 0.2) -> CallbackRace:
    """The way npshmex ruled out ("someone can get at the result before the callback runs"): a stdlib
    pool's worker returns the handle of ``array``'s segment, and a done callback swaps the stdlib
    future's result for the array. ``set_result`` wakes waiting threads before it runs callbacks,
    and nothing makes them wait for those: here the callback waits (up to 10 s) until the waiting
    thread has its value, so that the order it can lose in happens on every run. Then the same
    call through ``submit_then_unpack``, its unpacking started once a thread waits and slowed by
    ``unpack_delay``: the waiting thread gets the array."""
    waiter_got, waiter_done, unpacked = [], threading.Event(), threading.Event()
    with SharedNDArray.copy_of(array) as shared, ProcessPoolExecutor(1, mp_context=context) as pool:
        future = pool.submit(workers.echo, shared.handle)  # the worker answers with the handle

        def wait_for_result() -> None:
            try:
                waiter_got.append(type(future.result()).__name__)
            finally:
                waiter_done.set()

        def unpack(done: Future) -> None:
            waiter_done.wait(10)
            done._result = shared.array  # the handle swapped for the array (a private attribute)
            unpacked.set()

        waiter = threading.Thread(target=wait_for_result)
        waiter.start()  # before the callback: in whichever order the worker answers, it waits first
        future.add_done_callback(unpack)
        waiter.join()
        unpacked.wait(10)
        after_callback = type(future.result()).__name__

        own_got, waiting = [], threading.Event()

        def slow_unpack(handle) -> np.ndarray:
            waiting.wait(10)  # a thread is about to wait on our future
            time.sleep(unpack_delay)
            return shared.array

        ours = submit_then_unpack(pool, workers.echo, shared.handle, unpack=slow_unpack)

        def wait_on_ours() -> None:
            waiting.set()
            own_got.append(type(ours.result(timeout=30)).__name__)

        own_waiter = threading.Thread(target=wait_on_ours)
        own_waiter.start()
        own_waiter.join()
    return CallbackRace(waiter_got[0], after_callback, own_got[0] if own_got else "nothing", unpack_delay)


def source_of_share() -> str:
    """The source of ``share``, the function ``SharedMemoryExecutor._pack`` defines inside itself and
    hands to ``transit.pack``: what becomes of each big array (read from the library, not copied)."""
    lines = inspect.getsource(SharedMemoryExecutor._pack).splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def share("))
    end = next(i for i, line in enumerate(lines) if line.lstrip().startswith("packed = pack("))
    return textwrap.dedent("\n".join(lines[start:end]).rstrip())

