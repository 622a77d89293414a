"""The ``strategies`` suite of ``python -m helpers.bench``: every strategy of ``helpers.bench.strategies``
at every size, beside the floors measured in the same run; its rows, table, comparison and figure.

Each strategy row is ``StrategyResult.as_row()`` plus the keys every benchmark row has
(``median_s`` ... of the fan-out, the headline) and ratios of the fan-out and the round trip to
floor (a) and floor (b) at the same size. Seconds and bytes; schema in ``results/README.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from helpers.bench import strategies
from helpers.bench import transport_suite as transport
from helpers.lessons import memmap
from helpers.measure import system
from helpers.measure.units import MiB, format_bytes, format_seconds

DEFAULT_SIZES = "16,128"
DEFAULT_REPEAT = 3
SIZE_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def parse_names(text: str | None) -> list[str]:
    """Strategy names from a comma list (None or "all": every one, in lesson order); ValueError (one
    line listing the valid names) for an unknown one."""
    if text is None or text.strip() == "all":
        return list(strategies.NAMES)
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in strategies.STRATEGIES]
    if unknown or not names:
        raise ValueError(f"unknown strategy {unknown[0] if unknown else text!r}; valid: "
                         f"{','.join(strategies.NAMES)}")
    return list(dict.fromkeys(names))


def _fits(name: str, n_bytes: int, n_workers: int, ram: int, shm: int | None, disk: int) -> bool:
    mechanism = strategies.STRATEGIES[name].mechanism
    if mechanism.missing():
        return True  # skipped with its reason whatever the size
    needs = mechanism.needs(n_bytes, n_workers)
    return (mechanism.too_big(n_bytes, n_workers) is None and needs.ram <= ram
            and (not needs.shm or (shm is not None and needs.shm <= shm)) and needs.disk <= disk)


def _free() -> tuple[int, int | None, int]:
    try:
        disk = memmap.free_bytes(memmap.disk_parent())
    except FileNotFoundError:
        disk = 0
    return system.available_memory(), system.shm_free(), disk


def largest_size_that_fits(names: list[str], n_workers: int) -> int:
    """Bytes (whole MiB) of the largest array every strategy in ``names`` can run with now."""
    free = _free()
    low, high = 0, max(1, free[0] // MiB)
    while low < high:
        middle = (low + high + 1) // 2
        if all(_fits(name, middle * MiB, n_workers, *free) for name in names):
            low = middle
        else:
            high = middle - 1
    return low * MiB


def check_sizes_fit(sizes: list[int], names: list[str], n_workers: int) -> None:
    """ValueError (one line naming what fits) when a size needs more RAM, /dev/shm or disk than free now
    for one of the strategies chosen."""
    free = _free()
    for n_bytes in sizes:
        failing = [name for name in names if not _fits(name, n_bytes, n_workers, *free)]
        if failing:
            fits = largest_size_that_fits(names, n_workers)
            raise ValueError(
                f"size {n_bytes / MiB:g} MiB does not fit for {','.join(failing)} with {n_workers} workers "
                f"({format_bytes(free[0])} RAM available, {format_bytes(free[1] or 0)} free in /dev/shm); "
                f"sizes up to {fits // MiB} MiB fit for the strategies chosen")


def _ratio(value: float | None, floor: float) -> float | None:
    return None if value is None else value / floor


def strategy_row(result: strategies.StrategyResult, floors: dict) -> dict:
    """One strategy's row: ``as_row()``, the fan-out as the row's median/spread, ratios to the floors."""
    row = result.as_row()
    warm, fresh = floors["warm"].median, floors["fresh_shm"].median
    row.update(median_s=row["fan_out_median_s"], spread="iqr", iqr_s=row["fan_out_iqr_s"],
               min_s=row["fan_out_min_s"], max_s=row["fan_out_max_s"], runs_s=row["fan_out_runs_s"],
               first_s=None, what=f"fan-out: each of {result.n_workers} workers sums the whole array",
               ratio_to_warm_floor=_ratio(row["fan_out_median_s"], warm),
               ratio_to_fresh_floor=_ratio(row["fan_out_median_s"], fresh),
               round_trip_ratio_to_warm_floor=_ratio(row["round_trip_median_s"], warm),
               round_trip_ratio_to_fresh_floor=_ratio(row["round_trip_median_s"], fresh),
               pss_added_arrays=_ratio(row["pss_added_bytes"], result.array_bytes),
               peak_tree_pss_bytes=row["peak_pss_added_bytes"], peak_shm_bytes=row["shm_added_bytes"])
    return row


def _run_one(name: str, array: np.ndarray, n_workers: int, repeat: int) -> strategies.StrategyResult:
    """``run_strategy``; a strategy that fails (it has cleaned up) becomes a skipped row saying why,
    so that one failure does not lose the whole run."""
    try:
        return strategies.run_strategy(name, array, n_workers, repeat)
    except Exception as error:
        strategy = strategies.STRATEGIES[name]
        return strategies.StrategyResult(name, strategy.title, array.nbytes, n_workers,
                                         skipped=f"failed: {type(error).__name__}: {error}")


def run(sizes: list[int], names: list[str], n_workers: int, repeat: int, bar) -> list[dict]:
    """Floors then every strategy, size after size; ``bar`` (tqdm) advances once per strategy."""
    rows: list[dict] = []
    for n_bytes in sizes:
        label = format_bytes(n_bytes)
        bar.set_description(f"{label}: floors")
        array = np.random.default_rng(n_bytes).random(n_bytes // 8)
        floors = transport.measure_floors(array, repeat=max(repeat, 5))
        rows += transport.floor_rows(array.nbytes, floors)
        for name in names:
            bar.set_description(f"{label}: {name}")
            rows.append(strategy_row(_run_one(name, array, n_workers, repeat), floors))
            bar.update()
        del array
    return rows


def _cell(value: float | None, fmt: Callable[[float], str]) -> str:
    return "-" if value is None else fmt(value)


def _x(value: float) -> str:
    return f"{value:.2f}x"


FAN_OUT_LEGEND = "fan-out: every worker sums the whole array"


def format_table(rows: list[dict], fan_out_legend: str = FAN_OUT_LEGEND) -> str:
    """The showdown, size by size: fan-out and round trip medians, their ratios to floors (a) and (b),
    memory added (arrays), /dev/shm added, setup; skipped strategies with their reason."""
    header = (f"{'size':>9}  {'strategy':<22} {'fan-out':>9} {'/a':>8} {'/b':>7} {'round trip':>10} "
              f"{'/a':>8} {'/b':>7} {'PSS +':>7} {'shm +':>9} {'setup':>9}")
    lines = [header, "-" * len(header)]
    for row in sorted(rows, key=lambda r: r["size_bytes"]):
        if row["name"].startswith("floor_"):
            lines.append(f"{format_bytes(row['size_bytes']):>9}  {row['name']:<22} "
                         f"{format_seconds(row['median_s']):>9}")
            continue
        start = f"{format_bytes(row['size_bytes']):>9}  {row['name']:<22} "
        if row["skipped"]:
            lines.append(start + f"skipped: {row['skipped']}")
            continue
        lines.append(start + f"{format_seconds(row['median_s']):>9} {_x(row['ratio_to_warm_floor']):>8} "
                     f"{_x(row['ratio_to_fresh_floor']):>7} "
                     f"{_cell(row['round_trip_median_s'], format_seconds):>10} "
                     f"{_cell(row['round_trip_ratio_to_warm_floor'], _x):>8} "
                     f"{_cell(row['round_trip_ratio_to_fresh_floor'], _x):>7} "
                     f"{_cell(row['pss_added_arrays'], lambda v: f'{v:.2f}'):>7} "
                     f"{_cell(row['shm_added_bytes'], format_bytes):>9} "
                     f"{_cell(row['setup_s'], format_seconds):>9}")
    lines.append(f"{fan_out_legend}; /a, /b: median over floor (a) warm copy, "
                 "(b) copy into a new segment; PSS +: tree PSS added while every worker holds it, in arrays")
    return "\n".join(lines)


def format_comparison(rows: list[dict], reference: dict) -> str:
    """This run's fan-out and round-trip ratios to floor (a) beside the reference's, row by row."""
    theirs = {(row["name"], row["size_bytes"]): row for row in reference["rows"]}
    host = str(reference.get("machine", {}).get("host", "reference"))[:12]
    header = (f"{'size':>9}  {'strategy':<22} {'fan-out/a':>10} {host:>12} {'round trip/a':>13} {host:>12}")
    lines = [header, "-" * len(header)]
    for row in sorted(rows, key=lambda r: r["size_bytes"]):
        if row["name"].startswith("floor_"):
            continue
        ref = theirs.get((row["name"], row["size_bytes"]), {})
        lines.append(f"{format_bytes(row['size_bytes']):>9}  {row['name']:<22} "
                     f"{_cell(row.get('ratio_to_warm_floor'), _x):>10} "
                     f"{_cell(ref.get('ratio_to_warm_floor'), _x):>12} "
                     f"{_cell(row.get('round_trip_ratio_to_warm_floor'), _x):>13} "
                     f"{_cell(ref.get('round_trip_ratio_to_warm_floor'), _x):>12}")
    return "\n".join(lines)


PANELS = (("median_s", "fan-out: every worker sums the whole array (s, log)", True),
          ("round_trip_median_s", "round trip: one worker returns a same-size array (s, log)", True),
          ("pss_added_arrays", "tree PSS added while every worker holds it (arrays)", False))
# The course README's figure: the time panels alone, as the memory each way adds is lesson 11's exercise.
TIME_PANELS = PANELS[:2]


def plot_document(doc: dict, path: Path, reference: dict | None = None,
                  panels: tuple[tuple[str, str, bool], ...] = PANELS) -> Path:
    """Three panels over the strategies (x): fan-out and round-trip medians (log scale, the floors as
    lines in each size's colour) and the PSS added in arrays; one colour per size; the
    reference's values as grey crosses. ``panels``: which of them (``TIME_PANELS``: the times
    alone). Saved as PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [row for row in doc["rows"] if not row["name"].startswith("floor_")]
    names = list(dict.fromkeys(row["name"] for row in rows))
    sizes = sorted({row["size_bytes"] for row in rows})
    theirs = {(r["name"], r["size_bytes"]): r for r in (reference or {}).get("rows", [])}
    floors = {(r["name"], r["size_bytes"]): r["median_s"] for r in doc["rows"]
              if r["name"].startswith("floor_")}
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(9.0, 0.9 * len(names) + 4.5), 13 * len(panels) / 3),
                             layout="constrained", squeeze=False)
    axes = axes[:, 0]
    width = 0.8 / max(1, len(sizes))
    for ax, (key, title, log) in zip(axes, panels, strict=True):
        for s, n_bytes in enumerate(sizes):
            color = SIZE_COLORS[s % len(SIZE_COLORS)]
            offset = (s - (len(sizes) - 1) / 2) * width
            mine = {r["name"]: r for r in rows if r["size_bytes"] == n_bytes}
            xs = [i + offset for i, name in enumerate(names) if mine.get(name, {}).get(key) is not None]
            ys = [mine[name][key] for name in names if mine.get(name, {}).get(key) is not None]
            ax.bar(xs, ys, width=width, color=color, label=format_bytes(n_bytes))
            ref = [(i + offset, theirs[(name, n_bytes)][key]) for i, name in enumerate(names)
                   if theirs.get((name, n_bytes), {}).get(key) is not None]
            if ref:
                ax.plot(*zip(*ref, strict=True), "x", color="black", alpha=0.6,
                        label="reference" if s == 0 else None)
            if log:
                for floor, style in (("floor_warm", "-"), ("floor_fresh_shm", "--")):
                    if (floor, n_bytes) in floors:
                        ax.axhline(floors[(floor, n_bytes)], color=color, linestyle=style, linewidth=1)
        if log:
            ax.plot([], [], color="black", linestyle="-", linewidth=1, label="floor (a): warm copy")
            ax.plot([], [], color="black", linestyle="--", linewidth=1, label="floor (b): new segment")
        ax.set_yscale("log" if log else "linear")
        ax.set_ylabel("seconds" if log else "arrays")
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
        ax.set_title(title)
        ax.grid(True, axis="y", which="major", alpha=0.3)
        ax.legend(fontsize=8, title="array size\n(lines: floors\nin its colour)" if log else "array size",
                  title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    machine = doc.get("machine", {})
    fig.suptitle(f"{doc['suite']} suite on {machine.get('host', '?')}, {doc['created'][:10]}, "
                 f"{doc['options'].get('workers')} workers")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
