"""Draw the course README's top figure from the shipped strategies reference: its time panels alone.

The reference's own figure (``results/<name>.png``, written by ``make bench`` beside its JSON) has a
third panel, the tree's PSS each way adds in arrays: lesson 11's exercise asks the learner to predict
those, so the README shows the times only (``strategies_suite.TIME_PANELS``), drawn by the same code
from the same JSON. ``python -m tools.readme_figure`` redraws it (``results/readme/<name>-time.png``:
a folder of its own, so that every PNG directly in ``results/`` stays a reference's figure beside its
JSON); tests/unit/test_readme.py checks that the README shows it and that it is what this draws.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers.bench import strategies_suite

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "results" / "vm-2026-11-26-strategies.json"


def figure_path(reference: Path = REFERENCE) -> Path:
    """Where the README's figure of ``reference`` lies."""
    return reference.parent / "readme" / f"{reference.stem}-time.png"


def draw(reference: Path = REFERENCE, path: Path | None = None) -> Path:
    """Draw the time panels of ``reference`` at ``path`` (default: ``figure_path``); returns it."""
    doc = json.loads(reference.read_text())
    return strategies_suite.plot_document(doc, path or figure_path(reference),
                                          panels=strategies_suite.TIME_PANELS)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    reference = Path(argv[0]) if argv else REFERENCE
    print(draw(reference))
    return 0


if __name__ == "__main__":
    sys.exit(main())
