"""Lesson 09's code: an ndarray's round trip through ``multiprocessing``'s pickler, each way of
sending it, timed against the floors; and the demonstrations that must run in separate processes.

**Round trips** (``round_trip_table``, in seconds). ``how`` names the way (``HOWS``):
``"pickle"``, the stdlib default (the array's bytes inside the pickle); ``"torch"`` /
``"shared_memory"``, ``sharedarrays.reducers``' reductions, sending a private array (one
copy into shared memory per send); ``"torch_shared"`` / ``"shared_memory_shared"``, the same with
an array that already lives in shared memory (made once, not timed): nothing is copied. *Local*:
``ForkingPickler.dumps`` then ``loads`` in this process. *Remote*: ``Connection.send`` to a worker
process that sends the array straight back (``helpers.lessons.workers.echo_arrays``), until this
process has it back; starting the worker (and its torch import) is not timed. Each returns a
``RoundTrip``: the first call apart (it pays one-time costs) and the warm calls. Floors (a) and
(b), measured in the same run on the same array, are ``helpers.measure.copy_floors``'.

**Your turn** (``EXERCISE``): which arrays made from a received array cross again without a copy
(``copied_on_resend``: the reductions follow ``.base``, so views do and new arrays do not).

**Demonstrations.** ``keep_many_arrays`` starts two children: one shares small arrays the
torch way with each sharing strategy in turn, then the torch-free way, and sends them; the other
lowers its own open-file limit (``resource.setrlimit``) and keeps every array it receives. Under
``file_descriptor`` (Linux's default) each shared storage a process keeps holds one open file
descriptor, so the receiver runs out of them; under ``file_system`` storages are files named
``/dev/shm/torch_*`` that are mapped by name, and nothing runs out; the torch-free way maps a
segment per array, which before Python 3.13 keeps a descriptor open (``mmap``'s duplicate). The
notebook's own process never holds a torch storage, a limit is lowered only in the child, and
both children are gone when the function returns.

**The segment pool's memory** (``segment_bytes_in_shm``, ``collect_given_back``): what the
torch-free way's segments hold in ``/dev/shm``, lent or given back and kept warm.
"""

from __future__ import annotations

import inspect
import multiprocessing as mp
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import numpy as np

from helpers.lessons import workers
from helpers.lessons.exercises import Exercise
from helpers.measure import copy_floors
from helpers.measure.leftovers import SHM_DIR
from helpers.measure.timing import Timing
from helpers.measure.units import MiB, format_bytes, format_seconds
from sharedarrays import reducers
from sharedarrays.segment_pool import SegmentPool
from sharedarrays.shm import SharedNDArray

TORCH_FREE = "torch-free"  # the round of keep_many_arrays that sends the torch-free way
STOP_TIMEOUT = 20.0  # seconds the children get to finish before they are terminated
SETTLE_SECONDS = 5.0  # how long to wait for torch's shm manager to unlink its files after the children


@dataclass(frozen=True)
class KeptArrays:
    """What the receiving child reported: how many arrays it could keep, and why it stopped."""

    strategy: str
    nofile_limit: int
    n_sent: int
    n_kept: int
    error: str  # 'Type: message' of the error that stopped the receiver, '' if it kept them all
    torch_names_while_held: int  # /dev/shm entries named torch_* while the receiver held the arrays
    torch_names_after: int  # the same once both children were gone (after every strategy)

    @property
    def ran_out_of_descriptors(self) -> bool:
        """True when the receiver stopped on an error about open files or file descriptors."""
        text = self.error.lower()
        return any(sign in text for sign in ("too many open files", "ancdata", "errno 24", "emfile"))


def _torch_names() -> set[str]:
    try:
        return {name for name in os.listdir(SHM_DIR) if name.startswith("torch_")}
    except OSError:
        return set()


def _stop(process) -> None:
    process.join(STOP_TIMEOUT)
    if process.is_alive():
        process.terminate()
        process.join()


