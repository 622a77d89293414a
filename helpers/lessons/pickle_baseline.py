"""What sending an argument to a worker costs, stage by stage, and pickle protocol 5's way around it.

``pickle_cost_breakdown`` times the three stages ``multiprocessing`` puts every argument through
(pickle in the parent, the pipe, unpickle in the child), in seconds. ``dumps_out_of_band``,
``send_out_of_band`` and ``recv_out_of_band`` send any picklable object through a
``multiprocessing`` connection with pickle protocol 5: the pickle stays tiny and each large buffer
(an ndarray's memory) crosses the pipe raw, straight from the sender's memory, with no pickling
copy. ``sum_server`` starts a child that answers each array sent with its sum, to time the round
trip of each way of sending. ``time_fan_outs`` and ``track_memory_while_workers_hold`` are the fan-out
and memory measurements of lesson 02; ``EXERCISE`` is its "Your turn".
"""

from __future__ import annotations

import os
import pickle
import statistics
import struct
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import numpy as np

from helpers.lessons import workers
from helpers.lessons.exercises import Exercise
from helpers.measure import memory
from helpers.measure.timing import Timing, time_it
from helpers.measure.units import format_seconds

# How ``sum_server`` sends each array (see ``sum_arrays_received``).
PICKLED = "pickled"  # Connection.send(array): ForkingPickler, the default protocol
OUT_OF_BAND = "out-of-band, recv_bytes_into"  # protocol 5; buffers raw; Connection.recv_bytes_into
OUT_OF_BAND_DIRECT = "out-of-band, read into"  # protocol 5; buffers raw; read from the pipe directly
TRANSFERS = (PICKLED, OUT_OF_BAND, OUT_OF_BAND_DIRECT)
STOP_TIMEOUT = 10.0  # seconds a helper child gets to finish before it is terminated
HOLD_TIMEOUT = 60.0  # seconds a worker gets to receive and read its array
SUBMIT, MAP = "ProcessPoolExecutor.submit", "Pool.map"  # the two pools of the fan-out


@dataclass(frozen=True)
class PickleCostBreakdown:
    """Seconds spent in each stage of sending one object to a child (warm-up runs excluded).

    ``dumps``: ``ForkingPickler.dumps`` in the parent; ``pipe``: ``send_bytes`` of that payload
    through a one-way pipe until the child has read all of it (the round trip minus the child's
    ``loads``); ``loads``: ``pickle.loads`` in the child, timed there, with the received bytes
    still alive as in a worker. ``payload_bytes`` is the pickle's size in bytes.
    """

    dumps: Timing
    pipe: Timing
    loads: Timing
    payload_bytes: int

    @property
    def stages(self) -> dict[str, float]:
        """Median seconds of each stage, in the order an argument goes through them."""
        return {
            "pickle.dumps": self.dumps.median,
            "pipe": self.pipe.median,
            "pickle.loads": self.loads.median,
        }

    @property
    def total(self) -> float:
        """Sum of the stages' medians, in seconds."""
        return sum(self.stages.values())


def _stop(process, timeout: float = STOP_TIMEOUT) -> None:
    process.join(timeout)
    if process.is_alive():
        process.terminate()
        process.join()


@contextmanager
def _child(context, target, *args, pipe_bytes: int | None = None) -> Iterator[tuple]:
    """Start ``target(receiver, sender, *args)`` in a child over two one-way pipes.

    Yields (sender, receiver): the parent's ends. One-way pipes are what ``Pool`` and
    ``ProcessPoolExecutor`` send tasks through. ``pipe_bytes``: the capacity of the pipe to the
    child (``set_pipe_capacity``); None keeps the system's default. On exit the parent closes its
    sending end (the child reads end of file and returns), then joins the child (terminates it if
    it hangs).
    """
    child_receiver, parent_sender = context.Pipe(duplex=False)
    parent_receiver, child_sender = context.Pipe(duplex=False)
    if pipe_bytes is not None and set_pipe_capacity(parent_sender, pipe_bytes) is None:
        raise OSError(f"cannot set the pipe's capacity to {pipe_bytes} bytes here")
    process = context.Process(target=target, args=(child_receiver, child_sender, *args), daemon=True)
    process.start()
    child_receiver.close()
    child_sender.close()
    try:
        yield parent_sender, parent_receiver
    finally:
        parent_sender.close()  # the child reads end of file and leaves
        _stop(process)
        parent_receiver.close()


