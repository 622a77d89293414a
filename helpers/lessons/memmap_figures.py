"""Lesson 06's printouts and figures: the folders and their filesystems, first against warm reads,
the split read's time, what the tree maps of one file (RSS and PSS timelines by role), joblib's
calls timed and its workers holding an array, and tmpfs giving its RAM back. Sizes are bytes,
times seconds; every function only formats or draws what the lesson measured."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path

from helpers.lessons.memmap import FileMemory, filesystem_of, free_bytes
from helpers.measure.plots import plot_bars
from helpers.measure.timing import Timing
from helpers.measure.units import format_bytes, format_rate, format_ratio, format_seconds, shown

LOG_SCALE_SPAN = 20  # bars spanning more than this ratio are drawn on a log scale


def describe_places(places: Mapping[str, Path]) -> str:
    """One line per folder: its path, the mount point, filesystem type and source, and bytes free."""
    lines = []
    for kind, folder in places.items():
        fs = filesystem_of(folder)
        lines.append(f"{kind:>5}: {folder} is on {fs.mount_point} ({fs.fstype}, from {fs.source}), "
                     f"{format_bytes(free_bytes(folder))} free")
    return "\n".join(lines)


def describe_reads(reads: Mapping[tuple[str, str], Timing], cached: Mapping[str, Mapping[str, float]],
                   array_bytes: int, in_ram_s: float, warm_floor_s: float) -> str:
    """The median of each (filesystem, read) timing with its rate, ``np.sum`` over private RAM
    (``in_ram_s``), the warm memcpy floor, and the share of the file's pages cached after each step."""
    lines = [f"{kind:>5}, {what:<10}: {format_seconds(timing.median):>8} "
             f"({format_rate(array_bytes / timing.median)})" for (kind, what), timing in reads.items()]
    lines.append(f"np.sum of the array in private RAM: {format_seconds(in_ram_s)}; "
                 f"one warm copy of it, for scale: {format_seconds(warm_floor_s)}")
    lines += [f"{kind:>5}: share of pages in the page cache "
              + ", ".join(f"{when}: {share:.0%}" for when, share in shares.items())
              for kind, shares in cached.items()]
    return "\n".join(lines)


def plot_reads(reads: Mapping[tuple[str, str], Timing], in_ram_s: float, warm_floor_s: float,
               array_bytes: int):
    """Bars of the median milliseconds of each read and of ``np.sum`` in private RAM, against a line at
    the other way to read the file: one warm copy into private RAM (``warm_floor_s``), then ``np.sum``
    (``in_ram_s``); a log scale, with ticks at 1, 2 and 5 of each decade, only where the bars span over
    ``LOG_SCALE_SPAN``; the Axes."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    bars = {f"{kind}, {what}": timing.median * 1e3 for (kind, what), timing in reads.items()}
    bars["np.sum in private RAM"] = in_ram_s * 1e3
    log = max(bars.values()) > LOG_SCALE_SPAN * min(bars.values())
    copy_and_sum = warm_floor_s + in_ram_s
    ax = plot_bars(bars, "milliseconds" + (" (log scale)" if log else ""),
                   f"Map and sum a {format_bytes(array_bytes)} file",
                   reference=copy_and_sum * 1e3,
                   reference_label=(f"a copy into private RAM ({format_seconds(warm_floor_s)}), then np.sum "
                                    f"({format_seconds(in_ram_s)}): {format_seconds(copy_and_sum)}"), log=log)
    if log:
        ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    return ax


def describe_timing(timing: Timing) -> str:
    """A timing as its median, the spread of its middle half of runs (the IQR: a width, not a run's
    time) and its fastest run: 'median 4.49 ms (middle half spans 2.9 ms, fastest 3.8 ms, 9 runs)'."""
    if len(timing.runs) < 2:
        return f"median {format_seconds(timing.median)} (1 run)"
    return (f"median {format_seconds(timing.median)} (middle half spans {format_seconds(timing.iqr)}, "
            f"fastest {format_seconds(timing.min)}, {len(timing.runs)} runs)")


def describe_split_read(split: Mapping[str, Timing], kept: Mapping[str, Timing] | None = None,
                        whole: Mapping[str, Timing] | None = None) -> str:
    """Each filesystem's split-read timing (workers each summing a part of the file): median, IQR,
    fastest, runs; ``kept``: the same through mappings each worker made once (``memmap.keep_mappings``);
    ``whole``: one worker of the split's pool summing the whole file, mapping it anew."""
    ways = {"each task maps": split, **({"mapped once": kept} if kept else {})}
    lines = [f"split read, {kind:>5}, {how:<14}: {describe_timing(timing)}"
             for how, timings in ways.items() for kind, timing in timings.items()]
    lines += [f"one worker, {kind:>5}, the whole file: {describe_timing(timing)}"
              for kind, timing in (whole or {}).items()]
    return "\n".join(lines)


