"""The reference results lesson 11 compares with: the newest ``results/*-strategies.json``.

``python -m helpers.bench --suite strategies`` (``make bench``) writes one JSON file per machine
and day into ``results/``; ``newest_reference()`` picks the newest one shipped (by the date in its
name, then its ``created`` time), ``load_reference()`` reads it into fan-out and round-trip
medians per strategy at one size, each as a ratio to that machine's own floor (a) measured in the
same run; ``load_every_size()`` reads it at each of its sizes. ``compare()`` sets this run beside
it, ratio against ratio (never seconds against seconds: the machines differ). When no reference is
shipped yet, they say so instead of failing.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from helpers.measure.timing import Timing
from helpers.measure.units import format_bytes, format_ratio, format_seconds

RESULTS = Path(__file__).resolve().parents[2] / "results"
PATTERN = "*-strategies.json"
RERUN = "make bench  (or: .venv/bin/python -m helpers.bench --suite strategies)"
_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})-strategies\.json$")


@dataclass(frozen=True)
class Reference:
    """One reference run at one size: ratios to its own floor (a), by strategy name.

    ``fan_out`` and ``round_trip`` map a strategy name to its median over floor (a) (None where
    that strategy did not run or returns nothing); ``pss_added`` to what the tree's PSS added while
    every worker held the array, in arrays (None: not measured), ``setup_s`` to its setup's seconds;
    ``skipped`` maps a name to the reason.
    """

    path: Path
    host: str
    created: str
    size_bytes: int
    n_workers: int | None
    floor_warm_s: float
    fan_out: dict[str, float | None]
    round_trip: dict[str, float | None]
    skipped: dict[str, str]
    pss_added: dict[str, float | None] = field(default_factory=dict)
    setup_s: dict[str, float | None] = field(default_factory=dict)  # seconds, by strategy name
    floor_fresh_s: float | None = None  # floor (b): a copy into a new segment, seconds (None: not stored)

    @property
    def fan_out_ran(self) -> dict[str, float]:
        """``fan_out`` of the strategies that ran there (ratios to its floor (a))."""
        return {name: ratio for name, ratio in self.fan_out.items() if ratio is not None}


def newest_reference(folder: Path = RESULTS) -> Path | None:
    """The newest ``*-strategies.json`` in ``folder`` (by the date in its name, then its name), or
    None when none is shipped."""
    files = sorted(Path(folder).glob(PATTERN),
                   key=lambda p: ((m.group(1) if (m := _DATE.search(p.name)) else ""), p.name))
    return files[-1] if files else None


def _floor(rows: list[dict], size: int, data: dict) -> float | None:
    for row in rows:
        if row.get("name") in ("floor_warm", "floor_a") and row.get("size_bytes") == size:
            return row.get("median_s")
    floors = data.get("floors")
    if isinstance(floors, dict):  # {"<size>": {"warm": {"median_s": ...}}} or {"warm_s": ...}
        entry = floors.get(str(size), floors)
        warm = entry.get("warm") or entry.get("floor_warm") or entry.get("warm_s")
        return warm.get("median_s") if isinstance(warm, dict) else warm
    return None


def _floor_fresh(rows: list[dict], size: int) -> float | None:
    """Floor (b)'s median seconds at ``size`` (a copy into a new shm segment), or None."""
    for row in rows:
        if row.get("name") in ("floor_fresh_shm", "floor_b") and row.get("size_bytes") == size:
            return row.get("median_s")
    return None


def _strategy_rows(path: Path) -> tuple[dict, list[dict], list[dict]]:
    """(the JSON, all its rows, its strategy rows); ValueError when it holds no strategy rows."""
    from helpers.bench.strategies import NAMES

    data = json.loads(Path(path).read_text())
    rows = [row for row in data.get("rows", []) if isinstance(row, dict)]
    strategy_rows = [row for row in rows if row.get("name") in NAMES and row.get("size_bytes")]
    if not strategy_rows:
        raise ValueError(f"{Path(path).name} holds no strategy rows")
    return data, rows, strategy_rows


def sizes_in(path: Path) -> list[int]:
    """Every array size (bytes) the reference in ``path`` measured, smallest first."""
    return sorted({row["size_bytes"] for row in _strategy_rows(path)[2]})


