"""Lesson 07's table and object-array demonstrations: a record table pickled to workers (its text
column as fixed-width bytes or as Python objects) against the same table in shared memory, what
tracemalloc sees of a shared table beside the process tree's memory, and what a *forked* child reads
when it views an object array's pointers from a segment (in a fresh interpreter, so that no crash
can reach the caller).
"""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from helpers.lessons import workers
from helpers.lessons.shared_memory import nansum_field_slice, run_python
from helpers.measure.memory import MemoryReport, track_memory
from helpers.measure.timing import Timing, time_in_turns, time_it
from sharedarrays.shm import SharedNDArray, attach

TICKERS = ("AAPL", "MSFT", "NVDA", "GOOGL", "AMZN", "BRK.B", "TSLA", "SPY")
TEXT_KINDS = ("bytes", "objects")  # the ticker column as fixed-width bytes ('S8') or Python str
MISSING_SHARE = 0.05  # the share of prices that are NaN

PICKLED_BYTES = "pickled, text as fixed-width bytes"
PICKLED_OBJECTS = "pickled, text as Python objects"
SHARED = "shared memory: copy in once, send handles"
PICKLED_OBJECTS_TRACED = "pickled, text as Python objects, tracemalloc on"  # as the post timed it


def table_dtype(text: str) -> np.dtype:
    """The row of the lesson's table: id, timestamp, price and ticker (``text``: 'bytes' or 'objects')."""
    if text not in TEXT_KINDS:
        raise ValueError(f"text must be one of {TEXT_KINDS}, got {text!r}")
    return np.dtype([("id", "i8"), ("when", "datetime64[s]"), ("price", "f8"),
                     ("ticker", "S8" if text == "bytes" else object)])


def make_table(n_rows: int, text: str = "bytes") -> np.ndarray:
    """A record table of ``n_rows`` rows (5 % of prices missing); each column from its own seed, so
    the first rows are the same at every size and both text kinds hold the same tickers."""
    if not isinstance(n_rows, int | np.integer) or n_rows < 1:
        raise ValueError(f"n_rows must be a positive whole number, got {n_rows!r}")
    table = np.empty(n_rows, dtype=table_dtype(text))
    table["id"] = np.arange(n_rows)
    table["when"] = np.datetime64("2026-01-02T09:30:00") + np.random.default_rng(1).integers(
        0, 250 * 86_400, n_rows).astype("timedelta64[s]")
    table["price"] = 50 + 450 * np.random.default_rng(2).random(n_rows)
    table["price"][np.random.default_rng(3).random(n_rows) < MISSING_SHARE] = np.nan
    tickers = np.array(TICKERS, dtype="S8")[np.random.default_rng(4).integers(0, len(TICKERS), n_rows)]
    table["ticker"] = tickers if text == "bytes" else [ticker.decode() for ticker in tickers]
    return table


def time_table_fan_outs(context, n_workers: int, n_rows: int, repeat: int = 5
                        ) -> tuple[dict[str, Timing], dict[str, list[float]]]:
    """Seconds of one fan-out of the whole table to each of ``n_workers`` workers, which return
    ``np.nansum`` of its prices: pickled with each text kind, or copied into a new segment whose
    handle each task carries (segment creation and copy included), and the object kind pickled again
    with tracemalloc tracing this process, as the post timed it (unless it traces already). Pool
    start-up is excluded. The three ways are timed in turns (one call of each per round), so that a
    busy moment of the machine slows one call of each, not every call of one.
    Returns the timings and the sums of the untimed first run of each way, by way."""
    tables = {kind: make_table(n_rows, kind) for kind in TEXT_KINDS}

    def shared_fan_out(pool) -> list[float]:
        with SharedNDArray.copy_of(tables["bytes"]) as shared:
            tasks = [(shared.handle, "price", 0, n_rows)] * n_workers
            return pool.starmap(nansum_field_slice, tasks, chunksize=1)


    with context.Pool(n_workers) as pool:
        pool.map(workers.worker_pid, range(n_workers))  # start the workers before timing
        ways: dict[str, Callable[[], list[float]]] = {
            PICKLED_BYTES: lambda: pool.map(nansum_price, [tables["bytes"]] * n_workers, chunksize=1),
            PICKLED_OBJECTS: lambda: pool.map(nansum_price, [tables["objects"]] * n_workers, chunksize=1),
            SHARED: lambda: shared_fan_out(pool),
        }
        sums = {way: fan_out() for way, fan_out in ways.items()}  # untimed: the warm-up, checked
        timings = time_in_turns(ways, repeat=repeat)
        if not tracemalloc.is_tracing():  # tracing already: every way above was traced, none to compare
            tracemalloc.start()  # as the post did: tracing on while it timed (start and stop untimed)
            try:
                sums[PICKLED_OBJECTS_TRACED] = ways[PICKLED_OBJECTS]()
                timings[PICKLED_OBJECTS_TRACED] = time_it(ways[PICKLED_OBJECTS], repeat=repeat, warmup=0)
            finally:
                tracemalloc.stop()
    return timings, sums


POST_TABLE_BYTES = 240e6  # the post's record array: 240 MB