def keep_many_arrays(context, strategies: tuple[str, ...] = ("file_descriptor", "file_system", TORCH_FREE),
                     n_arrays: int = 200, nofile_limit: int = 64, n_items: int = 16) -> list[KeptArrays]:
    """For each of ``strategies`` in turn (torch's sharing strategies, then ``TORCH_FREE``: the
    torch-free way), send ``n_arrays`` small arrays from one child to another whose open-file limit
    is ``nofile_limit``, which keeps them all; return what the receiver saw each time (both children
    are started once, by ``context``)."""
    before = _torch_names()
    data_in, data_out = context.Pipe(duplex=False)
    report_here, report_there = context.Pipe()
    next_round, release = context.Semaphore(0), context.Event()
    receiver = context.Process(target=keep_received_arrays, daemon=True,
                               args=(data_in, report_there, nofile_limit, n_arrays, len(strategies)))
    sender = context.Process(target=send_shared_arrays, daemon=True,
                             args=(data_out, next_round, release, list(strategies), n_arrays, n_items))
    receiver.start()
    sender.start()
    for end in (data_in, data_out, report_there):
        end.close()
    reports = []
    try:
        for _ in strategies:
            reports.append(report_here.recv())
            report_here.send("let go")
            next_round.release()
    finally:
        _stop(receiver)  # it reads what is left of the last round while the sender still holds it
        release.set()
        _stop(sender)
        report_here.close()
    deadline = time.monotonic() + SETTLE_SECONDS
    while _torch_names() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    after = len(_torch_names() - before)
    return [KeptArrays(strategy, nofile_limit, n_arrays, n_kept, error, names_held, after)
            for strategy, (n_kept, error, names_held) in zip(strategies, reports, strict=True)]


LABELS = {
    "pickle": "stdlib pickle",
    "torch": "torch, private array",
    "torch_shared": "torch, already shared",
    "shared_memory": "torch-free, private array",
    "shared_memory_shared": "torch-free, already shared",
}


def format_ratio(value: float) -> str:
    """A ratio to two significant digits (what a median of a few runs supports), trailing zeros
    kept so that a column reads evenly ('1.0', '0.090'), without an exponent from 10 up: '150'."""
    if float(f"{value:.2g}") >= 10:  # 9.97 too: '10', not '10.'
        return f"{float(f'{value:.2g}'):,.0f}"
    return f"{value:#.2g}"


NOISE_BAND = (0.95, 1.05)  # a ratio in here is "~1.0×", "about": equal within a few runs' noise


def within_noise(value: float) -> bool:
    """True when the ratio ``value`` lies in ``NOISE_BAND``: equal within a few runs' noise."""
    return NOISE_BAND[0] <= value <= NOISE_BAND[1]


def noise_ratio(value: float) -> str:
    """``format_ratio``, but '~1.0' within ``NOISE_BAND``: equal within a few runs' noise."""
    return "~1.0" if within_noise(value) else format_ratio(value)