NO_INITIALIZER = "no initializer"  # the key of memmap.time_pool_starts's baseline way


def describe_pool_starts(starts: Mapping[str, Timing]) -> str:
    """Each way's pool start (``memmap.time_pool_starts``: from a new pool to every worker having run a
    task), with no initializer or mapping one filesystem's file once per worker."""
    return "\n".join(f"pool start, {way if way == NO_INITIALIZER else 'mapping ' + way + ' once'}: "
                     f"{describe_timing(timing)}" for way, timing in starts.items())


def start_up_costs(starts: Mapping[str, Timing]) -> dict[str, float]:
    """What each way's initializer added to the pool's start (``memmap.time_pool_starts``): its median
    start less the median start with no initializer, seconds (below 0: noise)."""
    baseline = starts[NO_INITIALIZER].median
    return {kind: timing.median - baseline for kind, timing in starts.items() if kind != NO_INITIALIZER}


def start_up_noise(starts: Mapping[str, Timing]) -> float:
    """The spread (IQR) of the pool's starts with no initializer, seconds: an initializer's added
    start-up (``start_up_costs``) within it is noise."""
    return starts[NO_INITIALIZER].iqr


def calls_to_repay(split: Mapping[str, Timing], kept: Mapping[str, Timing],
                   starts: Mapping[str, Timing]) -> dict[str, int | None]:
    """For each filesystem whose mapped-once calls took at most 0.8× the calls mapping per task
    (medians): the calls whose saving (difference of medians) repays the mapping's start-up cost,
    rounded up (the call during which it is repaid); None where that cost was within the noise
    (at most ``start_up_noise``)."""
    costs, noise = start_up_costs(starts), start_up_noise(starts)
    return {kind: (math.ceil(costs[kind] / (split[kind].median - kept[kind].median))
                   if costs.get(kind, 0.0) > noise else None)
            for kind in kept if kept[kind].median <= 0.8 * split[kind].median}


def describe_repayment(repaid: Mapping[str, int | None]) -> str:
    """What the mapping's added start-up came to (``calls_to_repay``): 'within the noise on disk and
    repaid within 3 calls on tmpfs', 'repaid within 3 calls on disk and tmpfs'."""
    noise = [kind for kind, calls in repaid.items() if calls is None]
    paid = [(kind, calls) for kind, calls in repaid.items() if calls is not None]
    parts = [f"within the noise on {' and '.join(noise)}"] if noise else []
    counts = {calls for _, calls in paid}
    if len(counts) == 1:  # one count for all: 'repaid within 3 calls on disk and tmpfs'
        calls = counts.pop()
        parts.append(f"repaid within {calls} call{'s' if calls > 1 else ''} on "
                     + " and ".join(kind for kind, _ in paid))
    elif paid:
        parts.append("repaid within " + " and ".join(
            (f"{calls} call{'s' if calls > 1 else ''} on {kind}" if i == 0 else f"{calls} on {kind}")
            for i, (kind, calls) in enumerate(paid)))
    return " and ".join(parts)


def describe_mapping_once(split: Mapping[str, Timing], kept: Mapping[str, Timing],
                          starts: Mapping[str, Timing]) -> str:
    """Markdown: the mapped-once calls' medians, what the mapping added to the pool's start (medians of
    ``memmap.time_pool_starts``) against the spread of starts without it, within how many calls it was
    repaid or that it was noise (``calls_to_repay``), and where the mapped-once calls took over 0.8×
    the calls mapping per task (no clear gain)."""
    kinds = list(kept)
    costs, repaid = start_up_costs(starts), calls_to_repay(split, kept, starts)
    added = [f"{format_seconds(costs[kind])} on {kind}" if costs[kind] > 0
             else f"nothing measurable on {kind}" for kind in kinds]
    text = ("Workers that had mapped it once took "
            + " and ".join(f"{format_seconds(kept[kind].median)} on {kind}" for kind in kinds)
            + f". Mapping at start-up added {' and '.join(added)} to the pool's start (medians of "
            f"{len(starts[NO_INITIALIZER].runs)} starts each; without it, their middle half spans "
            f"{format_seconds(start_up_noise(starts))})")
    if repaid:
        text += ": " + describe_repayment(repaid)
    missed = [kind for kind in kinds if kept[kind].median > 0.8 * split[kind].median]
    if len(missed) == len(kinds):
        text += ". Here no clear gain over mapping per task"
    elif missed:
        text += f"; no clear gain per call on {' and '.join(missed)}"
    return text + "."


