"""Matplotlib figures for the lessons: memory timelines and bars against the memcpy floor."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from helpers.measure.units import MiB

if TYPE_CHECKING:
    from helpers.measure.memory import MemoryReport


def _axes(ax, figsize=(8, 4)):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def plot_memory_timeline(report: MemoryReport, measure: str = "pss", ax=None, title: str | None = None):
    """One thin line per process, a thick line for the tree's sum, a dashed one for /dev/shm (MiB)."""
    ax = _axes(ax)
    times, per_process, totals = report.timeline(measure)
    for pid, values in per_process.items():
        ax.plot(times, [v / MiB for v in values], linewidth=1, label=report.process_labels[pid])
    ax.plot(times, [v / MiB for v in totals], color="black", linewidth=2.5, label=f"tree {measure.upper()}")
    shm = [s.shm / MiB for s in report.samples]
    ax.plot(times, shm, color="grey", linestyle="--", label="/dev/shm (above start)")
    for label, at in report.marks.items():
        ax.axvline(at, color="grey", linewidth=0.5)
        ax.annotate(label, (at, 0), xycoords=("data", "axes fraction"), rotation=90,
                    fontsize=7, va="bottom", ha="right")
    ax.set_xlabel("time since tracking began (s)")
    ax.set_ylabel(f"{measure.upper()} (MiB)")
    ax.set_title(title or f"Memory of the process tree ({measure.upper()})")
    ax.legend(fontsize=7, loc="upper left", ncol=2 if len(per_process) > 4 else 1)
    return ax


def plot_bars(values: Mapping[str, float], unit_label: str, title: str, reference: float | None = None,
              reference_label: str = "memcpy floor", ax=None, log: bool = False):
    """Horizontal bars, one per name, with an optional vertical reference line (e.g. the floor)."""
    ax = _axes(ax, figsize=(8, 0.5 * len(values) + 1.5))
    names = list(values)
    ax.barh(names, [values[n] for n in names], color="tab:blue")
    ax.invert_yaxis()
    if reference is not None and math.isfinite(reference):
        ax.axvline(reference, color="tab:red", linestyle="--", label=reference_label)
        ax.legend(loc="lower right")
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(unit_label)
    ax.set_title(title)
    return ax


def plot_lines(x: Sequence[float], series: Mapping[str, Sequence[float]], x_label: str, y_label: str,
               title: str, ax=None, log: bool = False):
    """One line with markers per named series over a shared x axis."""
    ax = _axes(ax)
    for name, ys in series.items():
        ax.plot(x, ys, marker="o", label=name)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title)
    ax.legend()
    return ax


def figure_as_markdown(figure, alt: str) -> str:
    """``figure`` as Markdown: a PNG inside an ``<img>`` tag, drawn as the inline backend draws it,
    so that text shown collapsed (``exercises.reveal``) can hold it; the figure is closed, never
    displayed itself."""
    import base64
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    png = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{alt}" src="data:image/png;base64,{png}">'
