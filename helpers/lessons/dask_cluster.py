"""Lesson 10's Dask section: the same fan-out as Ray's on a Dask ``LocalCluster`` of worker processes,
the array handed by value (``client.submit(f, array)``) or scattered once
(``client.scatter(array, broadcast=True)``, then the future). Times are seconds, sizes bytes.

``dask_cluster`` starts the cluster (``processes=True``, one thread per worker, no dashboard, logs
silenced, its scratch folder a ``sal-dask-*`` temp folder of ours) and always closes it: the
client, the cluster, every worker process it started (waited for, killed by pid after 10 s), the
folder. The scheduler and the nannies run in this process (threads of an event loop); each nanny
spawns one worker process, so the workers are our children and ``track_memory`` sees them. Dask's
scheduler adds its scratch folder to ``sys.path``; the session takes it out again.
Dask's active memory manager is off in the session: on (Dask's default), its ReduceReplicas policy
drops, every 2 s, each copy beyond one that no waiting task needs, so the copies
``broadcast=True`` made can vanish before the tasks that would read them arrive, and a worker then
fetches the array again (Dask's ``scatter`` documentation says to turn it off for ``broadcast``).
Every task is pinned to one worker (``workers=[address]``) and made impure (``pure=False``: Dask
would otherwise run identical calls once). The functions Dask's workers run are at the end of
this module (a function defined in a notebook cell would live in ``__main__``). Dask is imported
lazily, so importing ``helpers`` never needs it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil

from helpers.lessons.exercises import Exercise
from helpers.lessons.ray_session import refuse_fork_after_ray
from helpers.measure.leftovers import TEMP_PREFIX
from helpers.measure.memory import MemoryReport, release_free_heap, track_memory
from helpers.measure.proctree import label
from helpers.measure.timing import Timing, time_it
from helpers.measure.units import format_ratio, format_seconds, shown

SHUTDOWN_TIMEOUT_SECONDS = 10.0
START_TIMEOUT_SECONDS = 60.0
PARENT_ROLE = "parent (client, scheduler, nannies)"
LARGE_GRAPH_WARNING = "Sending large graph"  # Dask's UserWarning for an array inside a task


def dask_available() -> str | None:
    """None if Dask's distributed scheduler imports here, else why not (a sentence for the reader)."""
    try:
        import distributed  # noqa: F401
    except Exception as error:  # ImportError, or a broken install raising something else
        return (f"Dask is not usable here ({type(error).__name__}: {error}); "
                "install it with pip install 'dask[distributed]'")
    return None


@dataclass(frozen=True)
class DaskSession:
    """A running LocalCluster: its client, the workers' addresses (sorted) and pids, its folder."""

    client: object
    workers: tuple[str, ...]
    worker_pids: tuple[int, ...]
    folder: Path

    def roles(self) -> dict[int, str]:
        """Role of each process for ``MemoryReport.name_roles``: this process and the workers."""
        return {os.getpid(): PARENT_ROLE,
                **{pid: f"worker {i}" for i, pid in enumerate(self.worker_pids, start=1)}}


def _new_descendants(before: set[int]) -> list[psutil.Process]:
    """Descendants started since ``before``, but multiprocessing's resource tracker (it serves this
    process for its whole life, whoever started it)."""
    me = os.getpid()
    return [child for child in psutil.Process().children(recursive=True)
            if child.pid not in before and not label(child.pid, me).startswith("resource tracker")]


@contextlib.contextmanager
def dask_cluster(n_workers: int, start_method: str | None = None) -> Iterator[DaskSession]:
    """Start a ``LocalCluster`` of ``n_workers`` processes and a ``Client``, its active memory
    manager off (see the module's docstring); yield a ``DaskSession``; always close both, wait for
    (or kill) every worker process and remove the scratch folder.

    ``start_method``: how the nannies start their workers (Dask's setting
    ``distributed.worker.multiprocessing-method``; None keeps Dask's, spawn); fork is refused with a
    RuntimeError once Ray has run in this process. RuntimeError, saying why, when Dask is missing
    or the cluster does not start."""
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    if start_method is not None:
        refuse_fork_after_ray(start_method, "Dask's nannies")
    reason = dask_available()
    if reason is not None:
        raise RuntimeError(reason)
    folder = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}dask-"))
    remove_folder = functools.partial(shutil.rmtree, folder, ignore_errors=True)
    atexit.register(remove_folder)  # a kernel shut down before the closing cell still removes it
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    with contextlib.ExitStack() as stack:
        stack.callback(atexit.unregister, remove_folder)
        stack.callback(remove_folder)
        stack.callback(_forget_folder, folder)
        stack.callback(_wait_or_kill, before)
        try:
            client = start_cluster_and_client(stack, n_workers, folder, start_method)
        except Exception as error:
            reason = f"{type(error).__name__}: {error}"
            raise RuntimeError(f"Dask's LocalCluster did not start here ({reason})") from error
        pids = client.run(os.getpid)
        workers = tuple(sorted(pids))
        yield DaskSession(client, workers, tuple(pids[w] for w in workers), folder)