def format_round_trips(rows: list[dict], size_bytes: int) -> str:
    """A text table of the round trips measured at ``size_bytes``: the cold (first) call's and the
    warm calls' median seconds, locally and through a worker, the warm median over floor (a) (warm
    memcpy) and (b) (a copy into a new shared-memory segment), and the cold call over (b), to two
    significant digits ('~1.0' within 5% of 1); '—' for an array already shared (it copies nothing to
    compare with a floor)."""
    at_size = {(row["how"], row["where"]): row for row in rows if row["size_bytes"] == size_bytes}
    any_row = next(iter(at_size.values()))
    lines = [f"{format_bytes(size_bytes)}: floor (a) warm copy {format_seconds(any_row['warm_floor_s'])}, "
             f"floor (b) copy into a new segment {format_seconds(any_row['fresh_floor_s'])}",
             f"{'way':<27}{'where':<8}{'cold call':>10}{'warm median':>12}{'÷ (a)':>9}{'÷ (b)':>9}"
             f"{'cold ÷ (b)':>12}"]
    for how, label in LABELS.items():
        for where in ("local", "remote"):
            row = at_size.get((how, where))
            if row is None:
                continue
            ratios = (f"{'—':>9}{'—':>9}{'—':>12}" if how.endswith("_shared")  # no copy: no floor to compare
                      else f"{noise_ratio(row['ratio_to_warm_floor']):>8}×"
                           f"{noise_ratio(row['ratio_to_fresh_floor']):>8}×"
                           f"{noise_ratio(row['first_s'] / row['fresh_floor_s']):>11}×")
            lines.append(f"{label:<27}{where:<8}{format_seconds(row['first_s']):>10}"
                         f"{format_seconds(row['median_s']):>12}{ratios}")
    return "\n".join(lines)


def format_medians_by_size(rows: list[dict]) -> str:
    """A compact text table of the warm medians at every size measured: one line per way and place,
    one column per size, the two floors' medians first (the figures section 3's sentences quote)."""
    sizes = sorted({row["size_bytes"] for row in rows})
    by_key = {(row["how"], row["where"], row["size_bytes"]): row for row in rows}
    floors = {row["size_bytes"]: row for row in rows}
    lines = [f"{'warm median':<35}" + "".join(f"{format_bytes(size):>10}" for size in sizes),
             f"{'floor (a) warm copy':<35}" + "".join(f"{format_seconds(floors[size]['warm_floor_s']):>10}"
                                                       for size in sizes),
             f"{'floor (b) copy into a new segment':<35}"
             + "".join(f"{format_seconds(floors[size]['fresh_floor_s']):>10}" for size in sizes)]
    for how, label in LABELS.items():
        for where in ("local", "remote"):
            if all((how, where, size) in by_key for size in sizes):
                lines.append(f"{label + ', ' + where:<35}"
                             + "".join(f"{format_seconds(by_key[how, where, size]['median_s']):>10}"
                                       for size in sizes))
    return "\n".join(lines)


def format_lent_segments(rows: list[dict]) -> str:
    """The torch-free private-array rows' segment pool, one column per size: segments made new / lent
    again (given back by the last call's receiver) over each row's calls, cold and warm."""
    sizes = sorted({row["size_bytes"] for row in rows})
    by_key = {(row["where"], row["size_bytes"]): row for row in rows if row["how"] == "shared_memory"}
    lines = [f"{'segments new / lent again':<35}" + "".join(f"{format_bytes(size):>10}" for size in sizes)]
    for where in WHERES:
        if all((where, size) in by_key for size in sizes):
            lines.append(f"{LABELS['shared_memory'] + ', ' + where:<35}" + "".join(
                f"{by_key[where, size]['segments_new']} / {by_key[where, size]['segments_reused']}".rjust(10)
                for size in sizes))
    return "\n".join(lines)


def warm_path_line(rows: list[dict], map_reused: int, map_sends: int) -> str:
    """One line on which way of sending got given-back (warm) segments: the round trips' loop of sends
    (each received array dropped before the next send) against a ``Pool.map`` that lent ``map_reused``
    of its ``map_sends`` segments again."""
    torch_free = [row for row in rows if row["how"] == "shared_memory"]
    reused = sum(row["segments_reused"] or 0 for row in torch_free)
    sends = sum(len(row["runs_s"]) + 1 for row in torch_free)
    loop = (f"the loop of sends above (each received array dropped before the next send): {reused} of "
            f"{sends} sends lent a given-back segment again")
    pool_map = f"section 2's `Pool.map`: {map_reused} of {map_sends}"
    if map_reused == 0:
        pool_map = (f"section 2's `Pool.map`, which pickled every task before a segment came back: "
                    f"{map_reused} of {map_sends}")
    if reused and not map_reused:
        return f"Warm segments came with {loop}; {pool_map}."
    return f"{loop[0].upper()}{loop[1:]}; {pool_map}."


