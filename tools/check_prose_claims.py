"""Find comparisons in a lesson's fixed prose that neither the run renders nor a check asserts.

A *What to see* or *Conclusion* paragraph tells the learner what the run shows: "the first bar
stands above the rest", "the tree's PSS grows by about one array", "the fastest". Written once,
such a sentence can be contradicted by the next run, and no figure check sees it (it holds no
number). So every such paragraph in a Markdown cell that makes a comparison (an ordering, a
grouping, a "same", a count of copies) names the asserts that hold it to the run, in a comment
the reader does not see::

    *What to see:* the first bar stands above the rest. <!-- asserted: first-copy-slowest -->

and a check cell of the same lesson carries the same key on the assert that tests exactly that
(usually the check right after it; a paragraph that sums up a plot of earlier sections may name
their checks)::

    assert first > 1.2 * later, (first, later)  # claim: first-copy-slowest

A paragraph a code cell renders from the measured values (``display(Markdown(f"..."))``) is bound
by construction: it says what this run found, so it is listed as rendered and not checked here.

``python -m tools.check_prose_claims notebooks/*.ipynb`` prints every unbound comparison and every
key without its assert, and exits 1 if there is any; ``--list`` prints, per lesson, each paragraph
with its comparisons and the asserts (or the rendering cell) that hold it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

# A paragraph that says what the run shows begins with one of these (italic or bold).
CLAIM_PARAGRAPH = re.compile(r"^\s*[*_]{1,2}(What to see|Conclusion)\b", re.IGNORECASE)
# Words that compare: orderings, groupings, sameness, counts of copies, and where a line sits.
COMPARISON = re.compile(
    r"\b(?:faster|slower|fastest|slowest|quicker|cheaper|costlier|more than|less than|fewer|"
    r"larger|smaller|bigger|higher|lower|above|below|the same|same as|about as|as \w+ as|"
    r"similar|closer|further|apart|twice|half|once per|per worker|one array|one copy|a copy|"
    r"no copy|none of|beats?|wins?|loses|ahead|behind|stays? flat|flat|barely|nearly|grows? by|"
    r"grown by|climbs?|steps? up|sits?|differs?|exceeds?|dominates?|zero-copy|copies|copied)\b",
    re.IGNORECASE)
BOUND = re.compile(r"<!--\s*asserted:\s*([^>]*?)\s*-->")
CLAIM_TAG = re.compile(r"#\s*claim:\s*([\w-]+(?:\s*,\s*[\w-]+)*)")
DETAILS = re.compile(r"<details>.*?</details>", re.DOTALL)
NOT_PROSE = re.compile(r"`[^`]*`|\]\([^)]*\)|<!--.*?-->|<[^>]+>", re.DOTALL)


@dataclass(frozen=True)
class Paragraph:
    """One What to see / Conclusion paragraph of a Markdown cell, with what binds it."""

    notebook: str
    cell: int
    text: str
    comparisons: tuple[str, ...]
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Finding:
    notebook: str
    cell: int
    problem: str
    text: str

    def __str__(self) -> str:
        return f"{self.notebook} cell {self.cell}: {self.problem}: {shorten(self.text)}"


def shorten(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def claim_paragraphs(markdown: str) -> list[str]:
    """The What to see / Conclusion paragraphs of a Markdown cell (its <details> blocks left out)."""
    kept = DETAILS.sub("\n\n", markdown)
    return [part.strip() for part in re.split(r"\n\s*\n", kept) if CLAIM_PARAGRAPH.match(part)]


def comparisons(paragraph: str) -> tuple[str, ...]:
    """The comparing words of a paragraph's prose (inline code, links and comments left out)."""
    prose = NOT_PROSE.sub(" ", paragraph)
    return tuple(dict.fromkeys(match.group(0).lower() for match in COMPARISON.finditer(prose)))


def bound_keys(paragraph: str) -> tuple[str, ...]:
    """The keys the paragraph names in its ``<!-- asserted: ... -->`` comments."""
    return tuple(key.strip() for found in BOUND.findall(paragraph) for key in found.split(",") if key.strip())


def asserted_keys(source: str) -> dict[str, str]:
    """key -> the assert line of a code cell tagged ``# claim: key`` (one line may hold several keys)."""
    found = {}
    for line in source.splitlines():
        tag = CLAIM_TAG.search(line)
        if tag and line.lstrip().startswith("assert"):
            for key in tag.group(1).split(","):
                found[key.strip()] = line.strip()
    return found


def rendered_paragraphs(source: str) -> bool:
    """True when a code cell renders a What to see / Conclusion paragraph from the run's values."""
    return "Markdown(" in source and re.search(r"(What to see|Conclusion)", source) is not None


def read(path: Path) -> tuple[list[Paragraph], list[tuple[int, dict[str, str]]], list[int]]:
    """A notebook's claim paragraphs, its code cells' tagged asserts, and its rendering cells."""
    notebook = nbformat.read(path, as_version=4)
    paragraphs, asserts, rendered = [], [], []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            paragraphs += [Paragraph(path.name, index, text, comparisons(text), bound_keys(text))
                           for text in claim_paragraphs(cell.source)]
        elif cell.cell_type == "code":
            asserts.append((index, asserted_keys(cell.source)))
            if rendered_paragraphs(cell.source):
                rendered.append(index)
    return paragraphs, asserts, rendered


def check_notebook(path: Path) -> list[Finding]:
    """Each unbound comparing paragraph, each key no assert carries, each claim tag no paragraph names."""
    paragraphs, asserts, _ = read(path)
    findings, used = [], set()
    for paragraph in paragraphs:
        if paragraph.comparisons and not paragraph.keys:
            findings.append(Finding(path.name, paragraph.cell,
                                    f"compares ({', '.join(paragraph.comparisons)}) with no assert bound",
                                    paragraph.text))
        for key in paragraph.keys:
            if not any(key in keys for _, keys in asserts):
                problem = f"names {key!r}, which no assert of the lesson carries"
                findings.append(Finding(path.name, paragraph.cell, problem, paragraph.text))
            used.add(key)
    for cell, keys in asserts:
        for key, line in keys.items():
            if key not in used:
                findings.append(Finding(path.name, cell, f"claim {key!r} is bound by no paragraph", line))
    return findings


def listing(path: Path) -> list[str]:
    """Per paragraph: its comparisons and the assert lines that hold it; then the rendering cells."""
    paragraphs, asserts, rendered = read(path)
    lines = [f"== {path.name}"]
    for paragraph in paragraphs:
        lines.append(f"cell {paragraph.cell}: {shorten(paragraph.text, 100)}")
        if not paragraph.comparisons:
            lines.append("    compares nothing")
        for key in paragraph.keys:
            holders = [f"cell {cell}: {keys[key]}" for cell, keys in asserts if key in keys]
            lines.append(f"    {key}: " + ("; ".join(holders) or "NO ASSERT"))
    lines += [f"cell {cell}: rendered from the run" for cell in rendered]
    return lines


def main(argv: list[str] | None = None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    if "--list" in args:
        args.remove("--list")
        for path in args:
            print("\n".join(listing(Path(path))))
        return 0
    findings = [finding for path in args for finding in check_notebook(Path(path))]
    for finding in findings:
        print(finding)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