def start_cluster_and_client(stack: contextlib.ExitStack, n_workers: int, folder: Path,
                             start_method: str | None = None):
    """The working lines of ``dask_cluster``: Dask's settings (the active memory manager off, scratch
    space in ``folder``, the nannies' start method), a ``LocalCluster`` of ``n_workers`` worker
    processes of one thread each, and a ``Client`` of it, each entered on ``stack`` (which closes
    them in reverse order). Returns the client once every worker has joined."""
    import dask
    from distributed import Client, LocalCluster

    settings = {"distributed.scheduler.active-memory-manager.start": False,  # on by default
                "temporary-directory": str(folder)}  # the scheduler's scratch space
    if start_method is not None:
        settings["distributed.worker.multiprocessing-method"] = start_method
    stack.enter_context(dask.config.set(settings))
    cluster = stack.enter_context(LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
        silence_logs=logging.ERROR, local_directory=str(folder)))
    client = stack.enter_context(Client(cluster, timeout=START_TIMEOUT_SECONDS))
    client.wait_for_workers(n_workers, timeout=START_TIMEOUT_SECONDS)
    return client


def _forget_folder(folder: Path) -> None:
    """Drop the scratch folders Dask's scheduler added to this process's ``sys.path``."""
    sys.path[:] = [entry for entry in sys.path if not entry.startswith(str(folder))]


def _wait_or_kill(before: set[int]) -> None:
    """Wait for the processes the cluster started to end; kill by pid what is left after 10 s."""
    _, alive = psutil.wait_procs(_new_descendants(before), timeout=SHUTDOWN_TIMEOUT_SECONDS)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=SHUTDOWN_TIMEOUT_SECONDS)


