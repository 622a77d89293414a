"""Lesson 03's figures and table: memory timelines by role, cost per task against the object's
size, and where a Manager proxy starts to lose; and the sentences that read them (all times in
seconds, sizes in bytes)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from itertools import pairwise

import numpy as np

from helpers.lessons.send_once_and_managers import ProxyCosts, format_table, pss_between_exact_reads
from helpers.measure.proctree import ProcessMemory
from helpers.measure.units import MiB, approx_ratio, approx_seconds, format_bytes, format_seconds, shown


def pss_carried_by_rss(report):
    """A copy of a ``MemoryReport`` whose every sample's PSS is ``pss_between_exact_reads``: each
    process's last exact PSS moved by its RSS change since (RSS and USS kept as sampled)."""
    samples = [dataclasses.replace(sample, processes={
        pid: ProcessMemory(memory.rss, memory.uss, round(estimate[pid]))
        for pid, memory in sample.processes.items()})
        for sample, estimate in zip(report.samples, pss_between_exact_reads(report.samples), strict=True)]
    return dataclasses.replace(report, samples=samples)


def plot_memory(reports: Mapping[str, object]):
    """One PSS timeline per ``MemoryReport``, side by side, titled by the mapping's keys; the figure.

    The sampler re-reads PSS only now and then (it is costly) and RSS every sample: the lines are
    ``pss_carried_by_rss``, so a copy made and freed between two PSS reads still shows."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(reports), figsize=(5 * len(reports), 4.8), layout="constrained",
                             sharey=True)
    longest = max((len(label) for report in reports.values() for label in report.marks
                   if not label.endswith(" ends")), default=0)
    for ax, (title, report) in zip(np.atleast_1d(axes), reports.items(), strict=True):
        pss_carried_by_rss(report).plot(ax=ax, title=title)
        marks_above_the_axes(ax, report.marks)
        ax.set_title(title, pad=8 + 3.6 * longest)  # points: clear of the longest 7-point label, rotated
    fig.suptitle("PSS by process", fontsize=10)
    return fig


def marks_above_the_axes(ax, marks: Mapping[str, float]) -> None:
    """Move the mark labels a timeline wrote at the foot of its axes (where the lines near zero
    hide their first letters) above the axes, and shade each held window (a mark to its "... ends"
    mark) instead of labelling its end. Lift the title clear of them with ``set_title(pad=...)``."""
    for text in list(ax.texts):
        label = text.get_text()
        if label not in marks:
            continue
        if label.endswith(" ends"):
            text.remove()
            continue
        text.xy = text.xyann = (marks[label], 1.0)
        text.set_verticalalignment("bottom")
        text.set_horizontalalignment("center")
        text.set_annotation_clip(False)
    for label, start in marks.items():
        if f"{label} ends" in marks:
            ax.axvspan(start, marks[f"{label} ends"], color="0.92", zorder=0)


def plot_costs(sizes: Sequence[int], per_task: Mapping[str, Sequence[float]], floor: Sequence[float],
               costs: ProxyCosts, lines: Mapping[str, tuple[float, float]], resend: Sequence[float],
               installed: float, break_even: Sequence[float | None], statistic: str = "min",
               tested: Mapping[int, float] | None = None, tested_size: int | None = None):
    """Left: seconds per task of each way (``per_task``) against the wrapped data's size, with the
    memcpy ``floor``. Right: seconds per task of a proxy against reads per task, sent with every task
    or installed (``lines``: their (fixed, per read) fits, dashed and labelled as estimates past the
    reads measured), against ``resend`` of each size (estimated break-even circles) and the
    ``installed`` object's task. The right panel plots each k's ``statistic`` ("min": fastest task,
    "median"): pass ``resend``, ``installed`` and ``lines`` by the same statistic. ``tested``: seconds
    per task at reads past 64 (on the list of ``tested_size`` bytes), drawn as filled points. The figure."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), layout="constrained")
    mib = [n / MiB for n in sizes]
    for (label, values), style in zip(per_task.items(), ("o-", "s-", "^-"), strict=False):
        left.plot(mib, values, style, label=label)
    left.plot(mib, floor, "k--", label="memcpy floor (fresh pages)")
    left.set(xscale="log", yscale="log", xlabel="wrapped data (MiB)", ylabel="seconds per task",
             title="Cost per task against the object's size")
    left.legend(fontsize=8)

    ks = sorted(costs.sent)
    reach = max([64] + [k for k in break_even if k]) * 3
    fitted = np.array([0, *np.geomspace(0.5, reach, 200)])
    proxy_ways = (("proxy sent with every task", costs.sent, "^", "tab:green"),
                  ("proxy installed once per worker", costs.installed, "v", "tab:red"))
    for label, timings, marker, color in proxy_ways:
        fixed, per_read = lines[label]
        right.plot(ks, [getattr(timings[k], statistic) for k in ks], marker, color=color, label=label)
        right.plot(fitted, fixed + per_read * fitted, "--", color=color, linewidth=1,
                   label="its line through 1 and 64 reads (an estimate past 64)")
    estimated = {"label": "break-even, estimated from the line"}
    for n, seconds, k in zip(sizes, resend, break_even, strict=True):
        right.axhline(seconds, color="tab:blue", linestyle=":", linewidth=1)
        right.annotate(f"object of {format_bytes(n)} sent with every task", (fitted[1], seconds),
                       fontsize=7, va="bottom", color="tab:blue")
        if k:
            right.plot([k], [seconds], "o", color="tab:green", markerfacecolor="none", **estimated)
            estimated = {}
    if tested:
        where = f" on the {format_bytes(tested_size)} list" if tested_size else ""
        right.plot(list(tested), list(tested.values()), "o", color="tab:green",
                   label=f"proxy sent with every task, tested{where}")
    right.axhline(installed, color="tab:orange", linestyle=":", linewidth=1)
    right.annotate("index sent, object installed", (fitted[1], installed), fontsize=7, va="bottom",
                   color="tab:orange")
    right.set(xscale="symlog", yscale="log", xlim=(0, reach), xlabel="items read per task (k)",
              ylabel=f"seconds per task ({'fastest' if statistic == 'min' else statistic})",
              title="A proxy pays per read: where it loses (estimated past 64 reads)")
    right.legend(fontsize=8, loc="lower right")
    return fig


