"""``python -m helpers.bench``: rerun the course's measurements on your hardware.

Suites (``--suite``): ``transport`` — one round trip of an array through the shared-memory
executor and the pickler reductions, against this machine's floors measured in the same run
(``helpers.transport_bench``). Writes ``results/<host>-<date>-<suite>.json`` (schema in
``results/README.md``) and a PNG figure beside it; ``--compare FILE`` prints this run beside a
reference. Bad input gets one line on stderr and exit code 2; Ctrl-C shuts every pool down,
unlinks every segment and exits with 130.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from helpers import bench_report, bench_targets, config, leftovers, system
from helpers import transport_bench as transport
from helpers.machine import machine_report
from helpers.memory import track_memory
from helpers.units import MiB, format_bytes

SUITES = ("transport",)  # the "strategies" suite joins here
DEFAULT_SIZES = "1,10,100,1000"
# Copies of the array alive at once, at worst: RAM (the stdlib round trip: the array, its pickle,
# the worker's copy and pickle, the bytes received and the result) and /dev/shm (a pooled segment
# and a result segment, with one to spare for the reductions' pool).
RAM_COPIES = 6
SHM_COPIES = 3
DESCRIPTION = """\
Rerun the course's measurements on this machine. The transport suite times one round trip of an
array of random float64 through the shared-memory executor (against the stdlib
ProcessPoolExecutor) and through the pickler reductions, against two floors measured in the same
run: (a) one copy into warm memory, (b) one copy into a new shared-memory segment. It writes
results/<host>-<date>-transport.json (schema: results/README.md) and a PNG figure beside it, and
prints the table and which targets hold. Ctrl-C stops it cleanly (exit code 130)."""
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
    parser.add_argument("--suite", choices=SUITES, default="transport",
                        help="which measurements to run (default: %(default)s)")
    parser.add_argument("--sizes", default=DEFAULT_SIZES, metavar="MiB,MiB,...",
                        help="array sizes in MiB (2**20 bytes, as LAB_ARRAY_MB), comma-separated; each must "
                             f"fit {RAM_COPIES} copies in available RAM and {SHM_COPIES} in free /dev/shm "
                             "(default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, metavar="N",
                        help="timed runs per measurement, after warm-up calls (one per worker); medians are "
                             "reported (from 256 MiB on, the ways that pickle or copy into fresh memory run "
                             "at most 2 times; default: %(default)s)")
    parser.add_argument("--workers", type=int, default=config.n_workers(), metavar="N",
                        help="worker processes per executor (default: LAB_WORKERS or the usable CPUs, "
                             "at least 2: %(default)s)")
    parser.add_argument("--start-method", default=transport.DEFAULT_START_METHOD,
                        choices=multiprocessing.get_all_start_methods(),
                        help="how worker processes start (default: %(default)s; workers are started and "
                             "warmed before timing either way)")
    parser.add_argument("--out", type=Path, metavar="FILE.json",
                        help="where to write the results; the PNG figure goes beside it with .png "
                             "(default: results/<host>-<date>-<suite>.json under the current folder)")
    parser.add_argument("--compare", type=Path, metavar="FILE.json",
                        help="a result file of an earlier run (e.g. the reference in results/): print this "
                             "run's medians and ratios beside it and draw it dotted in the figure")
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
    common = {"repeat": args.repeat, "start_method": args.start_method}
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
        source = transport.random_array(n_bytes)
        floors = transport.measure_floors(source, repeat=max(args.repeat, 5))
        rows += transport.floor_rows(source.nbytes, floors)
        bar.update()
        for name, measure in _transport_measurements(source, floors, args):
            bar.set_description(f"{label}: {name}")
            rows.append(_measured(measure))
            bar.update()
        del source
    transport.add_speedups(rows)
    return rows


def _clean_after_interrupt() -> None:
    """After Ctrl-C every pool is shut down by its ``with`` block; drop anything of ours an interrupt
    caught half-made (a segment whose name carries this process's pid)."""
    gc.collect()
    for path in leftovers.ours():
        if path.name.startswith(f"{leftovers.SEGMENT_PREFIX}{os.getpid()}_"):
            path.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        sizes = parse_sizes(args.sizes)
        if args.repeat < 1 or args.workers < 1:
            raise BadInput("--repeat and --workers must be at least 1")
        check_sizes_fit(sizes)
        reference = bench_report.load_reference(args.compare) if args.compare else None
    except (BadInput, ValueError) as error:
        parser.error(str(error))
    out = args.out or bench_report.default_out_path(args.suite)
    started = time.perf_counter()
    try:
        with tqdm(total=steps_of_transport(sizes, args), unit="step", file=sys.stderr) as bar:
            machine = machine_report()
            rows = run_transport(sizes, args, bar)
    except KeyboardInterrupt:
        _clean_after_interrupt()
        print("interrupted: every pool shut down and every segment unlinked; no results written",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    targets = bench_targets.check_targets(rows)
    options = {"suite": args.suite, "sizes_bytes": sizes, "repeat": args.repeat, "workers": args.workers,
               "start_method": args.start_method, "argv": sys.argv[1:] if argv is None else list(argv)}
    doc = bench_report.document(args.suite, options, machine, rows, targets, time.perf_counter() - started)
    bench_report.write_document(out, doc)
    figure = bench_report.plot_document(doc, out.with_suffix(".png"), reference)
    print(bench_report.format_table(rows))
    print()
    print(bench_report.format_targets(targets))
    if reference is not None:
        print()
        print(bench_report.format_comparison(rows, reference))
    print(f"\nwall time {doc['wall_seconds']:.1f} s; wrote {out} and {figure}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