def plot_round_trips(rows: list[dict], axes) -> None:
    """Median warm round trip against size, log-log, one line per way, floors (a) and (b) dashed:
    local round trips on ``axes[0]``, remote ones on ``axes[1]``."""
    sizes = sorted({row["size_bytes"] for row in rows})
    floors = {row["size_bytes"]: (row["warm_floor_s"], row["fresh_floor_s"]) for row in rows}
    titles = {"local": "local round trip (dumps + loads here)",
              "remote": "remote round trip (to a worker and back)"}
    for ax, where in zip(axes, ("local", "remote"), strict=True):
        for how, label in LABELS.items():
            points = sorted((row["size_bytes"], row["median_s"]) for row in rows
                            if row["how"] == how and row["where"] == where)
            if points:
                ax.plot([size / MiB for size, _ in points], [seconds for _, seconds in points],
                        marker="o", label=label)
        ax.plot([size / MiB for size in sizes], [floors[size][0] for size in sizes], "k--",
                label="floor (a): copy into warm memory")
        ax.plot([size / MiB for size in sizes], [floors[size][1] for size in sizes], "k:",
                label="floor (b): copy into a new segment")
        ax.set(xscale="log", yscale="log", xlabel="array size (MiB)",
               ylabel="round trip, median warm run (s)", title=titles[where])
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend(fontsize="small")


# --- Worker functions (run in child processes; importable by name under spawn and forkserver) ---