def side_by_side(sizes: Sequence[int], floor: Sequence[float],
                 ways: Mapping[str, tuple[Sequence, Sequence[str]]], memory: Mapping[str, str]) -> str:
    """A text table: per way and size, the median seconds per task, its ratio to the ``floor``, what
    was paid once (``ways``: {way: (Timings by size, paid-once texts by size)}) and, at the largest
    size, the memory added (``memory``: {way: text})."""
    rows = []
    for i, (n, floor_seconds) in enumerate(zip(sizes, floor, strict=True)):
        for way, (timings, once) in ways.items():
            rows.append({"way": way, "wrapped data": format_bytes(n),
                         "per task": format_seconds(timings[i].median),
                         "÷ floor": f"{timings[i].median / floor_seconds:.2g}", "paid once": once[i],
                         "memory added (PSS)": memory[way] if i == len(sizes) - 1 else ""})
    return format_table(rows)


def start_up_spread(baseline) -> float:
    """How far a baseline pool's typical start-up lies above its fastest (a ``Timing``: median minus
    fastest run), seconds: the noise a difference between fastest runs must beat."""
    return baseline.median - baseline.min


def start_up_added(start_up, baseline) -> float | None:
    """Seconds a pool's start-up (a ``Timing``) added over a ``baseline`` pool's (fastest runs: a
    start-up only gets slower with the machine's load), or None when that is within the baseline's
    own spread (``start_up_spread``): nothing measurable."""
    extra = start_up.min - baseline.min
    return extra if extra > start_up_spread(baseline) else None


def start_up_over(start_up, empty_pool) -> str:
    """``start_up_added`` for the table: "+690 ms start-up", or "within an empty pool's spread
    (10 ms)" when it added nothing measurable."""
    extra = start_up_added(start_up, empty_pool)
    if extra is None:
        return f"within an empty pool's spread ({format_seconds(start_up_spread(empty_pool))})"
    return f"+{format_seconds(float(f'{extra:.2g}'))} start-up"  # two digits, as the lesson's prose rounds it


NEAR = 0.2  # a start-up within this share of its model is near it
FLAT = 1.5  # per-task medians within this factor of each other are flat (as section 2 reads them)


def _two_digits(seconds: float) -> float:
    return float(f"{seconds:.2g}")  # as approx_seconds prints it


def _start_up_model(n_workers: int, pickling: float, unpickling: float, sizes: Sequence[int],
                    added: Sequence[float | None]) -> tuple[list[float], list[float | None]]:
    """(model, measured) by size, each rounded to two digits as printed: the model is ``n_workers``
    × (``pickling`` + ``unpickling``, themselves rounded) scaled by size from the largest."""
    parts = _two_digits(pickling) + _two_digits(unpickling)
    model = [_two_digits(n_workers * parts * n / sizes[-1]) for n in sizes]
    return model, [None if a is None else _two_digits(a) for a in added]