def pickle_cost_breakdown(
    array: np.ndarray, context, repeat: int = 5, warmup: int = 1
) -> PickleCostBreakdown:
    """Time the three stages an argument goes through on its way to a worker, in seconds.

    ``context`` is a multiprocessing context (its start method starts the one child used for the
    pipe and ``loads`` stages; starting it is not timed). ``dumps`` is timed first, with no other
    pickle alive: one kept alive meanwhile changed where glibc's allocator put the next ones and
    made them several times cheaper than the same pickling inside a pool (seen at 4 MiB).
    """
    dumps = time_it(lambda: ForkingPickler.dumps(array), repeat=repeat, warmup=warmup)
    payload = ForkingPickler.dumps(array)
    pipe, loads = _time_pipe_and_loads(payload, context, repeat, warmup)
    return PickleCostBreakdown(dumps=dumps, pipe=pipe, loads=loads, payload_bytes=len(payload))


def time_pipe_stage(array: np.ndarray, context, pipe_bytes: int, repeat: int = 5,
                    warmup: int = 1) -> Timing | None:
    """``pickle_cost_breakdown``'s pipe stage, in seconds, through a pipe that holds ``pipe_bytes``
    (``set_pipe_capacity``); None where the pipe's capacity cannot be set."""
    if set_pipe_capacity(None, pipe_bytes) is None:
        return None
    pipe, _ = _time_pipe_and_loads(ForkingPickler.dumps(array), context, repeat, warmup, pipe_bytes)
    return pipe


def _time_pipe_and_loads(payload: bytes, context, repeat: int, warmup: int,
                         pipe_bytes: int | None = None) -> tuple[Timing, Timing]:
    """(pipe, loads) seconds: ``payload`` sent with ``send_bytes`` to a child that unpickles it and
    answers with its ``loads`` time; the pipe stage is the round trip less that time."""
    pipe_runs, loads_runs = [], []
    with _child(context, time_loads_of_received, pipe_bytes=pipe_bytes) as (sender, receiver):
        for run in range(warmup + repeat):
            start = time.perf_counter()
            sender.send_bytes(payload)
            loads_seconds = receiver.recv()
            round_trip = time.perf_counter() - start
            if run >= warmup:
                pipe_runs.append(round_trip - loads_seconds)
                loads_runs.append(loads_seconds)
    return Timing(tuple(pipe_runs)), Timing(tuple(loads_runs))


def dumps_out_of_band(obj) -> tuple[bytes, list[pickle.PickleBuffer]]:
    """Pickle with protocol 5, keeping large buffers out of band: (small pickle, buffer views).

    No data is copied: each PickleBuffer is a view of the object's own memory.
    """
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return data, buffers


def send_out_of_band(connection, obj) -> int:
    """Send ``obj`` as a protocol-5 pickle plus its buffers raw; return the raw bytes sent.

    First message: (pickle, sizes of the buffers), pickled as usual (small); then one message
    per buffer, written with ``send_bytes`` straight from the object's memory.
    """
    data, buffers = dumps_out_of_band(obj)
    views = [buffer.raw() for buffer in buffers]
    connection.send((data, [view.nbytes for view in views]))
    for view in views:
        connection.send_bytes(view)
    return sum(view.nbytes for view in views)


def read_message_into(connection, buffer) -> int:
    """Read one ``send_bytes`` message straight from the connection's file into ``buffer``.

    ``Connection.recv_bytes_into`` reads the message into a temporary ``io.BytesIO`` first and
    copies it from there; this reads ``multiprocessing``'s frame (a 4-byte big-endian length, or
    -1 and an 8-byte length) and then ``os.readv`` into ``buffer``: the kernel's copy out of the
    pipe is the only one. Falls back to ``recv_bytes_into`` where there is no ``os.readv``.
    Returns the bytes read; raises ValueError if the message is longer than ``buffer``.
    """
    if not hasattr(os, "readv"):
        return connection.recv_bytes_into(buffer)
    fd = connection.fileno()
    (size,) = struct.unpack("!i", _read_exactly(fd, 4))  # the frame: a 4-byte big-endian length,
    if size == -1:  # or -1 and then an 8-byte one (a message of 2 GiB or more)
        (size,) = struct.unpack("!Q", _read_exactly(fd, 8))
    target = memoryview(buffer).cast("B")
    if size > target.nbytes:
        raise ValueError(f"message of {size} bytes does not fit a buffer of {target.nbytes} bytes")
    done = 0
    while done < size:
        n = os.readv(fd, [target[done:size]])
        if n == 0:
            raise EOFError(f"end of file after {done} of {size} bytes")
        done += n
    return size