def keep_received_arrays(receiver, reporter, nofile_limit: int, n_arrays: int, n_rounds: int) -> None:
    """Lower this process's open-file limit to ``nofile_limit``; then, ``n_rounds`` times, receive
    ``n_arrays`` arrays from ``receiver`` keeping every one, until an error stops it. After each
    round report on ``reporter`` (arrays kept, 'Type: message' of that error or '', torch_* names
    in /dev/shm while holding them), wait for an answer, let them go, read what is left of the round."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile_limit, hard))
    for _ in range(n_rounds):  # one round per way of sending
        kept, error, read = [], "", 0
        try:
            while read < n_arrays:
                read += 1
                kept.append(receiver.recv())
        except Exception as caught:
            error = f"{type(caught).__name__}: {caught}"
        torch_names = sum(name.startswith("torch_") for name in os.listdir("/dev/shm"))
        reporter.send((len(kept), error, torch_names))
        reporter.recv()  # the parent read the report: let the arrays go
        del kept
        for _ in range(n_arrays - read):
            receiver.recv()


def send_shared_arrays(sender, next_round, release, strategies: list[str], n_arrays: int,
                       n_items: int) -> None:
    """Send ``n_arrays`` new arrays of ``n_items`` float64 on ``sender`` with each of ``strategies``
    in turn (torch's sharing strategies 'file_descriptor', 'file_system': the torch way; ``TORCH_FREE``:
    the torch-free way), each round after the first once ``next_round`` (a semaphore) is released;
    stay alive (receivers fetch torch's file descriptors from this process, and the torch-free way's
    segments are unlinked when it stops sharing) until ``release`` is set."""
    from sharedarrays import reducers

    rng = np.random.default_rng(0)
    for round_number, strategy in enumerate(strategies):
        if round_number:
            next_round.acquire()  # the receiver let the last round's arrays go
        if strategy == TORCH_FREE:
            reducers.stop_sharing_arrays()
            reducers.share_arrays("shared_memory")
        else:
            import torch.multiprocessing

            reducers.share_arrays("torch")  # on already in the second torch round: does nothing
            torch.multiprocessing.set_sharing_strategy(strategy)
        for _ in range(n_arrays):
            sender.send(rng.random(n_items))
    release.wait()  # stay alive: receivers fetch torch's descriptors from this process


# --- Round trips through the pickler, each way of sending an array, timed against the floors ---


HOWS = ("pickle", "torch", "torch_shared", "shared_memory", "shared_memory_shared")
WHERES = ("local", "remote")
ECHO_STOP_TIMEOUT = 10.0  # seconds the echo worker gets to leave before it is terminated


def reduction_of(how: str) -> str | None:
    """The ``sharedarrays.reducers`` way ``how`` uses ('torch', 'shared_memory'), None for 'pickle'."""
    if how not in HOWS:
        raise ValueError(f"how must be one of {HOWS}, got {how!r}")
    return None if how == "pickle" else how.removesuffix("_shared")


@dataclass(frozen=True)
class RoundTrip:
    """Seconds of round trips of one array: ``first`` (one-time costs included) and ``warm`` (the rest)."""

    first: float
    warm: Timing
    segments: tuple[int, int] | None = None  # the torch-free pool over these calls: (new, lent again)

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


def _segment_counts(how: str) -> tuple[int, int] | None:
    """For ``"shared_memory"``: the segments this process's pool made new and lent again so far
    (the library's counters, ``SegmentPool.created`` and ``reused``); None for any other way."""
    pool = reducers.shared_memory_pool() if how == "shared_memory" else None
    return None if pool is None else (pool.created, pool.reused)


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
        segments = _segment_counts(how)
    return RoundTrip(runs[0], Timing(tuple(runs[1:])), segments)


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
            segments = _segment_counts(how)
        return RoundTrip(runs[0], Timing(tuple(runs[1:])), segments)

    def close(self) -> None:
        """Ask the worker to leave, wait for it (terminate it if it hangs)."""
        try:
            self.connection.send(None)
        except OSError:
            pass  # it is gone already
        self.connection.close()
        self.process.join(ECHO_STOP_TIMEOUT)
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
    floor (a) / (b) at that size) and the floors themselves, ``warm_floor_s`` and ``fresh_floor_s``:
    each the faster of two medians, timed before and after that size's round trips; ``fresh_floor_runs_s``:
    every run of floor (b) at that size, before and after; ``segments_new`` / ``segments_reused``: for
    ``"shared_memory"``, the segments its pool made new / lent again over that row's calls (else None).
    One echo worker per reduction serves every size (started once, not timed).
    """
    hows, wheres = list(hows), list(wheres)
    echo_workers: dict[str | None, EchoWorker] = {}
    rows = []
    try:
        for size in sizes_bytes:
            array = np.random.default_rng(size).random(max(1, size // 8))
            before = copy_floors.measure_floors(array, repeat)
            size_rows = []
            for how in hows:
                for where in wheres:
                    if where == "local":
                        trip = local_round_trip_seconds(array, how, repeat)
                    else:
                        way = reduction_of(how)
                        if way not in echo_workers:
                            echo_workers[way] = EchoWorker(way, mp_context)
                        trip = echo_workers[way].round_trip_seconds(array, how, repeat)
                    new, reused = trip.segments or (None, None)
                    size_rows.append({"how": how, "size_bytes": int(array.nbytes), "where": where,
                                      "first_s": trip.first, "median_s": trip.median,
                                      "runs_s": list(trip.runs), "segments_new": new,
                                      "segments_reused": reused})
            after = copy_floors.measure_floors(array, repeat)
            floors = copy_floors.faster_medians(before.as_dict(), after.as_dict())
            warm_floor, fresh_floor = floors["warm"], floors["fresh_shm"]
            fresh_runs = list(before.as_dict()["fresh_shm"].runs) + list(after.as_dict()["fresh_shm"].runs)
            for row in size_rows:
                rows.append(row | {"ratio_to_warm_floor": row["median_s"] / warm_floor,
                                   "ratio_to_fresh_floor": row["median_s"] / fresh_floor,
                                   "warm_floor_s": warm_floor, "fresh_floor_s": fresh_floor,
                                   "fresh_floor_runs_s": fresh_runs})
            del array
    finally:
        for worker in echo_workers.values():
            worker.close()
    return rows


def open_files_held_torch_free(n_arrays: int, array_bytes: int = 64 * 1024) -> int | None:
    """How many more open files this process holds while it keeps ``n_arrays`` arrays received the
    torch-free way (dumped and loaded here, each in a segment of its own), or None without
    ``/proc/self/fd``. Before Python 3.13 ``mmap`` keeps a duplicate descriptor per map: about one
    each; from 3.13 the library maps without one."""
    fd_folder = "/proc/self/fd"
    if not os.path.isdir(fd_folder):
        return None
    before = len(os.listdir(fd_folder))
    with reducers.sharing_arrays("shared_memory"):
        kept = [ForkingPickler.loads(ForkingPickler.dumps(np.full(array_bytes // 8, float(i))))
                for i in range(n_arrays)]
        held = len(os.listdir(fd_folder)) - before
        del kept
    return max(held, 0)


def segment_bytes_in_shm(names: Iterable[str]) -> int:
    """Bytes ``/dev/shm`` holds for the segments ``names`` (their allocated pages; one gone counts 0)."""
    held = 0
    for name in names:
        try:
            held += os.stat(os.path.join(SHM_DIR, name)).st_blocks * 512
        except FileNotFoundError:
            pass
    return held


def without_segment_names(message: str) -> str:
    """``message`` without the quoted segment names it holds (each carries a process id):
    "segment 'sal_1234_ab' no longer exists" reads "segment no longer exists"."""
    return re.sub(r"segment '[^']+'", "segment", message)


def collect_given_back(pool: SegmentPool, timeout: float = 5.0) -> int:
    """Call ``pool.collect()`` (it files the segments receivers gave back as idle, warm ones) until
    none is lent or ``timeout`` seconds have passed (a receiver gives one back when its last view of
    it goes); return the bytes idle in the pool."""
    deadline = time.monotonic() + timeout
    pool.collect()
    while pool.lent_bytes and time.monotonic() < deadline:
        time.sleep(0.02)
        pool.collect()
    return pool.idle_bytes


def working_lines(function: Callable, starts: tuple[str, ...], until: str | None = None) -> str:
    """The lines of ``function``'s source that begin (indentation aside) with one of ``starts``,
    each with the lines that continue it (until its brackets close): its working lines; with
    ``until``, only those before the first line that begins with it. Wherever lines are left out,
    a line ``...  # (lines cut)`` at the first left-out line's indentation says so."""
    kept, depth, cut_at = [], 0, None  # cut_at: indentation of the first line cut since the last kept
    for line in inspect.getsource(function).splitlines():
        indent = line[:len(line) - len(line.lstrip())]
        if until is not None and depth == 0 and line.lstrip().startswith(until):
            cut_at = indent
            break
        code = line.split("  #")[0]
        if depth > 0 or line.lstrip().startswith(starts):
            if cut_at is not None and kept:
                kept.append(cut_at + CUT_MARK)
            cut_at = None
            kept.append(line)
            depth = max(0, depth + sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}"))
        elif line.strip() and cut_at is None:
            cut_at = indent
    if cut_at is not None and kept:
        kept.append(cut_at + CUT_MARK)
    return "\n".join(kept)


