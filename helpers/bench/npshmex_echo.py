"""The real ``npshmex.ProcessPoolExecutor`` timed in the transport suite, in a process of its own.

npshmex (https://github.com/JelleAalbers/npshmex) passes every array argument and array result of
a task through a new shared-memory segment (its ``SharedArray`` dependency: a C extension built
from source, so the package is an optional extra, ``pip install -e ".[npshmex]"``). Importing it
replaces ``concurrent.futures._base.Future`` for the whole interpreter (lesson 08 shows why that is
a fault), so it never runs in the benchmark's own process: ``echo_seconds`` starts
``python -m helpers.bench.npshmex_echo`` and reads the timings it prints.

Timed, as the transport suite times the other executors: ``submit(echo, array).result()`` on a
started, warmed executor; npshmex copies the array into a new segment, the worker attaches it and
copies its result into another new segment, and the parent attaches that (and deletes it).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from helpers.measure.units import format_ratio

MISSING = ("npshmex is not installed (an optional extra: pip install -e \".[npshmex]\"; its SharedArray "
           "dependency builds from source and needs a C compiler)")
TIMINGS = "TIMINGS "  # the line of the child's output that holds its JSON


def missing() -> str | None:
    """Why npshmex cannot be timed here, or None when it and SharedArray import."""
    found = all(importlib.util.find_spec(name) is not None for name in ("npshmex", "SharedArray"))
    return None if found else MISSING


def echo_seconds(n_bytes: int, repeat: int, n_workers: int, start_method: str,
                 timeout: float = 600) -> tuple[list[float], float]:
    """(seconds of each timed round trip, seconds of the first one) of npshmex's executor echoing a
    random float64 array of ``n_bytes``, measured in a fresh interpreter. Raises RuntimeError with
    the child's error when it fails, or when it runs past ``timeout`` seconds."""
    command = [sys.executable, "-m", "helpers.bench.npshmex_echo", str(n_bytes), str(repeat), str(n_workers),
               start_method]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as error:  # run() killed the child; its segments may remain
        raise RuntimeError(f"npshmex's echo ran past {timeout:.0f} s (segments named npshmex_* may be "
                           "left in /dev/shm: npshmex.shm_clear() removes them)") from error
    lines = [line for line in done.stdout.splitlines() if line.startswith(TIMINGS)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"npshmex's echo failed (exit {done.returncode}): {done.stderr[-2000:]}")
    timings = json.loads(lines[-1][len(TIMINGS):])
    return timings["runs"], timings["first"]


def _main(n_bytes: int, repeat: int, n_workers: int, start_method: str) -> None:
    import multiprocessing as mp

    import npshmex
    import SharedArray

    from helpers.lessons import workers
    from helpers.measure import copy_floors
    from helpers.measure.timing import time_it

    def ours() -> set[str]:  # npshmex's segments on the machine now: other programs' are left alone
        return {entry.name.decode() for entry in SharedArray.list() if entry.name.startswith(b"npshmex")}

    before = ours()
    source = copy_floors.random_array(n_bytes)
    executor = npshmex.ProcessPoolExecutor(n_workers, mp_context=mp.get_context(start_method))
    try:
        list(executor.map(workers.sleep_then_echo, [0.2] * n_workers, range(n_workers)))  # started, warm

        def once() -> None:
            result = executor.submit(workers.echo, source).result()
            assert result.shape == source.shape
            del result

        first = time_it(once, repeat=1, warmup=0).runs[0]
        timing = time_it(once, repeat=repeat, warmup=n_workers - 1)
    finally:
        executor.shutdown()
        for name in ours() - before:  # this run's segments left (none, unless a task failed)
            SharedArray.delete(name)
    print(TIMINGS + json.dumps({"runs": list(timing.runs), "first": first}), flush=True)



ROWS = {"npshmex_echo": "npshmex", "ours_warm": "ours, warm", "stdlib_echo": "stdlib"}


def _reading(by: dict, sizes: list[int]) -> str:
    """One paragraph that reads the table's columns: npshmex against ours, and ours against its floor."""
    both = [size for size in sizes if ("ours_warm", size) in by]
    if not both:
        return "This file has no warm rows of ours to compare npshmex with."
    over = [by["npshmex_echo", size]["median_s"] / by["ours_warm", size]["median_s"] for size in both]
    npshmex = [by["npshmex_echo", size]["ratio_to_warm_floor"] for size in both]
    largest = max(both)
    ours_at_largest = by["ours_warm", largest]["ratio_to_warm_floor"]
    below = (f" A ratio under 1 (here {ours_at_largest:.3g}×) is two timings of the same copy a few per cent "
             "apart." if ours_at_largest < 1 else "")
    return (f"Reading across: npshmex took {format_ratio(min(over))}× to {format_ratio(max(over))}× "
            "as long as ours. npshmex makes new segments for the argument and the result every call, so it "
            f"stayed at {min(npshmex):.3g}× floor (a) or more; ours reuses the argument's and, for an echo, "
            f"makes none for the result: warm, it fell to {ours_at_largest:.3g}× floor (a) at "
            f"{largest >> 20} MiB, a warm copy plus a message.{below}")


def _newest_rows(folder: Path | None) -> tuple[Path, dict, list[int]] | None:
    """The newest transport file in ``folder`` (``results/``) that has npshmex's rows: its path, its
    rows of ``ROWS`` by (name, size in bytes) and npshmex's sizes; None when there is none."""
    folder = Path(__file__).resolve().parents[2] / "results" if folder is None else folder
    for path in sorted(folder.glob("*-transport*.json"), reverse=True):
        rows = json.loads(path.read_text())["rows"]
        by = {(row["name"], row["size_bytes"]): row for row in rows if row["name"] in ROWS}
        sizes = sorted({size for name, size in by if name == "npshmex_echo"})
        if sizes:
            return path, by, sizes
    return None


def reference_table(folder: Path | None = None) -> str:
    """Markdown: npshmex's echo beside ours (warm) and the stdlib's, per size, as multiples of that
    size's floor (a), from the newest transport file in ``folder`` (``results/``) that has npshmex's
    rows; or a line saying there is none and how to make one."""
    found = _newest_rows(folder)
    if found is None:
        return ("No transport results with npshmex's rows in `results/`: install the extra and run "
                "`python -m helpers.bench --suite transport`.")
    path, by, sizes = found
    header = "| size | " + " | ".join(ROWS.values()) + " | npshmex over ours |"
    lines = [f"From `results/{path.name}`, ratios to floor (a) of the same size:", "",
             header, "|---" * (len(ROWS) + 2) + "|"]
    for size in sizes:
        cells = [f"{by[name, size]['ratio_to_warm_floor']:.3g}×" if (name, size) in by else "-"
                 for name in ROWS]
        npshmex, ours = by["npshmex_echo", size], by.get(("ours_warm", size))
        over = "-" if ours is None else f"{format_ratio(npshmex['median_s'] / ours['median_s'])}×"
        lines.append(f"| {size >> 20} MiB | " + " | ".join(cells) + f" | {over} |")
    return "\n".join(lines + ["", _reading(by, sizes)])


if __name__ == "__main__":
    _main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
