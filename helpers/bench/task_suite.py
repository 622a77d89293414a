"""The ``task`` suite of ``python -m helpers.bench --task module:function``: a reader's own task on their
own array (``helpers.bench.own_task``, ``helpers.bench.task_array``) in every strategy chosen, beside
the floors measured on that array in the same run; its rows, table, ranking, comparison and figure.

Rows are the strategies suite's (``strategies_suite.strategy_row``: fan-out and round-trip medians,
their ratios to floor (a) and (b), set-up, PSS and /dev/shm added while every worker holds the array,
the reason when a strategy could not run) with ``what`` saying what the task did; the document adds
``task`` (the spec, the array, the time limit) and ``ranking`` (``own_task.ranking``). Seconds, bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from helpers.bench import own_task, strategies_suite, task_array
from helpers.bench import transport_suite as transport
from helpers.measure.units import format_bytes

TRACE_LINES = 12  # lines of each worker traceback the table prints
FLOOR_REPEAT_MAX = 20  # timed runs of each floor, at most (one memcpy each: steady long before that)


def panels(spec: str) -> tuple[tuple[str, str, bool], ...]:
    """The figure's three panels, titled for ``spec``."""
    return (("median_s", f"fan-out: every worker calls {spec} (s, log)", True),
            ("round_trip_median_s", "round trip: worker 0's returned array sent back whole (s, log)", True),
            ("pss_added_arrays", "tree PSS added while every worker holds the array (arrays)", False))


def _floor_source(array: np.ndarray) -> np.ndarray:
    """What the floors copy: the array itself, or as many random bytes for an object array (its
    items are pointers: copying them is not what a strategy does with the array's bytes)."""
    if not array.dtype.hasobject:
        return array
    return np.random.default_rng(0).integers(0, 255, array.nbytes, dtype=np.uint8)


def run(source: task_array.ArrayInput, names: list[str], spec: str, n_workers: int, repeat: int,
        time_limit: float, bar) -> tuple[list[dict], dict]:
    """(rows, ranking): the floors, then every strategy in ``names`` with the task; ``bar`` (tqdm)
    advances once per strategy."""
    bar.set_description("floors")
    array = task_array.make(source)
    floors = transport.measure_floors(_floor_source(array), repeat=min(max(repeat, 5), FLOOR_REPEAT_MAX))
    rows = transport.floor_rows(array.nbytes, floors)
    what = own_task.FAN_OUT_WHAT.format(n=n_workers, task=spec)
    for name in names:
        bar.set_description(f"{format_bytes(array.nbytes)}: {name}")
        row = strategies_suite.strategy_row(
            own_task.run_strategy(name, array, spec, n_workers, repeat, time_limit), floors)
        row.update(what=what, task=spec)
        rows.append(row)
        bar.update()
    del array
    return rows, own_task.ranking(rows)


def format_table(rows: list[dict], spec: str) -> str:
    """The strategies suite's table, its legend saying what the fan-out was; then every worker
    traceback that came back."""
    table = strategies_suite.format_table(rows, own_task.FAN_OUT_WHAT.format(n="N", task=spec))
    traces = [f"--- {row['name']}: the end of the traceback (the worker's when the task raised; all of it "
              "in the JSON) ---\n"
              + "\n".join(row["traceback"].rstrip().splitlines()[-TRACE_LINES:])
              for row in rows if row.get("traceback")]
    return "\n\n".join([table, *traces])


def plot_document(doc: dict, path: Path, reference: dict | None = None) -> Path:
    """The strategies suite's figure (``strategies_suite.plot_document``) titled for the task."""
    return strategies_suite.plot_document(doc, path, reference, panels(doc["task"]["spec"]))


format_comparison = strategies_suite.format_comparison
