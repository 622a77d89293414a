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

A paragraph a code cell renders from the measured values (``display(Markdown(f"..."))``) says what
this run found, but only in what the values choose: "{ratio}× faster than" prints "0.8× faster" on a
run where it was slower. So a rendering cell's fixed words are checked too: a comparing word in the
text it passes to ``Markdown`` (the literals of the call and of the names the call uses, set in the
same cell) is either chosen by the values (a branch of a conditional expression, ``"faster" if ...
else "slower"``), a ratio written so that any value reads true ("{ratio}× as long as"), or named by
the asserts that hold it, in a comment of the cell::

    display(Markdown(f"Protocol 5 was {ratio:.1f}× faster."))  # asserted: protocol-5-faster

``python -m tools.check_prose_claims notebooks/*.ipynb`` prints every unbound comparison and every
key without its assert, and exits 1 if there is any; ``--list`` prints, per lesson, each paragraph
with its comparisons and the asserts (or the rendering cell) that hold it.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

# A paragraph that says what the run shows begins with one of these (italic or bold).
CLAIM_PARAGRAPH = re.compile(r"^\s*[*_]{1,2}(What to see|Conclusion|Found)\b", re.IGNORECASE)
# Words that compare: orderings, groupings, sameness, counts of copies, and where a line sits.
COMPARISON = re.compile(
    r"\b(?:faster|slower|fastest|slowest|quicker|cheaper|costlier|more than|less than|fewer|"
    r"larger|smaller|bigger|higher|lower|above|below|the same|same as|about as|as \w+ as|"
    r"similar|closer|further|apart|twice|half|once per|per worker|one array|one copy|a copy|"
    r"no copy|none of|beats?|wins?|loses|ahead|behind|stays? flat|flat|barely|nearly|grows? by|"
    r"grown by|climbs?|steps? up|sits?|differs?|exceeds?|dominates?|zero-copy|copies|copied)\b",
    re.IGNORECASE)
BOUND = re.compile(r"<!--\s*asserted:\s*([^>]*?)\s*-->")
# In a rendering cell: the comment that names the asserts holding its fixed comparing words.
RENDER_BOUND = re.compile(r"#\s*asserted:\s*([\w-]+(?:\s*,\s*[\w-]+)*)")
# A rendered ratio that reads true whatever its value: "{ratio}× as long as", "{ratio}× the time of".
NEUTRAL_RATIO = re.compile(r"×\**\s*(?:as \w+ as|the \w+ of)\b", re.IGNORECASE)
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
class RenderingCell(Paragraph):
    """A code cell that renders Markdown: its fixed text, the comparing words it writes whatever the
    run, and the keys of its ``# asserted:`` comment."""


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


def fixed_literals(node: ast.AST, assigned: dict[str, list[ast.AST]], seen: set[str]) -> list[str]:
    """The string literals under ``node`` the run cannot change: not a branch of a conditional
    expression, followed into the names the expression uses that the cell assigns."""
    if isinstance(node, ast.IfExp):
        return fixed_literals(node.test, assigned, seen)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in assigned and node.id not in seen:
        seen.add(node.id)
        return [text for value in assigned[node.id] for text in fixed_literals(value, assigned, seen)]
    return [text for child in ast.iter_child_nodes(node) for text in fixed_literals(child, assigned, seen)]


def unconditional_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that run whatever the values: those of an ``if`` are chosen by them."""
    found = []
    for statement in body:
        if isinstance(statement, ast.If):
            continue
        found.append(statement)
        if isinstance(statement, (ast.With, ast.For, ast.Try)):
            found += unconditional_statements(statement.body)
    return found


def rendered_text(source: str) -> str | None:
    """The fixed words a code cell passes to ``Markdown(...)`` (None when it renders no Markdown)."""
    if "Markdown(" not in source and "reveal(" not in source:
        return None
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    tree = ast.parse(code)
    assigned: dict[str, list[ast.AST]] = {}
    for node in unconditional_statements(tree.body):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        assigned.setdefault(name.id, []).append(node.value)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and renders_markdown(node)]
    if not calls:
        return None
    return " ".join(text for call in calls for text in fixed_literals(call, assigned, set()))


def renders_markdown(call: ast.Call) -> bool:
    """``Markdown(...)``, or ``exercises.reveal(..., markdown=True)`` (Markdown shown once answered)."""
    name = getattr(call.func, "id", getattr(call.func, "attr", None))
    as_markdown = any(keyword.arg == "markdown" and getattr(keyword.value, "value", False) is True
                      for keyword in call.keywords)
    return name == "Markdown" or (name == "reveal" and as_markdown)


def rendered_comparisons(text: str) -> tuple[str, ...]:
    """The comparing words in the fixed text of a rendering cell's What to see / Conclusion / Found
    paragraphs (ratios that read true at any value left out)."""
    return tuple(dict.fromkeys(word for paragraph in claim_paragraphs(text)
                               for word in comparisons(NEUTRAL_RATIO.sub(" ", paragraph))))


def read(path: Path) -> tuple[list[Paragraph], list[tuple[int, dict[str, str]]], list[RenderingCell]]:
    """A notebook's claim paragraphs, its code cells' tagged asserts, and its rendering cells."""
    notebook = nbformat.read(path, as_version=4)
    paragraphs, asserts, rendered = [], [], []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            paragraphs += [Paragraph(path.name, index, text, comparisons(text), bound_keys(text))
                           for text in claim_paragraphs(cell.source)]
        elif cell.cell_type == "code":
            asserts.append((index, asserted_keys(cell.source)))
            text = rendered_text(cell.source)
            if text is not None:
                keys = tuple(key.strip() for found in RENDER_BOUND.findall(cell.source)
                             for key in found.split(","))
                rendered.append(RenderingCell(path.name, index, text, rendered_comparisons(text), keys))
    return paragraphs, asserts, rendered


def check_notebook(path: Path) -> list[Finding]:
    """Each unbound comparing paragraph, each key no assert carries, each claim tag no paragraph names."""
    paragraphs, asserts, rendered = read(path)
    findings, used = [], set()
    for paragraph in [*paragraphs, *rendered]:
        if paragraph.comparisons and not paragraph.keys:
            fixed = "renders fixed words that compare" if isinstance(paragraph, RenderingCell) else "compares"
            findings.append(Finding(path.name, paragraph.cell,
                                    f"{fixed} ({', '.join(paragraph.comparisons)}) with no assert bound",
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
    for cell in rendered:
        words = f" (fixed: {', '.join(cell.comparisons)})" if cell.comparisons else ""
        lines.append(f"cell {cell.cell}: rendered from the run{words}")
        for key in cell.keys:
            holders = [f"cell {index}: {keys[key]}" for index, keys in asserts if key in keys]
            lines.append(f"    {key}: " + ("; ".join(holders) or "NO ASSERT"))
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
