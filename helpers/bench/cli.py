"""``python -m helpers.bench``: rerun the course's measurements on your hardware.

Suites (``--suite``): ``strategies`` (the default) — every sharing strategy of the course
(``helpers.bench.strategies``): a fan-out where every worker sums the whole array, a round trip, and the
memory each adds, beside the floors (``helpers.bench.strategies_suite``); ``transport`` — one round trip
of an array through the shared-memory executor and the pickler reductions, against this machine's
floors measured in the same run (``helpers.bench.transport_suite``); ``all`` — both, one after the other.
Writes ``results/<host>-<date>-<suite>.json`` (schema in ``results/README.md``) and a PNG figure
beside it; ``--compare FILE`` prints this run beside a reference. Bad input gets one line on stderr
and exit code 2; Ctrl-C shuts every pool, manager and Ray instance down, removes every segment and
temp file, and exits with 130.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from helpers.bench import (
    cluster_local,
    cluster_suite,
    own_task,
    report,
    strategies_suite,
    targets,
    task_array,
    task_suite,
)
from helpers.bench import transport_suite as transport
from helpers.bench.cluster_measure import ClusterError
from helpers.measure import config, copy_floors, leftovers, system
from helpers.measure.machine import machine_report
from helpers.measure.memory import track_memory
from helpers.measure.units import MiB, format_bytes

SUITES = ("strategies", "transport", "all", "cluster")  # "all": strategies, then transport, each to its own
                                                      # file; "cluster": on a Ray or Dask cluster
DEFAULT_SIZES = "1,10,100,1000"  # the transport suite's; strategies_suite.DEFAULT_SIZES the
                                 # strategies suite's
DEFAULT_REPEAT = 5  # the transport suite's; strategies_suite.DEFAULT_REPEAT the strategies suite's
# Copies of the array alive at once, at worst: RAM (the stdlib round trip: the array, its pickle,
# the worker's copy and pickle, the bytes received and the result) and /dev/shm (a pooled segment
# and a result segment, with one to spare for the reductions' pool).
RAM_COPIES = 6
SHM_COPIES = 3
DESCRIPTION = """\
Rerun the course's measurements on this machine. The strategies suite (the default) runs every way
of the course to share an array with workers (pickle, send once, Manager, fork, sharedctypes,
memmap, SharedNDArray, the shared-memory executor, the pickler reductions, Ray): every worker sums
the whole array (fan-out), one worker returns a same-size array (round trip), and the tree's PSS
while every worker holds it; it writes results/<host>-<date>-strategies.json and a PNG. The
transport suite times one round trip of an array of random float64 through the shared-memory
executor (against the stdlib ProcessPoolExecutor) and through the pickler reductions. Both
compare with two floors measured in the same run: (a) one copy into warm memory, (b) one copy
into a new shared-memory segment. Results: results/<host>-<date>-<suite>.json (schema:
results/README.md) and a PNG figure beside it; the table (and the transport targets) printed.
Ctrl-C stops it cleanly (exit code 130).

Beyond one machine (--suite cluster): every worker on every node of a Ray or a Dask cluster gets the
array (Ray by value, ray.put once, Dask by value, Dask scatter(broadcast=True)); per way the time
until all of them hold it, as a multiple of one transfer between two nodes by the engine's own
transport (the floor, measured in the same run), the bytes that crossed the network and what each
node added. --ray-address HOST:PORT and --dask-scheduler tcp://HOST:PORT (or RAY_ADDRESS and
DASK_SCHEDULER_ADDRESS) join your running clusters and leave them as they were; with neither, the
suite starts a cluster of separate processes on this machine (--nodes, --engines) and ends it.
--task and --array work there too; the task goes to the workers by value (they need NumPy and
psutil, not this course). Writes results/<host>-<date>-cluster.json and a PNG.

Your own task on your own array: --task my_module:my_function runs your function as the workers' task
in every strategy chosen (--strategies, default all), on --array data.npy (memory-mapped, not loaded
twice) or on random data of --shape and --dtype. The contract: each worker calls
    my_function(array, worker_index, n_workers)
