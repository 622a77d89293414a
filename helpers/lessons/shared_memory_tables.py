"""Lesson 07's table demonstrations: a record table pickled to workers (its text column as
fixed-width bytes or as Python objects) against the same table in shared memory (a new segment each
call, or one filled once), and what tracemalloc sees of a shared table beside the process tree's
memory.
"""

from __future__ import annotations

import hashlib
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from helpers.lessons import workers
from helpers.lessons.shared_memory import nansum_field_slice
from helpers.measure.memory import MemoryReport, track_memory
from helpers.measure.timing import Timing, time_in_turns
from sharedarrays.shm import SharedNDArray, attach

TICKERS = ("AAPL", "MSFT", "NVDA", "GOOGL", "AMZN", "BRK.B", "TSLA", "SPY")
TEXT_KINDS = ("bytes", "objects")  # the ticker column as fixed-width bytes ('S8') or Python str
MISSING_SHARE = 0.05  # the share of prices that are NaN

PICKLED_BYTES = "pickled, text as fixed-width bytes"
SHARED = "new segment each call: copy in, send handles"
SHARED_KEPT = "already in a segment: send handles"
PICKLED_OBJECTS = "pickled, text as Python objects"
PICKLED_OBJECTS_TRACED = "pickled, text as Python objects, tracemalloc on"  # as the post timed it
SHARED_TRACED = "new segment each call, tracemalloc on"  # the post traced its shared side too
ONE_ROW = "pickled, one row: a call's fixed cost"


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
    table_dtype(text)  # refuses an unknown text kind
    table = np.empty(n_rows, dtype=table_dtype("bytes"))
    table["id"] = np.arange(n_rows)
    table["when"] = np.datetime64("2026-01-02T09:30:00") + np.random.default_rng(1).integers(
        0, 250 * 86_400, n_rows).astype("timedelta64[s]")
    table["price"] = 50 + 450 * np.random.default_rng(2).random(n_rows)
    table["price"][np.random.default_rng(3).random(n_rows) < MISSING_SHARE] = np.nan
    picks = np.random.default_rng(4).integers(0, len(TICKERS), n_rows)
    table["ticker"] = np.array(TICKERS, dtype="S8")[picks]
    return table if text == "bytes" else text_as_objects(table)


def text_as_objects(table: np.ndarray) -> np.ndarray:
    """A copy of a table of ``table_dtype('bytes')`` whose tickers are Python strings, as
    ``df.to_records()`` gives a text column by default."""
    if table.dtype != table_dtype("bytes"):
        raise TypeError(f"expected a table of dtype {table_dtype('bytes')}, got {table.dtype}")
    objects = np.empty(len(table), dtype=table_dtype("objects"))
    for field in ("id", "when", "price"):
        objects[field] = table[field]
    objects["ticker"] = [ticker.decode() for ticker in table["ticker"]]
    return objects


@dataclass(frozen=True)
class TableFanOuts:
    """Each way's fan-out times (a Timing in seconds, by way), the rows it sent, and the sums that
    each way's workers returned on its untimed first call. ``ONE_ROW``, where timed, is a call's
    fixed cost (the pool's round trip), which ``per_row`` sets aside."""

    timings: dict[str, Timing]
    rows: dict[str, int]
    sums: dict[str, list[float]]

    @property
    def fixed(self) -> float:
        """Seconds of the fastest call that pickled one row (0 where not timed)."""
        return self.timings[ONE_ROW].min if ONE_ROW in self.timings else 0.0

    def per_row(self, way: str) -> float:
        """Seconds a row of ``way``'s fastest call, the fixed cost of a call set aside (all workers of
        the call together)."""
        return max(self.timings[way].min - self.fixed, 0.0) / self.rows[way]

    def whole_table(self, way: str, n_rows: int) -> float:
        """Seconds of ``way``'s fastest call on ``n_rows`` rows: measured where it sent them, else
        the fixed cost plus ``per_row`` times ``n_rows`` (extrapolated)."""
        if self.rows[way] == n_rows:
            return self.timings[way].min
        return self.fixed + self.per_row(way) * n_rows


