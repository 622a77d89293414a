"""``python -m helpers.bench --task module:function``: a reader's own task, on their own array, in every
strategy that can carry it, and a short ranking of the ways for that task on this machine.

The contract: each worker calls ``task(array, worker_index, n_workers)`` on the array it reaches the
strategy's way, and the task returns a small value or an array. The module is imported by name in
every worker, as a spawned child imports it, so it must be importable from here (not ``__main__``);
``check_task`` says why not before anything starts.

Each strategy runs in a spawned process of its own (``helpers.bench.ray_child.RayChild``, as the Ray
strategies do in the course's suite), which receives a copy of the array: a task that writes into
its argument cannot change what the next strategy sees, a task that hangs is ended with the whole
process tree at the time limit, and one that raises is reported with its traceback while the other
strategies still run. Seconds and bytes throughout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
from collections.abc import Callable

import numpy as np

from helpers.bench import decision_guide, ray_child, strategies, tasks
from helpers.measure import system

DEFAULT_TIME_LIMIT_S = 300.0  # one strategy's whole run (start-up, memory windows, timed runs)
STOP_SECONDS = 5.0  # a strategy's process told to stop (time limit, error) gets this long, then is killed
TOP = 3  # strategies the ranking names
TIMED_OUT = "timed out"
WRITES_REFUSED = "cannot run this task: it writes into its argument"
# The strategies that can carry an object array at all (pickled, inherited or read in place); the
# others need its bytes, which are pointers into one process's heap (lesson 07).
OBJECT_DTYPE_OK = frozenset({"threads", "pickle", "send_once", "manager", "fork_cow", "joblib", "executor",
                             "ray_by_value", "ray_object_store", "dask_by_value", "dask_scatter"})
CONSTRAINTS = ("start_methods", "crash_cleanup", "multi_node")  # the guide's questions every ranking cites
FAN_OUT_WHAT = "fan-out: each of {n} workers calls {task}(array, i, {n})"
ROUND_TRIP_WHAT = "round trip: worker 0's call sends its array back whole"


def check_task(spec: str) -> Callable:
    """The function ``spec`` ('module:function') names, imported here as a spawned worker will import
    it; ValueError (one line saying what to fix) when it cannot be."""
    module_name, colon, function_name = spec.partition(":")
    if not colon or not module_name or not function_name:
        raise ValueError(f"--task takes module:function (e.g. my_tasks:smooth), got {spec!r}")
    if module_name == "__main__":
        raise ValueError("--task cannot name __main__: spawned workers import the task by its module's name; "
                         "put the function in a module of its own")
    try:
        importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise ValueError(f"--task {spec}: no module named {error.name!r} (workers import it by name: run "
                         "from the folder that holds it, or add that folder to PYTHONPATH)") from None
    except Exception as error:  # the module itself raised while it was imported
        raise ValueError(f"--task {spec}: importing {module_name} raised "
                         f"{ray_child.one_line(error)}") from None
    try:
        function = tasks.load_own_task(spec)
    except AttributeError:
        raise ValueError(f"--task {spec}: module {module_name} has no {function_name!r}") from None
    if not callable(function):
        raise ValueError(f"--task {spec}: {function_name} is a {type(function).__name__}, not a function")
    return function


def object_dtype_refusal(name: str, dtype: np.dtype) -> str | None:
    """Why ``name`` cannot carry an array of ``dtype`` (None: it can): only object dtypes are refused."""
    if not dtype.hasobject or name in OBJECT_DTYPE_OK:
        return None
    return (f"object dtype: its items are pointers into one process's heap; {name} shares the array's bytes "
            f"(decision guide, object dtype: {decision_guide.GUIDE[name]['object_dtype'].render()})")


def read_only_refusal(name: str) -> str:
    """The reason a strategy whose workers get read-only views cannot run a task that writes."""
    return (f"{WRITES_REFUSED}, and {name} hands its workers read-only "
            f"views (decision guide, writable?: {decision_guide.GUIDE[name]['writable'].render()})")


def _serve_own_task(connection, layout: tuple, share: bool, scratch: str, *, spec: str) -> None:
    """Main of a strategy's spawned process: ``ray_child.serve`` measuring ``spec`` as the task."""
    ray_child.serve(connection, layout, scratch, functools.partial(_run_in_child, spec=spec),
                    contextlib.nullcontext)


def _run_in_child(name: str, array: np.ndarray, n_workers: int, repeat: int, *, spec: str):
    strategy = strategies.STRATEGIES[name]
    reason = strategy.mechanism.missing()
    if reason is not None:
        return strategies.StrategyResult(name, strategy.title, array.nbytes, n_workers, skipped=reason)
    return strategies.measure_here(strategy, array, n_workers, repeat, own_task=spec)


