"""Time an ndarray's round trip through ``multiprocessing``'s pickler, each way of sending it, in seconds.

``how`` names the way (``HOWS``):

- ``"pickle"``: the stdlib default (the array's bytes inside the pickle);
- ``"torch"`` / ``"shared_memory"``: ``helpers.shared.reducers``' reductions, first share of a private
  array (one copy into shared memory per send);
- ``"torch_shared"`` / ``"shared_memory_shared"``: the same reductions with an array that already
  lives in shared memory (made once before timing, not timed): nothing is copied.

*Local*: ``ForkingPickler.dumps`` then ``loads`` in this process. *Remote*: ``Connection.send``
to a worker process that sends the array straight back (``helpers.lessons.workers.echo_arrays``, which
enables the same reduction), until this process has the array back; starting the worker (and its
torch import) is not timed. Each returns a ``RoundTrip``: the first call apart (it pays one-time
costs: the torch-free way's first segment is new, later ones are reused warm) and the warm calls.

Floors (a) and (b), measured in the same run on the same array, are ``helpers.measure.copy_floors``'
(its docstring says exactly what each includes).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import numpy as np

from helpers.lessons import workers
from helpers.measure import copy_floors
from helpers.measure.timing import Timing
from helpers.shared import reducers
from helpers.shared.shm import SharedNDArray

HOWS = ("pickle", "torch", "torch_shared", "shared_memory", "shared_memory_shared")
WHERES = ("local", "remote")
STOP_TIMEOUT = 10.0  # seconds the echo worker gets to leave before it is terminated


def reduction_of(how: str) -> str | None:
    """The ``helpers.shared.reducers`` way ``how`` uses ('torch', 'shared_memory'), None for 'pickle'."""
    if how not in HOWS:
        raise ValueError(f"how must be one of {HOWS}, got {how!r}")
    return None if how == "pickle" else how.removesuffix("_shared")


@dataclass(frozen=True)
class RoundTrip:
    """Seconds of round trips of one array: ``first`` (one-time costs included) and ``warm`` (the rest)."""

    first: float
    warm: Timing

    @property
    def median(self) -> float:
        """Median seconds of the warm round trips."""
        return self.warm.median

    @property
    def runs(self) -> tuple[float, ...]:
        """Seconds of every warm round trip."""
        return self.warm.runs


@contextmanager
def array_to_send(array: np.ndarray, how: str) -> Iterator[np.ndarray]:
    """Enable ``how``'s reduction in this process (undone after) and yield what to send: ``array``
    itself, or for the ``*_shared`` ways a copy of it already in shared memory (freed after)."""
    way = reduction_of(how)
    with reducers.sharing_arrays(way) if way else nullcontext():
        if how == "shared_memory_shared":
            with SharedNDArray.copy_of(array) as shared:
                yield shared.array
        elif how == "torch_shared":
            yield ForkingPickler.loads(ForkingPickler.dumps(array))  # its .base is a shared tensor
        else:
            yield array


def _check(received: np.ndarray, array: np.ndarray, compare: bool) -> None:
    if received.shape != array.shape or received.dtype != array.dtype:
        raise AssertionError(f"round trip changed the array: {received.shape} {received.dtype}")
    if compare and not np.array_equal(received, array):
        raise AssertionError("round trip changed the array's contents")


def local_round_trip_seconds(array: np.ndarray, how: str, repeat: int = 5) -> RoundTrip:
    """Seconds of ``ForkingPickler.loads(ForkingPickler.dumps(array))`` in this process, sent ``how``
    (``HOWS``); the first result is compared with ``array`` (untimed), every one is checked whole."""
    with array_to_send(array, how) as sent:
        runs = []
        for run in range(repeat + 1):
            start = time.perf_counter()
            received = ForkingPickler.loads(ForkingPickler.dumps(sent))
            runs.append(time.perf_counter() - start)
            _check(received, array, compare=run == 0)
            del received
    return RoundTrip(runs[0], Timing(tuple(runs[1:])))


class EchoWorker:
    """A worker process that sends back every object it receives, with ``way``'s reduction enabled
    ('torch', 'shared_memory' or None). Context manager; starting it is not timed."""

    def __init__(self, way: str | None, mp_context=None):
        context = mp_context or mp.get_context("spawn")
        self.way = way
        self.connection, child_end = context.Pipe()
        self.process = context.Process(target=workers.echo_arrays, args=(child_end, way), daemon=True)
        self.process.start()
        child_end.close()
        try:
            if self.connection.recv() != "ready":
                raise RuntimeError("the echo worker did not start")
        except BaseException:
            self.close()
            raise

    def round_trip_seconds(self, array: np.ndarray, how: str, repeat: int = 5) -> RoundTrip:
        """Seconds to send ``array`` (``how``) to the worker and have it back; see the module docstring."""
        if reduction_of(how) != self.way:
            raise ValueError(f"this worker shares the {self.way!r} way; {how!r} needs {reduction_of(how)!r}")
        with array_to_send(array, how) as sent:
            runs = []
            for run in range(repeat + 1):
                start = time.perf_counter()
                self.connection.send(sent)
                received = self.connection.recv()
                runs.append(time.perf_counter() - start)
                _check(received, array, compare=run == 0)
                del received
        return RoundTrip(runs[0], Timing(tuple(runs[1:])))

    def close(self) -> None:
        """Ask the worker to leave, wait for it (terminate it if it hangs)."""
        try:
            self.connection.send(None)
        except OSError:
            pass  # it is gone already
        self.connection.close()
        self.process.join(STOP_TIMEOUT)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join()

    def __enter__(self) -> EchoWorker:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def remote_round_trip_seconds(array: np.ndarray, how: str, repeat: int = 5, mp_context=None) -> RoundTrip:
    """Seconds to send ``array`` through a Pipe to a new worker (``mp_context``, default spawn)
    that sends it straight back, ``how`` (``HOWS``); the worker's start is not timed."""
    with EchoWorker(reduction_of(how), mp_context) as worker:
        return worker.round_trip_seconds(array, how, repeat)