def time_table_fan_outs(context, n_workers: int, table: np.ndarray, object_rows: int,
                        repeat: int = 5) -> TableFanOuts:
    """Seconds of one fan-out of a record table to each of ``n_workers`` workers, which return
    ``np.nansum`` of its prices. ``table`` (``table_dtype('bytes')``) goes three ways: pickled; copied
    into a new segment whose handle each task carries (creation and copy included); as handles of a
    segment filled once, before timing. Its first ``object_rows`` rows with the text as Python
    objects are pickled (at full size that would take seconds a call; compare its time per row);
    and one row of those, a call's fixed cost (``ONE_ROW``). Then the objects way and the new
    segment way run again with tracemalloc tracing this process, as the post timed both sides
    (unless it traces already). Pool start-up is excluded;
    each way runs once untimed (its sums kept), then the ways
    are timed in turns (one call of each per round), so that a busy moment of the machine slows one
    call of each, not every call of one."""
    objects = text_as_objects(table[:object_rows])
    rows = {PICKLED_BYTES: len(table), SHARED: len(table), SHARED_KEPT: len(table),
            PICKLED_OBJECTS: len(objects), PICKLED_OBJECTS_TRACED: len(objects), SHARED_TRACED: len(table),
            ONE_ROW: 1}
    with SharedNDArray.copy_of(table) as kept, context.Pool(n_workers) as pool:
        pool.map(workers.worker_pid, range(n_workers))  # start the workers before timing

        def send_handles(shared: SharedNDArray) -> list[float]:
            return pool.starmap(nansum_field_slice, [(shared.handle, "price", 0, len(table))] * n_workers,
                                chunksize=1)

        def new_segment() -> list[float]:
            with SharedNDArray.copy_of(table) as shared:
                return send_handles(shared)

        ways: dict[str, Callable[[], list[float]]] = {
            PICKLED_BYTES: lambda: pool.map(nansum_price, [table] * n_workers, chunksize=1),
            SHARED: new_segment,
            SHARED_KEPT: lambda: send_handles(kept),
            PICKLED_OBJECTS: lambda: pool.map(nansum_price, [objects] * n_workers, chunksize=1),
            ONE_ROW: lambda: pool.map(nansum_price, [objects[:1]] * n_workers, chunksize=1),
        }
        sums = {way: fan_out() for way, fan_out in ways.items()}  # untimed: the warm-up, checked
        timings = time_in_turns(ways, repeat=repeat)
        if not tracemalloc.is_tracing():  # tracing already: every way above was traced, none to compare
            tracemalloc.start()  # as the post did: tracing on while it timed (start and stop untimed)
            try:
                traced = {PICKLED_OBJECTS_TRACED: ways[PICKLED_OBJECTS], SHARED_TRACED: ways[SHARED]}
                sums.update({way: fan_out() for way, fan_out in traced.items()})  # untimed, as above
                timings.update(time_in_turns(traced, repeat=repeat))
            finally:
                tracemalloc.stop()
    return TableFanOuts(timings, {way: rows[way] for way in timings}, sums)


POST_PICKLED_S, POST_SHARED_S = 216.0, 2.09  # the post's times: pickled, and with SharedMemory
POST_FACTOR = POST_PICKLED_S / POST_SHARED_S


POST_WORKERS = 4  # the post's pool: cpu_count() on its dual-core, four-thread laptop


def post_versions(fan_outs: TableFanOuts, n_workers: int) -> str:
    """Markdown on the shared-memory post's factor of about 100, from the fan-outs' times per row (a
    call's fixed cost set aside): its first version (text as objects, our objects way) against a new
    segment (the post made one per run), as a table of factors: what pickling itself costs, what the
    objects add, what tracemalloc tracing added (on the objects way over on a new segment, where
    both were traced, as the post timed them), and all together; then what
    differs between our setting and the post's (``n_workers``: ours)."""
    per_row = fan_outs.per_row
    factors = [("pickling fixed-width bytes / a new segment", per_row(PICKLED_BYTES) / per_row(SHARED)),
               ("text as Python objects / fixed-width bytes",
                per_row(PICKLED_OBJECTS) / per_row(PICKLED_BYTES))]
    if PICKLED_OBJECTS_TRACED in fan_outs.timings:
        on_objects = per_row(PICKLED_OBJECTS_TRACED) / per_row(PICKLED_OBJECTS)
        if SHARED_TRACED in fan_outs.timings:  # the post traced both sides: only the difference counts
            on_segment = per_row(SHARED_TRACED) / per_row(SHARED)
            # two decimals each, so that the quotient in the next column reads right (3.00× ÷ 1.03× = 2.9×)
            factors.append((f"tracemalloc on / off: objects' {on_objects:.2f}× ÷ a new "
                            f"segment's {on_segment:.2f}×", on_objects / on_segment))
        else:
            factors.append(("tracemalloc on / off", on_objects))
    # the product of the factors as printed, so that the row reads as their product (4.4× · 19× · 3×
    # reads 250×, where the unrounded product, just under 245, read 240×)
    total = float(np.prod([float(about(factor).replace(",", "")) for _, factor in factors]))
    verdict = ("more than" if total >= POST_FACTOR else "near" if total >= POST_FACTOR / 3
               else "short of")
    rows = [f"| {name} | {about(factor)}× |" for name, factor in factors]
    setting = (f"The post's {POST_WORKERS} workers change these factors" if n_workers < POST_WORKERS
               else "The post's machine changes these factors")
    setting += (", so compare their size, not their value." if total >= POST_FACTOR / 3
                else ": ours fall short of a gap of this size.")
    ours = f"S{table_dtype('bytes')['ticker'].itemsize}"
    return "\n".join([
        "**The post's 100×.** Its figures come from its first version: text as Python objects (our "
        "objects row), timed with tracemalloc on, which records every allocation. "
        f"Its code today stores fixed-width bytes (`'S6'`; ours is `'{ours}'`): our bytes "
        "row. Each factor below compares time per row, after subtracting the one-row call's fixed cost. "
        "'A new segment' is created inside the timed call, as in the post:",
        "", "| factor, per row | this run |", "|---|---|", *rows,
        f"| all together, with our {n_workers} workers | **{about(total)}×**, {verdict} the post's 100× |",
        "",
        setting])


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
