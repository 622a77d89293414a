"""Find figures in a lesson's prose that look measured but come neither from this run nor from a source.

A lesson's Markdown cells are fixed text: a number in them about this machine goes stale with the
next run. Figures about this run belong in output rendered from the measured values (a code cell
that displays Markdown built from its variables); a figure from elsewhere (the reference machine,
a blog post, a library's documentation) names its source in the same sentence. This tool flags
every figure in a Markdown cell that has a unit of size, time or rate (``64 MiB``, ``3.5 ms``,
``1.3 GiB/s``) or is a ratio (``7.0x``, ``10×``, ``ten times``) and whose sentence has no source:
a link, or one of the words in ``SOURCE_WORDS``. Inline code (`` `LAB_ARRAY_MB=16` ``), link
targets and HTML tags are not prose and are skipped.

``python -m tools.check_prose_figures notebooks/*.ipynb`` prints each unsourced figure with its
notebook, cell and sentence, and exits 1 if there is any.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

UNIT = r"(?:[KMGT]i?B|[kMG]B|B|ns|µs|us|ms|s|min|GB/s|[KMG]iB/s|%)"
FIGURE = re.compile(
    r"(?<![\w.])(\d+(?:[.,]\d+)*)\s?(" + UNIT + r")(?![\w/])"  # a number with a unit
    r"|(?<![\w.])(\d+(?:\.\d+)?)\s?(?:x|×)(?!\w)"  # a ratio: 7.0x, 10×
    r"|\b(two|three|four|five|six|seven|eight|nine|ten|a hundred|hundred|\d+)\s+times\b",
    re.IGNORECASE,
)
SOURCE_WORDS = ("docs", "documentation", "reference machine", "reference results", "source:",
                "according to", "reports", "reported", "default", "per the", "measured on", "blog",
                "pep ", "paper", "manual", "word count", "words a minute")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])|\n\s*\n|\n\s*[-*|#]")
NOT_PROSE = re.compile(r"`[^`]*`|\]\([^)]*\)|<[^>]+>|https?://\S+")


@dataclass(frozen=True)
class Finding:
    notebook: str
    cell: int
    figure: str
    sentence: str

    def __str__(self) -> str:
        return f"{self.notebook} cell {self.cell}: {self.figure!r} in: {self.sentence}"


def sentences(text: str) -> list[str]:
    """The Markdown text cut into sentences, list items, table rows and headings."""
    return [part.strip() for part in SENTENCE_END.split(text) if part and part.strip()]


def has_source(sentence: str) -> bool:
    """True when the sentence names where its figures come from: a link or a source word."""
    lowered = sentence.lower()
    return "](" in sentence or "http" in lowered or any(word in lowered for word in SOURCE_WORDS)


def unsourced_figures(markdown: str) -> list[tuple[str, str]]:
    """(figure, sentence) for every measured-looking figure of ``markdown`` without a source."""
    found = []
    for sentence in sentences(markdown):
        prose = NOT_PROSE.sub(" ", sentence)
        figures = [match.group(0) for match in FIGURE.finditer(prose)]
        if figures and not has_source(sentence):
            found.extend((figure, " ".join(sentence.split())) for figure in figures)
    return found


def check_notebook(path: Path) -> list[Finding]:
    """Every unsourced figure in the Markdown cells of the notebook at ``path``."""
    notebook = nbformat.read(path, as_version=4)
    return [Finding(path.name, index, figure, sentence)
            for index, cell in enumerate(notebook.cells) if cell.cell_type == "markdown"
            for figure, sentence in unsourced_figures(cell.source)]


def main(argv: list[str] | None = None) -> int:
    paths = [Path(arg) for arg in (argv if argv is not None else sys.argv[1:])]
    findings = [finding for path in paths for finding in check_notebook(path)]
    for finding in findings:
        print(finding)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