def load_reference(path: Path, size_bytes: int) -> Reference:
    """The run in ``path`` at the size nearest ``size_bytes`` (by ratio), as ratios to its floor (a).

    Reads the ``rows`` of ``helpers.bench``'s JSON: strategy rows as ``StrategyResult.as_row()``
    (``name``, ``size_bytes``, ``fan_out_median_s``, ``round_trip_median_s``, ``skipped``) and
    floor rows (``floor_warm``, ``median_s``). Raises ValueError when it holds no strategy rows."""
    data, rows, strategy_rows = _strategy_rows(path)
    sizes = sorted({row["size_bytes"] for row in strategy_rows})
    size = min(sizes, key=lambda s: max(s, size_bytes) / min(s, size_bytes))
    at_size = [row for row in strategy_rows if row["size_bytes"] == size]
    floor = _floor(rows, size, data)
    if not floor:
        raise ValueError(f"{Path(path).name} holds no floor (a) at {format_bytes(size)}")

    def ratio(row: dict, key: str) -> float | None:
        value = row.get(key)
        return None if value is None or row.get("skipped") else value / floor

    machine = data.get("machine") or {}
    host = machine.get("host") or machine.get("hostname") or Path(path).name.split("-")[0]
    return Reference(
        path=Path(path), host=str(host),
        created=str(data.get("created", "")), size_bytes=size,
        n_workers=at_size[0].get("n_workers") or (data.get("options") or {}).get("workers"),
        floor_warm_s=floor,
        fan_out={row["name"]: ratio(row, "fan_out_median_s") for row in at_size},
        round_trip={row["name"]: ratio(row, "round_trip_median_s") for row in at_size},
        skipped={row["name"]: row["skipped"] for row in at_size if row.get("skipped")},
        pss_added={row["name"]: None if row.get("pss_added_bytes") is None or row.get("skipped")
                   else row["pss_added_bytes"] / size for row in at_size},
        setup_s={row["name"]: None if row.get("skipped") else row.get("setup_s") for row in at_size},
        floor_fresh_s=_floor_fresh(rows, size))


def load_newest(size_bytes: int, folder: Path = RESULTS) -> Reference | str:
    """The newest reference in ``folder`` at the size nearest ``size_bytes``; or, when none is
    shipped or it cannot be read, one sentence saying so (never raises)."""
    path = newest_reference(folder)
    if path is None:
        return f"No reference results shipped in results/ yet ({PATTERN})."
    try:
        return load_reference(path, size_bytes)
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as error:
        return f"The reference {path.name} could not be read ({type(error).__name__}: {error})."


def load_every_size(folder: Path = RESULTS) -> list[Reference] | str:
    """The newest reference in ``folder`` at each of its sizes, smallest first; or, when none is
    shipped or it cannot be read, one sentence saying so (never raises)."""
    path = newest_reference(folder)
    if path is None:
        return f"No reference results shipped in results/ yet ({PATTERN})."
    try:
        return [load_reference(path, size) for size in sizes_in(path)]
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as error:
        return f"The reference {path.name} could not be read ({type(error).__name__}: {error})."


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}×"


def compare(results: Sequence, floors: tuple[Timing, Timing], reference: Reference | str | None) -> str:
    """This run's fan-out and round trip beside the reference's, each over its own floor (a), one
    row per strategy of either ("-": not run there); or, for no reference (None or the sentence of
    ``load_newest``), that sentence and how to make one."""
    if not isinstance(reference, Reference):
        why = reference or f"No reference results shipped in results/ yet ({PATTERN})."
        return f"{why} Make one with: {RERUN}"
    warm = floors[0].median
    head = (f"Reference: {reference.path.name} ({reference.host}, {format_bytes(reference.size_bytes)}, "
            f"{reference.n_workers} workers); this run: {format_bytes(results[0].array_bytes)}, "
            f"{results[0].n_workers} workers. Ratios to each machine's own floor (a).")
    header = (f"{'strategy':<24} {'fan-out here':>13} {'reference':>10} {'round trip here':>16} "
              f"{'reference':>10}")
    lines = [head, header, "-" * len(header)]
    here = {r.name: r for r in results}
    for name in [*here, *(name for name in reference.fan_out if name not in here)]:
        r = here.get(name)
        here_fan = None if r is None or r.fan_out is None else r.fan_out.median / warm
        here_trip = None if r is None or r.round_trip is None else r.round_trip.median / warm
        lines.append(f"{name:<24} {_cell(here_fan):>13} {_cell(reference.fan_out.get(name)):>10} "
                     f"{_cell(here_trip):>16} {_cell(reference.round_trip.get(name)):>10}")
    return "\n".join(lines)


def _possessive(name: str) -> str:
    return "'" if name.endswith("s") else "'s"