def what_dask_left(session: DaskSession) -> list[str]:
    """The session's worker processes still running and its folder, if still there (after exit)."""
    left = [f"worker process {pid}" for pid in session.worker_pids if psutil.pid_exists(pid)
            and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    return left + ([str(session.folder)] if session.folder.exists() else [])


def submit_each(session: DaskSession, fn, argument, *args, tasks_per_worker: int = 1) -> list:
    """``client.submit(fn, argument, *args)`` pinned to each worker in turn, ``tasks_per_worker``
    times each; Dask's warning about a large object inside the task is silenced (shown once by
    ``large_graph_warning``)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=LARGE_GRAPH_WARNING, category=UserWarning)
        return [session.client.submit(fn, argument, *args, workers=[worker], allow_other_workers=False,
                                      pure=False)
                for _ in range(tasks_per_worker) for worker in session.workers]


def fan_out(session: DaskSession, argument, tasks_per_worker: int = 1) -> list[float]:
    """``sum_array`` once on each worker (``tasks_per_worker`` times), all given the same argument
    (the array, or a future of it); the sums."""
    return session.client.gather(submit_each(session, sum_array, argument, tasks_per_worker=tasks_per_worker))


def large_graph_warning(session: DaskSession, array: np.ndarray) -> str:
    """What Dask warns when an array travels inside a task (first line), or '' if it says nothing."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session.client.gather(session.client.submit(sum_array, array, pure=False))
    found = [str(w.message) for w in caught if LARGE_GRAPH_WARNING in str(w.message)]
    return found[0].splitlines()[0] if found else ""


def time_fan_outs(session: DaskSession, array: np.ndarray, rounds: int = 2, repeat: int = 3
                  ) -> dict[str, Timing]:
    """Seconds of ``rounds`` fan-outs (one task per worker): the array itself in every task, or
    ``client.scatter(array, broadcast=True)`` once and the future in every task; also
    ``SCATTER_ALONE``, the ``client.scatter`` call inside each scattered run (the rest of that run
    is its fan-outs on the future)."""
    scatter_seconds = []

    def by_value():
        for _ in range(rounds):
            fan_out(session, array)

    def scattered():
        started = time.perf_counter()
        future = session.client.scatter(array, broadcast=True)
        scatter_seconds.append(time.perf_counter() - started)
        for _ in range(rounds):
            fan_out(session, future)
        future.release()

    timings = {"by value": time_it(by_value, repeat=repeat),
               "scatter once": time_it(scattered, repeat=repeat)}
    timings[SCATTER_ALONE] = Timing(tuple(scatter_seconds[-repeat:]))  # the timed runs, not the warm-up
    wait_until_stores_empty(session)
    return timings


SCATTER_ALONE = "the scatter itself"


def stores(session: DaskSession) -> dict[str, dict]:
    """Per worker: bytes and keys in its data store, and bytes it has sent to other workers so far."""
    return session.client.run(store_facts)


def wait_until_stores_empty(session: DaskSession, timeout: float = 10.0) -> None:
    """Wait until every worker has dropped what it held (releasing a future is asynchronous)."""
    deadline = time.monotonic() + timeout
    while any(facts["keys"] for facts in stores(session).values()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"Dask's workers still hold data {timeout:.0f} s after it was released")
        time.sleep(0.05)


@dataclass(frozen=True)
class DaskFanOutMemory:
    """One held fan-out (one task per worker): tree PSS and RSS added while every task held its
    argument (medians above the baseline), each role's PSS growth, the workers' data-store bytes,
    bytes sent worker to worker, and whether each task's argument was the object in its worker's
    data store (True) or its own copy (False)."""

    how: str
    tree_pss: float
    tree_rss: float
    role_pss: dict[str, float]
    store_bytes: int
    crossed_between_workers: int
    from_store: list[bool]
    report: MemoryReport

    def worker_copies(self, array_bytes: int) -> list[float]:
        """Each worker's PSS growth, in arrays."""
        return [grown / array_bytes for role, grown in self.role_pss.items() if role.startswith("worker")]


def _role_growth(report: MemoryReport, began: float, ended: float) -> dict[str, float]:
    """Median PSS of each process in the window above its first sample, by its report label."""
    held = report.pss_by_process(began, ended)
    growth = {}
    for pid, name in report.process_labels.items():
        first = next((s.processes[pid].pss for s in report.samples if pid in s.processes), None)
        if first is not None and name in held:
            growth[name] = held[name] - first
    return growth


def _wait_for_arrivals(arrived: str, n_tasks: int) -> None:
    """Wait until ``n_tasks`` files are in the folder ``arrived`` (``sum_and_hold`` writes one per
    task), up to ARRIVAL_TIMEOUT s."""
    deadline = time.monotonic() + ARRIVAL_TIMEOUT
    while len(os.listdir(arrived)) < n_tasks and time.monotonic() < deadline:
        time.sleep(0.005)


def _mark_while_every_task_holds(report: MemoryReport, arrived: str, n_tasks: int,
                                 hold_seconds: float) -> None:
    """Once every task has arrived (``sum_and_hold``), mark the report twice inside the holds: a mark
    makes the sampler read PSS exactly, so the window is measured, not carried over from before."""
    _wait_for_arrivals(arrived, n_tasks)
    for mark in ("every task holds", "every task still holds"):
        time.sleep(hold_seconds / 4)
        report.mark(mark)


def held_fan_out(session: DaskSession, array: np.ndarray, how: str, hold_seconds: float = 0.8
                 ) -> DaskFanOutMemory:
    """``sum_and_hold`` on every worker at once, the array handed ``how`` ("scatter once" or
    "by value"), under ``track_memory``; what the tree and the workers held meanwhile."""
    if how not in ("scatter once", "by value"):
        raise ValueError(f"how must be 'scatter once' or 'by value', got {how!r}")
    sent_before = sum(f["sent"] for f in stores(session).values())
    release_free_heap()  # else the scheduler's copies (in this process) may reuse freed heap in the baseline
    with (tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as arrived,
          track_memory(trace_python=False) as report):
        clock_offset = time.perf_counter() - report.mark("before")
        argument = session.client.scatter(array, broadcast=True) if how == "scatter once" else array
        futures = submit_each(session, sum_and_hold, argument, hold_seconds, arrived, len(session.workers))
        _mark_while_every_task_holds(report, arrived, len(session.workers), hold_seconds)
        results = session.client.gather(futures)
        del futures
        facts = stores(session)
        del argument
    report.name_roles(named=session.roles())
    began = max(r[1] for r in results) - clock_offset
    ended = min(r[2] for r in results) - clock_offset
    if ended <= began:  # a worker's hold began after another's ended: its wait for the others timed out
        raise RuntimeError(f"the workers did not hold the array at the same time (holds began within "
                           f"{max(r[1] for r in results) - min(r[1] for r in results):.1f} s)")
    margin = min(0.1, (ended - began) / 4)
    held = report.steady(began + margin, ended - margin)
    wait_until_stores_empty(session)
    return DaskFanOutMemory(how, held.pss - report.baseline.pss, held.rss - report.baseline.rss,
                            _role_growth(report, began + margin, ended - margin),
                            sum(f["bytes"] for f in facts.values()),
                            sum(f["sent"] for f in facts.values()) - sent_before, [r[3] for r in results],
                            report)


def argument_sources(session: DaskSession, array: np.ndarray, tasks_per_worker: int = 2
                     ) -> dict[str, list[bool]]:
    """For ``tasks_per_worker`` tasks on each worker: was the task's argument the object in its
    worker's data store (True: shared by the worker's tasks) or a copy of its own (False)?"""
    future = session.client.scatter(array, broadcast=True)
    sources = {how: [r[3] for r in session.client.gather(
                   submit_each(session, sum_and_hold, argument, 0.0, tasks_per_worker=tasks_per_worker))]
               for how, argument in (("scatter once", future), ("by value", array))}
    future.release()
    wait_until_stores_empty(session)
    return sources


def side_by_side(ray_timings: dict[str, Timing], ray_memory, dask_timings: dict[str, Timing],
                 dask_memory: dict[str, DaskFanOutMemory], array_bytes: int) -> list[dict]:
    """One row per engine and way (Ray's ``FanOutMemory`` results, then Dask's): median seconds of
    the timed fan-outs, tree PSS added and the bytes in the engine's own store(s), both in arrays."""
    rows = [("Ray", m.how, ray_timings[m.how], m) for m in ray_memory]
    rows += [("Dask", how, dask_timings[how], m) for how, m in dask_memory.items()]
    return [{"engine": engine, "how": how, "seconds": timing.median, "tree_pss": m.tree_pss / array_bytes,
             "store": m.store_bytes / array_bytes} for engine, how, timing, m in rows]


def format_rows(rows: list[dict], rounds: int) -> str:
    """``side_by_side``'s rows as a text table; their times are of ``rounds`` fan-outs."""
    time = f"time, {rounds} fan-outs"
    lines = [f"{'engine':6} {'handed':14} {time:>16} {'tree PSS':>9} {'in store':>9}"]
    lines += [f"{r['engine']:6} {r['how']:14} {format_seconds(r['seconds']):>16} {r['tree_pss']:>9.2f} "
              f"{r['store']:>9.2f}" for r in rows]
    return "\n".join(lines + ["(tree PSS and in store: arrays added; store: Ray's object store, "
                              "Dask's workers' data stores)"])


NEGLIGIBLE_ARRAYS = 0.01  # a role whose PSS moved less than this in every way is left out of the table


def format_roles(dask_memory: dict[str, DaskFanOutMemory], array_bytes: int) -> str:
    """Each Dask process's PSS growth while the tasks held the array, in arrays, per way; a role that
    moved by less than ``NEGLIGIBLE_ARRAYS`` in every way (multiprocessing's resource tracker) is left
    out, and a figure that rounds to zero prints 0.00, never -0.00."""
    roles = sorted({role for m in dask_memory.values() for role in m.role_pss})
    lines = [f"{'Dask: PSS growth by role, in arrays':38}" + "".join(f"{how:>14}" for how in dask_memory)]
    for role in roles:
        grown = [m.role_pss.get(role, 0.0) / array_bytes for m in dask_memory.values()]
        if all(abs(g) < NEGLIGIBLE_ARRAYS for g in grown):
            continue
        lines.append(f"{role:38}" + "".join(f"{g if round(g, 2) else 0.0:>14.2f}" for g in grown))
    return "\n".join(lines)


def _arrays(values: list[float]) -> str:
    return ", ".join(f"{value:.2f}" for value in values)


def conclusion(dask_memory: dict[str, DaskFanOutMemory], dask_timings: dict[str, Timing],
               array_bytes: int) -> str:
    """The section's conclusion in Markdown, every figure from this run's measurements; what answers
    the exercise (the scattered copies) is left to ``scatter_counts``, shown collapsed."""
    by_value = dask_memory["by value"]
    kernel = by_value.role_pss.get(PARENT_ROLE, 0.0) / array_bytes
    return (
        "**Conclusion.** By value, the data stores held nothing, yet the workers grew by "
        f"{_arrays(by_value.worker_copies(array_bytes))} arrays and this kernel (client, scheduler and "
        f"nannies) by "
        f"{kernel:.2f}. "
        + _timing_sentence(dask_timings)
        + ".")


def scatter_counts(dask_memory: dict[str, DaskFanOutMemory], array_bytes: int) -> str:
    """Where the scattered copies were (Markdown, in arrays): this answers the exercise, so the lesson
    shows it through ``exercises.reveal``."""
    scattered = dask_memory["scatter once"]
    n_workers = len(scattered.worker_copies(array_bytes))
    return (f"Scattered once, the workers' data stores held **{scattered.store_bytes / array_bytes:.2f} "
            f"arrays** on {n_workers} workers, one copy per worker (PSS: "
            f"{_arrays(scattered.worker_copies(array_bytes))} arrays; "
            f"{scattered.crossed_between_workers / array_bytes:.2f} went worker to worker), and every task "
            "got its worker's object.")


def _timing_sentence(dask_timings: dict[str, Timing]) -> str:
    """'Two fan-outs (medians) took S scattered once (A of it the scatter itself) and V by value, ...:
    R× as long' (R: two significant digits of the printed medians' ratio), the verdict chosen by the
    values."""
    by_value, scattered = dask_timings["by value"].median, dask_timings["scatter once"].median
    text = (f"Two fan-outs (medians) took {format_seconds(scattered)} scattered once")
    alone = dask_timings.get(SCATTER_ALONE)
    if alone is not None:
        text += f" ({format_seconds(alone.median)} of it the scatter itself)"
    text += f" and {format_seconds(by_value)} by value"
    if scattered < by_value:  # the ratio of the medians as printed, so that a reader's check agrees
        return text + f": {format_ratio(shown(by_value) / shown(scattered))}× as long"
    return text + ": on this run, no slower"


# The exercise's tasks on each worker: not the course's 2 workers, so that the number in the question is
# not an answer on the default machine.
TASKS_PER_WORKER = 3


def scattered_copies(session: DaskSession | None, array: np.ndarray, n_workers: int,
                     tasks_per_worker: int = TASKS_PER_WORKER) -> int:
    """How many copies of ``array`` the workers hold after one ``client.scatter(array,
    broadcast=True)`` and ``tasks_per_worker`` tasks on each worker given the scattered future: the
    copies in the workers' data stores, plus every task whose argument was not its worker's stored
    object (a copy of its own). The scattered data is let go before this returns. Without a session
    (Dask missing) it returns what broadcast=True gives, one copy per worker, so the exercise still
    checks against a count."""
    if session is None:
        return n_workers
    scattered = session.client.scatter(array, broadcast=True)
    try:
        in_stores = len(session.client.who_has(scattered)[scattered.key])
        results = session.client.gather(
            submit_each(session, sum_and_hold, scattered, 0.0, tasks_per_worker=tasks_per_worker))
        own_copies = sum(not from_store for *_, from_store in results)
        return in_stores + own_copies
    finally:
        scattered.release()
        wait_until_stores_empty(session)


def copies_each_way(session: DaskSession | None, array: np.ndarray, n_workers: int,
                    tasks_per_worker: int = TASKS_PER_WORKER) -> tuple[int, int]:
    """The exercise's two counts, for ``tasks_per_worker`` tasks on each worker: the copies the
    workers got with the scattered future (``scattered_copies``), and with the array itself in every
    task (``client.submit(f, array)``: the tasks handed a copy of their own; nothing is in the data
    stores). Without a session (Dask missing): what Dask gives, one per worker and one per task."""
    if session is None:
        return n_workers, tasks_per_worker * n_workers
    with_future = scattered_copies(session, array, n_workers, tasks_per_worker)
    own = 0
    for _ in range(tasks_per_worker):  # a round of one task per worker at a time: fewer copies in flight
        own += sum(not from_store for *_, from_store in session.client.gather(
            submit_each(session, sum_and_hold, array, 0.0)))
    wait_until_stores_empty(session)
    return with_future, own


def _copies_check(answer, copies: tuple[int, int], n_workers: int) -> str | None:
    if (not isinstance(answer, (tuple, list)) or len(answer) != 2
            or not all(isinstance(a, int) and not isinstance(a, bool) for a in answer)):
        return f"answer with two whole numbers, (with the future, with the array itself), got {answer!r}"
    if tuple(answer) != tuple(copies):
        return (f"the workers got {copies[0]} and {copies[1]} copies, on {n_workers} workers running "
                f"{TASKS_PER_WORKER} tasks each: broadcast=True gives every worker process its own, which "
                "its tasks share; the array itself is unpickled by every task")
    return None


EXERCISE = Exercise(
    name="copies, scattered or not",
    question=f"On these workers, you scatter the array with broadcast=True and submit {TASKS_PER_WORKER} "
             "tasks to each worker, each given the future; then you submit as many given the array itself, "
             "client.submit(f, array, pure=False). How many distinct copies of the array do the tasks get "
             "each way? Answer with two whole numbers, "
             "(with the future, with the array itself). It needs 2 workers or more (LAB_WORKERS=2): with "
             "one, some wrong answers give the right count.",
    check=_copies_check,
    solution=lambda copies, n_workers: tuple(copies),
    explanation="broadcast=True sends the array to one worker, and the others fetch it from there: "
                "one copy in each worker process, which every task on that worker is handed (the same "
                "object). Given the array itself, every task unpickles a copy of its own, and nothing is "
                "stored. Ray's object store, by contrast, keeps one copy per node.",
    misconceptions=(  # with N_WORKERS = 2, as the lesson's unit test measures
        ((1, 2 * TASKS_PER_WORKER), "Dask keeps one copy per machine for its workers to share, as Ray's "
                                    "object store does"),
        ((0, 2 * TASKS_PER_WORKER), "scatter leaves the array with the client or the scheduler until a "
                                    "task asks for it"),
        ((2 * TASKS_PER_WORKER, 2 * TASKS_PER_WORKER), "every task unpickles a copy of its own, as one "
                                                       "given the array does"),
        ((2 + 2 * TASKS_PER_WORKER, 2 * TASKS_PER_WORKER), "each worker stores one, and each task still "
                                                           "gets a copy of its own"),
        ((2, 2), "given the array itself, a worker's tasks share one copy, as with the future"),
    ),
)


# --- Functions Dask's workers run ---


def store_facts(dask_worker) -> dict:
    """This worker's data store: how many keys and bytes (Dask's own accounting) it holds, and
    the bytes it has sent to other workers since it started (``client.run`` passes ``dask_worker``)."""
    return {"keys": len(dask_worker.data), "bytes": int(dask_worker.state.nbytes),
            "sent": int(dask_worker.transfer_outgoing_bytes_total), "pid": os.getpid()}


def in_data_store(array: np.ndarray) -> bool:
    """Whether ``array`` is the very object this worker keeps in its data store."""
    from distributed import get_worker

    return any(value is array for value in get_worker().data.values())


def sum_array(array: np.ndarray) -> float:
    """Read every element once (the fan-out's work)."""
    return float(array.sum())


ARRIVAL_TIMEOUT = 60.0  # seconds a holding task waits for the others (a shared CPU may be slow)


def sum_and_hold(array: np.ndarray, hold_seconds: float, arrived: str | None = None, n_tasks: int = 1
                 ) -> tuple[float, float, float, bool]:
    """Sum the array; when ``arrived`` (a folder) is given, say so there and wait until ``n_tasks``
    tasks have (up to ARRIVAL_TIMEOUT s: the array may take a while to reach a worker on a busy CPU);
    then keep the array alive ``hold_seconds``. Returns the sum, the perf_counter instants the hold
    began and ended, and whether the array was the one in this worker's data store."""
    total = float(array.sum())
    if arrived is not None:
        Path(arrived, f"{os.getpid()}-{time.perf_counter_ns()}").touch()
        _wait_for_arrivals(arrived, n_tasks)
    began = time.perf_counter()
    time.sleep(hold_seconds)
    return total, began, time.perf_counter(), in_data_store(array)