def pipe_capacity() -> int | None:
    """Bytes a new pipe holds before its writer must wait for the reader (Linux's ``F_GETPIPE_SZ``);
    None where the system cannot be asked."""
    try:
        import fcntl

        get_size = fcntl.F_GETPIPE_SZ
    except (ImportError, AttributeError):
        return None
    read_end, write_end = os.pipe()
    try:
        return fcntl.fcntl(read_end, get_size)
    finally:
        os.close(read_end)
        os.close(write_end)


def set_pipe_capacity(connection, n_bytes: int) -> int | None:
    """Make the pipe behind ``connection`` hold ``n_bytes`` before its writer waits (Linux's
    ``F_SETPIPE_SZ``; at most ``/proc/sys/fs/pipe-max-size``, 1 MiB by default); return the
    capacity it got, or None where it cannot be set. ``connection`` None tries a new pipe."""
    try:
        import fcntl

        set_size = fcntl.F_SETPIPE_SZ
    except (ImportError, AttributeError):
        return None
    ends = os.pipe() if connection is None else ()
    try:
        return fcntl.fcntl(ends[1] if ends else connection.fileno(), set_size, n_bytes)
    except OSError:  # above the system's limit, or over the user's total of pipe pages
        return None
    finally:
        for end in ends:
            os.close(end)