and it returns a small value or an array; the array is the whole array, reached the strategy's way
(read-only in joblib and Ray: a function that writes into it is reported as unable to run there).
my_module is imported by name in every worker, as a spawned child imports it: run from its folder
or put it on PYTHONPATH (not __main__). Per strategy: the fan-out (every worker calls it) and, when
it returns an array, the round trip (worker 0's array sent back whole), as medians and multiples
of the floors; set-up; PSS and /dev/shm added while the workers hold the array; or why it could not
run (with the worker's traceback when your function raised; --time-limit ends one that hangs).
Then a ranking for your task and the decision guide's constraints that apply. Writes
results/<host>-<date>-task.json and a PNG; try --task helpers.bench.example_tasks:sum_slice."""
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C


class BadInput(Exception):
    """Input the benchmark cannot run: the message is the one line the user sees."""


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="python -m helpers.bench", description=DESCRIPTION,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=SUITES, default="strategies",
                        help="which measurements to run; all: strategies then transport, each written to "
                             "its default file (default: %(default)s)")
    parser.add_argument("--sizes", metavar="MiB,MiB,...",
                        help="array sizes in MiB (2**20 bytes, as LAB_ARRAY_MB), comma-separated; each must "
                             "fit what the strategies chosen need in RAM, /dev/shm and disk (transport: "
                             f"{RAM_COPIES} copies in RAM, {SHM_COPIES} in /dev/shm); the error says what "
                             f"fits (default: strategies {strategies_suite.DEFAULT_SIZES}, transport "
                             f"{DEFAULT_SIZES})")
    parser.add_argument("--strategies", metavar="NAME,NAME,...",
                        help="strategies suite: which strategies to run, comma-separated, in the order given "
                             f"(default: all of them: {','.join(strategies_suite.parse_names(None))})")
    parser.add_argument("--repeat", type=int, metavar="N",
                        help="timed runs per measurement, after a warm-up; medians are reported (default: "
                             f"strategies {strategies_suite.DEFAULT_REPEAT}, transport {DEFAULT_REPEAT}; "
                             "transport: from 256 MiB on, the ways that pickle or copy into fresh memory run "
                             "at most 2 times)")
    parser.add_argument("--workers", type=int, default=config.n_workers(), metavar="N",
                        help="worker processes per pool, executor or Ray (default: LAB_WORKERS or the usable "
                             "CPUs, at least 2: %(default)s)")
    parser.add_argument("--start-method", default=transport.DEFAULT_START_METHOD,
                        choices=multiprocessing.get_all_start_methods(),
                        help="transport suite: how worker processes start (default: %(default)s; the "
                             "strategies suite uses each strategy's own); workers are started and warmed "
                             "before timing either way")
    parser.add_argument("--task", metavar="MODULE:FUNCTION",
                        help="your own task, run by every worker as "
                             "FUNCTION(array, worker_index, n_workers), returning a small value or an array; "
                             "MODULE must be importable by name "
                             "(e.g. helpers.bench.example_tasks:sum_slice)")
    parser.add_argument("--array", type=Path, metavar="FILE.npy",
                        help="with --task, or in the cluster suite: the array, a .npy file (memory-mapped "
                             "read-only here)")
    parser.add_argument("--shape", metavar="N,N,...",
                        help=f"with --task and no --array: a random array of this shape (default: "
                             f"{task_array.DEFAULT_SHAPE})")
    parser.add_argument("--dtype", metavar="DTYPE",
                        help=f"with --shape: its dtype (default: {task_array.DEFAULT_DTYPE})")
    parser.add_argument("--time-limit", type=float, default=own_task.DEFAULT_TIME_LIMIT_S, metavar="S",
                        help="with --task: seconds one strategy may take in all; past it its processes are "
                             "ended and the row says so. Cluster suite (with or without --task): seconds one "
                             "fan-out may take; past it the run ends with one line (exit code 2) "
                             "(default: %(default)g)")
    parser.add_argument("--ray-address", metavar="HOST:PORT",
                        help="cluster suite: join the running Ray cluster whose head is there (default: "
                             f"${cluster_suite.RAY_ENV}); it is never started, stopped or reconfigured")
    parser.add_argument("--dask-scheduler", metavar="tcp://HOST:PORT",
                        help="cluster suite: join the running Dask cluster whose scheduler is there "
                             "(default: "
                             f"${cluster_suite.DASK_ENV}); it is never started, stopped or reconfigured")
    parser.add_argument("--engines", default="ray,dask", metavar="NAME,NAME",
                        help="cluster suite without an address: which local clusters to start and measure "
                             "(default: %(default)s)")
    parser.add_argument("--nodes", type=int, default=cluster_suite.LOCAL_NODES, metavar="N",
                        help="cluster suite without an address: nodes of the local cluster (Ray nodes, Dask "
                             "worker processes; default: %(default)s)")
    parser.add_argument("--node-workers", type=int, default=cluster_suite.LOCAL_NODE_WORKERS, metavar="N",
                        help="cluster suite without an address: workers of each local node (a Ray node's "
                             "CPUs, "
                             "a Dask worker's threads; default: %(default)s); on your cluster, one task runs "
                             "per CPU (Ray) or thread (Dask) of every node")
    parser.add_argument("--out", type=Path, metavar="FILE.json",
                        help="where to write the results; the PNG figure goes beside it with .png "
                             "(default: results/<host>-<date>-<suite>.json under the current folder; "
                             "not with --suite all)")
    parser.add_argument("--compare", type=Path, metavar="FILE.json",
                        help="a result file of an earlier run of the same suite (e.g. the reference in "
                             "results/): print this run's ratios beside it and draw it in the figure "
                             "(not with --suite all)")
    return parser


def parse_sizes(text: str) -> list[int]:
    """Sizes in bytes from a comma list of MiB ('1,10,100'); BadInput when one is not a positive number."""
    sizes = []
    for part in text.split(","):
        try:
            mib = float(part)
        except ValueError:
            raise BadInput(f"--sizes takes MiB numbers separated by commas, got {part.strip()!r}") from None
        if not mib > 0:
            raise BadInput(f"--sizes must be positive, got {part.strip()}")
        sizes.append(max(8, int(mib * MiB) // 8 * 8))
    return sizes


def largest_size_that_fits() -> int:
    """Bytes of the largest array the benchmark can run now (RAM available and /dev/shm free)."""
    fits = system.available_memory() // RAM_COPIES
    shm_free = system.shm_free()
    if shm_free is not None:
        fits = min(fits, shm_free // SHM_COPIES)
    return fits


def check_sizes_fit(sizes: list[int]) -> None:
    """BadInput naming what fits when a size needs more RAM or /dev/shm than this machine has now."""
    fits = largest_size_that_fits()
    too_big = [n for n in sizes if n > fits]
    if too_big:
        raise BadInput(
            f"size {too_big[0] / MiB:g} MiB does not fit: the benchmark holds up to {RAM_COPIES} copies in "
            f"RAM ({format_bytes(system.available_memory())} available) and {SHM_COPIES} in /dev/shm "
            f"({format_bytes(system.shm_free() or 0)} free); sizes up to {fits // MiB} MiB fit")


def _measured(measure: Callable[[], dict]) -> dict:
    """Run one measurement under the process-tree memory sampler; add its peaks (bytes) to the row."""
    with track_memory(interval=0.02, trace_python=False) as memory:
        row = measure()
    row.update(peak_tree_pss_bytes=memory.peak_pss, peak_shm_bytes=memory.peak_shm)
    return row


def _transport_measurements(source, floors, args: argparse.Namespace) -> list[tuple[str, Callable[[], dict]]]:
    common = {"repeat": args.repeat, "start_method": args.start_method,
              "short_repeat": max(args.repeat or 0, transport.SHORT_TRIP_REPEAT)}  # None: not chosen yet
    return (transport.executor_measurements(source, floors, n_workers=args.workers, **common)
            + transport.reducer_measurements(source, floors, **common))


def steps_of_transport(sizes: list[int], args: argparse.Namespace) -> int:
    """Progress-bar steps of the transport suite: per size, the floors and each measurement (the
    measurement lists are only built here: nothing runs)."""
    return len(sizes) * (1 + len(_transport_measurements(None, {}, args)))


def run_transport(sizes: list[int], args: argparse.Namespace, bar) -> list[dict]:
    """Every row of the transport suite, size after size (floors first at each size)."""
    rows: list[dict] = []
    for n_bytes in sizes:
        label = format_bytes(n_bytes)
        bar.set_description(f"{label}: floors")
        source = copy_floors.random_array(n_bytes)
        floors = transport.measure_floors(source, repeat=max(args.repeat, 5))
        rows += transport.floor_rows(source.nbytes, floors)
        short_repeat = max(args.repeat, transport.SHORT_TRIP_REPEAT)
        rows += transport.trip_floor_rows(source, floors, repeat=short_repeat, start_method=args.start_method)
        bar.update()
        for name, measure in _transport_measurements(source, floors, args):
            bar.set_description(f"{label}: {name}")
            rows.append(_measured(measure))
            bar.update()
        del source
    transport.add_speedups(rows)
    return rows


def _clean_after_interrupt() -> None:
    """After Ctrl-C every pool is shut down by its ``with`` block; end any child an interrupt caught
    half-started, then drop anything of ours it caught half-made (a segment whose name carries this
    process's pid)."""
    gc.collect()
    _end_children_left_running()
    for path in leftovers.ours():
        if path.name.startswith(f"{leftovers.SEGMENT_PREFIX}{os.getpid()}_"):
            path.unlink(missing_ok=True)


def _end_children_left_running(grace_s: float = 1.0) -> None:
    """End every child process still running once the ``with`` blocks have closed: a worker whose
    start Ctrl-C interrupted belongs to no pool any more. Left alone, it would still be reading its
    start-up pickle when this process exits, and exit removes the pool's semaphores before it joins
    children, so the child would print a FileNotFoundError traceback after our last line. Each gets
    ``grace_s`` seconds to end itself, then ``cluster_local.end_processes`` (SIGTERM, then SIGKILL).
    multiprocessing's resource tracker and forkserver are left running: they end when we do, the
    tracker after removing what it tracks."""
    import psutil

    def is_ours_to_end(child: psutil.Process) -> bool:
        try:
            command = " ".join(child.cmdline())
        except psutil.Error:
            return False
        return "resource_tracker" not in command and "forkserver" not in command

    children = [child for child in psutil.Process().children() if is_ours_to_end(child)]
    _, alive = psutil.wait_procs(children, timeout=grace_s)
    cluster_local.end_processes(alive)


def _check_input(args: argparse.Namespace, suite: str) -> tuple[list[int], list[str], dict | None]:
    """(sizes in bytes, strategy names, reference document) for one suite; BadInput or ValueError."""
    default_sizes = strategies_suite.DEFAULT_SIZES if suite == "strategies" else DEFAULT_SIZES
    sizes = parse_sizes(args.sizes or default_sizes)
    names = strategies_suite.parse_names(args.strategies)
    if (args.repeat is not None and args.repeat < 1) or args.workers < 1:
        raise BadInput("--repeat and --workers must be at least 1")
    if suite == "strategies":
        strategies_suite.check_sizes_fit(sizes, names, args.workers)
    else:
        check_sizes_fit(sizes)
    reference = report.load_reference(args.compare) if args.compare else None
    if reference is not None and reference.get("suite") != suite:
        raise BadInput(f"reference {args.compare} is of the {reference.get('suite')} suite, not {suite}")
    return sizes, names, reference


def _run_suite(suite: str, sizes: list[int], names: list[str], args: argparse.Namespace) -> tuple[dict, list]:
    """(machine report, rows) of one suite, under a tqdm bar over its steps."""
    is_strategies = suite == "strategies"
    steps = len(sizes) * len(names) if is_strategies else steps_of_transport(sizes, args)
    with tqdm(total=steps, unit="step", file=sys.stderr) as bar:
        machine = machine_report()
        if is_strategies:
            repeat = args.repeat or strategies_suite.DEFAULT_REPEAT
            return machine, strategies_suite.run(sizes, names, args.workers, repeat, bar)
        transport_args = argparse.Namespace(**{**vars(args), "repeat": args.repeat or DEFAULT_REPEAT})
        return machine, run_transport(sizes, transport_args, bar)


def partial_paths(out: Path) -> tuple[Path, Path]:
    """Where the JSON and the PNG of ``out`` are written before they take their names."""
    return out.with_name(f".{out.stem}.partial.json"), out.with_name(f".{out.stem}.partial.png")


def write_pair(out: Path, doc: dict, plot: Callable[[dict, Path], Path], written: list[Path]) -> Path:
    """Write the document at ``out`` and its figure beside it (``.png``), both or neither: each is
    written under a temporary name first, then both are renamed, and ``out`` appended to ``written``,
    with Ctrl-C only noted meanwhile (a rename takes microseconds) and raised right after.
    Anything raised before the renames, Ctrl-C included, removes the temporary files. Returns the
    figure's path."""
    partial_json, partial_png = partial_paths(out)
    figure = out.with_suffix(".png")
    try:
        report.write_document(partial_json, doc)
        plot(doc, partial_png)
        caught: list[int] = []
        previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
        try:
            os.replace(partial_png, figure)
            os.replace(partial_json, out)
            written.append(out)
        finally:
            signal.signal(signal.SIGINT, previous)
        if caught:
            raise KeyboardInterrupt
    finally:
        partial_json.unlink(missing_ok=True)
        partial_png.unlink(missing_ok=True)
    return figure


def _report(suite: str, doc: dict, out: Path, reference: dict | None, written: list[Path]) -> None:
    """Write the document and its figure (both or neither); print the table (and targets, comparison)."""
    suite_report = strategies_suite if suite == "strategies" else report
    def plot(document: dict, path: Path) -> Path:
        return suite_report.plot_document(document, path, reference)

    figure = write_pair(out, doc, plot, written)
    print(suite_report.format_table(doc["rows"]))
    if doc["targets"]:
        print()
        print(report.format_targets(doc["targets"]))
    if reference is not None:
        print()
        print(suite_report.format_comparison(doc["rows"], reference))
    print(f"\nwall time {doc['wall_seconds']:.1f} s; wrote {out} and {figure}")


def _check_task_input(args: argparse.Namespace) -> tuple[task_array.ArrayInput, list[str], dict | None]:
    """(the array's source, strategy names, reference document) for ``--task``; BadInput or ValueError,
    before anything is loaded or started."""
    if args.suite != "strategies" or args.sizes:
        raise BadInput("--task runs its own suite on --array or --shape/--dtype: leave out --suite and "
                       "--sizes")
    if args.array is not None and (args.shape or args.dtype):
        raise BadInput("--array gives the shape and dtype: leave out --shape and --dtype")
    if (args.repeat is not None and args.repeat < 1) or args.workers < 1 or not args.time_limit > 0:
        raise BadInput("--repeat and --workers must be at least 1, --time-limit positive")
    own_task.check_task(args.task)
    names = strategies_suite.parse_names(args.strategies)
    source = (task_array.describe_file(args.array) if args.array is not None
              else task_array.describe_random(args.shape, args.dtype))
    strategies_suite.check_sizes_fit([source.nbytes], names, args.workers)
    reference = report.load_reference(args.compare) if args.compare else None
    if reference is not None and reference.get("suite") != "task":
        raise BadInput(f"reference {args.compare} is of the {reference.get('suite')} suite, not task")
    return source, names, reference


def _check_cluster_input(args: argparse.Namespace) -> tuple:
    """(arrays' sources, engine addresses, reference document) for ``--suite cluster``; BadInput or
    ValueError before anything starts."""
    if args.array is not None and (args.shape or args.dtype or args.sizes):
        raise BadInput("--array gives the shape and dtype: leave out --sizes, --shape and --dtype")
    if ((args.repeat is not None and args.repeat < 1) or args.nodes < 2 or args.node_workers < 1
            or not args.time_limit > 0):
        raise BadInput("--repeat and --node-workers must be at least 1, --nodes at least 2, --time-limit "
                       "positive")
    engines = [name.strip() for name in args.engines.split(",") if name.strip()]
    unknown = [name for name in engines if name not in cluster_suite.ENGINES]
    if unknown or not engines:
        raise BadInput(f"--engines takes ray and/or dask, got {args.engines!r}")
    addresses = cluster_suite.addresses(args.ray_address, args.dask_scheduler, engines)
    for name in addresses:
        reason = _engine_missing(name)
        if reason:
            raise BadInput(reason)
    if args.task is not None:
        own_task.check_task(args.task)
    if args.array is not None:
        sources = [task_array.describe_file(args.array)]
    elif args.shape or args.dtype:
        sources = [task_array.describe_random(args.shape, args.dtype)]
    else:
        sources = [task_array.describe_random(str(n // 8), "float64")
                   for n in parse_sizes(args.sizes or cluster_suite.DEFAULT_SIZES)]
    local = [name for name, address in addresses.items() if address is None]
    reason = cluster_suite.sizes_fit([source.nbytes for source in sources], local, args.nodes,
                                     args.node_workers)
    if reason:
        raise BadInput(reason)
    reference = report.load_reference(args.compare) if args.compare else None
    if reference is not None and reference.get("suite") != "cluster":
        raise BadInput(f"reference {args.compare} is of the {reference.get('suite')} suite, not cluster")
    return sources, addresses, reference


def _engine_missing(name: str) -> str | None:
    """Why ``name``'s engine cannot run here (None: it can)."""
    import importlib.util

    module = "ray" if name == "ray" else "distributed"
    if importlib.util.find_spec(module) is None:
        return f"the cluster suite's {name} side needs {module}, which is not installed here"
    return None


def _check_any_input(args: argparse.Namespace, suites: list[str]) -> dict:
    if args.suite == "cluster":
        return {"cluster": _check_cluster_input(args)}
    if args.ray_address or args.dask_scheduler:
        raise BadInput("--ray-address and --dask-scheduler go with --suite cluster")
    if args.task is None and (args.array or args.shape or args.dtype):
        raise BadInput("--array, --shape and --dtype go with --task")
    if args.task is not None:
        return {"task": _check_task_input(args)}
    if len(suites) > 1 and (args.out or args.compare):
        raise BadInput("--out and --compare name one suite's file: use them with --suite strategies or "
                       "--suite transport")
    return {suite: _check_input(args, suite) for suite in suites}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    suites = ["strategies", "transport"] if args.suite == "all" else [args.suite]
    try:
        checked = _check_any_input(args, suites)
    except (BadInput, ValueError) as error:
        parser.error(str(error))
    suites = list(checked)
    written: list[Path] = []
    for suite in suites:
        out = args.out or report.default_out_path(suite)
        try:
            _run_and_report(suite, checked[suite], out, args, argv, written)
        except ClusterError as error:
            print(f"{parser.prog}: cluster: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except KeyboardInterrupt:
            _clean_after_interrupt()
            kept = ", ".join(str(path) for path in written)
            said = f"kept what was written before: {kept} and their PNGs" if kept else "no results written"
            print("interrupted: every pool, manager and Ray instance shut down and every segment and temp "
                  f"file removed; {said}", file=sys.stderr)
            return EXIT_INTERRUPTED
    return 0


def _run_and_report(suite: str, checked: tuple[list[int], list[str], dict | None], out: Path,
                    args: argparse.Namespace, argv: list[str] | None, written: list[Path]) -> None:
    """Run one suite, then write its JSON and PNG (both or neither; ``out`` joins ``written`` once
    both are there) and print its table."""
    if suite == "task":
        _run_and_report_task(checked, out, args, argv, written)
        return
    if suite == "cluster":
        _run_and_report_cluster(checked, out, args, argv, written)
        return
    sizes, names, reference = checked
    started = time.perf_counter()
    machine, rows = _run_suite(suite, sizes, names, args)
    met = [] if suite == "strategies" else targets.check_targets(rows) + targets.check_gates(rows)
    repeat = args.repeat or (strategies_suite.DEFAULT_REPEAT if suite == "strategies" else DEFAULT_REPEAT)
    options = {"suite": suite, "sizes_bytes": sizes, "repeat": repeat, "workers": args.workers,
               "start_method": "per strategy" if suite == "strategies" else args.start_method,
               "argv": sys.argv[1:] if argv is None else list(argv)}
    if suite == "strategies":
        options["strategies"] = names
    doc = report.document(suite, options, machine, rows, met, time.perf_counter() - started)
    _report(suite, doc, out, reference, written)


def _run_and_report_task(checked: tuple[task_array.ArrayInput, list[str], dict | None], out: Path,
                         args: argparse.Namespace, argv: list[str] | None, written: list[Path]) -> None:
    """Run the reader's task in every strategy chosen, write its JSON and PNG (both or neither), print
    the table, the ranking and the comparison."""
    source, names, reference = checked
    started = time.perf_counter()
    repeat = args.repeat or strategies_suite.DEFAULT_REPEAT
    with tqdm(total=len(names), unit="strategy", file=sys.stderr) as bar:
        machine = machine_report()
        rows, ranking = task_suite.run(source, names, args.task, args.workers, repeat, args.time_limit, bar)
    options = {"suite": "task", "sizes_bytes": [source.nbytes], "repeat": repeat, "workers": args.workers,
               "start_method": "per strategy", "strategies": names,
               "argv": sys.argv[1:] if argv is None else list(argv)}
    doc = report.document("task", options, machine, rows, [], time.perf_counter() - started)
    doc["task"] = {"spec": args.task, "array": source.describe(), "shape": list(source.shape),
                   "dtype": source.dtype.str, "path": None if source.path is None else str(source.path),
                   "time_limit_s": args.time_limit}
    doc["ranking"] = ranking
    figure = write_pair(out, doc, lambda document, path: task_suite.plot_document(document, path, reference),
                        written)
    print(task_suite.format_table(rows, args.task))
    print()
    print(own_task.format_ranking(ranking, args.task, source.nbytes))
    if reference is not None:
        print()
        print(task_suite.format_comparison(rows, reference))
    print(f"\nwall time {doc['wall_seconds']:.1f} s; wrote {out} and {figure}")


def _run_and_report_cluster(checked: tuple, out: Path, args: argparse.Namespace, argv: list[str] | None,
                            written: list[Path]) -> None:
    """Run the cluster suite, write its JSON and PNG (both or neither), print the table, the ranking,
    the decision guide's multi-node rows and the comparison."""
    sources, addresses, reference = checked
    started = time.perf_counter()
    repeat = args.repeat or cluster_suite.DEFAULT_REPEAT
    machine = machine_report()
    arrays = [task_array.make(source) for source in sources]
    rows, clusters = cluster_suite.run(arrays, addresses, args.task, repeat, args.time_limit, args.nodes,
                                       args.node_workers,
                                       progress=lambda text: print(text, file=sys.stderr, flush=True))
    del arrays
    options = {"suite": "cluster", "sizes_bytes": [source.nbytes for source in sources], "repeat": repeat,
               "workers": "every CPU (Ray) or thread (Dask) of every node",
               "start_method": "the engines' own",
               "task": args.task or "sum_whole (every worker sums the whole array)",
               "argv": sys.argv[1:] if argv is None else list(argv)}
    doc = report.document("cluster", options, machine, rows, [], time.perf_counter() - started)
    doc["clusters"] = clusters
    doc["ranking"] = cluster_suite.ranking(rows)
    doc["decision_guide"] = cluster_suite.guide_rows(rows, clusters)
    def plot(document: dict, path: Path) -> Path:
        return cluster_suite.plot_document(document, path, reference)

    figure = write_pair(out, doc, plot, written)
    print(cluster_suite.format_table(rows, clusters))
    print()
    print(cluster_suite.format_ranking(doc["ranking"]))
    print()
    print(cluster_suite.format_guide(doc["decision_guide"]))
    if reference is not None:
        print()
        print(cluster_suite.format_comparison(rows, reference))
    print(f"\nwall time {doc['wall_seconds']:.1f} s; wrote {out} and {figure}")
