"""Lesson 00's figures: a copy timed run by run, RSS against PSS of N readers of one segment (also as
Markdown, to show collapsed, with its spikes named), who counts what under memory_profiler, and the
copy floors (times in seconds, sizes in bytes)."""

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
    for ax in axes:
        _stagger_mark_labels(ax)
    _room_for_mark_labels(axes[0])  # the y axis is shared: one call moves both
    return fig


def _room_for_mark_labels(ax, share: float = 0.3) -> None:
    """Lower the y axis below 0 so that the bottom ``share`` of the axes, where the marks' labels
    stand, holds no line; ticks stay at 0 and above."""
    top = ax.get_ylim()[1]
    ticks = [tick for tick in ax.get_yticks() if 0 <= tick <= top]
    ax.set_ylim(-share / (1 - share) * top, top)
    ax.set_yticks(ticks)


def _stagger_mark_labels(ax, gap: float = 0.06) -> None:
    """Move a mark's label to the right of its line (the plot draws them on the left) when it stands
    within ``gap`` of the x span of the previous label on the left, so that two marks close in time
    stay readable."""
    from matplotlib.text import Annotation

    low, high = ax.get_xlim()
    previous = None
    for label in sorted((text for text in ax.texts if isinstance(text, Annotation)), key=lambda t: t.xy[0]):
        at = label.xy[0]
        if previous is not None and at - previous < gap * (high - low):
            label.set_horizontalalignment("left")
        else:
            previous = at


def spikes_caption(report, reader_pids: Sequence[int], array_bytes: int, share: float = 0.25) -> str:
    """A sentence naming the PSS spikes of workload B, from ``report`` (marks of ``start_here``'s
    section 4), each in arrays above the level its line then settled at: the tree's while this kernel
    filled the segment (between ``'no segment end'`` and ``'unmapped holding'``; it settles once the
    kernel closes the segment), and a reader's before every reader held it (between ``'unmapped end'``
    and ``'shared holding'``), each named when it rose over ``share`` of an array; "" when neither did."""
    times, per_process, totals = report.timeline("pss")
    marks = report.marks

    def peak(values, start: str, end: str) -> float:
        inside = [v for t, v in zip(times, values, strict=True) if marks[start] < t < marks[end] and v == v]
        return max(inside, default=0.0)

    parts = []
    settled = report.steady("unmapped holding", "unmapped end").pss
    filling = peak(totals, "no segment end", "unmapped holding") - settled
    if filling > share * array_bytes:
        parts.append(f"this kernel, mapping the segment while it filled it (+{filling / array_bytes:.2f})")
    held = report.by_process("shared holding", "shared end")
    early = {pid: peak(per_process[pid], "unmapped end", "shared holding") - held[pid][1]
             for pid in reader_pids if pid in per_process and pid in held}
    first = max(early, key=early.get, default=None)
    if first is not None and early[first] > share * array_bytes:
        parts.append(f"{report.process_labels[first]}, charged all it mapped until the others attached "
                     f"(+{early[first] / array_bytes:.2f})")
    return (f"Spikes, in arrays above where the line settled: {'; '.join(parts)}. "
            f"Samples at least {report.interval * 1000:.0f} ms apart can miss a peak.") if parts else ""


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


def who_counts_markdown(growth: Mapping[str, float], array_bytes: int, n_workers: int) -> str:
    """``plot_who_counts``'s figure as Markdown, so that ``exercises.reveal`` can show it collapsed."""
    return plots.figure_as_markdown(plot_who_counts(growth, array_bytes, n_workers),
                                    "What each tool says the tree grew by, against one array")


def plot_floors(floors: Mapping[str, object], array_bytes: int):
    """The speed of each copy in ``floors`` (label -> its ``Timing``; GiB/s from the median); the figure."""
    ax = plot_bars({label: array_bytes / floor.median / GiB for label, floor in floors.items()},
                   "copy speed (GiB/s, median)",
                   f"Copying {format_bytes(array_bytes)}: the floors and new private pages")
    ax.figure.set_size_inches(8, 2.5)
    return ax.figure
