"""Execute the lessons in place and store clean outputs (``make notebooks``).

``python -m tools.execute_notebooks execute notebooks/*.ipynb`` runs each notebook top to bottom in a
fresh kernel of this environment, at the size ``helpers.measure.config`` picks (or ``LAB_ARRAY_MB``), and
writes it back with its outputs, minus what should never be stored: widget views and state
(they show "model not found" when reopened) and per-cell execution timestamps. The seconds the run
took go into the notebook's metadata (``lab.run_seconds``), where ``tools.lesson_times`` reads them
for the lesson's header and the README.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CELL_TIMEOUT_SECONDS = 600


def strip_volatile(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove widget state and views and execution timestamps; keep text, images and errors."""
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        kept = []
        for output in cell.outputs:
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                data.pop(WIDGET_VIEW)
                if set(data) <= {"text/plain"}:
                    continue  # a widget's only other output is its repr: drop it whole
            kept.append(output)
        cell.outputs = kept
    return notebook


def execute_in_place(path: Path) -> float:
    """Run the notebook at ``path`` top to bottom and store its outputs; return seconds taken."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_SECONDS,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    notebook.metadata.setdefault("lab", {})["run_seconds"] = round(seconds, 1)  # tools.lesson_times reads it
    nbformat.write(strip_volatile(notebook), path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.execute_notebooks", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("execute", help="run notebooks in place and store their outputs")
    run.add_argument("paths", nargs="+", type=Path, help="notebooks to run, in this order")
    args = parser.parse_args(argv)
    for path in args.paths:
        print(f"{path}: running ...", flush=True)
        seconds = execute_in_place(path)
        print(f"{path}: done in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
