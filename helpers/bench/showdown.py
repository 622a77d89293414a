"""Lesson 11's views of a showdown run: the table, the time and memory plots, and the blog's claims.

Everything here reads ``helpers.bench.strategies.StrategyResult`` objects (times in seconds, memory in
bytes) and the two floors measured in the same run (``strategies.floor_seconds``: (a) a copy into
warm memory, (b) a copy into a new shared-memory segment). Times are compared as ratios to floor
(a), never as absolute numbers; memory as multiples of the array. Nothing here runs a strategy.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from helpers.lessons.showdown_lesson import NEAR_ZERO, ONE_ARRAY, format_arrays
from helpers.measure import plots
from helpers.measure.leftovers import TEMP_PREFIX
from helpers.measure.memory import GLIBC_MMAP_THRESHOLD_MAX
from helpers.measure.timing import Timing
from helpers.measure.units import format_bytes, format_ratio, format_seconds

# The blog benchmark (Luis Sena, "Sharing big NumPy arrays across python processes", 2021, a ~1.5 GB
# array on 4 cores): pickling was by far the slowest; fork copy-on-write, a sharedctypes RawArray,
# SharedMemory and Ray's object store came out close together; a memmap on disk (/tmp) was slower
# than one on tmpfs (/dev/shm); Ray with the array passed to every task was slower than ray.put once.
BLOG_URL = "https://luis-sena.medium.com/sharing-big-numpy-arrays-across-python-processes-abf0dc2a0ab2"
BLOG_ZERO_COPY = ("fork_cow", "sharedctypes", "shared_memory", "ray_object_store")
BLOG_OTHERS = (*BLOG_ZERO_COPY, "memmap_disk", "memmap_tmpfs")
MUCH_SLOWER = 2.0  # "pickle >> others": at least this many times the slowest of the others
CLOSE_TOGETHER = 2.0  # "close together": the slowest of the group within this factor of the fastest
# The blog's own fan-out timings (milliseconds, from its results chart: a ~1.5 GB array, 4 cores, in
# Docker, where /tmp is not tmpfs; each process was given its slice of the array, where the course
# gives every task the whole array), by the course's name for the same way.
BLOG_MS = {"pickle": 4137.79, "fork_cow": 80.30, "sharedctypes": 102.24, "memmap_disk": 159.62,
           "memmap_tmpfs": 108.68, "shared_memory": 99.96, "ray_by_value": 252.08, "ray_object_store": 70.65}
BLOG_LABEL = "the blog's timings"


def _at_least(ratio: float) -> str:
    """``_factor`` rounded down, for "at least": 14.7 reads '14', never '15' (two digits, or two
    decimals under 2); append the '×' yourself."""
    if ratio < 2:
        return f"{math.floor(ratio * 100) / 100:.2f}"
    digits = max(0, 1 - math.floor(math.log10(ratio)))
    step = 10 ** -digits
    return format_ratio(math.floor(ratio / step + 1e-9) * step)


def _factor(ratio: float) -> str:
    """A ratio for prose and tables: two decimals under 2 (1.96 must not read as the 2 a claim
    asks for), else two significant digits ('3.5', '27'); append the '×' yourself."""
    return f"{ratio:.2f}" if ratio < 2 else format_ratio(ratio)
# The strategies the lesson's live run leaves to the reference results and the panel, and why (what
# each copies, lesson 11 prints after its exercise): seconds of start-up, or a row that repeats another.
NOT_LIVE = {
    "reducer_torch": "torch's import takes seconds, in the kernel and in each worker",
    "reducer_shared_memory": ("the executor's mechanism, made by a pickler reduction: its row would "
                              "repeat the executor's"),
    "dask_by_value": "a Dask cluster's start-up takes seconds",
    "dask_scatter": "a Dask cluster's start-up takes seconds",
}


# On the one Ray instance the lesson's Ray strategies share, only the first one's memory can be
# measured (``ray_strategies.shared_ray_session``): ray.put once goes first, the way the decision
# guide recommends, so its one store copy is measured; by value, after it, says it was not.
RAY_MEASURED = "ray_object_store"
RAY_AFTER_PUT = f" (`ray_by_value` after `{RAY_MEASURED}`, into its store pages)"


def live_order(names: Sequence[str]) -> list[str]:
    """``names`` less ``NOT_LIVE``, in order, but with ``RAY_MEASURED`` moved before the other Ray
    strategy (``ray_by_value``), so that the shared Ray instance measures its memory."""
    live = [name for name in names if name not in NOT_LIVE]
    if RAY_MEASURED in live and "ray_by_value" in live:
        live.remove(RAY_MEASURED)
        live.insert(live.index("ray_by_value"), RAY_MEASURED)
    return live


@dataclass(frozen=True)
class Claim:
    """One claim of the blog checked on this run: ``holds`` is True, False, or None (cannot tell)."""

    claim: str
    holds: bool | None
    detail: str
    factor: float | None = None  # the ratio the verdict rests on
    not_comparable: bool = False  # the two sides were not measured alike: ``detail`` says why
    caveat: str = ""  # why a verdict that holds holds despite an unlike measurement
    ties: bool = False  # a "slower" claim read by section 3's rule: under NOISE_FACTOR apart, a tie

    @property
    def verdict(self) -> str:
        return {True: "holds", False: "does NOT hold here", None: "cannot tell"}[self.holds]


def run_showdown(names: Sequence[str], array, n_workers: int, repeat: int = 3,
                 progress: Callable[[str, int, int], None] | None = None) -> list:
    """``strategies.run_all`` as the lesson and the panel run it: the Ray strategies run in a spawned
    process of their own (Ray never runs here, so this process may still fork afterwards) and
    share one Ray instance there (a start-up of several seconds saved; only the first reports
    memory, the other says why), and a strategy that fails here becomes a skipped result whose
    reason says so."""
    from helpers.bench import strategies

    return strategies.run_all(names, array, n_workers, repeat=repeat, progress=progress,
                              share_ray_session=True)


def ran(results: Sequence) -> dict:
    """The results that ran (not skipped), by strategy name."""
    return {r.name: r for r in results if r.skipped is None}


def skipped(results: Sequence) -> list[tuple[str, str]]:
    """(title, reason) of every strategy that did not run."""
    return [(r.title, r.skipped) for r in results if r.skipped is not None]


def _ratio(seconds: float | None, floor: float) -> str:
    return "-" if seconds is None else f"{seconds / floor:.3g}×"


def _time(timing: Timing | None) -> str:
    return "-" if timing is None else format_seconds(timing.median)


def _arrays(n_bytes: float | None, array_bytes: int) -> str:
    return "-" if n_bytes is None else format_arrays(n_bytes / array_bytes)


UNMEASURED = "memory not measured"


def format_table(results: Sequence, floors: tuple[Timing, Timing]) -> str:
    """Every strategy that ran, one row each: fan-out and round trip (median seconds and × floor
    (a)), setup, and what the tree's PSS and /dev/shm added while every worker held the array
    (in arrays). The floors head the table."""
    warm, fresh = floors
    width = max([44, *(len(r.title) for r in ran(results).values())])  # every title whole
    header = (f"{'strategy':<{width}} {'fan-out':>9} {'×(a)':>8} {'round trip':>10} {'×(a)':>8} {'setup':>9} "
              f"{'PSS +':>7} {'shm +':>7}")
    lines = [header, "-" * len(header),
             f"{'floor (a): copy into warm memory':<{width}} {format_seconds(warm.median):>9} {'1×':>8}",
             f"{'floor (b): copy into a new shm segment':<{width}} {format_seconds(fresh.median):>9} "
             f"{_ratio(fresh.median, warm.median):>8}"]
    unmeasured = []  # footnotes: why a row's memory columns are empty
    for r in ran(results).values():
        round_trip = r.round_trip.median if r.round_trip is not None else None
        setup = "-" if r.setup_s is None else "n/r" if _unresolved(r, floors) else format_seconds(r.setup_s)
        if r.setup_s is not None and _starts_late(r.name):  # not a setup: a difference of start-ups
            setup += START_MARK
        pss, shm = _arrays(r.pss_added_bytes, r.array_bytes), _arrays(r.shm_added_bytes, r.array_bytes)
        if r.pss_added_bytes is None:  # the notes from why memory is not measured on (the rest: its lesson)
            why = r.notes[r.notes.find(UNMEASURED):] if UNMEASURED in (r.notes or "") else UNMEASURED
            unmeasured.append(f"{'*' * (len(unmeasured) + 1)} {r.title}: {why}")
            pss = shm = "*" * len(unmeasured)
        lines.append(
            f"{r.title:<{width}} {_time(r.fan_out):>9} {_ratio(r.fan_out.median, warm.median):>8} "
            f"{_time(r.round_trip):>10} {_ratio(round_trip, warm.median):>8} {setup:>9} "
            f"{pss:>7} {shm:>7}")
    lines.append("(PSS + and shm +: added while every worker held the array, in arrays; "
                 "×(a): over floor (a))")
    late = [r.name for r in ran(results).values() if r.setup_s is not None and _starts_late(r.name)]
    if late:
        lines.append(f"({START_MARK} {', '.join(late)}: not a setup time but a late pool's extra start-up: "
                     "the note below)")
    kept = [r.name for r in ran(results).values() if (copies := _copies_held(r)) is not None
            and r.pss_added_bytes / r.array_bytes - copies >= 0.5]
    if kept:
        lines.append(f"({', '.join(kept)}: above {_their(kept)} copies, freed buffers glibc keeps under "
                     "32 MiB: section 4)")
    same = [r for r in ran(results).values() if r.round_trip is not None
            and _ratio(r.fan_out.median, warm.median) == _ratio(r.round_trip.median, warm.median)]
    for r in same:  # timed apart: say so, with a digit more, lest it read as one timing printed twice
        lines.append(f"({r.name}: fan-out and round trip timed apart, {r.fan_out.median * 1e3:.4g} and "
                     f"{r.round_trip.median * 1e3:.4g} ms)")
    return "\n".join(lines + unmeasured)


def plot_times(results: Sequence, floors: tuple[Timing, Timing], ax=None, log: bool = True):
    """One row per strategy that ran: its fan-out and round trip (median seconds), with floors (a)
    and (b) as vertical lines; log scale by default (the rows span orders of magnitude)."""
    ax = _axes(ax, len(ran(results)))
    done = list(ran(results).values())
    rows = range(len(done))
    height = 0.4
    ax.barh([y - height / 2 for y in rows], [r.fan_out.median for r in done], height,
            label="fan-out: every worker sums the whole array", color="tab:blue")
    trips = [r.round_trip.median if r.round_trip is not None else math.nan for r in done]
    ax.barh([y + height / 2 for y in rows], trips, height, label="round trip of a same-size array",
            color="tab:orange")
    ax.set_yticks(list(rows), [r.title for r in done], fontsize=8)
    ax.invert_yaxis()
    warm, fresh = floors
    ax.axvline(warm.median, color="black", linestyle="-", label="floor (a): copy into warm memory")
    ax.axvline(fresh.median, color="black", linestyle="--", label="floor (b): copy into a new segment")
    if log:
        ax.set_xscale("log")
    n_bytes = done[0].array_bytes if done else 0
    runs = len(done[0].fan_out.runs) if done else 0
    timed = "one timed run" if runs == 1 else f"median of {runs} timed runs"
    ax.set_xlabel(f"seconds, {timed}" + (" (log scale)" if log else ""))
    ax.set_title(f"Time: {format_bytes(n_bytes)} of float64, {done[0].n_workers if done else 0} workers")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2)  # below: no bar hidden
    return ax


def plot_memory(results: Sequence, ax=None):
    """One row per strategy that ran: what the tree's PSS and /dev/shm added while every worker
    held the array (in arrays; Ray's object store beside them), with lines at 1 and N arrays."""
    ax = _axes(ax, len(ran(results)))
    done = list(ran(results).values())
    rows = range(len(done))
    height = 0.27

    def arrays(attribute: str) -> list[float]:
        values = [getattr(r, attribute) for r in done]
        return [math.nan if v is None else max(0.0, v / r.array_bytes)  # below 0: noise, drawn as none
                for v, r in zip(values, done, strict=True)]

    for offset, attribute, label, color in (
            (-height, "pss_added_bytes", "tree PSS added", "tab:blue"),
            (0.0, "shm_added_bytes", "/dev/shm added", "tab:gray"),
            (height, "object_store_bytes", "Ray object store", "tab:purple")):
        values = arrays(attribute)
        if not all(math.isnan(v) for v in values):
            ax.barh([y + offset for y in rows], values, height, label=label, color=color)
    kept = "freed buffers glibc keeps (arrays under 32 MiB)"
    for row, result in zip(rows, done, strict=True):
        copies = _copies_held(result)
        if copies is not None and result.pss_added_bytes / result.array_bytes - copies >= 0.5:
            ax.barh(row - height, result.pss_added_bytes / result.array_bytes - copies, height, left=copies,
                    color="white", edgecolor="tab:blue", hatch="///", label=kept)
            kept = None  # one legend entry
    for row, result in zip(rows, done, strict=True):
        if result.pss_added_bytes is None:  # e.g. the second Ray strategy on a shared Ray instance
            ax.text(0.05, row, "memory not measured (section 2's table says why)", va="center", fontsize=8,
                    color="dimgray", zorder=5, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    ax.set_yticks(list(rows), [r.title for r in done], fontsize=8)
    ax.set_ylim(len(done) - 0.5, -0.5)  # top to bottom, every row whole (a row may have no bar)
    if done:
        ax.axvline(1, color="black", linestyle="--", label="one array")
        ax.axvline(done[0].n_workers, color="tab:red", linestyle=":", label="one array per worker")
    ax.set_xlabel("added while every worker holds the array (arrays)")
    ax.set_title("Memory: what each way adds to the machine")
    ax.legend(fontsize=7, loc="lower right")
    return ax


# The copies a way that pickles the array holds while every worker holds it, as (fixed, per worker):
# what its PSS bar shows above them, at an array under glibc's 32 MiB, is freed buffers kept for reuse
# (``kept_buffers``), drawn hatched.
HELD_COPIES = {"pickle": (0, 1), "send_once": (0, 1), "manager": (1, 1), "joblib": (1, 0)}


def _copies_held(result) -> int | None:
    """The copies of ``HELD_COPIES`` for ``result``; None when not listed, not measured, or the array
    is at least glibc's 32 MiB (no buffer is kept: above that, nothing explains more)."""
    if (result.name not in HELD_COPIES or result.pss_added_bytes is None
            or result.array_bytes >= GLIBC_MMAP_THRESHOLD_MAX):
        return None
    fixed, per_worker = HELD_COPIES[result.name]
    return fixed + per_worker * result.n_workers


def memory_figure_markdown(results: Sequence) -> str:
    """``plot_memory``'s figure as Markdown (``plots.figure_as_markdown``), so that it can be shown
    collapsed, as ``exercises.reveal`` shows text."""
    figure = plot_memory(results).figure
    return plots.figure_as_markdown(figure, f"{figure.axes[0].get_title()}: one bar per strategy, in arrays")


def _axes(ax, n_rows: int):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(9, 0.45 * n_rows + 1.8), layout="constrained")
    return ax


def blog_claims(results: Sequence) -> list[Claim]:
    """The blog's four claims, each checked on this run's fan-out medians; the last (Ray by value
    against ray.put) not compared when by value ran after ray.put in the same Ray instance, into
    store pages ray.put had faulted in (``live_order``)."""
    claims = claims_from_medians(fan_out_medians(results))
    if _by_value_after_put(results):
        last = claims[-1]
        # by value's head start (pages already faulted in) can only have sped it up: slower still holds
        claims[-1] = (Claim(last.claim, True, last.detail, last.factor, caveat=RAY_SECOND_HELD, ties=True)
                      if last.holds
                      else Claim(last.claim, None, RAY_SECOND, last.factor, not_comparable=True))
    return claims


def _by_value_after_put(results: Sequence) -> bool:
    """Whether ``ray_by_value`` ran after ``RAY_MEASURED`` in this run (``live_order``), into store
    pages ray.put had faulted in: a head start that section 5 and the takeaway do not compare."""
    order = [r.name for r in ran(results).values()]
    return ({"ray_by_value", RAY_MEASURED} <= set(order)
            and order.index("ray_by_value") > order.index(RAY_MEASURED))


# Why this run's Ray by value is not compared with its ray.put (the reference's ran in fresh stores).
RAY_SECOND = "ran after ray.put, into its store pages"
RAY_SECOND_HELD = "ran after ray.put, into pages it had touched: a head start"


def fan_out_medians(results: Sequence) -> dict[str, float]:
    """Fan-out median seconds of every strategy that ran, by name."""
    return {name: r.fan_out.median for name, r in ran(results).items()}


def claims_from_medians(medians: dict[str, float]) -> list[Claim]:
    """The blog's four claims checked on fan-out medians by strategy name (seconds, or any
    common unit: e.g. a reference's ratios to its floor (a)); names missing did not run."""
    return [_pickle_much_slower(medians), _zero_copy_close(medians), _disk_slower_than_tmpfs(medians),
            _ray_by_value_slower(medians)]


def _missing(names: Sequence[str], medians: dict) -> list[str]:
    return [name for name in names if name not in medians]


def _pickle_much_slower(medians: dict) -> Claim:
    text = (f"pickle far slower (≥ {MUCH_SLOWER:g}× the slowest of fork, sharedctypes, "
            "SharedMemory, ray.put, memmap)")
    others = {name: medians[name] for name in BLOG_OTHERS if name in medians}
    if "pickle" not in medians or not others:
        return Claim(text, None, "pickle or every way that shares did not run")
    slowest = max(others, key=others.get)
    factor = medians["pickle"] / others[slowest]
    return Claim(text, factor >= MUCH_SLOWER,
                 f"pickle's fan-out is {factor:.1f}× the slowest of the others ({slowest})", factor)


def joblib_against_pickle(results: Sequence, floors: tuple[Timing, Timing] | None = None,
                          references: Sequence = ()) -> str:
    """' joblib (a dump per call) took 2.2× pickle's time here.' when joblib's fan-out was slower than
    pickle's (the blog's first claim leaves joblib out), with ``FAR_OFF_SAID`` for either fan-out
    section 6 flags (given ``floors`` and ``references``); "" otherwise, or when either did not run."""
    medians = fan_out_medians(results)
    if ("joblib" not in medians or "pickle" not in medians
            or medians["joblib"] < NOISE_FACTOR * medians["pickle"]):  # closer: within noise (section 5)
        return ""
    times = _factor(medians["joblib"] / medians["pickle"])
    far = [] if floors is None else [n for n in _far_off(results, floors[0].median, references, "fan-out")
                                     if n in ("joblib", "pickle")]
    flag = f" ({_and([f'`{n}`' for n in far])}: {FAR_OFF_SAID})" if far else ""
    return f" joblib (a dump per call) took {times}× pickle's time here{flag}."


def _zero_copy_close(medians: dict) -> Claim:
    text = f"fork, sharedctypes, SharedMemory, ray.put close (within {CLOSE_TOGETHER:g}×)"
    group = {name: medians[name] for name in BLOG_ZERO_COPY if name in medians}
    if len(group) < 2:
        missing = ", ".join(_missing(BLOG_ZERO_COPY, medians))
        return Claim(text, None, f"fewer than two of them ran (missing: {missing})")
    slowest, fastest = max(group, key=group.get), min(group, key=group.get)
    spread = group[slowest] / group[fastest]
    missing = _missing(BLOG_ZERO_COPY, medians)
    note = f"; not run: {', '.join(missing)}" if missing else ""
    return Claim(text, spread <= CLOSE_TOGETHER,
                 f"the slowest ({slowest}) is {spread:.1f}× the fastest ({fastest}){note}", spread)


def _disk_slower_than_tmpfs(medians: dict) -> Claim:
    """Holds at ``NOISE_FACTOR`` or more; under it either way, a tie (``_is_tie``): the label prints no
    threshold of its own that the verdict would then overrule (cold read 11, F2)."""
    text = "memmap on disk slower than on tmpfs"
    if "memmap_disk" not in medians or "memmap_tmpfs" not in medians:
        return Claim(text, None, "one of the two memmaps did not run", ties=True)
    factor = medians["memmap_disk"] / medians["memmap_tmpfs"]
    if factor >= NOISE_FACTOR:
        how = f"disk took {factor:.2f}× tmpfs's time"
    elif factor <= 1 / NOISE_FACTOR:
        how = f"disk was faster: {factor:.2f}× tmpfs's time (the file sat in the page cache)"
    else:
        how = f"a tie: disk took {factor:.2f}× tmpfs's time"
    return Claim(text, factor >= NOISE_FACTOR, how, factor, ties=True)


def _ray_by_value_slower(medians: dict) -> Claim:
    """Holds at ``NOISE_FACTOR`` or more; under it either way, a tie (``_is_tie``)."""
    text = "Ray by value slower than ray.put once"
    if "ray_by_value" not in medians or "ray_object_store" not in medians:
        return Claim(text, None, "one of the two Ray strategies did not run", ties=True)
    factor = medians["ray_by_value"] / medians["ray_object_store"]
    return Claim(text, factor >= NOISE_FACTOR, f"by value took {factor:.2f}× the object store's time", factor,
                 ties=True)


def format_claims(claims: Sequence[Claim]) -> str:
    """One line per claim: its verdict on this run, and the numbers behind it."""
    return "\n".join(f"{c.verdict:<19} {c.claim}\n{'':<19} ({c.detail})" for c in claims)



@dataclass(frozen=True)
class ClaimColumn:
    """The blog's claims checked on one run at one size: this run's, or a reference's;
    ``timed_runs``: how many timed runs each fan-out median rests on (None: not known, a reference)."""

    label: str
    size_bytes: int
    claims: list[Claim]
    timed_runs: int | None = None
    medians: dict[str, float] = field(default_factory=dict)  # the fan-outs the claims rest on


def claims_by_size(results: Sequence, references: Sequence) -> list[ClaimColumn]:
    """The blog's claims on this run, then on each reference (``showdown_reference.Reference``, one
    per size, ratios to its floor (a): a ratio to one floor ranks the ways as seconds do)."""
    here = results[0].array_bytes if results else 0
    runs = [len(r.fan_out.runs) for r in ran(results).values() if r.fan_out is not None]
    columns = [ClaimColumn(f"this run ({format_bytes(here)})", here, blog_claims(results),
                           min(runs, default=None), fan_out_medians(results))]
    for reference in references:
        columns.append(ClaimColumn(f"reference ({format_bytes(reference.size_bytes)})",
                                   reference.size_bytes, claims_from_medians(reference.fan_out_ran),
                                   medians=reference.fan_out_ran))
    return columns


# A verdict on this run that rests on a ratio within this factor of 1 is within this machine's noise
# (re-executions of lesson 11 at 16 MiB reordered ways closer than this; the lesson's checks assert only
# factors of two or more), unless the reference at the same size gives the same verdict.
NOISE_FACTOR = 2.0
WITHIN_NOISE = "within noise"


def within_noise(claim: Claim, column: ClaimColumn, same_size: Claim | None) -> bool:
    """True when ``claim`` (of ``column``, this run's: a reference's medians are not ranked by this
    rule) rests on a ratio under ``NOISE_FACTOR`` either way from 1, and ``same_size`` (the
    reference's verdict at that size, if any) differs."""
    return (column.timed_runs is not None and claim.factor is not None and claim.holds is not None
            and 1 / NOISE_FACTOR < claim.factor < NOISE_FACTOR
            and (same_size is None or same_size.holds != claim.holds))


def noisy_verdicts(columns: Sequence[ClaimColumn]) -> list[list[bool]]:
    """For each column, for each of its claims: ``within_noise`` against the other column of the
    same size, if any (the reference beside this run)."""
    marks = []
    for column in columns:
        twins = [other for other in columns if other is not column and other.size_bytes == column.size_bytes]
        marks.append([within_noise(claim, column, twins[0].claims[index] if twins else None)
                      for index, claim in enumerate(column.claims)])
    return marks


def _is_tie(claim: Claim) -> bool:
    """A "slower" claim (``Claim.ties``) whose ratio is under ``NOISE_FACTOR`` either way from 1: a tie,
    in every column alike (section 3's rule: ways under twice apart are not ranked)."""
    return (claim.ties and claim.factor is not None and not claim.not_comparable
            and 1 / NOISE_FACTOR < claim.factor < NOISE_FACTOR)


TIE = "tie"


def _cell(claim: Claim, noisy: bool = False) -> str:
    figure = "" if claim.factor is None else f" ({_factor(claim.factor)}×)"
    if _is_tie(claim):
        return f"{TIE}{figure}"
    if claim.not_comparable:
        return f"not comparable{figure}: {claim.detail}"
    if claim.caveat and claim.holds and not noisy:
        return f"holds ({_factor(claim.factor)}×; {claim.caveat})"
    if noisy:
        return f"{WITHIN_NOISE}{figure}"
    return {True: "holds", False: "**no**", None: "cannot tell"}[claim.holds] + figure


def claims_markdown(columns: Sequence[ClaimColumn]) -> str:
    """A Markdown table, one row per claim (what the blog found; a threshold only where the verdict
    uses it, the "slower" claims reading section 3's rule, ``_is_tie``): the verdict and its ratio on
    the blog's own timings, then in each column."""
    blog = claims_from_medians(BLOG_MS)  # the blog's own timings, checked by the same code
    header = f"| the blog's claim | {BLOG_LABEL} | " + " | ".join(c.label for c in columns) + " |"
    lines = [header, "|" + "---|" * (len(columns) + 2)]
    noisy = [[False] * len(column.claims) for column in columns]  # one rule in every column: ``_is_tie``
    for index, claim in enumerate(columns[0].claims):
        cells = " | ".join(_cell(column.claims[index], marks[index]) for column, marks in zip(columns, noisy,
                                                                                          strict=True))
        lines.append(f"| {claim.claim} | {_cell(blog[index])} | {cells} |")
    if any(_is_tie(column.claims[index]) for column in columns for index in range(len(column.claims))):
        lines.append(f"\n*Tie*: under {NOISE_FACTOR:g}× apart either way: not ranked (section 3).")
    return "\n".join(lines)


def blog_timings_markdown(results: Sequence) -> str:
    """A Markdown table, one row per way the blog timed: its milliseconds' multiple of its fastest
    way, beside this run's fan-out as a multiple of this run's fastest of the same ways (the
    blog measured no floor, so both columns are ratios to the fastest of one run)."""
    here = {name: t for name, t in fan_out_medians(results).items() if name in BLOG_MS}
    blog_fastest, here_fastest = min(BLOG_MS.values()), min(here.values(), default=None)
    lines = ["| way | the blog: × its fastest | this run: × its fastest |", "|---|---|---|"]
    for name, ms in sorted(BLOG_MS.items(), key=lambda item: item[1]):
        ours = f"{_factor(here[name] / here_fastest)}×" if name in here else "not run"
        lines.append(f"| {name} | {_factor(ms / blog_fastest)}× | {ours} |")
    return "\n".join(lines)


def _this_run_against(claim: Claim, noisy: bool, agrees: bool) -> str:
    """How this run's verdict on a claim reads beside the reference's."""
    if noisy:
        return WITHIN_NOISE
    return "as on the reference" if agrees else "which this run does not explain"


def _sizes(columns: Sequence[ClaimColumn], index: int, names: dict | None = None) -> str:
    """'0.9×, 0.53×': claim ``index``'s ratio in each column, smallest size first (and ``names[label]``)."""
    return ", ".join(f"{_factor(c.claims[index].factor)}×" + (f" (`{names[c.label]}`)" if names else "")
                     for c in columns)


def _first(columns: Sequence[ClaimColumn]) -> str:
    return ", smallest size first" if len(columns) > 1 else ""


def _disk_or_tmpfs(columns: Sequence[ClaimColumn], noisy: list[bool]) -> str:
    """This run's disk-over-tmpfs ratio and the reference's at each size, each read by section 3's
    rule (under ``NOISE_FACTOR`` apart: a tie); ``noisy`` is unused (one rule in every column)."""
    here, references = columns[0], [c for c in columns[1:] if c.claims[2].factor is not None]
    if here.claims[2].factor is None or not references:
        return ""
    factors = [c.claims[2].factor for c in references]
    there = ", ".join(f"{_factor(c.claims[2].factor)}× at {format_bytes(c.size_bytes)} "
                      f"({_disk_direction(c.claims[2].factor, 'disk ')})" for c in references)
    factor = here.claims[2].factor
    text = (f"**Disk against tmpfs.** Disk took {_factor(factor)}× tmpfs's time here "
            f"({_disk_direction(factor, 'disk ')}); on the reference VM, reading the file from the page "
            f"cache (lesson 06): {there}")
    if any(f <= 1 / NOISE_FACTOR for f in factors):
        text += "; lesson 06 counted fewer page faults per read there"
    return text + "."


def _disk_direction(factor: float, subject: str = "") -> str:
    """Which memmap was faster; less than ``NOISE_FACTOR`` apart, a tie (section 3's rule)."""
    if 1 / NOISE_FACTOR < factor < NOISE_FACTOR:
        return "a tie"
    return subject + ("slower" if factor > 1 else "faster")


def _slowest_of_zero_copy(column: ClaimColumn) -> str | None:
    group = {name: column.medians[name] for name in BLOG_ZERO_COPY if name in column.medians}
    return max(group, key=group.get) if len(group) > 1 else None


def _close_together(columns: Sequence[ClaimColumn], noisy: list[bool]) -> str:
    here, references = columns[0], [c for c in columns[1:] if _slowest_of_zero_copy(c)]
    if _slowest_of_zero_copy(here) is None or not references:
        return ""
    slowest_there = {c.label: _slowest_of_zero_copy(c) for c in references}
    if len(set(slowest_there.values())) == 1:
        only = slowest_there[references[0].label]
        tied = {c.label: _within_noise_of(c, only)[:1] for c in references}  # section 3's rule: the runner-up
        where = (f" was `{only}`" + ("" if any(tied.values()) else " at every size")
                 + f" ({_sizes(references, 1)} the fastest's time{_first(references)})")
        for near in dict.fromkeys(names for names in tied.values() if names):  # not ranked there
            at = [c for c in references if tied[c.label] == near]
            where += (", tied with " + " and ".join(f"`{n}`" for n in near)
                      + ("" if len(at) == len(references) else f" at {_size_list(at)}"))
    else:
        where = f" took {_sizes(references, 1, slowest_there)} the fastest's time{_first(references)}"
    text = f"**Close together.** There the slowest of the claim's four ways{where}"
    failed = {slowest_there[c.label] for c in references if c.claims[1].holds is False}
    if "shared_memory" in failed:
        text += ": each `SharedMemory` task maps the segment afresh (lesson 07)"
    slowest = _slowest_of_zero_copy(here)
    # A way as slow as the one the reference's reason names, in this run: said, lest the reason
    # read as the whole story (only when this run's slowest is the reference's, at every size).
    behind = _close_behind(here, slowest) if set(slowest_there.values()) == {slowest} else None
    if behind is not None:
        there = [c for c in references if behind in c.medians]
        text += f"; `{behind}` there: {_times_fastest(there, behind)}" + (
            ", falling with size (a fixed cost per task)" if _falls(there, behind) else "")
    # the slowest and every zero-copy way within NOISE_FACTOR of it: named together, not ranked
    near = sorted((name for name in BLOG_ZERO_COPY if name in here.medians and name != slowest
                   and here.medians[name] * NOISE_FACTOR > here.medians[slowest]),
                  key=here.medians.__getitem__, reverse=True)
    lead = f"`{slowest}`" if not near else (
        _and([f"`{name}`" for name in (slowest, *near)]).replace(", and", " and") + " ("
        + ", ".join(_times_fastest([here], name) for name in (slowest, *near))
        + f": within {NOISE_FACTOR:g}× of each other, not ranked)")
    if here.claims[1].holds:
        how = f"all within {CLOSE_TOGETHER:g}×, as the blog found: not ranked"
    else:
        how = f"slowest {lead}" if not near else lead
        # The reference's slowest, too slow here on its own: the claim fails here for the reason said.
        alone = [name for name in sorted(failed) if name != slowest and name in here.medians
                 and _factor_of_fastest(here, name) > CLOSE_TOGETHER]
        if alone and not noisy[1] and here.medians[slowest] < NOISE_FACTOR * here.medians[alone[0]]:
            # this run's slowest within noise of the reference's: neither is ranked above the other
            how = (f"`{slowest}` and `{alone[0]}` ({_times_fastest([here], alone[0])}) both over "
                   f"{CLOSE_TOGETHER:g}×, within noise of each other; `{alone[0]}`"
                   + (" maps afresh" if alone[0] == "shared_memory" else " is slow") + " as on the reference")
        elif alone and not noisy[1]:
            there = [c for c in references if slowest in c.medians]
            if _falls(there, slowest):
                how += f" (a fixed cost per task: there {_times_fastest(there, slowest)}, falling with size)"
            how += (f", and `{alone[0]}` alone is {_times_fastest([here], alone[0])}"
                    + (", mapping afresh" if alone[0] == "shared_memory" else "") + " as on the reference")
        else:
            against = _this_run_against(here.claims[1], noisy[1], slowest in failed)
            if against == "as on the reference":
                how = "so the claim fails, as on the reference" + _where_it_failed(references) + "; " + (
                    _slowest_near(here, slowest, near) if near else f"slowest {lead}")
            else:
                how += f", {against}"
    return f"{text}. This run: {_factor(here.claims[1].factor)}×, {how}."


def _within_noise_of(column: ClaimColumn, slowest: str) -> tuple[str, ...]:
    """The claim's other ways under ``NOISE_FACTOR`` of ``slowest``'s fan-out in ``column``, slowest first:
    not ranked below it (cold read 11, F3)."""
    return tuple(sorted((name for name in BLOG_ZERO_COPY if name in column.medians and name != slowest
                         and column.medians[name] * NOISE_FACTOR > column.medians[slowest]),
                        key=column.medians.__getitem__, reverse=True))


def _size_list(columns: Sequence[ClaimColumn]) -> str:
    """'16 MiB and 128 MiB': the columns' sizes, in order."""
    names = [format_bytes(c.size_bytes) for c in columns]
    return " and ".join(names) if len(names) == 2 else _and(names)


def _where_it_failed(references: Sequence[ClaimColumn]) -> str:
    """' at 16 MiB and 1 GiB (it held at 128 MiB)': the reference's sizes where the close-together claim
    failed, and those where it held; "" when it failed at every size."""
    held = [c for c in references if c.claims[1].holds]
    if not held:
        return ""

    failed = [c for c in references if c.claims[1].holds is False]
    return f" at {_size_list(failed)} (it held at {_size_list(held)})"


def _slowest_near(column: ClaimColumn, slowest: str, near: Sequence[str]) -> str:
    """"this run's slowest, `a` (5.2×) and `b` (4.1×), are within 2× of each other: not ranked"."""
    names = [f"`{name}` ({_times_fastest([column], name)})" for name in (slowest, *near)]
    listed = " and ".join(names) if len(names) == 2 else _and(names)
    return f"this run's slowest, {listed}, are within {NOISE_FACTOR:g}× of each other: not ranked"


CLOSE_BEHIND = 1.25  # a zero-copy way within this factor of the slowest one gets the reference's ratios too


def _close_behind(column: ClaimColumn, slowest: str) -> str | None:
    """The zero-copy way next to the slowest in ``column``, if its fan-out is within ``CLOSE_BEHIND``."""
    group = {name: column.medians[name] for name in BLOG_ZERO_COPY
             if name in column.medians and name != slowest}
    if not group:
        return None
    runner = max(group, key=group.get)
    return runner if group[runner] * CLOSE_BEHIND >= column.medians[slowest] else None


def _factor_of_fastest(column: ClaimColumn, name: str) -> float:
    return column.medians[name] / min(column.medians[n] for n in BLOG_ZERO_COPY if n in column.medians)


def _times_fastest(columns: Sequence[ClaimColumn], name: str) -> str:
    """'2.3×, 1.3×': ``name``'s fan-out over the fastest zero-copy way's, in each column."""
    return ", ".join(f"{_factor(_factor_of_fastest(c, name))}×" for c in columns)


def _falls(columns: Sequence[ClaimColumn], name: str) -> bool:
    """True when ``name``'s ratio to the fastest zero-copy way falls size by size (two sizes or more)."""
    factors = [_factor_of_fastest(c, name) for c in columns]
    return len(factors) > 1 and all(a > b for a, b in zip(factors, factors[1:], strict=False))


def disagreements_markdown(columns: Sequence[ClaimColumn]) -> str:
    """A collapsed Markdown block on the two claims that differ between machines (disk against tmpfs,
    the zero-copy ways close together): the reference's ratios at each size with what the course
    showed of the cause, then this run's, saying whether it agrees, is within noise, or is not
    explained; "" without a reference column."""
    noisy = [False] * len(columns[0].claims)  # one rule in every column (``_is_tie``)
    parts = [part for part in (_disk_or_tmpfs(columns, noisy), _close_together(columns, noisy)) if part]
    if not parts:
        return ""
    body = "\n\n".join(parts)
    return f"<details><summary>Where the machines differ, and why</summary>\n\n{body}\n</details>"


def file_advice_markdown(columns: Sequence[ClaimColumn]) -> str:
    """The decision guide's line for data in a file: disk against tmpfs is pointed to where section 5
    gives it as measured (its figures are not repeated here)."""
    text = "- **Data in a file:** a memmap of it where it lies (lesson 06)"
    measured = bool(columns) and any(c.claims[2].factor is not None for c in columns)
    return text + ("; disk or tmpfs (section 5 compares them): measure yours." if measured else
                   "; on disk or on tmpfs: measure yours.")


def _fan_out_ratio(results: Sequence, floors: tuple[Timing, Timing], name: str) -> float | None:
    result = ran(results).get(name)
    return None if result is None or result.fan_out is None else result.fan_out.median / floors[0].median


def guide_markdown(results: Sequence, floors: tuple[Timing, Timing], columns: Sequence[ClaimColumn],
                   references: Sequence = ()) -> str:
    """Lesson 11's decision guide read by need, one Markdown bullet per need, its figures from this
    run: SharedMemory's fan-out beside sharedctypes' (why the guide still picks SharedMemory), ranked by
    section 3's rule here and at each of the reference's sizes (``_ranked_by_size``), and the file
    line (``file_advice_markdown``). A comparison whose way did not run is left out. No memory figure
    of the exercise's ways: the guide is shown open, answered or not. ``references``
    (``load_every_size``'s): a fan-out section 6 flags is quoted with ``FAR_OFF_SAID``."""
    shm, ctypes = (_fan_out_ratio(results, floors, name) for name in ("shared_memory", "sharedctypes"))
    read_only = ("- **Read-only, one Linux machine:** fork (04; `mp.get_context(\"fork\")`) if the "
                 "parent runs no threads when it forks, else a "
                 "`SharedMemory` segment (07): any start method, attach by name at any time; "
                 "`sharedctypes` (05)")
    if shm is None or ctypes is None:
        return _guide(read_only + " reaches workers only when they start.", results, columns)
    # section 3's rule here and at each of the reference's sizes: ranked only NOISE_FACTOR apart or more
    how = ("faster" if ctypes * NOISE_FACTOR <= shm else "slower" if ctypes >= shm * NOISE_FACTOR
           else f"within {NOISE_FACTOR:g}× of it")
    far = [n for n in _far_off(results, floors[0].median, references, "fan-out")
           if n in ("sharedctypes", "shared_memory")]
    flag = f"; {_and([f'`{n}`' for n in far])}: {FAR_OFF_SAID}" if far else ""
    size = format_bytes(results[0].array_bytes)
    read_only += f" was {how} here ({size}: {ctypes:.3g}× against {shm:.3g}× floor (a){flag})"
    refs = [c for c in columns[1:] if "sharedctypes" in c.medians and "shared_memory" in c.medians]
    if refs:
        read_only += f" and, in the reference, {_ranked_by_size(refs, 'sharedctypes', 'shared_memory')}"
    subject = "it" if how == "faster" or not refs else "`sharedctypes`"
    return _guide(read_only + f"; {'and' if how == 'slower' else 'but'} {subject} reaches workers only when "
                  "they start.", results, columns)


def _ranked_by_size(columns: Sequence[ClaimColumn], name: str, other: str) -> str:
    """'at least 2× faster at 16 MiB and 1 GiB, within 2× at 128 MiB': ``name``'s fan-out against
    ``other``'s in each column, by section 3's rule (ranked only ``NOISE_FACTOR`` apart or more)."""
    groups: dict[str, list[str]] = {}
    for column in columns:
        ratio = column.medians[other] / column.medians[name]
        verdict = (f"at least {NOISE_FACTOR:g}× faster" if ratio >= NOISE_FACTOR
                   else f"at least {NOISE_FACTOR:g}× slower" if ratio <= 1 / NOISE_FACTOR
                   else f"within {NOISE_FACTOR:g}×")
        groups.setdefault(verdict, []).append(format_bytes(column.size_bytes))
    if len(groups) == 1 and len(columns) > 1:
        return f"{next(iter(groups))} at every size"
    return ", ".join(f"{verdict} at {' and '.join(sizes)}" for verdict, sizes in groups.items())


def _guide(read_only: str, results: Sequence, columns: Sequence[ClaimColumn]) -> str:
    executor = ("- **Existing pool code:** the shared-memory executor (08) or a pickler reduction (09). The "
                "executor copies each array per submit: put an array many tasks "
                "read in a `SharedNDArray` first (08).")
    return "\n".join([
        "- **The work releases the GIL:** threads (01): they read the array itself.",
        read_only,
        "- **Writes into one result:** `SharedMemory` or `sharedctypes`, with a lock or disjoint slices "
        "(05).",
        executor,
        "- **Several machines:** put it once, pass the reference: `ray.put` (one copy per node, lesson 10) "
        "or Dask's `scatter(broadcast=True)`.",
        object_arrays_advice(results),
        file_advice_markdown(columns),
    ])


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def object_arrays_advice(results: Sequence) -> str:
    """The guide's line for object arrays: no segment or file holds them, fork un-shares what it reads,
    else send them once per worker, with when that pays off here: the ``n``-th fan-out from which its
    start-up (setup) plus n fan-outs cost no more than n of pickle's fan-outs."""
    text = ("- **Object arrays:** no segment or file holds them (07); forked workers read them, but "
            "refcounts un-share every page read (04); else send them once per worker (03)")
    done = ran(results)
    pickle, once = done.get("pickle"), done.get("send_once")
    if pickle is None or once is None or once.setup_s is None or once.setup_s < NOTHING_SET_UP:
        return text + " or convert them to a fixed-width dtype."  # a start-up under noise: no payback to say
    per_call = pickle.fan_out.median
    if per_call <= once.fan_out.median:  # no fan-out saved anything over pickling it per task
        return (text + f", not faster here (fan-out {format_seconds(once.fan_out.median)} against pickle's "
                f"{format_seconds(per_call)}), or convert them to a fixed-width dtype.")
    return text + " if the pool serves many calls, or convert them to a fixed-width dtype."


# What each way copies, as lesson 11 prints it after its exercise: lesson 10's exercise asks how many
# copies Dask's scatter makes, so the answer is not given away here.
COPIES_KEPT_FOR = {"dask_scatter": "(lesson 10's exercise counts its copies)",
                   "executor": "one copy per submit into a warm pooled segment"}


def copies_said(strategy) -> str:
    """What ``strategy`` (``strategies.Strategy``) copies, as lesson 11 prints it (``COPIES_KEPT_FOR``)."""
    return COPIES_KEPT_FOR.get(strategy.name, strategy.copies)


def added_arrays(results: Sequence) -> dict[str, float]:
    """What the tree's PSS added while every worker held the array, in arrays, by strategy name (the
    strategies that ran and whose memory was measured)."""
    return {name: r.pss_added_bytes / r.array_bytes for name, r in ran(results).items()
            if r.pss_added_bytes is not None}


# The ways whose server process holds a copy of its own, besides one per reading worker (lesson 03's
# Manager: each read unpickles a copy in the worker): n_workers + 1 copies, whatever glibc keeps on top.
SERVER_COPY = ("manager",)


def _whole(arrays: float) -> int:
    """``arrays`` to the nearest whole array, a half rounding down (``ONE_ARRAY``: 1.5 is one)."""
    return math.ceil(arrays - 0.5)


def memory_groups(results: Sequence) -> dict[str, list[str]]:
    """The strategies that ran, by what the tree's PSS added while every worker held the array, to
    the nearest whole array (what else the processes hold moves a little between the two windows;
    the exercise's ``ONE_ARRAY`` is the same cut): 'none', 'one' (one copy, however many workers),
    'per worker' (one per worker), 'per worker and one' (and one more, a server's; the Manager's
    whatever it reads above that: ``server_copies`` says why), 'more' (anything
    else, and a way whose workers map one copy in /dev/shm yet added more than one array: with 2
    workers its extra array only looks like a copy per worker)."""
    groups: dict[str, list[str]] = {"none": [], "one": [], "per worker": [], "per worker and one": [],
                                    "more": []}
    done = ran(results)
    for name, added in added_arrays(results).items():
        n_workers, whole = done[name].n_workers, _whole(added)
        shm = (done[name].shm_added_bytes or 0) / done[name].array_bytes
        if abs(shm - 1) <= 0.25 and added > ONE_ARRAY:
            groups["more"].append(name)
        elif whole <= 0:
            groups["none"].append(name)
        elif whole == 1:
            groups["one"].append(name)
        elif whole == n_workers:
            groups["per worker"].append(name)
        elif whole == n_workers + 1 or (name in SERVER_COPY and whole > n_workers + 1):
            groups["per worker and one"].append(name)
        else:
            groups["more"].append(name)
    return groups


def noise_note(results: Sequence, short: bool = False) -> str:
    """Markdown: why the figures are read to the nearest whole array, with how far the ways that
    map one copy ('one' in ``memory_groups``) strayed from 1.00 here, and (not when ``short``) the
    case where PSS + reads under shm + (a page in /dev/shm that a worker maps is in both); "" when
    none strayed by 0.05."""
    added, done = added_arrays(results), ran(results)
    one, none = memory_groups(results)["one"], memory_groups(results)["none"]
    strayed = (any(abs(added[name] - 1) >= 0.05 for name in one)
               or any(added[name] >= 0.05 for name in none))
    if short and strayed:
        return "Read each figure to the nearest whole array."  # a "+0.31" beside "add no array", too
    if not one or max(abs(added[name] - 1) for name in one) < 0.05:
        return ""
    low, high = min(one, key=added.get), max(one, key=added.get)
    off = max(abs(added[name] - 1) for name in one) * done[one[0]].array_bytes
    if short:
        return "Read each figure to the nearest whole array."
    text = (f"Read them to the nearest whole array: the ways that map one copy read "
            f"{format_arrays(added[low])} (`{low}`) to {format_arrays(added[high])} (`{high}`), up to "
            f"{format_bytes(off)} off, as the processes' other memory moves between the idle and the "
            "holding window")
    shm = {name: (done[name].shm_added_bytes or 0) / done[name].array_bytes for name in one}
    if any(added[name] < shm[name] - 0.02 for name in one):
        text += " (so PSS + can dip under shm +)"
    return text + "."


def pss_under_shm(results: Sequence) -> str:
    """Markdown: each way whose PSS + reads under its shm + (a part over its whole, as printed), with
    the gap between the two printed figures: within the PSS measure's noise where both read as the
    same whole array (``_whole``), else not explained by this run; "" when none reads under."""
    done, added = ran(results), added_arrays(results)
    parts = []
    for name, pss in added.items():
        shm = (done[name].shm_added_bytes or 0) / done[name].array_bytes
        gap = float(f"{shm:.2f}") - float(f"{pss:.2f}")  # as the table prints them
        if shm < NEAR_ZERO or gap < 0.005:  # shm + ≈0: no part to compare
            continue
        text = (f"`{name}`'s PSS + ({format_arrays(pss)}) reads {gap:.2f} of an array under its shm + "
                f"({format_arrays(shm)})")
        parts.append(text + (": a gap within the PSS measure's noise, so read both as one array"
                             if _whole(pss) == _whole(shm) == 1 else
                             f": a gap within the PSS measure's noise, so read both as {_whole(shm)} arrays"
                             if _whole(pss) == _whole(shm) else ": a gap this run does not explain"))
    return "; ".join(parts) + "." if parts else ""


# The strategies that pickle the array (or unpickle it) in a process of the tree: at an array under
# glibc's GLIBC_MMAP_THRESHOLD_MAX, the freed buffers stay in that process's heap for reuse.
PICKLE_THE_ARRAY = ("pickle", "send_once", "manager", "joblib", "dask_by_value", "dask_scatter")


def _verb(names: Sequence[str], one: str, many: str) -> str:
    return one if len(names) == 1 else many


def _their(names: Sequence[str]) -> str:
    return _verb(names, "its", "their")


def kept_buffers(results: Sequence, references: Sequence) -> str:
    """Markdown, in plain words: which ways added more than their copies in ``results`` and why (a
    way that pickles the array, at an array under glibc's 32 MiB: freed buffers the allocator
    keeps), with what the first of the ``references`` above that size measured for them; any other
    such way, with the reference at this run's size; "" when none did."""
    added, more = added_arrays(results), memory_groups(results)["more"]
    if not more:
        return ""
    array_bytes = next(iter(ran(results).values())).array_bytes

    def names(group: list[str]) -> str:
        return ", ".join(f"`{name}` ({format_arrays(added[name])})" for name in group)

    def measured(reference, group: list[str]) -> str:
        return ", ".join(f"`{name}` {format_arrays(reference.pss_added[name])}" for name in group
                         if reference.pss_added.get(name) is not None)

    if array_bytes >= GLIBC_MMAP_THRESHOLD_MAX:
        return f"{names(more)} added more than {_their(more)} copies; this run does not say why."
    pickling = [name for name in more if name in PICKLE_THE_ARRAY]
    others = [name for name in more if name not in PICKLE_THE_ARRAY]
    parts = []
    if pickling:
        hatched = " (hatched)" if all(name in HELD_COPIES for name in pickling) else ""
        text = (f"{names(pickling)} {_verb(pickling, 'holds', 'hold')} more than {_their(pickling)} copies"
                f"{hatched}: below {format_bytes(GLIBC_MMAP_THRESHOLD_MAX)}, C's allocator (glibc malloc) "
                "keeps a pickled or unpickled array's freed buffers for reuse")
        larger = next((r for r in references if r.size_bytes >= GLIBC_MMAP_THRESHOLD_MAX), None)
        if larger is not None and measured(larger, pickling):
            text += f" (the reference at {format_bytes(larger.size_bytes)}: {measured(larger, pickling)})"
        parts.append(text + ".")
    if others:
        text = (f"{names(others)} added more than {_their(others)} copies here, which this run does not "
                "explain")
        same = next((r for r in references if r.size_bytes == array_bytes), None)
        if same is not None and measured(same, others):
            text += f"; the reference at {format_bytes(array_bytes)}: {measured(same, others)}"
        parts.append(text + ".")
    return " ".join(parts)


def server_copies(results: Sequence, references: Sequence, after_kept: bool = False) -> str:
    """Markdown: the ways of ``memory_groups``' 'per worker and one' (the Manager), as its own copy plus
    one per reading worker; what reads above that, under glibc's 32 MiB, as freed buffers kept for
    reuse ("the same way" when ``after_kept``: right after ``kept_buffers``' sentence), else not
    explained; with the first of the ``references`` at 32 MiB or above; "" when none."""
    added, group = added_arrays(results), memory_groups(results)["per worker and one"]
    if not group:
        return ""
    n_workers = next(iter(ran(results).values())).n_workers
    larger = next((r for r in references if r.size_bytes >= GLIBC_MMAP_THRESHOLD_MAX), None)
    array_bytes = next(iter(ran(results).values())).array_bytes
    parts = []
    for name in group:
        text = (f"`{name}` ({format_arrays(added[name])}) holds its own copy plus one per reading worker, "
                f"{n_workers + 1} here")
        if _whole(added[name]) > n_workers + 1:
            text += (", the rest not explained by this run" if array_bytes >= GLIBC_MMAP_THRESHOLD_MAX else
                     ", the rest buffers kept the same way" if after_kept else
                     ", the rest freed buffers it keeps for reuse (glibc, under "
                     f"{format_bytes(GLIBC_MMAP_THRESHOLD_MAX)})")
        if larger is not None and larger.pss_added.get(name) is not None:
            there = format_arrays(larger.pss_added[name])
            text += f" (the reference at {format_bytes(larger.size_bytes)}: {there})"
        parts.append(text)
    return "; ".join(parts) + "."


def memory_what_to_see(results: Sequence, references: Sequence) -> str:
    """Markdown for lesson 11's memory plot, every group and figure read from ``results``: the groups,
    then why figures are read to the nearest whole array (``noise_note``, short), which ways added more
    than their copies and why (``kept_buffers``, ``server_copies``); a way not measured is said in the
    table's footnote. Shown collapsed until the exercise is answered: it gives its figures."""
    added, groups = added_arrays(results), memory_groups(results)
    if not added:
        return "*What to see:* no strategy's memory was measured in this run."
    n_workers = next(iter(ran(results).values())).n_workers

    def names(group: str) -> str:
        return ", ".join(f"`{name}` ({format_arrays(added[name])})" for name in groups[group])

    said = {
        "none": "add no array: workers read pages already counted",
        "one": "add one array however many workers map it",
        "per worker": f"add one array per worker ({n_workers}): each has a copy",
    }
    parts = [f"{names(group)} {_verb(groups[group], 'adds', 'add')}{text[3:]}" for group, text in said.items()
             if groups[group]]
    text = "*What to see* (arrays added): " + "; ".join(parts) + "."
    kept = kept_buffers(results, references)
    more = [noise_note(results, short=True), pss_under_shm(results), kept,
            server_copies(results, references, bool(kept))]
    return " ".join([text, *(part for part in more if part)])


# The strategies whose round trip brings the result back pickled through a pipe (their mechanisms'
# notes say so): a pickled copy of the result on top of making it.
RESULT_PICKLED_BACK = ("pickle", "send_once", "manager", "fork_cow", "joblib")
# The strategies whose worker writes array + 1 into a result array made at set-up, which the caller
# then reads where it lies (their mechanisms' notes say so): the warm-up already touched its pages.
RESULT_WRITTEN_IN_PLACE = ("sharedctypes", "memmap_disk", "memmap_tmpfs", "shared_memory")
# The strategies whose result comes back through a new segment or storage (the executor, torch's
# reduction) or Ray's object store: a new copy each round trip, neither pickled through a pipe nor
# written into a result made at set-up.
RESULT_IN_NEW_STORE = ("executor", "reducer_torch", "ray_object_store", "ray_by_value")
# The strategies that copy the array for every task (``strategies.STRATEGIES[name].copies`` says
# "per task", or "per read" for the manager: one read per task): the lesson's hypothesis names them.
COPY_PER_TASK = ("pickle", "manager", "executor", "reducer_torch", "reducer_shared_memory", "ray_by_value",
                 "dask_by_value")


# What a way that does not copy per task does instead, when its fan-out is among the slowest.
NOT_PER_TASK = {"joblib": "copies it once per call",
                "memmap_disk": "copies nothing per task but maps the file afresh in every task",
                "memmap_tmpfs": ("copies nothing per task, with more page faults per read than disk "
                                 "(lesson 06)"),
                "shared_memory": "copies nothing per task but maps the segment afresh in every task"}


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def _range(ratios: Sequence[float], form: Callable[[float], str] = format_ratio) -> str:
    low, high = form(min(ratios)), form(max(ratios))
    return f"{low}×" if low == high else f"{low}× to {high}×"


# What a figure section 6 flags (``showdown_reference.far_off_rows``) carries wherever it is quoted.
FAR_OFF_SAID = "far off the reference, section 6"


def _reference_at(results: Sequence, references: Sequence):
    """The reference of this run's size among ``references`` (``load_every_size``'s), or None."""
    size = results[0].array_bytes if results else None
    return next((r for r in references if getattr(r, "size_bytes", None) == size), None)


def _far_off(results: Sequence, warm: float, references: Sequence, what: str) -> list[str]:
    """The strategies whose ``what`` ("fan-out" or "round trip") section 6 flags as far off the
    reference of this run's size (``showdown_reference.far_off_names``); [] without one."""
    from helpers.bench.showdown_reference import far_off_names

    return far_off_names(results, warm, _reference_at(results, references), what)


def _flagged_range(ratios: dict[str, float], far: Sequence[str] = (),
                   form: Callable[[float], str] = format_ratio) -> str:
    """``_range`` of ``ratios`` (by strategy), each flagged way in it named with its figure and
    ``FAR_OFF_SAID``: '4.6× to 17× (`joblib`'s 17×: far off the reference, section 6)'."""
    text = _range(list(ratios.values()), form)
    flagged = [name for name in ratios if name in far]
    if len(ratios) == 1 and flagged:
        return f"{text} ({FAR_OFF_SAID})"
    if flagged:
        said = "; ".join(f"`{name}`'s {form(ratios[name])}×: {FAR_OFF_SAID}" for name in flagged)
        text += f" ({said})"
    return text


def _round_trips_against_floor_b(trip: dict[str, float], fresh_over_warm: float,
                                  far: Sequence[str] = ()) -> str:
    """The sentence on round trips by how the result comes back, in multiples of floor (b): pickled
    through a pipe, written into a result made at set-up, or through a new segment or Ray's store;
    the pipe's said to be the slowest only when ``NOISE_FACTOR`` or more above every other. ``far``:
    the strategies whose round trip is far off the reference (``showdown_reference.far_off_names``),
    each flagged in its group."""
    pickled = [name for name in RESULT_PICKLED_BACK if name in trip]
    in_place = [name for name in RESULT_WRITTEN_IN_PLACE if name in trip]
    stored = [name for name in RESULT_IN_NEW_STORE if name in trip]

    def span(names: list[str]) -> str:
        return _flagged_range({name: trip[name] / fresh_over_warm for name in names}, far)

    parts = []
    if pickled:
        text = f"pickled back through a pipe ({_names(pickled)}) {span(pickled)}"
        others = [trip[name] for name in trip if name not in pickled]
        if others and min(trip[n] for n in pickled) >= NOISE_FACTOR * max(others):
            text += f", at least {_at_least(min(trip[n] for n in pickled) / max(others))}× any other"
        parts.append(text)
    if in_place:
        text = f"written into a result made and first filled untimed ({_names(in_place)}) {span(in_place)}"
        rest = [trip[name] for name in in_place if name != "sharedctypes"]
        if "sharedctypes" in in_place and rest and min(rest) >= NOISE_FACTOR * trip["sharedctypes"]:
            text += (", lowest `sharedctypes`: its workers got both arrays at start, the others map them per "
                     "task")
        elif len(in_place) > 1:  # section 3's rule: ways less than NOISE_FACTOR apart are not ranked
            text += f": within {NOISE_FACTOR:g}×, not ranked"
        parts.append(text)
    if stored:
        store = "Ray's object store" if all(name.startswith("ray") for name in stored) else (
            "a new segment" if not any(name.startswith("ray") for name in stored) else
            "a new segment or Ray's object store")
        parts.append(f"through {store} ({_names(stored)}) {span(stored)}, a new copy each time")
    if not parts:
        return ""
    text = (f"Round trips in floor (b) (×(a) in the table under the exercise ÷ {fresh_over_warm:.3g}), "
            "by how the result returns:" + (" " if len(parts) == 1 else "\n  - ") + ".\n  - ".join(parts))
    if ("ray_by_value" in trip and RAY_MEASURED in trip and trip["ray_by_value"] < fresh_over_warm
            and trip["ray_by_value"] < trip[RAY_MEASURED]):
        text += (f". `ray_by_value` ran after `{RAY_MEASURED}`, into store pages already faulted in: hence "
                 "its round trip under floor (b)")
    return text + "."


def _reference_disagrees(name: str, bands: list[tuple[list[str], float]], reference) -> str:
    """' (the reference at 16 MiB: `joblib` 15.1×, `manager` 29.5×; rerun before you rank this gap)':
    for each band of ways ``name`` beat here (``times``: this run's gap to the band's slowest), the
    band's slowest there named with ``name`` when the reference at this size
    (``showdown_reference.Reference`` or None) puts ``name`` less than ``NOISE_FACTOR`` above it, or this
    run's gap is ``NOISE_FACTOR`` or more times the reference's; "" when no band's is, or the reference
    lacks them."""
    medians = getattr(reference, "fan_out_ran", None) or {}
    if name not in medians:
        return ""
    compared = []
    for band, times in bands:
        if not all(p in medians for p in band):
            continue
        top = max(band, key=medians.__getitem__)
        there = medians[name] / medians[top]
        if there < NOISE_FACTOR or times >= NOISE_FACTOR * there:
            compared.append(top)
    if not compared:
        return ""
    values = ", ".join(f"`{n}` {medians[n]:.3g}×" for n in [name, *compared])
    return (f" (the reference at {format_bytes(reference.size_bytes)}: {values}; rerun before you rank "
            f"{'this gap' if len(compared) == 1 else 'these gaps'})")


def _bands(ratios: dict[str, float]) -> list[list[str]]:
    """``ratios``' names, lowest ratio first, in bands one phrase can say: those under
    1.1 × ``NOISE_FACTOR`` ('about 2×'), then runs within ``NOISE_FACTOR`` of their band's lowest
    ('at least 12×'); never 2× and 12× under one phrase."""
    bands: list[list[str]] = []
    for name in sorted(ratios, key=ratios.__getitem__):
        low = ratios[bands[-1][0]] if bands else None
        if (low is not None and ratios[name] < NOISE_FACTOR * low
                and (low < 1.1 * NOISE_FACTOR) == (ratios[name] < 1.1 * NOISE_FACTOR)):
            bands[-1].append(name)
        else:
            bands.append([name])
    return bands


def _new_pages_cause(joblib_fan: float, new_pages: tuple[float, Sequence[float]] | None,
                     n_workers: int) -> str:
    """Why joblib took longer than the executor, where this run's figures bear it out: its dump writes
    new file pages, about floor (b) (``new_pages``: floor (b) × floor (a), and setup's copies into a
    segment or file × floor (b), all within ``NOISE_FACTOR`` of it), at least ``NOISE_FACTOR`` times
    the executor's ``n_workers`` copies into warm segments (about floor (a) each, lesson 08), and
    within joblib's fan-out; "" otherwise."""
    if new_pages is None or not n_workers:
        return ""
    floor_b, copies = new_pages
    if (not copies or not all(1 / NOISE_FACTOR < c < NOISE_FACTOR for c in copies)
            or floor_b < NOISE_FACTOR * n_workers or joblib_fan < floor_b):
        return ""
    return (f"whose dump, once per call, writes new file pages (about floor (b), {_table(floor_b)}×: "
            f"setup's copies into a segment or file took {_range(copies)} it)")


def _hypothesis(fan: dict[str, float], joblib_dump: float | None = None, n_workers: int = 0,
                reference=None, far: Sequence[str] = (),
                new_pages: tuple[float, Sequence[float]] | None = None) -> str:
    """Whether the lesson's hypothesis held on the fan-outs ``fan`` (× floor (a)): are the ways that
    copy the array per task the slowest? Only gaps of ``NOISE_FACTOR`` or more rank (section 5's
    rule): the per-task ways that took that much longer than every other way; each other way that
    took that much longer than a per-task way, with what it does instead (``NOT_PER_TASK``); the
    per-task ways and other ways within ``NOISE_FACTOR`` of each other, not ranked. joblib among the
    slower is split into its dump alone (``joblib_dump``, × floor (a), timed apart:
    ``time_joblib_dump``) and the rest of its call. ``far``: the ways whose fan-out section 6 flags,
    each quoted with ``FAR_OFF_SAID``; a verdict resting on them alone says so. joblib beside the
    executor alone gives the cause where ``new_pages`` bears it out (``_new_pages_cause``)."""
    per_task = [name for name in COPY_PER_TASK if name in fan]
    others = [name for name in fan if name not in per_task]
    if not per_task or not others:
        return ""

    def by_time(names) -> list[str]:
        return sorted(names, key=fan.__getitem__, reverse=True)

    def joined(parts: list[str]) -> str:
        return " and ".join(parts) if len(parts) == 2 else _and(parts)

    said: set[str] = set()

    def or_per_read(names) -> str:  # what the per-task ways copy: manager's per read
        return " or per read" if "manager" in names and len(names) > 1 else ""

    def figure(name: str) -> str:
        return f"{fan[name]:.3g}×" + (f": {FAR_OFF_SAID}" if name in far else "")

    def listed(names: list[str]) -> str:
        text = joined([f"`{name}`" + ("" if name in said else f" ({figure(name)})") for name in names])
        said.update(names)
        return text

    def slower(a: str, b: str) -> bool:
        return fan[a] >= NOISE_FACTOR * fan[b]

    top_other = max(others, key=fan.__getitem__)
    ahead = by_time(name for name in per_task if slower(name, top_other))
    behind = by_time(name for name in per_task if name not in ahead)
    above = by_time(name for name in others if any(slower(name, p) for p in behind))
    near_pairs = [(p, o) for p in behind for o in others if not slower(p, o) and not slower(o, p)]
    tied = by_time({p for p, _ in near_pairs})
    verdict = ("**The hypothesis held**" if not behind else "**The hypothesis held in part**" if ahead
               else "**The hypothesis did not hold**" if above else "**No verdict on the hypothesis**")
    rests = ahead or above  # the ways the verdict rests on
    if rests and all(name in far for name in rests):
        verdict += f", on {joined([f'`{name}`' for name in rests])} alone: rerun before you trust it"
    sentences = []
    if ahead:
        times = min(fan[name] for name in ahead) / fan[top_other]
        how = "per read" if ahead == ["manager"] else "per task" + or_per_read(ahead)
        sentences.append(f"{listed(ahead)}, which {_verb(ahead, 'copies', 'copy')} the array {how}, took "
                         f"{_factor(times)}× as long as `{top_other}`, the slowest way that does not copy "
                         "per task, or longer")
    said_after: set[str] = set()  # the caveat on ray_by_value's pages, said once
    warm_said = False  # the executor's warm copies, said with joblib's cause
    for name in above[:2]:  # the two slowest, each with what it does; the rest named after them
        beaten = [p for p in behind if slower(name, p)]
        times = {p: fan[name] / fan[p] for p in beaten}
        bands = [(band, times[band[0]]) for band in _bands(times)]  # each gap said by its own ratio
        does = NOT_PER_TASK.get(name, "copies nothing per task")
        cause = (_new_pages_cause(fan[name], new_pages, n_workers)
                 if name == "joblib" and beaten == ["executor"] else "")
        text = f"{listed([name])}, {cause or 'which ' + does}, took "
        text += _and([(f"about {NOISE_FACTOR:g}× as long as" if low < 1.1 * NOISE_FACTOR
                       else f"at least {_at_least(low)}× as long as")  # no hair's-breadth verdict
                      + f" {listed(band)}" for band, low in bands])
        per_task_copy = f", which {_verb(beaten, 'copies', 'copy')} it per task"
        text += (", whose copies per task go into warm pooled segments, about 1× "
                 "floor (a) each (lesson 08)" if cause else per_task_copy)
        warm_said = warm_said or bool(cause)
        if "ray_by_value" in beaten and RAY_MEASURED in fan and "ray_by_value" not in said_after:
            said_after.add("ray_by_value")
            text += RAY_AFTER_PUT
        sentences.append(text + _reference_disagrees(name, bands, reference))
    if len(above) > 2:
        sentences.append(f"so did {joined([f'`{name}`' for name in above[2:]])}, beside a way that copies "
                         "per task (plot above)")
    groups: dict[tuple[str, ...], list[str]] = {}  # the per-task ways within 2x of the same other ways
    for p in tied:
        groups.setdefault(tuple(by_time(o for q, o in near_pairs if q == p)), []).append(p)
    for whom, group in groups.items():
        span = "" if len(whom) < 2 else f" ({_flagged_range({o: fan[o] for o in whom}, far, _table)})"
        does = "" if "joblib" in whom else f", which {_verb(whom, 'copies', 'copy')} nothing per task"
        names = joined([f"`{o}`" for o in whom])  # named, however many (cold read 11b)
        gap = min(max(fan[p], fan[o]) / min(fan[p], fan[o]) for p in group for o in whom)  # all near 2x?
        near = (f"about {NOISE_FACTOR:g}× {names}{span}{does}, too close to {NOISE_FACTOR:g}× to rank "
                "(section 3)" if gap >= 0.95 * NOISE_FACTOR
                else f"within {NOISE_FACTOR:g}× of {names}{span}{does}")
        copies = f", which {_verb(group, 'copies', 'copy')} it per read," if group == ["manager"] else ""
        text = f"{listed(group)}{copies} {_verb(group, 'is', 'are')} {near}"
        rest = [fan[o] for o in fan if o not in group and o not in whom]
        if rest and min(fan[p] for p in group) >= NOISE_FACTOR * max(rest):  # above every other way
            text += (f" (not ranked) and took at least {_at_least(min(fan[p] for p in group) / max(rest))}× "
                     "as long as every other way")
        elif gap < 0.95 * NOISE_FACTOR:
            text += ": not ranked"
        sentences.append(text)
    text = f" {verdict} (fan-outs, × floor (a)):" + "".join(f"\n  - {sentence}." for sentence in sentences)
    # cold read 11, round 5: no gap explained between the executor and shared_memory where the page
    # calls them within NOISE_FACTOR, not ranked
    pair = [fan[name] for name in ("executor", "shared_memory") if name in fan]
    ranked = len(pair) < 2 or max(pair) >= NOISE_FACTOR * min(pair)
    if "executor" in fan and n_workers and fan["executor"] > 2 * n_workers and ranked:
        text += "\n  - " + _executor_split(fan, n_workers, far, warm_said) + "."
    return text


# What an executor's task pays besides its copy, as a SharedNDArray's task does (no split is timed here).
MAPS_AFRESH = "each task maps a segment and faults its pages in"
A_MODEL = "a model, not a measured split"  # what the executor's reading is (cold read 11, round 5)


def _executor_split(fan: dict[str, float], n_workers: int, far: Sequence[str] = (),
                    warm_said: bool = False) -> str:
    """The executor's fan-out (× floor (a)) read from the table beside it (cold read 11b): its task
    maps a segment afresh and faults its pages in, as `shared_memory`'s does, and copies the array
    into a warm pooled segment first, about floor (a) each (lesson 08). Its gap over `shared_memory`
    is said as its ``n_workers`` warm copies where it is within ``NOISE_FACTOR`` of them; otherwise
    what is left is said not timed apart. ``warm_said``: the copies were described already."""
    flag = f" ({FAR_OFF_SAID})" if "executor" in far else ""
    executor = f"`executor`'s {fan['executor']:.3g}×{flag}"
    copies = ("its warm copies" if warm_said else  # no count: the exercise asks it (cold read 11, F1)
              "its copies into warm pooled segments (about 1× floor (a) each, lesson 08)")
    if "shared_memory" not in fan:
        return f"{executor}: {copies}, and per task a segment mapped afresh; no split is timed here"
    shared = f"`shared_memory`'s {fan['shared_memory']:.3g}× ({MAPS_AFRESH})"
    gap = fan["executor"] - fan["shared_memory"]
    if n_workers / NOISE_FACTOR <= gap <= NOISE_FACTOR * n_workers:
        return f"{executor} is consistent with {shared} plus {copies}: {A_MODEL}"
    if gap < n_workers / NOISE_FACTOR:
        return f"{executor} is at most {shared} plus {copies}: {A_MODEL}"
    return (f"{executor} is {shared} and {format_ratio(gap)}× more, more than {copies} take: the rest "
            "is not timed apart here")


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + ", and " + parts[-1]


def _threads_round_trip(done: dict, fresh: float) -> str:
    """The sentence on threads' round trip, beside floor (b): nothing is sent, so what it times is one
    thread making a new array in this process. Over floor (b): fresh pages or reused ones, timed once
    (the row that varies most between machines: lesson 11's comparison with the reference names it).
    Under it: pages the allocator kept from arrays freed before (glibc, under 32 MiB) or the 2 MiB
    pages NumPy asks for, either far cheaper to fill than a new segment's 4 KiB pages (timed apart
    at 16 MiB: 0.7 to 0.9 ms reused, 1.4 to 2.1 ms fresh with the mmap threshold pinned, against 0.6
    to 1 ms for floor (a))."""
    threads = done.get("threads")
    if threads is None or threads.round_trip is None:
        return ""
    ratio = format_ratio(threads.round_trip.median / fresh)
    if threads.round_trip.median <= fresh:
        return f" `threads` {ratio}×: nothing is sent; a thread makes `array + 1` in this process."
    runs = len(threads.round_trip.runs)
    timed = "timed once" if runs == 1 else f"the median of {runs} runs"
    return (f" `threads`' round trip ({ratio}× floor (b), {timed}) "
            "sends nothing: a thread makes a new array (`array + 1`) in fresh pages, faulted in as floor "
            "(b)'s, or reused ones; one run does not tell which.")


def time_joblib_dump(array) -> Timing | None:
    """Seconds of ``joblib.dump(array)`` alone, into a new folder where joblib dumps (/dev/shm or the
    temp folder: lesson 06's ``time_dump``, removed after); None when joblib is not installed."""
    import importlib.util
    import tempfile
    from pathlib import Path

    if importlib.util.find_spec("joblib") is None:
        return None
    from helpers.lessons.joblib_memmap import joblib_temp_root, time_dump

    with tempfile.TemporaryDirectory(prefix=TEMP_PREFIX, dir=joblib_temp_root().path) as folder:
        return time_dump(array, Path(folder))


def _under_floor_a(fan: dict[str, float]) -> str:
    """The ways whose fan-out beat floor (a), with why they can: "" when none did."""
    under = sorted((name for name in fan if fan[name] < 1), key=fan.__getitem__)
    if not under:
        return ""
    beat = [name for name in under if fan[name] * NOISE_FACTOR <= 1]
    matched = [name for name in under if name not in beat]
    parts = []
    if beat:
        parts.append(_and([f"`{name}` ({format_ratio(fan[name])}×)" for name in beat])
                     + " beat floor (a): a sum only reads, a copy also writes.")
    if matched:
        parts.append(_and([f"`{name}` ({format_ratio(fan[name])}×)" for name in matched])
                     + f" matched floor (a) (within {NOISE_FACTOR:g}×): nothing is sent.")
    return " ".join(parts)


def time_what_to_see(results: Sequence, floors: tuple[Timing, Timing], joblib_dump: Timing | None = None,
                     references: Sequence = ()) -> str:
    """Markdown for lesson 11's time plot, every ordering read from ``results`` (the spreads are the
    plot's and the table's): which ways' round trips are slowest, whether
    they pickle the result back and what they took in multiples of floor (b) beside the ways that
    write it in place, and whether the hypothesis held (``_hypothesis``, with ``joblib_dump``:
    ``time_joblib_dump``, and the reference of this run's size among ``references``, if any)."""
    warm, fresh = floors[0].median, floors[1].median
    done = ran(results)
    fan = {name: r.fan_out.median / warm for name, r in done.items() if r.fan_out is not None}
    trip = {name: r.round_trip.median / warm for name, r in done.items() if r.round_trip is not None}
    if len(fan) < 2 or len(trip) < 2:
        return "*What to see:* too few strategies ran here to compare."
    dump = None if joblib_dump is None else joblib_dump.median / warm
    reference = _reference_at(results, references)
    far_trips = _far_off(results, warm, references, "round trip")
    trips = _round_trips_against_floor_b(trip, fresh / warm, far_trips)
    threads = _threads_round_trip(done, fresh).strip()
    if trips and threads:
        trips = trips[:-1] + ".\n  - " + threads
    copies = [done[name].setup_s / fresh for name in RESULT_WRITTEN_IN_PLACE
              if name in done and done[name].setup_s is not None]  # setup's copies into new pages
    hypothesis = _hypothesis(fan, dump, min((r.n_workers for r in done.values()), default=0), reference,
                             _far_off(results, warm, references, "fan-out"), (fresh / warm, copies))
    if f"`ray_by_value` ran after `{RAY_MEASURED}`" in trips:  # said once is enough
        hypothesis = hypothesis.replace(RAY_AFTER_PUT, "")
    parts = [trips, _under_floor_a(fan), hypothesis]
    return "*What to see*:\n\n" + "\n".join(f"- {part.strip()}" for part in parts if part)



PIPED_PER_TASK = ("pickle", "manager")


def _table(ratio: float) -> str:
    """A ratio as the table and section 3's verdict print it (three significant figures)."""
    return f"{ratio:.3g}"  # the ways that send the array through a pipe per task (or per read)


# The ways that copy the array per task into shared memory (a warm segment, Ray's object store).
COPY_PER_TASK_SHARED = ("executor", "ray_by_value")


def takeaways_markdown(results: Sequence, floors: tuple[Timing, Timing], references: Sequence = ()) -> str:
    """Lesson 11's takeaways on time, as this run measured them (section 3): the fan-outs of the ways
    that pickle the array through a pipe per task, those that map one shared copy (and ``ray.put``
    once where it falls outside their range, with why: ``_put_once_outside``) and those that copy
    it per task into shared memory, × floor (a), as ranges (no ranking claimed); the round trips pickled back
    against those written in place, × floor (b), as bounds (one far-off run moves no bound). Each line
    only where its ways ran and its gap is ``NOISE_FACTOR`` or more; no memory figure (the exercise's
    answer). ``references``: ``showdown_reference.load_every_size``'s, for ``_put_once_outside`` and
    the figures section 6 flags, quoted with that flag (``FAR_OFF_SAID``)."""
    warm, fresh = floors[0].median, floors[1].median
    done = ran(results)
    fan = {name: r.fan_out.median / warm for name, r in done.items() if r.fan_out is not None}
    trip = {name: r.round_trip.median / fresh for name, r in done.items() if r.round_trip is not None}
    far_fan, far_trip = (_far_off(results, warm, references, what) for what in ("fan-out", "round trip"))

    def span(names: list[str]) -> str:
        return _flagged_range({n: fan[n] for n in names}, far_fan, _table)

    def bound(value: float, name: str) -> str:  # a round trip's bound, flagged when a flagged way sets it
        return f"{format_ratio(value)}×" + (f" (`{name}`: {FAR_OFF_SAID})" if name in far_trip else "")
    lines = []
    piped = [name for name in PIPED_PER_TASK if name in fan]
    mapped = [name for name in RESULT_WRITTEN_IN_PLACE if name in fan]
    if piped and mapped and min(fan[n] for n in piped) >= NOISE_FACTOR * max(fan[n] for n in mapped):
        text = (f"- Pickling per task is dear: per fan-out at {format_bytes(results[0].array_bytes)} here, "
                f"{' and '.join(f'`{n}`' for n in piped)} took "
                f"{span(piped)} floor (a); mapping a segment or file, {span(mapped)}"
                f"{_put_once_outside(results, floors, references)}.")
        shared = [name for name in COPY_PER_TASK_SHARED if name in fan]
        # section 5 does not compare a by value run after ray.put (a head start): nor does this line
        here = [name for name in shared if not (name == "ray_by_value" and _by_value_after_put(results))]
        if here:  # a copy per task, but into shared memory: no pickle, no pipe
            text = (text[:-1] + "; a copy per task into shared memory (" + ", ".join(f"`{n}`" for n in here)
                    + ("; `ray_by_value`, run after ray.put, not compared" if here != shared else "")
                    + f"), {span(here)}.")
            slowest_mapped = max(fan[n] for n in mapped)
            if max(fan[n] for n in here) < NOISE_FACTOR * slowest_mapped:  # section 3's rule: not ranked
                text = text[:-1] + f", within {NOISE_FACTOR:g}× of the slowest mapped way (not ranked)."
        sections = "section 3"
        if "joblib" in fan:  # one dump per call, inside the timed call: none of the groups above
            text = text[:-1] + (f"; `joblib`, dumping inside the timed call, "
                                f"{_table(fan['joblib'])}×.")
            if "joblib" in far_fan:  # section 6's flag, where the line's last figure is the flagged one
                text = text[:-1] + ", far off the reference: rerun before you trust it."
                sections = "sections 3 and 6"
        groups = [piped, mapped, *([shared] if here else [])]  # the reference's Ray ways ran in fresh stores
        lines.append(text[:-1] + f" ({sections})." + _at_largest_reference(fan, groups, results, references))
    late = [name for name in LATE_START if name in fan and done[name].setup_s is not None]
    if late:  # their start-up, untimed in the fan-out, is where send_once pays its copies
        def paid(n: str) -> str:
            r = done[n]
            if _unresolved(r, floors):
                return f"`{n}` n/r (start-up noise)"
            if r.setup_s < NOTHING_SET_UP:
                return f"`{n}` nothing measurable ({format_seconds(r.setup_s)})"
            return f"`{n}` {format_seconds(r.setup_s)} ({_table(r.setup_s / warm)}× floor (a))"
        untimed = [n for n in LATE_UNTIMED if n in fan]  # cold read 11, round 5: say it is not timed
        lines.append("- Fan-outs leave out start-up, where the late pools got the array to their workers: "
                     + "; ".join([*(paid(n) for n in late), *(f"`{n}` not timed apart" for n in untimed)])
                     + ".")
    back = [name for name in RESULT_PICKLED_BACK if name in trip]
    in_place = [name for name in RESULT_WRITTEN_IN_PLACE if name in trip]
    if back and in_place and min(trip[n] for n in back) >= NOISE_FACTOR * max(trip[n] for n in in_place):
        low, high = min(back, key=trip.__getitem__), max(in_place, key=trip.__getitem__)
        lines.append(f"- Share the result too: pickled back through a pipe it took at least "
                     f"{bound(trip[low], low)} floor (b); written into a segment or file "
                     f"made beforehand (untimed), at most {bound(trip[high], high)} (section 3).")
    return "\n".join(lines)


def _at_largest_reference(fan: dict[str, float], groups: Sequence[Sequence[str]], results: Sequence,
                          references: Sequence) -> str:
    """' At 1 GiB the reference: 56× to 73×, 0.93× to 2.5× and 3× to 4.2×, ranked as here.': the
    fan-outs of the takeaway's ``groups`` (the same ways, in the same order) at the reference's largest
    size, where fixed costs per task weigh least; 'ranked as here' when every pair of groups
    ``NOISE_FACTOR`` apart here is in the same order there, else 'not all ranked as here'. "" without a
    reference larger than this run or where a group's ways did not all run there."""
    size = results[0].array_bytes if results else None
    larger = [r for r in references if getattr(r, "size_bytes", 0) > (size or 0)]
    if not larger or not fan:
        return ""
    there = max(larger, key=lambda r: r.size_bytes).fan_out_ran
    if any(name not in there for group in groups for name in group):
        return ""
    ranges = [_range([there[n] for n in group]) for group in groups]
    kept = all(min(there[n] for n in high) > max(there[n] for n in low)
               for high in groups for low in groups
               if min(fan[n] for n in high) >= NOISE_FACTOR * max(fan[n] for n in low))
    listed = ", ".join(ranges[:-1]) + " and " + ranges[-1]
    return (f" At {format_bytes(max(r.size_bytes for r in larger))} the reference: {listed}, "
            + ("ranked as here." if kept else "not all ranked as here."))


def _put_once_outside(results: Sequence, floors: tuple[Timing, Timing], references: Sequence) -> str:
    """' (`ray_object_store`, put once, 17.6×: a fixed cost per task, falling with size in the reference;
    far off the reference, section 6)' when ``RAY_MEASURED`` (one copy, read in place, as the mapped
    ways) ran outside their fan-out range here (as the takeaway prints it): the fixed cost where slower
    and its ratio to the fastest zero-copy way falls size by size in the reference (``_falls``, as
    section 5 reads it), far off where section 6 flags its fan-out; "" otherwise."""
    from helpers.bench.showdown_reference import far_off_rows

    warm = floors[0].median
    done = ran(results)
    fan = {name: r.fan_out.median / warm for name, r in done.items() if r.fan_out is not None}
    mapped = [float(_table(fan[n])) for n in RESULT_WRITTEN_IN_PLACE if n in fan]
    if RAY_MEASURED not in fan or not mapped:
        return ""
    put = float(_table(fan[RAY_MEASURED]))  # as the takeaway prints it
    if min(mapped) <= put <= max(mapped):
        return ""
    why = []
    there = [c for c in claims_by_size(results, references)[1:]
             if RAY_MEASURED in c.medians and _slowest_of_zero_copy(c)]
    if put > max(mapped) and _falls(there, RAY_MEASURED):
        why.append("a fixed cost per task, falling with size in the reference")
    reference = next((r for r in references if r.size_bytes == results[0].array_bytes), None)
    if f"`{RAY_MEASURED}`'s fan-out" in far_off_rows(results, warm, reference):
        why.append("far off the reference, section 6")
    said = f": {'; '.join(why)}" if why else ""
    return f" (`{RAY_MEASURED}`, put once, {_table(fan[RAY_MEASURED])}×{said})"


# Ways whose workers get the array as their pool starts: the fan-out does not time that start-up.
LATE_START = ("fork_cow", "send_once")
# A late pool whose extra start-up is not timed apart: its setup column holds its copy.
LATE_UNTIMED = ("sharedctypes",)
# What the extra start-up of a pool that gets the array as it starts holds, over one started on a stand-in.
START_WHY = {"send_once": "the array pickled to each worker at start",
             "fork_cow": "fork copies no page of it"}
# A late way whose start-up sends the array to every worker as pickle's fan-out does to every task: an
# extra start-up beyond that whole fan-out is said to come from the workers starting one by one.
SENDS_LIKE_PICKLE = ("send_once",)
# Why such a start-up takes longer than pickling the copies (seen with Pool(n, init, (array,)) under
# spawn: Pool() itself returned ~95 ms later per worker with 16 MiB than with 8 items, 1, 2 and 4
# workers): the parent writes each worker's pickled copy into the pipe that starts it, which holds 64
# KiB, so the write waits until that worker's interpreter has started and reads it.
START_SERIAL = "the workers start one by one, each copy waiting until its worker has started"
NOTHING_SET_UP = 1e-4  # seconds: a setup under this made nothing (the array goes with every task)
# ray.put copies the array once into Ray's store, as floor (b) copies it into a new segment. Timed apart
# on a 2-core VM (16 MiB), puts into a fresh store's pages took 1.1x to 1.6x floor (b), puts into
# pages reused from earlier puts 0.3x to 0.45x: which pages a put got is not measured here, so a put
# within NOISE_FACTOR under floor (b) is said not to be bounded by it (cold read 11b: no unshown
# timing quoted), and one further under names the reuse as the likely reason, untimed.
RAY_PUT_LIKE_FLOOR = "Ray's store is not a new segment, so floor (b) does not bound a put"
RAY_PUT_REUSED = ("far under it, likely store pages an earlier put had touched; which pages it got is not "
                  "timed here")
# A late pool's setup is the difference of two pool start-ups, each timed once.
START_DIFFERENCE = "a difference of two start-ups timed once"


START_MARK = "†"  # the setup column's mark on a late pool's extra start-up (cold read 11c)


def _starts_late(name: str) -> bool:
    """Whether the setup column holds ``name``'s extra start-up, not a setup (``setup_is_start``)."""
    from helpers.bench import strategies

    return strategies.STRATEGIES[name].mechanism.setup_is_start


def _unresolved(r, floors: tuple[Timing, Timing]) -> bool:
    """A start-up that sends every worker a copy, measured under those copies' floor: not resolved."""
    return (r.name in SENDS_LIKE_PICKLE and r.setup_s is not None
            and r.setup_s < r.n_workers * floors[0].median)


def setup_note(results: Sequence, floors: tuple[Timing, Timing]) -> str:
    """Plain text, 100 columns, reading the table's setup column (timed once) below the table: the
    copies into a segment or file in
    multiples of floor (b); what stores it once elsewhere (ray.put's in floor (b) when under it); each
    pool that gets the array as it starts, its extra start-up over a pool started on a stand-in, and
    why (send_once's beyond pickle's whole fan-out: ``late_start_markdown``, in section 3); the ways
    that set up nothing."""
    from helpers.bench import strategies

    done = {name: r for name, r in ran(results).items() if r.setup_s is not None}
    if not done:
        return ""
    fresh = floors[1].median
    copy_in = [name for name in RESULT_WRITTEN_IN_PLACE if name in done]
    at_start = [name for name in done if strategies.STRATEGIES[name].mechanism.setup_is_start]
    rest = [name for name in done if name not in copy_in and name not in at_start]
    stored = [name for name in rest if done[name].setup_s >= NOTHING_SET_UP]
    nothing = [name for name in rest if name not in stored]
    pickle = done.get("pickle") or ran(results).get("pickle")
    pickle_fan = pickle.fan_out.median if pickle is not None and pickle.fan_out is not None else None

    def stored_once(name: str) -> str:
        text = f"{name} {format_seconds(done[name].setup_s)}"
        ratio = done[name].setup_s / fresh
        if name == "ray_object_store" and ratio < 1:  # under floor (b): say whether within one run's noise
            why = RAY_PUT_LIKE_FLOOR if ratio * NOISE_FACTOR >= 1 else RAY_PUT_REUSED
            text += f", {format_ratio(ratio)}× floor (b): {why}"
        return text

    def started(name: str) -> str:
        text, why = f"{name} {format_seconds(done[name].setup_s)}", START_WHY.get(name)
        if _unresolved(done[name], floors):  # under its own copies' floor: start-up noise, no figure
            n = done[name].n_workers
            return (f"{name} n/r: not resolved, as {START_DIFFERENCE} came out under its {n} copies' floor "
                    f"({format_seconds(n * floors[0].median)}, {n}× floor (a)): start-up noise hides them")
        if done[name].setup_s < NOTHING_SET_UP:  # no slower than the stand-in's start-up
            return (text + ": no slower than with 8 elements" + (f", as {why}" if why else "")
                    + f" ({START_DIFFERENCE})")
        if (name in SENDS_LIKE_PICKLE and pickle_fan is not None
                and done[name].setup_s > pickle_fan / NOISE_FACTOR):  # a closer one: not "as long as"
            return text + f", {_as_long_as(done[name].setup_s, pickle_fan)}: {START_SERIAL}"
        if name in SENDS_LIKE_PICKLE:
            return text + (f" ({why})" if why else "")
        return text + f", {START_DIFFERENCE}" + (f" ({why})" if why else "")

    sentences = []
    if copy_in:
        sentences.append(f"a copy into a segment or file took "
                         f"{_range([done[name].setup_s / fresh for name in copy_in])} floor (b)")
    sentences += [stored_once(name) for name in stored]
    text = ("Setup (timed once): " + "; ".join(sentences) + ".") if sentences else ""
    if at_start:
        text += (f" Late pools ({START_MARK}), start-up minus that of the same pool given an 8-element "
                 "array: "
                 + "; ".join(started(name) for name in at_start) + ".")
    if nothing:
        most = max(done[name].setup_s for name in nothing)
        text += f" The rest set up nothing ({format_seconds(most)} at most)."
    return textwrap.fill(text.strip(), 100, break_on_hyphens=False)  # no "start-" / "ups" split


def _as_long_as(setup_s: float, pickle_fan_s: float) -> str:
    """'more than twice pickle's whole fan-out (71 ms)' past ``NOISE_FACTOR``, else the ratio: '1.6×
    pickle's whole fan-out (71.7 ms)' (cold read 11c: not 'about as long as')."""
    fan_out = format_seconds(pickle_fan_s)
    if setup_s >= NOISE_FACTOR * pickle_fan_s:
        return f"more than {_factor(NOISE_FACTOR)}× pickle's whole fan-out ({fan_out})"
    return f"{format_ratio(setup_s / pickle_fan_s)}× pickle's whole fan-out ({fan_out})"


def late_start_markdown(results: Sequence) -> str:
    """Markdown: why a pool that pickles the array to each worker as it starts (``SENDS_LIKE_PICKLE``)
    took about as long to start as pickle's whole fan-out, which pickles as many copies, or longer;
    "" when it took under half of it (or either did not run)."""
    done = ran(results)
    pickle = done.get("pickle")
    if pickle is None or pickle.fan_out is None:
        return ""
    slow = [name for name in SENDS_LIKE_PICKLE if name in done and done[name].setup_s is not None
            and done[name].setup_s > pickle.fan_out.median / NOISE_FACTOR]
    return "".join(f" `{name}`'s setup ({format_seconds(done[name].setup_s)}, timed once) took "
                   f"{_as_long_as(done[name].setup_s, pickle.fan_out.median)}, of as many copies: "
                   + START_SERIAL + "." for name in slow)