CUT_MARK = "...  # (lines cut)"


# --- "Your turn": which arrays made from a received array cross again without a copy ---


RESENDS = {  # what the exercise sends on, made from the received array ``received``
    "received[10::3]": lambda received: received[10::3],
    "received.view(np.uint8)": lambda received: received.view(np.uint8),
    "np.ascontiguousarray(received[10::3])": lambda received: np.ascontiguousarray(received[10::3]),
    "received * 1.0": lambda received: received * 1.0,
}
WHY = {
    "received[10::3]": "a slice is a view: its .base leads to the received array's shared memory",
    "received.view(np.uint8)": "a view with another dtype is still a view of the same shared bytes",
    "np.ascontiguousarray(received[10::3])": "a strided slice is not contiguous, so this makes a new, "
                                             "private array: the reduction must copy it into shared memory",
    "received * 1.0": "arithmetic makes a new, private array, however equal its values",
}


# The right answer, what ``WHY`` explains: views cross as descriptions, new arrays are copied.
RESEND_ANSWER = {"received[10::3]": "shared", "received.view(np.uint8)": "shared",
                 "np.ascontiguousarray(received[10::3])": "copied", "received * 1.0": "copied"}


def copied_on_resend(array: np.ndarray, ways: Iterable[str] = reducers.WAYS) -> dict[str, dict[str, bool]]:
    """For each way, send ``array`` once in this process (``ForkingPickler`` dumps then loads), then
    send on each of ``RESENDS`` made from what was received: True where the resent array was copied
    into new shared memory (it shares no memory with the received one), False where it crossed as a
    description. Use a small array: the copies are made for real."""
    copied = {}
    for way in ways:
        with reducers.sharing_arrays(way):
            received = ForkingPickler.loads(ForkingPickler.dumps(array))
            copied[way] = {}
            for expression, make in RESENDS.items():
                resent = ForkingPickler.loads(ForkingPickler.dumps(make(received)))
                copied[way][expression] = not np.shares_memory(resent, received)
                del resent
            del received
    return copied