FAULT_AROUND_BYTES = 16 * 4096  # the most a read fault maps of 4 KiB pages (fault_around_bytes's default)
NOISE_BYTES = 2**20  # a tree's memory moves by up to this between two still windows: read as about 0


def two_decimals(n_bytes: float) -> str:
    """Bytes in MiB (GiB from 1 GiB) with two decimals: two cells whose array counts differ (2.01 and
    2.02) no longer show the same MiB."""
    unit, size = ("GiB", 2**30) if abs(n_bytes) >= 2**30 else ("MiB", 2**20)
    return f"{n_bytes / size:.2f} {unit}"


def format_growth_table(columns: Mapping[str, Mapping[str, float | None]], array_bytes: int) -> str:
    """A text table of ``demos.increase`` columns, one row per tree measure, in bytes and arrays.

    tracemalloc's row is left out (its peak spans the whole tracked block, not one window); a change
    under ``NOISE_BYTES`` either way reads 'about 0', and a missing value 'n/a'."""

    def cell(value: float | None) -> str:
        if value is None:
            return "n/a"
        if abs(value) < NOISE_BYTES:
            return "about 0"
        return f"{two_decimals(value)} ({value / array_bytes:.2f} arrays)"

    names = list(columns)
    measures = [m for m in dict.fromkeys(m for column in columns.values() for m in column)
                if not m.startswith("tracemalloc")]
    rows = [["measure", *names], *([m, *(cell(columns[n].get(m)) for n in names)] for m in measures)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    note = f"(about 0: a change under {format_bytes(NOISE_BYTES)}, the noise of a still tree)"
    return "\n".join([*lines, note])


def describe_file_memory(seen: Mapping[str, FileMemory], array_bytes: int) -> str:
    """One line per filesystem: how many processes map the file, and its RSS and PSS sums in bytes
    and in arrays of ``array_bytes``."""
    return "\n".join(
        f"{kind:>5}: the file's mappings in the tree: {read.processes} processes, RSS sum "
        f"{format_bytes(read.rss)} ({read.rss / array_bytes:.2f} arrays), PSS sum "
        f"{format_bytes(read.pss)} ({read.pss / array_bytes:.2f} arrays)" for kind, read in seen.items())


def keep_one_mark_per_state(report) -> None:
    """Drop the ``'... end'`` marks of a MemoryReport and the word ``' holding'`` from the others, so
    that a plot labels each held state once, by its name (``'workers read'``)."""
    report.marks = {label.removesuffix(" holding"): at for label, at in report.marks.items()
                    if not label.endswith(" end")}


def lift_mark_labels(ax, above: float = 0.03) -> None:
    """Raise the marks' labels of a timeline off the bottom edge (``above``, in axes fractions), where
    the frame cut their first letter."""
    for text in ax.texts:
        if hasattr(text, "xyann"):  # an annotation: its text stands at xyann
            text.xyann = (text.xyann[0], above)


def workers_of_each_kind(report, kinds: Iterable[str]) -> dict[int, str]:
    """pid -> '<kind> worker i' for the children seen in each kind's ``'<kind>: workers read holding'``
    .. ``'... end'`` window (``memmap.map_and_hold_in_workers`` with ``label=f"{kind}: "``); each kind
    started its own workers. Read before ``keep_one_mark_per_state`` drops the end marks."""
    named: dict[int, str] = {}
    for kind in kinds:
        window = report.window(f"{kind}: workers read holding", f"{kind}: workers read end")
        seen = {pid for sample in window for pid in sample.processes
                if report.process_labels.get(pid, "").split(" (")[0] in ("spawned child", "child")}
        named.update({pid: f"{kind} worker {i}" for i, pid in enumerate(sorted(seen), start=1)})
    return named


def plot_rss_and_pss(report, kinds: Iterable[str] = ("disk", "tmpfs")):
    """RSS (left) and PSS (right) timelines of the tree, processes named by role (each kind's workers
    by their kind); the figure."""
    import matplotlib.pyplot as plt

    report.name_roles(named=workers_of_each_kind(report, kinds))
    keep_one_mark_per_state(report)
    fig, (ax_rss, ax_pss) = plt.subplots(1, 2, figsize=(13, 4.5), layout="constrained", sharey=True)
    report.plot("rss", ax=ax_rss, title="RSS: each worker counts the file's pages again (workers overlap)")
    report.plot("pss", ax=ax_pss, title="PSS: the tree holds the file's pages once (workers overlap)")
    for ax in (ax_rss, ax_pss):
        lift_mark_labels(ax)
    return fig


def resource_tracker_names(report) -> dict[int, str]:
    """pid -> whose resource tracker it is (loky's or multiprocessing's), for the trackers still alive."""
    import psutil

    named = {}
    for pid, text in report.process_labels.items():
        if text.startswith("resource tracker"):
            try:
                loky = "loky" in " ".join(psutil.Process(pid).cmdline())
            except psutil.Error:
                continue
            named[pid] = "loky's resource tracker" if loky else "multiprocessing's resource tracker"
    return named


def plot_joblib_memory(report, workers: Mapping[str, Iterable[int]]):
    """The PSS timeline of joblib's workers holding nothing, a pickled and an auto-memmapped array;
    ``workers`` maps a pool's name to its workers' pids (named '<name> worker i'); the Axes."""
    named = resource_tracker_names(report)
    for pool, pids in workers.items():
        named.update({pid: f"{pool} worker {i}" for i, pid in enumerate(dict.fromkeys(pids), start=1)})
    report.name_roles(named=named)
    keep_one_mark_per_state(report)
    ax = report.plot("pss", title="joblib: one mapped dump (auto-memmap) against a copy per worker "
                                  "(pickled)")
    bottom, top = ax.get_ylim()
    ax.set_ylim(bottom, top + 0.35 * (top - bottom))  # room for the legend above the tree's peak
    left, right = ax.get_xlim()
    ax.set_xlim(left - 0.04 * (right - left), right)  # room left of the first mark for its label
    lift_mark_labels(ax)
    return ax


def describe_tmpfs_release(kind: str, still_listed: bool, mapped_after_delete: FileMemory,
                           used: Mapping[str, int]) -> str:
    """Whether the deleted file is still listed and mapped, and /dev/shm's used bytes in each state."""
    lines = [f"the {kind} file, after os.remove: still in a listing: {still_listed}; "
             f"still mapped here: {format_bytes(mapped_after_delete.rss)}"]
    lines += [f"/dev/shm used, {state:<18}: {format_bytes(value)}" for state, value in used.items()]
    return "\n".join(lines)


def describe_faults(faults: Mapping[str, int], reads: Mapping[tuple[str, str], Timing], array_bytes: int,
                    huge: str | None, second_sums: Mapping[str, Timing] | None = None,
                    in_ram: float | None = None) -> str:
    """Markdown: the page faults of one warm read of the whole file on each filesystem, the bytes
    each fault mapped, and, chosen by the counts, why they differ; ``huge`` is the tmpfs mount's
    ``huge=`` option (``memmap.tmpfs_huge_option``); ``second_sums``: a second sum through the same
    mapping on each filesystem (``memmap.time_second_sum``), which says what the faults cost;
    ``in_ram``: seconds of ``np.sum`` over the array in private RAM, to compare the second sums with."""
    per_fault = {kind: array_bytes / max(count, 1) for kind, count in faults.items()}
    text = "**Counted.** One warm read of the whole file took " + " and ".join(
        f"{count:,}{' page faults' if i == 0 else ''} on {kind} (one per {format_bytes(per_fault[kind])})"
        for i, (kind, count) in enumerate(faults.items())) + ". "
    if "tmpfs" not in faults or "disk" not in faults:
        return text
    slower = shown(reads["tmpfs", "warm read"].median) / shown(reads["disk", "warm read"].median)
    timing = f"Its warm read took {format_ratio(slower)}× the disk's"
    if faults["tmpfs"] > 2 * faults["disk"]:
        timing = timing.replace("Its warm read", "tmpfs's warm read")
        timing += f", with {format_ratio(faults['tmpfs'] / faults['disk'])}× the faults"
        small = huge in (None, "never", "deny")
        mount, each = f" (`huge={huge}`)" if huge else "", format_bytes(per_fault["tmpfs"])
        disk = f"On disk one fault mapped {format_bytes(per_fault['disk'])} on average"
        if per_fault["disk"] > 1.1 * FAULT_AROUND_BYTES:
            disk += (", more than 16 pages: the page cache held this file partly in larger blocks "
                     "(*folios*), which a fault maps whole")
        tmpfs = (f"tmpfs here{mount} holds 4 KiB pages only, so a fault maps 16 at most: one per {each} "
                 "on average" if small else f"this tmpfs{mount} still took one per {each}")
        return (
            f"**Counted.** One warm read of the whole file took {faults['disk']:,} page faults on disk and "
            f"{faults['tmpfs']:,} on tmpfs. A fault maps the page touched and cached neighbours, up to 16 "
            f"pages of 4 KiB (*fault-around*). {disk}. {tmpfs}. " + timing
            + (fault_cost(second_sums, in_ram) if slower > 1.1
               else ", so here the faults did not decide it."))
    if faults["disk"] > 2 * faults["tmpfs"]:
        return text + ("Here the disk file needed more faults: its page cache held it in smaller blocks. "
                       + timing + ".")
    return text + "Both mapped about as much per fault here. " + timing + "."


def fault_cost(second_sums: Mapping[str, Timing] | None, in_ram: float | None = None) -> str:
    """The end of ``describe_faults``'s sentence on tmpfs's slower warm read: what a second sum through
    the same mapping (no new faults; ``second_sums`` per filesystem) took on each, and what that says."""
    if not second_sums or not {"disk", "tmpfs"} <= set(second_sums):
        return "; what the faults cost, this run does not measure."
    disk, tmpfs = second_sums["disk"].median, second_sums["tmpfs"].median
    if 0.8 <= tmpfs / disk <= 1.25:
        verdict = ("once mapped, both read as fast as a private array (`np.sum`: "
                   f"{format_seconds(in_ram)})"
                   if in_ram and 0.8 <= max(tmpfs, disk) / in_ram <= 1.25 else
                   "read alike once mapped: tmpfs lost its warm read to mapping its pages")
    elif tmpfs > disk:
        verdict = (f"tmpfs took {format_ratio(shown(tmpfs) / shown(disk))}× the disk's even then: "
                   "the faults explain only part")
    else:
        verdict = "tmpfs read faster once mapped: mapping its pages cost more than the whole gap"
    return (f". A second sum through the same mapping took {format_seconds(disk)} on disk and "
            f"{format_seconds(tmpfs)} on tmpfs: {verdict}.")


TEMP_FOLDER_CALLS = {  # temp_folder_experiment's keys -> what each call had and asked for, in order
    "temp_folder=, workers kept from the last call":
        "call 1: workers kept from an earlier call, temp_folder=ours",
    "JOBLIB_TEMP_FOLDER, the same workers": "call 2: the same workers, JOBLIB_TEMP_FOLDER=ours",
    "temp_folder=, new workers": "call 3: new workers, temp_folder=ours",
    "no temp_folder=, the same workers": "call 4: the same workers as call 3, nothing asked",
}


def describe_temp_folder_experiment(roots: Mapping[str, Path], ours: Path, array_bytes: int) -> str:
    """Markdown: a collapsed block listing where each call of ``joblib_memmap.temp_folder_experiment``
    dumped its array of ``array_bytes`` (``ours``: the folder it asked for), in the calls' order, and
    what the calls show."""
    width = max(len(text) for text in TEMP_FOLDER_CALLS.values())
    lines = [f"{TEMP_FOLDER_CALLS[how]:<{width}}  ->  {'ours' if root == ours else root}"
             for how, root in roots.items()]
    return ("<details><summary>A quirk: <code>temp_folder=</code> belongs to loky's workers, not to the call"
            "</summary>\n\n"
            f"Four calls, each dumping a {format_bytes(array_bytes)} array (*ours*: `{ours}`):\n\n"
            "```text\n" + "\n".join(lines) + "\n```\n\n"
            "Workers loky starts for a call keep its `temp_folder=`: kept workers ignored a "
            "new one (call 1) and kept theirs when nothing was asked (call 4; joblib issue "
            "[#1373](https://github.com/joblib/joblib/issues/1373)). `JOBLIB_TEMP_FOLDER` reached even kept "
            "workers (call 2)."
            "\n</details>")


def describe_waits(retry_waits: Iterable[float]) -> str:
    """How many auto-memmapped calls slept before trying again to delete the call's folder
    (``joblib_memmap.time_calls``, per run) and how long: '5 of 7 auto-memmapped calls waited about
    100 ms for their folder's deletion'; '' where none did."""
    waits = list(retry_waits)
    waited = [wait for wait in waits if wait > 0]
    if not waited:
        return ""
    each = (f"about {format_seconds(waited[0])}" if len({format_seconds(wait) for wait in waited}) == 1
            else f"{format_seconds(min(waited))} to {format_seconds(max(waited))}")
    return f"{len(waited)} of {len(waits)} auto-memmapped calls waited {each} for their folder's deletion"


def _span(values: list[float]) -> str:
    low, high = format_seconds(min(values)), format_seconds(max(values))
    return low if low == high else f"{low} to {high}"


def describe_runs_and_waits(runs: Iterable[float], retry_waits: Iterable[float]) -> str:
    """The calls that waited to delete their folder (``describe_waits``) and the range of their times,
    then those that did not, apart: their range and median (seconds, per run); '' where none waited."""
    runs, waits = list(runs), list(retry_waits)
    text = describe_waits(waits)
    if not text:
        return ""
    waited = [run for run, wait in zip(runs, waits, strict=True) if wait > 0]
    unwaited = [run for run, wait in zip(runs, waits, strict=True) if wait == 0]
    text += f", taking {_span(waited)}"
    if unwaited:
        text += f"; the {len(unwaited)} that did not took {_span(unwaited)}"
        text += f" (median {format_seconds(statistics.median(unwaited))})" if len(unwaited) > 1 else ""
    return text


def median_unwaited(runs: Iterable[float], retry_waits: Iterable[float]) -> float | None:
    """The median seconds of the runs that did not wait to delete the call's folder; None where every
    run waited."""
    unwaited = [run for run, wait in zip(runs, retry_waits, strict=True) if wait == 0]
    return statistics.median(unwaited) if unwaited else None


def describe_joblib_headline(times: Mapping[str, Timing], retry_waits: Iterable[float], tasks: int,
                             growth: Mapping[str, Mapping[str, float | None]], array_bytes: int) -> str:
    """Markdown: the medians of auto-memmap, pickling and our own memmap, with their ratios; when some
    auto-memmapped runs waited to delete the call's folder (``retry_waits``, per run), how many and how
    long, then the median of those that did not wait, and its ratios; the tree's PSS growth of each
    way, in arrays (``growth``: ``format_growth_table``'s columns 'pickled - idle' and
    'auto-memmap - idle')."""
    waits = list(retry_waits)
    pickled, mine = times["pickled"].median, times.get("our memmap")

    def ratios(auto: float) -> str:
        text = f"pickled {format_ratio(pickled / auto)}× as long"
        return text + (f", our memmap {format_ratio(mine.median / auto)}×" if mine else "")

    auto = times["auto-memmap"].median
    text = (f"At the median, calls of {tasks} tasks took **{format_seconds(auto)}** auto-memmapped and "
            f"**{format_seconds(pickled)}** pickled ({format_ratio(pickled / auto)}× as long)")
    if mine:
        text += (f"; our own memmap skipped the dump: **{format_seconds(mine.median)}** "
                 f"({format_ratio(mine.median / auto)}× auto-memmap's)")
    if describe_waits(waits):
        text += f". {describe_waits(waits)} (below)"
        unwaited = median_unwaited(times["auto-memmap"].runs, waits)
        if unwaited is not None:
            n = sum(wait == 0 for wait in waits)
            took = f"the {n} that did not had a median of" if n > 1 else "the one that did not took"
            text += f"; {took} **{format_seconds(unwaited)}** ({ratios(unwaited)})"
    auto_pss, pickled_pss = (growth[column]["tree PSS sum"] / array_bytes
                             for column in ("auto-memmap - idle", "pickled - idle"))
    return (text + f". The tree's PSS grew by **{auto_pss:.2f} arrays** auto-memmapped, "
            f"**{pickled_pss:.2f}** pickled (a copy per worker).")


def describe_joblib_times(times: Mapping[str, Timing], retry_waits: Iterable[float],
                          dumping: Iterable[float], dump_s: float, array_bytes: int, dumped_to: Path,
                          write_s: float | None = None) -> str:
    """Markdown, after ``describe_joblib_headline``: why some auto-memmapped runs waited (``retry_waits``,
    per run, from ``joblib_memmap.time_calls``); what auto-memmapping (its calls that did not wait, else
    each call less its wait) added to our memmap's median and how much of it the dump inside the calls took
    (``dumping``, per run); ``joblib.dump`` of the array timed alone (``dump_s``), against one ``write``
    of its bytes into a new file in the same folder (``write_s``: the dump's floor, seconds)."""
    auto, ours = times["auto-memmap"], times["our memmap"]
    waits = list(retry_waits)
    text, less, unwaited = "", "", median_unwaited(auto.runs, waits)
    if any(wait > 0 for wait in waits):
        text += ("The waits: at a call's end joblib deletes the call's folder, retrying until loky's "
                 "resource tracker has removed the dump (`joblib/disk.py`). ")
        less = "'s calls that did not wait"
    if unwaited is None:  # every call waited: each less its wait
        unwaited = statistics.median(run - wait for run, wait in zip(auto.runs, waits, strict=True))
        less = "'s calls less their waits"
    added, dumped = unwaited - ours.median, statistics.median(dumping)
    text += (f"Our memmap (timed in turns) took {format_seconds(ours.median)}, {format_seconds(added)} less "
             f"than auto-memmap{less}; the dump took {format_seconds(dumped)} inside a call")
    if added - dumped > 0.25 * added:
        text += f", the other {format_seconds(added - dumped)} joblib's bookkeeping around it"
    elif dumped > 1.1 * added:
        text += ", more than that difference: the calls' spread hides the rest"
    text += (f". Alone, `joblib.dump` of {format_bytes(array_bytes)} into `{dumped_to}` took "
             f"{format_seconds(dump_s)}")
    if write_s:
        text += f", {format_ratio(dump_s / write_s)}× one `write()` of its bytes into a new file there"
    if dump_s > 1.1 * dumped:
        text += " (alone it was slower: noise at this scale)"
    return text + "."


def describe_joblib_memory(growth: Mapping[str, Mapping[str, float | None]], array_bytes: int) -> str:
    """Markdown: that the growth table's /dev/shm row is the same dump the PSS row counts, and the
    cgroup counter's growth of each way (``growth``: ``format_growth_table``'s columns 'pickled - idle'
    and 'auto-memmap - idle'), when readable."""
    text = "The `/dev/shm` row is the dump the PSS row counts"
    counters = [growth[column].get("cgroup counter") for column in ("auto-memmap - idle", "pickled - idle")]
    if None in counters:
        return text + "."
    auto, pickled = (value / array_bytes for value in counters)
    return text + (f": the machine held {auto:.2f} arrays more auto-memmapped (cgroup counter), "
                   f"{pickled:.2f} pickled.")


def describe_mapping_cost(reads: Mapping[tuple[str, str], Timing], second_sums: Mapping[str, Timing],
                          copy_s: float) -> str:
    """Markdown: what mapping the file anew added to a sum on each filesystem (its warm read less a
    second sum through one mapping, which faults no more; seconds as printed, never below 0), against
    one warm copy of the array (``copy_s``): less than a copy, about one, or how many."""
    kinds = [kind for kind in second_sums if (kind, "warm read") in reads]
    cost = {kind: max(shown(reads[kind, "warm read"].median) - shown(second_sums[kind].median), 0.0)
            for kind in kinds}

    def against_copy(kind: str) -> str:
        ratio = cost[kind] / shown(copy_s)
        if ratio < 0.9:
            return f"less than a copy on {kind}"
        return f"about a copy on {kind}" if ratio <= 1.1 else f"{format_ratio(ratio)}× one on {kind}"

    return ("Mapping anew (its page faults: warm read less second sum) added "
            + " and ".join(f"{format_seconds(cost[kind])} to the sum on {kind}" if i == 0 else
                           f"{format_seconds(cost[kind])} on {kind}" for i, kind in enumerate(kinds))
            + f", against {format_seconds(copy_s)} for one copy: "
            + ", ".join(against_copy(kind) for kind in kinds) + ".")