def run_strategy(name: str, array: np.ndarray, spec: str, n_workers: int, repeat: int,
                 time_limit: float = DEFAULT_TIME_LIMIT_S) -> strategies.StrategyResult:
    """Measure ``spec`` in strategy ``name`` in a spawned process of its own, within ``time_limit``
    seconds; never raises for a strategy that cannot run or fails (the result says why, with the
    worker's traceback when the task raised). Leaves no process, segment or file behind."""
    strategy = strategies.STRATEGIES[name]
    reason = object_dtype_refusal(name, array.dtype) or strategy.unavailable(array.nbytes, n_workers)
    if reason is not None:
        return strategies.StrategyResult(name, strategy.title, array.nbytes, n_workers, skipped=reason)
    target = functools.partial(_serve_own_task, spec=spec)
    with ray_child.RayChild(target, array, stop_seconds=STOP_SECONDS) as child:
        try:
            result = child.run(name, n_workers, repeat, timeout=time_limit)
        except ray_child.RayChildFailed as failed:
            if str(failed) == "no answer within the time limit":
                why = (f"{TIMED_OUT}: not done within {time_limit:g} s (the task may hang); its process and "
                       "workers were ended")
            else:
                why = f"failed: {failed}"
            return strategies.StrategyResult(name, strategy.title, array.nbytes, n_workers, skipped=why)
    if result.traceback and tasks.WRITES_READ_ONLY in result.traceback:
        return dataclasses.replace(result, skipped=read_only_refusal(name), traceback=None)
    if result.skipped and result.skipped.startswith("failed here: "):
        return dataclasses.replace(result, skipped="failed: " + result.skipped.removeprefix("failed here: "))
    return result


def run_all(names: list[str], array: np.ndarray, spec: str, n_workers: int, repeat: int,
            time_limit: float = DEFAULT_TIME_LIMIT_S,
            progress: Callable[[str, int, int], None] | None = None) -> list[strategies.StrategyResult]:
    """``run_strategy`` for each name in order, calling ``progress(name, done, total)`` before each."""
    results = []
    for done, name in enumerate(names):
        if progress is not None:
            progress(name, done, len(names))
        results.append(run_strategy(name, array, spec, n_workers, repeat, time_limit))
    return results


# --- the ranking ---------------------------------------------------------------------------------


def _seconds(row: dict) -> float:
    """What the ranking orders by: the fan-out's median plus the round trip's where there is one."""
    return row["fan_out_median_s"] + (row["round_trip_median_s"] or 0.0)


def _memory_added(row: dict) -> float:
    return max(row["pss_added_bytes"] or 0.0, row["shm_added_bytes"] or 0.0)


def ranking(rows: list[dict], available_bytes: int | None = None) -> dict:
    """The ranking for this task: the strategies that ran, fastest first (fan-out plus round trip),
    those whose memory added (tree PSS, or /dev/shm if more) fits ``available_bytes`` (default: RAM
    available now) in ``order``, the others in ``over_memory``; ``writes``: True when a strategy
    refused the task for writing into a read-only view, None when none could tell; ``constraints``:
    the decision guide's cells that apply to the first ``TOP`` (its start methods, crash cleanup,
    more than one machine, and whether writes are seen when the task writes), each with its lessons."""
    available = system.available_memory() if available_bytes is None else available_bytes
    ran = sorted((r for r in rows if not r["name"].startswith("floor_") and not r["skipped"]), key=_seconds)
    refused = [r["name"] for r in rows if (r.get("skipped") or "").startswith(WRITES_REFUSED)]
    writes = True if refused else None
    entries = [{"name": r["name"], "seconds": _seconds(r), "fan_out_median_s": r["fan_out_median_s"],
                "round_trip_median_s": r["round_trip_median_s"],
                "fan_out_ratio_to_warm_floor": r["ratio_to_warm_floor"],
                "memory_added_bytes": _memory_added(r), "lesson": r["lesson"]} for r in ran]
    order = [e for e in entries if e["memory_added_bytes"] <= available]
    questions = CONSTRAINTS + (("writable",) if writes else ())
    constraints = [{"name": e["name"], "question": decision_guide.QUESTIONS[q],
                    "answer": decision_guide.GUIDE[e["name"]][q].render()}
                   for e in order[:TOP] for q in questions if e["name"] in decision_guide.GUIDE]
    return {"order": order, "over_memory": [e for e in entries if e not in order],
            "available_bytes": available, "writes": writes, "refused_for_writing": refused,
            "constraints": constraints}


def format_ranking(rank: dict, spec: str, array_bytes: int) -> str:
    """The ranking as a few lines of text: the fastest ways, then the constraints that apply."""
    from helpers.measure.units import format_bytes, format_seconds

    lines = [f"ranking for {spec} on {format_bytes(array_bytes)} (fan-out + round trip, fastest first, "
             f"within {format_bytes(rank['available_bytes'])} of RAM available):"]
    for place, entry in enumerate(rank["order"][:TOP], 1):
        lines.append(f"  {place}. {entry['name']:<22} {format_seconds(entry['seconds']):>9}  "
                     f"(fan-out {entry['fan_out_ratio_to_warm_floor']:.2f}x floor (a); memory added "
                     f"{entry['memory_added_bytes'] / array_bytes:.2f} arrays; lesson {entry['lesson']})")
    if not rank["order"]:
        lines.append("  no strategy ran to the end: see the reasons above")
    for entry in rank["over_memory"]:
        lines.append(f"  left out: {entry['name']} added {format_bytes(entry['memory_added_bytes'])}, "
                     "more than the RAM available")
    if rank["writes"]:
        refused = ", ".join(rank["refused_for_writing"])
        lines.append(f"  the task writes into its argument: refused by {refused} (read-only "
                     "views); where the others' writes go is below (writable?)")
    if rank["constraints"]:
        lines.append("what the decision guide says of them (lesson that shows it):")
        lines += [f"  {c['name']:<22} {c['question']:<17} {c['answer']}" for c in rank["constraints"]]
    return "\n".join(lines)