def _read_exactly(fd: int, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = os.read(fd, n - len(chunks))
        if not chunk:
            raise EOFError("end of file while reading a message header")
        chunks += chunk
    return bytes(chunks)


def recv_out_of_band(connection, direct: bool = False):
    """Receive an object sent by ``send_out_of_band``; its buffers land in new NumPy memory.

    Each buffer is received into a fresh ``np.empty`` of its size (with ``recv_bytes_into``, or
    read straight from the pipe when ``direct``); ``pickle.loads`` then builds the object over
    those buffers without copying them again.
    """
    data, sizes = connection.recv()
    buffers = []
    for size in sizes:
        target = np.empty(size, dtype=np.uint8)
        if direct:
            read_message_into(connection, target)
        else:
            connection.recv_bytes_into(target)
        buffers.append(target)
    return pickle.loads(data, buffers=buffers)


def send_array(connection, array: np.ndarray, transfer: str) -> None:
    """Send ``array`` through ``connection`` the way ``transfer`` (one of TRANSFERS) names."""
    if transfer not in TRANSFERS:
        raise ValueError(f"transfer must be one of {TRANSFERS}, got {transfer!r}")
    if transfer == PICKLED:
        connection.send(array)
    else:
        send_out_of_band(connection, array)


def receive_array(connection, transfer: str):
    """Receive what ``send_array`` sent the same ``transfer`` way."""
    if transfer == PICKLED:
        return connection.recv()
    return recv_out_of_band(connection, direct=transfer == OUT_OF_BAND_DIRECT)


@contextmanager
def sum_server(context, pipe_bytes: int | None = None) -> Iterator[Callable[[np.ndarray, str], float]]:
    """Start a child that answers each array sent to it with its sum.

    Yields ``ask(array, transfer) -> float``: name the transfer (one of TRANSFERS) in a small
    message, send the array that way, wait for the sum. The child is started with ``context``
    (callers time ``ask`` only) and stopped on exit; ``pipe_bytes`` as in ``_child``.
    """
    with _child(context, sum_arrays_received, pipe_bytes=pipe_bytes) as (sender, receiver):

        def ask(array: np.ndarray, transfer: str) -> float:
            if transfer not in TRANSFERS:
                raise ValueError(f"transfer must be one of {TRANSFERS}, got {transfer!r}")
            sender.send(transfer)
            send_array(sender, array, transfer)
            return receiver.recv()

        yield ask


def fan_out_submit(executor, arrays: Sequence[np.ndarray]) -> list[float]:
    """One task per array through a ProcessPoolExecutor: each array is pickled and piped on its own."""
    futures = [executor.submit(workers.sum_array, a) for a in arrays]
    return [future.result() for future in futures]


def fan_out_map(pool, arrays: Sequence[np.ndarray]) -> list[float]:
    """One task per array through a multiprocessing Pool (``chunksize=1``: one array a task)."""
    return pool.map(workers.sum_array, arrays, chunksize=1)


def split_ways(array: np.ndarray, n_workers: int) -> dict[str, list[np.ndarray]]:
    """Ways to give ``n_workers`` workers the array, as the lists of arguments one fan-out sends.

    "whole": the same array to each (references, nothing copied yet); "slices": one contiguous
    slice each; "strided": every ``n_workers``-th element, from a different start for each.
    Slices are views: nothing is copied either.
    """
    if not isinstance(n_workers, int) or n_workers < 1:
        raise ValueError(f"n_workers must be a whole number of at least 1, got {n_workers!r}")
    bounds = np.linspace(0, array.size, n_workers + 1).astype(int)
    return {
        "whole": [array] * n_workers,
        "slices": [array[start:stop] for start, stop in zip(bounds[:-1], bounds[1:], strict=True)],
        "strided": [array[start::n_workers] for start in range(n_workers)],
    }


class _ByteCounter:
    """A file that keeps only the number of bytes written to it."""

    def __init__(self):
        self.count = 0

    def write(self, data) -> int:
        self.count += memoryview(data).nbytes
        return self.count


def bytes_pickled(arrays: Sequence[object]) -> int:
    """Bytes of the pickles a pool sends for one task per item (what ``ForkingPickler.dumps`` writes),
    counted as they are written rather than kept: a big pickle is never held whole."""
    total = 0
    for item in arrays:
        counter = _ByteCounter()
        ForkingPickler(counter).dump(item)
        total += counter.count
    return total


CHUNK_ITEMS, CHUNKSIZE = 6, 2  # the exercise's "chunks": Pool(2).map(f, [array] * 6, chunksize=2)
CHUNK_POOL = 2  # its pool's workers, not its 3 tasks: "one pickle per worker" fails at any N_WORKERS


def _chunks(items: Sequence[object]) -> list[tuple]:
    """The tasks ``Pool.map(f, items, chunksize=CHUNKSIZE)`` pickles (``Pool._get_tasks``: a tuple each)."""
    return [tuple(items[i:i + CHUNKSIZE]) for i in range(0, len(items), CHUNKSIZE)]


def arrays_pickled(array: np.ndarray, n_workers: int) -> dict[str, float]:
    """For each of ``split_ways``, the bytes pickled by one fan-out, in arrays (1.0: one array's bytes);
    "chunks": ``Pool.map`` of ``[array] * CHUNK_ITEMS`` with ``chunksize=CHUNKSIZE``, one task per chunk,
    each pickle writing an object it meets again once (the memo); "pairs": the same with
    ``[array, array.copy()] * (CHUNK_ITEMS // 2)``, two different arrays in every chunk."""
    sent = {way: bytes_pickled(arrays) / array.nbytes for way, arrays in split_ways(array, n_workers).items()}
    sent["chunks"] = bytes_pickled(_chunks([array] * CHUNK_ITEMS)) / array.nbytes
    other = array.copy()  # equal values, another object: the memo does not know it
    sent["pairs"] = bytes_pickled(_chunks([array, other] * (CHUNK_ITEMS // 2))) / array.nbytes
    del other
    return sent


def time_fan_outs(context, n_workers: int, ways: Mapping[str, Sequence[np.ndarray]], repeat: int
                  ) -> tuple[dict[tuple[str, str], Timing], dict[tuple[str, str], list[float]]]:
    """Seconds of one fan-out of each list in ``ways`` through each pool (SUBMIT, MAP), and the sums.

    Keys are (pool, way). Each pool is started and its workers warmed by each list's first fan-out,
    which also gives the sums returned; neither is timed, so pool start-up is excluded.
    """
    timings, sums = {}, {}
    with ProcessPoolExecutor(n_workers, mp_context=context) as executor:
        for way, arrays in ways.items():
            sums[SUBMIT, way] = fan_out_submit(executor, arrays)
            timings[SUBMIT, way] = time_it(lambda arrays=arrays: fan_out_submit(executor, arrays),
                                           repeat=repeat, warmup=0)
    with context.Pool(n_workers) as pool:
        for way, arrays in ways.items():
            sums[MAP, way] = fan_out_map(pool, arrays)
            timings[MAP, way] = time_it(lambda arrays=arrays: fan_out_map(pool, arrays),
                                        repeat=repeat, warmup=0)
    return timings, sums


def hold_in_every_worker(pool, manager, data: np.ndarray, n_workers: int):
    """Send ``data`` to each of the pool's ``n_workers`` workers; return (release event, tasks) once
    each holds its copy. Each task blocks its worker, so the tasks land on different workers."""
    release = manager.Event()
    readies = [manager.Event() for _ in range(n_workers)]
    tasks = [pool.apply_async(workers.hold_array, (data, ready, release)) for ready in readies]
    for ready in readies:
        if not ready.wait(HOLD_TIMEOUT):
            raise RuntimeError(f"a worker did not receive its array within {HOLD_TIMEOUT:.0f} s")
    return release, tasks


def _let_sampler_see(report, since: str | float, samples: int = 5, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while len(report.window(since)) < samples and time.monotonic() < deadline:
        time.sleep(0.02)


def track_memory_while_workers_hold(context, n_workers: int, data: np.ndarray) -> memory.MemoryReport:
    """Track the process tree's memory (bytes) while each of ``n_workers`` pool workers holds ``data``.

    A ``Pool`` and a ``Manager`` (its events travel as task arguments) are started and every worker
    warmed with a tiny array before tracking begins. Marks: "send" (tasks submitted), "all holding"
    (the first sample, read exactly, taken after each worker had read every page of its copy: the
    plot's lines reach that state at this mark, not one sample later), "release". Processes are
    named by role: parent, worker 1..N (in the order they received ``data``), manager.
    """
    with context.Manager() as manager, context.Pool(n_workers) as pool:
        release, tasks = hold_in_every_worker(pool, manager, data[:8], n_workers)
        release.set()
        [task.get(HOLD_TIMEOUT) for task in tasks]
        with memory.track_memory() as report:
            _let_sampler_see(report, 0.0)
            report.mark("send")
            release, tasks = hold_in_every_worker(pool, manager, data, n_workers)
            report.mark("all holding")  # one of the sampler's next two samples reads PSS exactly
            _let_sampler_see(report, "all holding", samples=2)
            report.marks["all holding"] = next(
                (sample.time for sample in report.window("all holding") if sample.exact),
                report.marks["all holding"])
            _let_sampler_see(report, "all holding")
            report.mark("release")
            release.set()
            [task.get(HOLD_TIMEOUT) for task in tasks]
            _let_sampler_see(report, "release")
        pids = [process.pid for process in pool._pool]
        report.name_roles(workers=in_order_received(report, pids, "send", data.nbytes / 2),
                          named={manager._process.pid: "manager"})
    return report


def in_order_received(report: memory.MemoryReport, pids: Sequence[int], start: str,
                      threshold: float) -> list[int]:
    """``pids`` in the order their PSS first rose ``threshold`` bytes above their median before the
    mark ``start`` (those that never did last, as given): "worker 1" is the first to receive."""
    def first_rise(pid: int) -> float:
        before = [sample.processes[pid].pss for sample in report.window(0.0, start)
                  if pid in sample.processes]
        level = statistics.median(before) if before else 0
        return next((sample.time for sample in report.window(start) if pid in sample.processes
                     and sample.processes[pid].pss - level >= threshold), float("inf"))
    return sorted(pids, key=first_rise)


def pss_rise(report: memory.MemoryReport, role: str, start: str, end: str,
             statistic: Callable[[list[int]], float] = max) -> float:
    """Bytes: the highest PSS the process named ``role`` ("parent", "worker 1": ``name_roles``)
    reached between the marks ``start`` and ``end`` (or another ``statistic`` of its samples there,
    e.g. ``statistics.median``: where it stood most of the time), above its median PSS before ``start``."""
    pid = next(pid for pid, name in report.process_labels.items() if name == role)
    before = [sample.processes[pid].pss for sample in report.window(0.0, start) if pid in sample.processes]
    during = [sample.processes[pid].pss for sample in report.window(start, end) if pid in sample.processes]
    return statistic(during) - statistics.median(before)


def rise_order(report: memory.MemoryReport, start: str, end: str, threshold: float) -> list[str]:
    """The roles (``name_roles``) whose PSS rose at least ``threshold`` bytes above their median
    before the mark ``start``, between the marks ``start`` and ``end``, in the order they first did."""
    first_rise = {}
    for pid, role in report.process_labels.items():
        before = [sample.processes[pid].pss for sample in report.window(0.0, start)
                  if pid in sample.processes]
        if not before:  # started after the mark: no level to rise from
            continue
        level = statistics.median(before)
        risen = [sample.time for sample in report.window(start, end)
                 if pid in sample.processes and sample.processes[pid].pss - level >= threshold]
        if risen:
            first_rise[role] = risen[0]
    return sorted(first_rise, key=first_rise.get)


def rises_at_tree_peak(report: memory.MemoryReport, start: str, end: str) -> dict[str, int]:
    """At the sample between the marks ``start`` and ``end`` where the tree's PSS was highest: how far
    each role's PSS (``name_roles``) stood above its median before ``start``, in bytes. A sampled
    moment: the true peak can fall between samples."""
    peak = max(report.window(start, end), key=lambda sample: sample.pss)
    rises = {}
    for pid, role in report.process_labels.items():
        before = [sample.processes[pid].pss for sample in report.window(0.0, start)
                  if pid in sample.processes]
        if before and pid in peak.processes:
            rises[role] = peak.processes[pid].pss - statistics.median(before)
    return rises


def about(ratio: float) -> str:
    """A measured ratio rounded to two significant digits for prose: 9447.2 -> '9,400', 75.04 -> '75',
    2.31 -> '2.3' (timings on a shared machine support no more)."""
    if ratio == 0 or not np.isfinite(ratio):
        return f"{ratio:g}"
    rounded = float(f"{ratio:.2g}")
    return f"{rounded:,.0f}" if rounded >= 10 else f"{rounded:g}"


BYTES_MARGIN = 1.1  # a speed-up within this factor of the byte saving is within a fan-out's noise


def against_bytes(speed_ups: Sequence[float], bytes_ratio: float, margin: float = BYTES_MARGIN) -> str:
    """How slicing's speed-ups (whole over slices, every statistic shown: medians and fastest runs,
    both pools) compare with the ``bytes_ratio`` fewer bytes, for prose: "more than" only when every
    one beats it by ``margin`` (a factor), "less than" when every one falls short by as much,
    else "about Nx, as the Nx fewer bytes predict"."""
    fewer = f"the {bytes_ratio:.0f}× fewer bytes"
    relative = [x / bytes_ratio for x in speed_ups]
    if min(relative) > margin:
        return f"more than {fewer}"
    if max(relative) < 1 / margin:
        return f"less than {fewer}"
    return f"about {bytes_ratio:.0f}×, as {fewer} predict"


def shown(seconds: float) -> float:
    """A duration as printed (``format_seconds``), in seconds: differences of printed figures agree."""
    value, unit = format_seconds(seconds).split()[:2]
    return float(value) * {"min": 60, "s": 1, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}[unit]


HUGE_PAGES = "2 MiB huge pages, which fault far fewer times"  # than the fresh floor's 4 KiB pages (lesson 00)
NEW_ARRAY_PAGES = ("its new array's pages cost less than 4 KiB ones, as 2 MiB pages (see the floors) would; "
                   "this page does not time that copy")  # NumPy's madvise (cell 4): not measured here


def loads_against_fresh(loads: Timing, fresh: float) -> str:
    """``pickle.loads`` (seconds) against the fresh floor, by its runs as printed, for prose: huge pages
    are named only when every run came in under the floor."""
    runs, floor = [shown(run) for run in loads.runs], shown(fresh)
    if max(runs) < floor:
        return f"under the fresh floor in every run: its new memory may have come as {HUGE_PAGES}"
    if min(runs) < floor:
        return "about the fresh floor (its runs straddle it)"
    return f"{loads.median / fresh:.1f}× the fresh floor"


def trip_against_fresh(trip: Timing, fresh: float) -> str:
    """A round trip read straight into a new NumPy array (seconds) against one copy at the fresh floor
    (4 KiB pages), as printed, for prose: said only when its fastest run, its other steps included, beat
    that one copy, so its new array's pages cost less than 4 KiB ones; 2 MiB pages would explain it, but
    no cell times a copy into a new array, so the cause is worded as untimed; else empty (the trip's
    other copies and sum are no floor sum it is bound by, on those pages)."""
    if shown(trip.min) < shown(fresh):
        return (f"; its fastest run ({format_seconds(trip.min)}), its other steps included, beat even "
                f"one copy at the fresh floor ({format_seconds(fresh)}): {NEW_ARRAY_PAGES}")
    return ""


def pipe_grew(small: Timing, big: Timing, fresh: float, array_bytes: int, pipe_bytes: int | None,
              big_pipe_bytes: int) -> str:
    """The same trip (same reader, same new array) through a pipe of ``pipe_bytes`` (``small``) and of
    ``big_pipe_bytes`` (``big``), seconds, for prose: only the pipe grew, with its fills of
    ``array_bytes`` where ``pipe_bytes`` is known; the medians' direction as printed."""
    from helpers.measure.units import format_bytes

    fills = (f", fills {array_bytes / pipe_bytes:,.0f} → {array_bytes / big_pipe_bytes:,.0f}"
             if pipe_bytes else "")
    pipe = f"A {format_bytes(big_pipe_bytes)} pipe"
    if shown(big.median) < shown(small.median):
        head = f"{pipe} cut it to {format_seconds(big.median)} (only the pipe grew{fills})"
    else:
        head = (f"{pipe} took {format_seconds(big.median)} (only the pipe grew{fills}): no faster on medians "
                f"(fastest runs {format_seconds(small.min)} and {format_seconds(big.min)})")
    return head + trip_against_fresh(big, fresh) + ". "


def against_stage(trip: Timing, stage: Timing) -> str:
    """The big pipe's trip (read straight into a new array, its sum included) against section 2's
    pipe stage through the same pipe (``recv_bytes`` into new ``bytes``), seconds as printed, for prose:
    the two differ in their reader and in their pages, which the page does not time apart."""
    gap = shown(stage.median) - shown(trip.median)
    took = (f"{format_seconds(abs(gap))} {'less' if gap > 0 else 'more'}" if gap else "as long")
    return (f"Section 2's stage through that pipe took {format_seconds(stage.median)}; this trip, "
            f"sum included, took {took}. They differ in reader (into a new array, not `recv_bytes`) "
            "and so in pages, not timed apart here. ")


def plot_stages(breakdown: PickleCostBreakdown, one_task: float, warm_floor: float, array_bytes: int):
    """Stacked bars of the stages' medians (``dumps`` and ``loads`` timed alone, the pipe the rest of a
    bare round trip) beside one task through a pool, in ms, with the warm floor."""
    import matplotlib.pyplot as plt

    from helpers.measure.units import format_bytes

    _, ax = plt.subplots(figsize=(9, 3), layout="constrained")
    left = 0.0
    for stage, seconds in breakdown.stages.items():
        ax.barh("its stages, outside a pool", seconds * 1e3, left=left * 1e3, label=stage)
        left += seconds
    ax.barh("one task through a pool", one_task * 1e3, color="grey", label="one task")
    ax.axvline(warm_floor * 1e3, color="black", linestyle="--", label="memcpy floor, warm")
    ax.set_xlabel("time (ms)")
    ax.set_title(f"Sending one {format_bytes(array_bytes)} array to a worker, stage by stage")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


EXERCISE_WAYS = ("strided", "chunks", "pairs")  # the ways of ``arrays_pickled`` the exercise asks about
_MEMO = "Pool.map pickles one task per chunk, and one pickle writes an object it meets again only once"
_HINTS = {"strided": "a view pickles a copy of just the elements it shows",
          "chunks": _MEMO, "pairs": _MEMO + " (a copy is another object)"}


def _check_pickled_prediction(answer, n_workers: int, sent: Mapping[str, float]) -> str | None:
    if not isinstance(answer, Mapping) or set(answer) != set(EXERCISE_WAYS):
        return f"answer with a dict of one number per way, keys {list(EXERCISE_WAYS)}, in arrays"
    for way in EXERCISE_WAYS:
        predicted, measured = answer[way], sent[way]
        if not isinstance(predicted, int | float) or abs(predicted - measured) > 0.05 * measured + 0.01:
            return (f"{way!r}: one fan-out to {n_workers} workers pickled {measured:.2f} arrays, not "
                    f"{predicted!r}; {_HINTS[way]}")
    return None


N_CHUNKS = CHUNK_ITEMS // CHUNKSIZE
EXERCISE = Exercise(
    name="bytes pickled",
    question=("how many arrays' worth of bytes does one fan-out pickle when worker i gets "
              "array[i::N_WORKERS] ('strided': one task per worker); with "
              "Pool(2).map(workers.sum_array, [array] * 6, chunksize=2) ('chunks'); or with the same call "
              "on [array, array.copy()] * 3 ('pairs')? Answer {'strided': ..., 'chunks': ..., 'pairs': ...}, "
              "in arrays (1.0 = the array's bytes)."),
    check=_check_pickled_prediction,
    solution=lambda n_workers, sent: {"strided": 1.0, "chunks": float(N_CHUNKS), "pairs": 2.0 * N_CHUNKS},
    explanation=("A view, strided or not, pickles a copy of just the elements it shows: the strided views "
                 "add up to one array. Pool.map pickles one task per chunk, and pickle's memo writes the "
                 "array a chunk holds twice only once: 3 chunks, 3 arrays. A chunk of the array and its "
                 "copy holds two objects: 6 arrays."),
    misconceptions=(  # with 2 workers, as the lesson's unit test measures (and 3, 4)
        ({"strided": 1.0, "chunks": 1.0, "pairs": 2.0},
         "the pool pickles an argument that every task shares only once"),
        ({"strided": 2.0, "chunks": 3.0, "pairs": 6.0},
         "a strided view pickles the whole buffer it spans: N_WORKERS arrays in all"),
        ({"strided": 1.0, "chunks": 6.0, "pairs": 6.0},
         "every item pickles its own copy of the array, even inside one chunk"),
        ({"strided": 1.0, "chunks": 3.0, "pairs": 3.0},
         "each task pickles one array, whatever its chunk holds"),
        ({"strided": 1.0, "chunks": float(CHUNK_POOL), "pairs": float(CHUNK_POOL)},
         "a pool pickles an argument once per worker, whatever the number of tasks"),
        ({"strided": 0.5, "chunks": 1.0, "pairs": 2.0},
         "what one task pickles (here half an array) is what the whole fan-out pickles"),
    ),
)


# --- Worker functions (run in child processes; importable by name under spawn and forkserver) ---


def sum_arrays_received(receiver, sender) -> None:
    """Answer every array read from ``receiver`` with its sum (a float) on ``sender``, until end of file.

    Each array comes after a small message naming how it is sent: one of
    ``helpers.lessons.pickle_baseline.TRANSFERS``.
    """
    from helpers.lessons import pickle_baseline

    try:
        while True:
            try:
                transfer = receiver.recv()
            except EOFError:
                break
            array = pickle_baseline.receive_array(receiver, transfer)
            sender.send(float(np.sum(array)))
            del array
    finally:
        receiver.close()
        sender.close()


def unpickle_error(payload: bytes) -> str:
    """Unpickle ``payload`` in this worker; return '' if that worked, else 'ErrorType: message'.

    Shows, without killing the worker, what a worker sees when a task names a function it
    cannot import (one defined in a notebook cell lives in the parent's ``__main__`` only).
    """
    import pickle

    try:
        pickle.loads(payload)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return ""


def time_loads_of_received(receiver, sender) -> None:
    """Unpickle every byte message read from ``receiver``; answer with the seconds ``loads`` took.

    The received bytes stay alive while they are unpickled, as in a pool's worker, so the new
    object lands in memory the allocator must find elsewhere. Ends at end of file.
    """
    import pickle
    import time

    try:
        while True:
            payload = receiver.recv_bytes()
            start = time.perf_counter()
            received = pickle.loads(payload)
            sender.send(time.perf_counter() - start)
            del received, payload
    except EOFError:
        pass
    finally:
        receiver.close()
        sender.close()
