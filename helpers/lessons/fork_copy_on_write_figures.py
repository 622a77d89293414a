"""Lesson 04's tables and plots: each process's memory while forked workers hold still, what each
fan-out grew, the memory timelines with processes named by role, and the start methods compared
(bytes and seconds in, human units out)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from helpers.lessons.fork_copy_on_write import FanOut
from helpers.measure.proctree import ProcessMemory
from helpers.measure.units import MiB, format_bytes


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [text.rjust(width) for text, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join([row[0].ljust(widths[0]), *cells]))
    return "\n".join(lines)


def process_table(held: Mapping[int, ProcessMemory]) -> str:
    """A text table of each held process's RSS, USS and PSS by role (parent, worker 1..N) and the
    tree's sums, in human units."""
    rows = [("process", "RSS", "USS", "PSS")]
    workers = 0
    for pid, measured in held.items():
        if pid == os.getpid():
            name = "parent"
        else:
            workers += 1
            name = f"worker {workers}"
        rows.append((name, *(format_bytes(v) for v in (measured.rss, measured.uss, measured.pss))))
    sums = [sum(getattr(m, k) for m in held.values()) for k in ("rss", "uss", "pss")]
    rows.append(("sum over the tree", *(format_bytes(v) for v in sums)))
    return _table(rows)


def growth_table(fans: Mapping[str, FanOut], unit_bytes: int) -> str:
    """A text table, one row per fan-out: what the tree's RSS and PSS grew by while the workers
    held, and what each worker's task made private (its USS growth), in bytes and in
    ``unit_bytes`` ("<0.01" below a hundredth)."""

    def cell(n_bytes: float) -> str:
        share = n_bytes / unit_bytes
        return f"{format_bytes(n_bytes)} ({'<0.01' if abs(share) < 0.005 else f'{share:.2f}'})"

    rows = [("fan-out", "tree RSS growth", "tree PSS growth", "each worker's USS growth in its task")]
    for name, fan in fans.items():
        tasks = ", ".join(cell(w.uss_growth) for w in fan.workers)
        rows.append((name, cell(fan.growth("rss")), cell(fan.growth("pss")), tasks))
    return _table(rows)


def name_phase_workers(report, phases: Mapping[str, FanOut]) -> None:
    """Label the report's processes by role: the workers of each phase '<phase> worker i', the
    tracking process 'parent' (``MemoryReport.name_roles``)."""
    named = {w.pid: f"{label} worker {i}" for label, fan in phases.items()
             for i, w in enumerate(fan.workers, start=1)}
    report.name_roles(named=named)


def plot_fork_phases(report, phases: Mapping[str, FanOut]):
    """RSS (left) and PSS (right) of every process over the fan-outs in ``phases``, processes named
    by role, with a red star at the tree's sum as ``fan_out`` read it exactly halfway through each
    hold; the figure."""
    import matplotlib.pyplot as plt

    name_phase_workers(report, phases)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), layout="constrained", sharey=True)
    report.plot("rss", ax=left, title="RSS: every forked worker seems to hold everything")
    report.plot("pss", ax=right, title="PSS: reading shares the array, writing copies it")
    for label, fan in phases.items():
        at = (report.marks[f"{label} holding"] + report.marks[f"{label} end"]) / 2
        for ax, measure in ((left, "rss"), (right, "pss")):
            ax.plot(at, sum(getattr(m, measure) for m in fan.held.values()) / MiB, "r*", markersize=12,
                    label="direct read, tree" if label == next(iter(phases)) else None)
    for ax in (left, right):  # a phase's workers overlap: the first drawn wide, the others dashed over it
        for line in ax.get_lines():
            if line.get_label().endswith(" worker 1"):
                line.set_linewidth(3)
                line.set_alpha(0.6)
            elif " worker " in line.get_label():
                line.set_linestyle("--")
    for ax in (left, right):  # below the axes: inside, it would hide the idle workers' lines
        for line in ax.get_lines():  # no segment is made here: a flat /dev/shm line says nothing
            if line.get_label().startswith("/dev/shm") and len(set(line.get_ydata())) <= 1:
                line.remove()
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4)
    return fig


def plot_start_methods(jobs: Mapping[str, FanOut], seconds: Mapping[str, float], floor_seconds: float,
                       array_bytes: int, n_workers: int):
    """Left: each job's ``seconds`` (its fastest run, start-up included) against floor (a),
    ``floor_seconds``; right: the tree's PSS growth while the workers of ``jobs`` held, in arrays; the
    figure."""
    import matplotlib.pyplot as plt

    from helpers.measure import plots

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 3.5), layout="constrained")
    plots.plot_bars(dict(seconds), "seconds, fastest of three (start-up included)",
                    f"Start {n_workers} workers, each sums the array", reference=floor_seconds,
                    reference_label="floor (a): one warm copy", ax=left)
    plots.plot_bars({name: job.growth("pss") / array_bytes for name, job in jobs.items()},
                    "tree PSS growth while the workers hold (arrays)", "Memory",
                    reference=1.0, reference_label="one copy of the array", ax=right)
    return fig


def plot_collections(rows_lists: float, kernel: float, frozen: float, list_objects: float):
    """What one ``gc.collect()`` made private in a forked worker (bytes, means over workers), as bars
    in MiB: with the rows, stacked as the rows' lists (``rows_lists``, beyond a collection with the
    rows freed) and the notebook process's own objects (``kernel``, that collection); with the rows
    freed; after ``gc.freeze()`` (``frozen``). A dashed line at ``list_objects``, the pages of the rows' list
    objects themselves; the figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 2.8), layout="constrained")
    names = ["gc.collect()", "gc.collect(), rows freed", "gc.collect(), gc.freeze()"]
    ax.barh(names[0], rows_lists / MiB, color="tab:blue", label="the rows' lists")
    ax.barh(names[0], kernel / MiB, left=rows_lists / MiB, color="tab:gray",
            label="the notebook's own objects")
    ax.barh(names[1], kernel / MiB, color="tab:gray")
    ax.barh(names[2], frozen / MiB, color="tab:green", label="gc.collect() after gc.freeze()")
    ax.axvline(list_objects / MiB, color="tab:red", linestyle="--",
               label=f"the rows' list objects ({format_bytes(list_objects)})")
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    ax.set_xlabel("MiB each worker made private (mean over workers)")
    ax.set_title("One collection in a forked worker: what it un-shares")
    return fig