def _ratios_here_over_there(results: Sequence, warm: float, reference: Reference) -> dict[str, float]:
    """Every fan-out and round trip that ran both here and there, named "<strategy>'s fan-out" or
    "<strategy>'s round trip": (here / floor (a)) over the reference's (its own floor (a))."""
    ratios = {}
    for r in results:
        for what, timing, there in (("fan-out", r.fan_out, reference.fan_out.get(r.name)),
                                    ("round trip", r.round_trip, reference.round_trip.get(r.name))):
            if timing is not None and there:
                ratios[f"`{r.name}`{_possessive(r.name)} {what}"] = timing.median / warm / there
    return ratios


def _seconds_here_and_there(results: Sequence, warm: float, reference: Reference
                            ) -> dict[str, tuple[float, float]]:
    """The rows of ``_ratios_here_over_there`` as (seconds here, seconds there: its ratio times its
    floor (a))."""
    seconds = {}
    for r in results:
        for what, timing, there in (("fan-out", r.fan_out, reference.fan_out.get(r.name)),
                                    ("round trip", r.round_trip, reference.round_trip.get(r.name))):
            if timing is not None and there:
                row = f"`{r.name}`{_possessive(r.name)} {what}"
                seconds[row] = (timing.median, there * reference.floor_warm_s)
    return seconds


def _where(reference: Reference) -> str:
    """'`vm`, 2026-11-26' for the reference (its host and the date in its name, else its created time)."""
    found = _DATE.search(reference.path.name)
    return f"`{reference.host}`, {found.group(1) if found else reference.created[:10]}"


FAR_OFF = 2.0  # a row whose ratio here over there is this far above the rows' median: likely noise


def far_off(results: Sequence, warm: float, reference: Reference) -> tuple[str, float, float] | None:
    """The row (as ``_ratios_here_over_there`` names it) whose ratio here over there is furthest above
    the rows' median, with that ratio and its multiple of the median, when ``FAR_OFF`` or more above
    it (far from what the machines' difference predicts); None otherwise, or without a row in both."""
    ratios = _ratios_here_over_there(results, warm, reference) if isinstance(reference, Reference) else {}
    if not ratios:
        return None
    median = statistics.median(ratios.values())
    high = max(ratios, key=ratios.__getitem__)
    return None if ratios[high] < FAR_OFF * median else (high, ratios[high], ratios[high] / median)


def far_off_rows(results: Sequence, warm: float, reference: Reference | str | None) -> list[str]:
    """Every row (as ``_ratios_here_over_there`` names it) whose ratio here over there is ``FAR_OFF``
    or more above the rows' median, furthest first; [] without a row in both."""
    ratios = _ratios_here_over_there(results, warm, reference) if isinstance(reference, Reference) else {}
    if not ratios:
        return []
    median = statistics.median(ratios.values())
    return sorted((name for name in ratios if ratios[name] >= FAR_OFF * median), key=ratios.__getitem__,
                  reverse=True)


def far_off_names(results: Sequence, warm: float, reference: Reference | str | None, what: str) -> list[str]:
    """The strategies whose ``what`` ("fan-out" or "round trip") is one of ``far_off_rows``, furthest
    first: the flag every place that quotes such a figure carries."""
    return [row.split("`")[1] for row in far_off_rows(results, warm, reference) if row.endswith(what)]


def _far_off(results: Sequence, warm: float, reference: Reference) -> str:
    """'. `joblib`'s round trip ran 6.8× the reference's ratio, 2.6 times the median: rerun before you
    trust it' for ``far_off``'s row; "" when there is none."""
    row = far_off(results, warm, reference)
    if row is None:
        return ""
    ratios = _ratios_here_over_there(results, warm, reference)
    median = statistics.median(ratios.values())
    rows = far_off_rows(results, warm, reference)  # every row this far off, not only the furthest (11b)
    if len(rows) == 1:
        return (f". {row[0]} ran {format_ratio(row[1])}× the reference's ratio, {format_ratio(row[2])} "
                "times the median: rerun before you trust it")
    said = _and_join([f"{name} ({format_ratio(ratios[name])}×, {format_ratio(ratios[name] / median)} times "
                      "the median)" for name in rows])
    return f". {said} ran far above the reference's ratio: rerun before you trust them"


def _and_join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _orders_kept(results: Sequence, reference: Reference) -> str:
    """'of the 40 pairs of fan-outs 2× or more apart here, 38 are in the same order there'."""
    here = {r.name: r.fan_out.median for r in results
            if r.fan_out is not None and reference.fan_out.get(r.name)}
    apart = [(a, b) for a in here for b in here if here[a] >= 2 * here[b]]
    kept = sum(reference.fan_out[a] > reference.fan_out[b] for a, b in apart)
    return (f"of the {len(apart)} pairs of fan-outs 2× or more apart here, "
            f"{'all' if kept == len(apart) else kept} {'are' if kept != 1 else 'is'} in the same order there")