def _fits(measured: float | None, model: float) -> str:
    measured = measured or 0.0
    return "near it" if abs(measured - model) <= NEAR * model else "less" if measured < model else "more"


def start_up_model_table(n_workers: int, pickling: float, unpickling: float, sizes: Sequence[int],
                         added: Sequence[float | None], model: bool = True) -> str:
    """Lines to print: by size (bytes), what installing the object added to an empty pool's start-up
    (``added``: seconds, None where nothing measurable) and, if ``model``, the model ``n_workers`` ×
    (``pickling`` + ``unpickling``: the largest object's, seconds) scaled by size."""
    modelled, took = _start_up_model(n_workers, pickling, unpickling, sizes, added)
    against = f", against the model {n_workers} × (pickling + unpickling) scaled by size" if model else ""
    lines = [f"start-up added to an empty pool{against}:"]
    for n, m, a in zip(sizes, modelled, took, strict=True):
        measured = "nothing measurable" if a is None else f"measured +{approx_seconds(a)}"
        its_model = f", model {approx_seconds(m)}" if model else ""
        lines.append(f"{format_bytes(n):>9}: {measured}{its_model}")
    return "\n".join(lines)


def start_up_against_model(n_workers: int, pickling: float, unpickling: float, sizes: Sequence[int],
                           added: Sequence[float | None]) -> str:
    """The model of ``start_up_model_table`` in a sentence: its sum at the largest size against what
    was measured there (near it: "the model fits at" the largest size), then how the smallest size bore it
    out (every figure rounded as printed): where it falls short there, how much of that start-up is
    a part the model leaves out ("most" past half)."""
    model, took = _start_up_model(n_workers, pickling, unpickling, sizes, added)
    measured = "nothing measurable" if took[-1] is None else approx_seconds(took[-1])
    fits = _fits(took[-1], model[-1]).replace("less", "less: some of it overlapped")
    parts = f"{approx_seconds(_two_digits(pickling))} + {approx_seconds(_two_digits(unpickling))}"
    text = (f"{n_workers} × ({parts}, section 1) = {approx_seconds(model[-1])} at {format_bytes(sizes[-1])}, "
            f"measured {measured}, {fits}")
    if len(sizes) < 2:
        return text + "."
    smaller, smallest = [_fits(took[i], model[i]) for i in range(len(sizes) - 1)], format_bytes(sizes[0])
    if set(smaller) == {"near it"}:
        return text + "; scaled by size (printed above), near it at every size."
    if smaller[0] == "less" or took[0] is None:
        return text + f"; scaled by size (printed above), less at {smallest}: some of it overlapped."
    if smaller[0] == "near it":
        return text + f"; scaled by size (printed above), near it at {smallest} too."
    if fits == "near it":
        text = text.removesuffix(", near it") + f": the model fits at {format_bytes(sizes[-1])}"
    gap = took[0] - model[0]  # as printed
    share = "most" if gap > took[0] / 2 else "some"
    return text + (f". At {smallest}, scaled by size, it leaves {share} of the start-up to a part not broken "
                   f"down here: {approx_seconds(gap)} of {approx_seconds(took[0])}.")


def proxy_across_sizes(medians: Sequence[float], reads: int) -> str:
    """How a proxy task reading ``reads`` items moved across the lists' sizes (``medians``, seconds,
    smallest list first; as printed, three digits, in the table above the figure): flat within
    ``FLAT``, or how far it fell or rose, though a read moves one item at any length."""
    times = [shown(t) for t in medians]
    ratio = approx_ratio(max(times) / min(times))
    steps = list(pairwise(times))
    course = ("falls" if all(a > b for a, b in steps) else
              "rises" if all(a < b for a, b in steps) else "varies")
    way, why = f"the proxy's ({reads} reads) {course}", "a read moves one item at any length"
    if max(times) <= FLAT * min(times):
        return f"{way} within {ratio}×: flat within noise, as {why}"
    return f"{way} {ratio}× across the sizes, though {why}"


def off_the_line(offs: Sequence[float]) -> str:
    """How far measured tasks fell off a line that predicted them (``offs``: measured / line − 1,
    each), in whole percent as printed: "ran 16% to 42% high" (measured under the line), "ran 5%
    low", "ran 16% high to 5% low" (the farthest each way)."""
    high = sorted(-off for off in offs if off < 0)
    low = sorted(off for off in offs if off >= 0)

    def span(shares: list[float]) -> str:
        ends = dict.fromkeys(f"{share:.0%}" for share in (shares[0], shares[-1]))
        return " to ".join(ends)

    if high and low:
        return f"ran {high[-1]:.0%} high to {low[-1]:.0%} low"
    return f"ran {span(high)} high" if high else f"ran {span(low)} low"