def round_trip_table(sizes_bytes: Iterable[int], hows: Iterable[str] = HOWS, wheres: Iterable[str] = WHERES,
                     repeat: int = 3, mp_context=None) -> list[dict]:
    """Round trips of random float64 arrays at each size, each way, locally and through a worker.

    One dict per (size, how, where): ``how``, ``size_bytes``, ``where``, ``first_s``, ``median_s``
    (warm runs), ``runs_s``, ``ratio_to_warm_floor`` / ``ratio_to_fresh_floor`` (median over
    floor (a) / (b) at that size) and the floors themselves, ``warm_floor_s`` and ``fresh_floor_s``.
    One echo worker per reduction serves every size (started once, not timed).
    """
    hows, wheres = list(hows), list(wheres)
    echo_workers: dict[str | None, EchoWorker] = {}
    rows = []
    try:
        for size in sizes_bytes:
            array = np.random.default_rng(size).random(max(1, size // 8))
            floors = copy_floors.measure_floors(array, repeat)
            warm_floor, fresh_floor = floors.warm.median, floors.new_segment.median
            for how in hows:
                for where in wheres:
                    if where == "local":
                        trip = local_round_trip_seconds(array, how, repeat)
                    else:
                        way = reduction_of(how)
                        if way not in echo_workers:
                            echo_workers[way] = EchoWorker(way, mp_context)
                        trip = echo_workers[way].round_trip_seconds(array, how, repeat)
                    rows.append({
                        "how": how, "size_bytes": int(array.nbytes), "where": where,
                        "first_s": trip.first, "median_s": trip.median, "runs_s": list(trip.runs),
                        "ratio_to_warm_floor": trip.median / warm_floor,
                        "ratio_to_fresh_floor": trip.median / fresh_floor,
                        "warm_floor_s": warm_floor, "fresh_floor_s": fresh_floor,
                    })
            del array
    finally:
        for worker in echo_workers.values():
            worker.close()
    return rows