def post_versions(pickled_bytes: float, pickled_objects: float, shared: float,
                  traced: float | None, table_bytes: int | None = None) -> str:
    """Markdown on the shared-memory post's two versions, from the fan-out times (seconds; the
    lesson passes the fastest call of each): its code today (``'S6'``, our bytes row) and its first
    version (text as objects, our strings row), which of them gives a factor of tens, and what
    tracemalloc on cost the strings' way. With ``table_bytes`` (the timed table's size), says how
    much bigger the post's table was."""
    def faster(pickled: float) -> str:
        if pickled >= shared:
            return f"shared memory was {about(pickled / shared)}× as fast as pickling"
        return f"pickling was {about(shared / pickled)}× as fast as shared memory"

    text = ("**The post's two versions.** Its code today (`'S6'`) is our bytes row: "
            f"{faster(pickled_bytes)}. Its first version (text as objects) is our strings row: "
            f"{faster(pickled_objects)}. ")
    separate = pickled_objects >= 10 * shared > pickled_bytes
    bigger = (f" (on a table {POST_TABLE_BYTES / table_bytes:,.0f}× this one's size)" if table_bytes else "")
    text += ("Only the strings make pickling lose by an order of magnitude, as in the post: its figures "
             f"came from that version{bigger}. " if separate
             else "Here the two versions do not separate that way. ")
    if traced is not None:
        costly = traced >= 1.2 * pickled_objects
        text += ("With tracemalloc tracing this process, as the post timed it, the strings' way took "
                 f"{about(traced / pickled_objects)}× as long" + (
                     ": tracemalloc records every allocation the pickling makes." if costly else
                     ": on this path it costs little, since the workers, which unpickle, are not traced."))
    return text


@dataclass(frozen=True)
class TableShare:
    """A table shared with workers under ``track_memory``: each worker's nansum of its slice of
    prices, the SHA-256 of the whole table as each worker read it and as this process holds it,
    and the MemoryReport (bytes; processes named by role)."""

    price_sums: list[float]
    worker_digests: list[str]
    parent_digest: str
    report: MemoryReport


def share_table_with_workers(context, table: np.ndarray, n_workers: int) -> TableShare:
    """Copy ``table`` into a segment and let ``n_workers`` spawned workers sum their slice of the
    prices and hash every byte of it, all under ``track_memory`` (tracemalloc included)."""
    bounds = [(i * len(table) // n_workers, (i + 1) * len(table) // n_workers) for i in range(n_workers)]
    with track_memory() as report:
        with SharedNDArray.copy_of(table) as shared:
            with context.Pool(n_workers) as pool:
                price_sums = pool.starmap(nansum_field_slice,
                                          [(shared.handle, "price", start, stop) for start, stop in bounds])
                worker_digests = pool.map(table_digest, [shared.handle] * n_workers, chunksize=1)
    report.name_roles()
    parent_digest = hashlib.sha256(np.ascontiguousarray(table).view(np.uint8)).hexdigest()
    return TableShare(price_sums, worker_digests, parent_digest, report)


READ_OBJECTS_IN_FORKED_CHILD = """
    import json, os
    import numpy as np
    from sharedarrays.shm import SharedNDArray
    objects = np.array(["a string", 3.5, None, {"key": "value"}], dtype=object)
    pointers = np.frombuffer(objects.tobytes(), dtype=np.uintp)  # what a segment can hold
    with SharedNDArray.copy_of(pointers) as shared:
        changed_read, changed_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: view the segment's pointers as objects, read them twice
            items = np.ndarray(shared.array.shape, dtype=object, buffer=shared.array)
            at_fork = [repr(item) for item in items]
            os.read(changed_read, 1)  # the parent has changed its dict by now
            later = [repr(item) for item in items]
            print(json.dumps({"child at fork": at_fork, "child later": later}), flush=True)
            os._exit(0)
        objects[3]["key"] = "changed"
        os.write(changed_write, b"!")
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"parent later": [repr(item) for item in objects],
                          "child exit": os.waitstatus_to_exitcode(status)}), flush=True)
"""


@dataclass(frozen=True)
class ForkedRead:
    """What a forked child read through an object array's pointers in a segment: the items (as
    ``repr``) at the fork and after the parent changed one, the parent's own items then, and the
    exit codes of the child and of the interpreter that ran the demonstration."""

    child_at_fork: list[str]
    child_later: list[str]
    parent_later: list[str]
    child_exit: int | None
    returncode: int


def read_objects_in_forked_child() -> ForkedRead:
    """In a fresh interpreter, put an object array's pointers in a segment and fork a child that
    views them as objects, before and after the parent changes one of its objects."""
    result = run_python(READ_OBJECTS_IN_FORKED_CHILD)
    seen: dict = {}
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            seen.update(json.loads(line))
    return ForkedRead(seen.get("child at fork", []), seen.get("child later", []),
                      seen.get("parent later", []), seen.get("child exit"), result.returncode)


# --- Worker functions (run in child processes; importable by name under spawn and forkserver) ---


def nansum_price(records: np.ndarray) -> float:
    """``np.nansum`` of the 'price' field of a record table received as an argument (pickled)."""
    return float(np.nansum(records["price"]))


def table_digest(handle) -> str:
    """SHA-256 (hex) of every byte of a shared record table, as this worker reads it (no copy)."""
    with attach(handle) as records:
        return hashlib.sha256(records.view(np.uint8)).hexdigest()


def about(value: float) -> str:
    """A measured ratio or figure with two significant digits, for prose: 503.2 -> '500', 7.34 -> '7.3'.
    A value just below zero (above -0.01: a memory difference that is noise of either sign) reads '0'."""
    if -0.01 < value < 0:
        return "0"
    return f"{float(f'{value:.2g}'):,g}"