def _row_seconds(name: str, pair: tuple[float, float]) -> str:
    return f"{name}: {format_seconds(pair[0])} here, {format_seconds(pair[1])} there"


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _new_pages(floors: tuple[Timing, Timing], reference: Reference, speed: float) -> str:
    """'; into a new segment only 1.3× faster (floor (b): 14.9× floor (a) here, 4.82× there): new pages
    cost relatively more here': floor (b) over floor (a) on each machine, worded by the measured
    direction (cold read 11, F2); "" where the reference stores no floor (b) at that size."""
    fresh_there = reference.floor_fresh_s
    if not fresh_there or floors[1].median is None:
        return ""
    here, there = floors[1].median / floors[0].median, fresh_there / reference.floor_warm_s
    fresh_speed = speed * there / here  # our new-segment copy rate over theirs
    fresh = (f"{format_ratio(fresh_speed)}× faster" if fresh_speed >= 1
             else f"{format_ratio(1 / fresh_speed)}× slower")
    only = "only " if fresh_speed >= 1 and here > there else ""
    return (f"; into a new segment {only}{fresh} (floor (b): {here:.3g}× floor (a) here, "  # as the table
            f"{there:.3g}× there): new pages cost relatively {'more' if here > there else 'less'} "
            "here")


def floors_markdown(results: Sequence, floors: tuple[Timing, Timing], reference: Reference | str | None,
                    here: str | None = None) -> str:
    """Markdown: floor (a) in this run (on ``here``: the host and today's date unless given) and in
    the ``reference`` (its host and date), how many times faster one machine copies memory, what
    that predicts for a row (1× for pure copying, that factor for a pure fixed cost), and, row by
    row, this run's ratios over the reference's: the median and the range, its ends named with their
    seconds, and how many rows fall outside the prediction; "" without a reference or a row run in
    both."""
    import datetime
    import socket

    if not isinstance(reference, Reference) or not results:
        return ""
    warm, size = floors[0].median, results[0].array_bytes
    ratios = _ratios_here_over_there(results, warm, reference)
    if not ratios:
        return ""
    seconds = _seconds_here_and_there(results, warm, reference)
    here = here or f"`{socket.gethostname()}`, {datetime.date.today().isoformat()}"
    speed = reference.floor_warm_s / warm * size / reference.size_bytes  # our copy rate over theirs
    factor = format_ratio(max(speed, 1 / speed))
    median = statistics.median(ratios.values())
    low, high = min(ratios, key=ratios.__getitem__), max(ratios, key=ratios.__getitem__)
    there = format_seconds(reference.floor_warm_s)
    if speed >= 1 and median > 1:  # ratios read higher here: floor (b) beside it, no other cause timed apart
        return (f"This run's machine copies {factor}× faster than the reference's (floor (a): "
                f"{format_seconds(warm)} here; {there} on {_where(reference)})"
                + _new_pages(floors, reference, speed) + "; ratios here run higher "
                f"({format_ratio(median)}× the reference's at the median). Compare orders, not ratios: "
                + _orders_kept(results, reference) + _far_off(results, warm, reference) + ".")
    text = (f"Floor (a): {format_seconds(warm)} in this run ({here}), {there} in the reference "
            f"({_where(reference)}, README's machine table): this run's machine copies "
            f"{factor}× {'faster' if speed >= 1 else 'slower'}. A row that only copies would read 1× here "
            f"over there; one of fixed costs only (a task's start, a message), {factor}×. Row by row: "
            f"{format_ratio(median)}× at the median, from {format_ratio(ratios[low])}× "
            f"({_row_seconds(low, seconds[low])}) to {format_ratio(ratios[high])}× "
            f"({_row_seconds(high, seconds[high])}).")
    top, bottom = max(speed, 1.0), min(speed, 1.0)
    beyond = "by more than the copy rate"  # past the end the copy rate sets, not the one of equal seconds
    above = sum(ratio > top for ratio in ratios.values())
    below = sum(ratio < bottom for ratio in ratios.values())
    outside = []
    if above:
        outside.append(f"{above} of {len(ratios)} rows above {format_ratio(top)}× (slower here "
                       f"{'in seconds too' if speed >= 1 else beyond})")
    if below:
        outside.append(f"{below} under {format_ratio(bottom)}× (faster here "
                       f"{beyond if speed >= 1 else 'in seconds too'})")
    if outside:
        text += f" {_and(outside)}: rerun, or raise `REPEAT`, before reading one row."
    return text