def format_resends(copied: Mapping[str, Mapping[str, bool]]) -> str:
    """What ``copied_on_resend`` measured, one line per expression: 'shared' or 'copied', each way."""
    ways = list(copied)
    lines = [f"{'sent on':<40}" + "".join(f"{way:>15}" for way in ways)]
    for expression in RESENDS:
        lines.append(f"{expression:<40}" + "".join(
            f"{'copied' if copied[way][expression] else 'shared':>15}" for way in ways))
    return "\n".join(lines)


def _check_resend_prediction(answer, copied: Mapping[str, Mapping[str, bool]]) -> str | None:
    if not isinstance(answer, Mapping) or set(answer) != set(RESENDS):
        return f"answer with a dict: 'copied' or 'shared' for each of {list(RESENDS)}"
    for expression in RESENDS:
        said = answer[expression]
        if said not in ("copied", "shared"):
            return f"{expression!r}: answer 'copied' or 'shared', not {said!r}"
        for way, by_expression in copied.items():
            measured = "copied" if by_expression[expression] else "shared"
            if said != measured:
                return f"{expression!r} was {measured} when sent on the {way!r} way: {WHY[expression]}"
    return None


def _resend_solution(copied: Mapping[str, Mapping[str, bool]]) -> dict[str, str]:
    first_way = next(iter(copied.values()))
    return {expression: "copied" if first_way[expression] else "shared" for expression in RESENDS}


EXERCISE = Exercise(
    name="what crosses again without a copy",
    question=("`received` came through a reduction, and the process that received it, sharing the same "
              "way, sends on each of "
              f"{list(RESENDS)}. Which cross as a description of the same shared memory ('shared') "
              "and which are copied into new shared memory ('copied')? Answer with a dict."),
    check=_check_resend_prediction,
    solution=_resend_solution,
    explanation=("Both reductions follow .base to the memory an array views: a view of shared memory "
                 "crosses as a description, a new array (a copy, a result) is private and is copied once."),
    misconceptions=(
        ({**RESEND_ANSWER, "received[10::3]": "copied"},
         "a strided slice is not contiguous, so it cannot be described and must be copied"),
        ({**RESEND_ANSWER, "received.view(np.uint8)": "copied"},
         "a view with another dtype is a new array"),
        ({expression: "shared" for expression in RESENDS},
         "whatever is made from a received shared array stays in its shared memory"),
    ),
)
