"""Lesson 00's figures: a copy timed run by run, RSS against PSS of N readers of one segment (also as
Markdown, to show collapsed), who counts what under memory_profiler, and the copy floors (times in
seconds, sizes in bytes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from helpers.measure import plots
from helpers.measure.plots import plot_bars
from helpers.measure.units import GiB, MiB, format_bytes


def plot_run_by_run(runs: Sequence[float], later: float, array_bytes: int):
    """One bar per timed run (ms), the first in red, with the median of the later runs dashed; the figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5), layout="constrained")
    numbers = range(1, len(runs) + 1)
    ax.bar(numbers, [run * 1e3 for run in runs], color=["tab:red"] + ["tab:blue"] * (len(runs) - 1))
    ax.axhline(later * 1e3, color="grey", linestyle="--", label=f"median of runs 2-{len(runs)}")
    ax.set(xlabel="run", ylabel="time (ms)", xticks=numbers,
           title=f"Copying {format_bytes(array_bytes)} into a new buffer, run by run")
    ax.legend()
    return fig


def plot_rss_and_pss(report):
    """The same run twice, side by side: every process's RSS (left) and PSS (right), in MiB; the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True, layout="constrained")
    report.plot("rss", ax=axes[0], title="RSS of each process and of the tree")
    report.plot("pss", ax=axes[1], title="PSS of each process and of the tree")
    return fig


def rss_and_pss_markdown(report) -> str:
    """``plot_rss_and_pss``'s figure as Markdown (``plots.figure_as_markdown``), so that
    ``exercises.reveal`` can show it collapsed."""
    return plots.figure_as_markdown(plot_rss_and_pss(report),
                                    "RSS (left) and PSS (right) of each process and of the tree, over time")


def plot_who_counts(growth: Mapping[str, float], array_bytes: int, n_workers: int):
    """Horizontal bars of what each tool says the run grew by (bytes, drawn in MiB), one array dashed."""
    ax = plot_bars({name: grew / MiB for name, grew in growth.items()},
                   "growth while the workers hold the segment (MiB)",
                   f"{n_workers} workers read one shared array: who counts what",
                   reference=array_bytes / MiB, reference_label="one array")
    ax.figure.set_size_inches(8, 3)
    return ax.figure


def plot_floors(floors: Mapping[str, object], array_bytes: int):
    """The speed of each copy in ``floors`` (label -> its ``Timing``; GiB/s from the median); the figure."""
    ax = plot_bars({label: array_bytes / floor.median / GiB for label, floor in floors.items()},
                   "copy speed (GiB/s, median)",
                   f"Copying {format_bytes(array_bytes)}: floors (a) and (b), and into fresh private pages")
    ax.figure.set_size_inches(8, 2.5)
    return ax.figure
