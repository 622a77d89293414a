"""What ``python -m helpers.bench`` writes and prints: the JSON document, its table, the PNG figure,
and the comparison with a reference run. The JSON schema is documented in ``results/README.md``.
"""

from __future__ import annotations

import datetime
import json
import socket
from pathlib import Path

from helpers.measure.units import MiB, format_bytes, format_seconds

SCHEMA = "shared-arrays-lab/bench/1"
FLOOR_STYLES = {"floor_warm": ("floor (a): copy into warm memory", "-"),
                "floor_fresh_shm": ("floor (b): copy into a new shm segment", "--")}
# Plotted per panel: rows whose name starts with the prefix; floors are drawn on every panel.
PANELS = (("executor round trip", ("stdlib_", "ours_")), ("pickler reductions", ("reducer_",)))


def default_out_path(suite: str, folder: Path | None = None) -> Path:
    """``results/<host>-<date>-<suite>.json`` under the current folder (date: UTC, YYYY-MM-DD)."""
    day = datetime.datetime.now(datetime.UTC).date().isoformat()
    return (folder or Path("results")) / f"{socket.gethostname()}-{day}-{suite}.json"


def document(suite: str, options: dict, machine: dict, rows: list[dict], targets: list[dict],
             wall_seconds: float) -> dict:
    """The JSON document of one run (see results/README.md)."""
    return {"schema": SCHEMA, "suite": suite,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "options": options, "wall_seconds": wall_seconds, "machine": machine,
            "rows": rows, "targets": targets}


def write_document(path: Path, doc: dict) -> None:
    """Write ``doc`` as indented JSON (the text is built first, so a failure leaves no half file)."""
    text = json.dumps(doc, indent=1, default=str) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def load_reference(path: Path) -> dict:
    """A document written by an earlier run; ValueError (one line) when it is not one."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as error:
        raise ValueError(f"cannot read reference {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"reference {path} is not JSON: {error.msg} at line {error.lineno}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("rows"), list):
        raise ValueError(f"reference {path} is not a benchmark result (schema {SCHEMA!r} expected)")
    return doc


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def format_table(rows: list[dict]) -> str:
    """Rows as a text table, size by size: median, IQR, first run, ratios to floors, speed-up."""
    header = (f"{'size':>9}  {'row':<36} {'median':>9} {'IQR':>9} {'first':>9} "
              f"{'/floor a':>9} {'/floor b':>9} {'vs stdlib':>9}")
    lines = [header, "-" * len(header)]
    for row in sorted(rows, key=lambda r: r["size_bytes"]):
        speedup = row.get("speedup_over_stdlib")
        lines.append(
            f"{format_bytes(row['size_bytes']):>9}  {row['name']:<36} {format_seconds(row['median_s']):>9} "
            f"{format_seconds(row['iqr_s']):>9} {format_seconds(row['first_s']):>9} "
            f"{_ratio(row['ratio_to_warm_floor']):>9} {_ratio(row['ratio_to_fresh_floor']):>9} "
            f"{_ratio(speedup):>9}")
    return "\n".join(lines)


def format_targets(targets: list[dict]) -> str:
    """One line per target: holds or MISSED, with the measured value and the limit."""
    lines = []
    for check in targets:
        target = check["target"]
        if target.endswith("ms") or target.endswith("its last call"):
            value, limit = format_seconds(check["value"]), format_seconds(check["limit"])
        elif target.endswith("(bytes)"):
            value, limit = format_bytes(check["value"]), format_bytes(check["limit"])
        else:
            value, limit = f"{check['value']:.2f}", f"{check['limit']:g}"
        verdict = "holds " if check["holds"] else "MISSED"
        lines.append(f"{verdict} {check['target']:<62} at {format_bytes(check['size_bytes']):>9}: "
                     f"{value} (limit {limit})")
    return "\n".join(lines)


def format_comparison(rows: list[dict], reference: dict) -> str:
    """This run's medians and ratios to floor (a) beside the reference's, row by row."""
    theirs = {(row["name"], row["size_bytes"]): row for row in reference["rows"]}
    host = reference.get("machine", {}).get("host", "reference")
    header = (f"{'size':>9}  {'row':<36} {'here':>9} {'/floor a':>9}   {host[:12]:>12} {'/floor a':>9} "
              f"{'here/ref':>9}")
    lines = [header, "-" * len(header)]
    for row in sorted(rows, key=lambda r: r["size_bytes"]):
        ref = theirs.get((row["name"], row["size_bytes"]))
        ref_cells = f"{'-':>12} {'-':>9} {'-':>9}"
        if ref:
            ref_cells = (f"{format_seconds(ref['median_s']):>12} {_ratio(ref['ratio_to_warm_floor']):>9} "
                         f"{_ratio(row['median_s'] / ref['median_s']):>9}")
        lines.append(f"{format_bytes(row['size_bytes']):>9}  {row['name']:<36} "
                     f"{format_seconds(row['median_s']):>9} {_ratio(row['ratio_to_warm_floor']):>9}   "
                     + ref_cells)
    return "\n".join(lines)


def _series(rows: list[dict]) -> dict[str, tuple[list[float], list[float]]]:
    found: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        found.setdefault(row["name"], []).append((row["size_bytes"] / MiB, row["median_s"]))
    return {name: tuple(map(list, zip(*sorted(points), strict=True))) for name, points in found.items()}


def plot_document(doc: dict, path: Path, reference: dict | None = None) -> Path:
    """Log-log figure of median seconds against size (MiB), floors as lines, one panel per group
    of rows that has data; the reference's series dashed and faint. Saved as PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    here = _series(doc["rows"])
    there = _series(reference["rows"]) if reference else {}
    panels = [(title, prefixes) for title, prefixes in PANELS if any(n.startswith(prefixes) for n in here)]
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 5), layout="constrained",
                             squeeze=False)
    for ax, (title, prefixes) in zip(axes[0], panels, strict=True):
        for name, (label, style) in FLOOR_STYLES.items():
            if name in here:
                ax.plot(*here[name], color="black", linestyle=style, label=label)
        for name, (sizes, seconds) in here.items():
            if not name.startswith(prefixes):
                continue
            (line,) = ax.plot(sizes, seconds, marker="o", label=name)
            if name in there:
                ax.plot(*there[name], color=line.get_color(), linestyle=":", alpha=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("array size (MiB, random float64)")
        ax.set_ylabel("median round trip (s)")
        ax.set_title(title + (" (dotted: reference)" if there else ""))
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    machine = doc.get("machine", {})
    fig.suptitle(f"{doc['suite']} suite on {machine.get('host', '?')}, {doc['created'][:10]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
