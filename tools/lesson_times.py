"""Each lesson's reading time and run time, in its header line and in the README's lesson map.

Reading time: the words a reader reads at 200 words a minute, to the nearest minute: the prose, that is every
Markdown cell (its ``<details>`` blocks and inline code included; fenced code blocks, HTML tags and
link targets not) and the Markdown the stored run renders (a conclusion written from the
measurement), plus the printed output (the text the stored run prints: tables, check lines, shown
source, and the fenced text blocks of rendered Markdown; not a figure's placeholder text). The
prose alone is what a lesson's word budget limits; the printed output is counted because a reader
reads it too. Run time: the seconds its last stored execution took at the default size, which
``tools.execute_notebooks`` records in the notebook's metadata (``lab.run_seconds``), rounded to 5 s.
``--write`` puts both into every lesson's header line (added under the title where missing) and into
the README's last column; without it, the command lists what differs and exits 1 (the unit tests run
it that way).

    python -m tools.lesson_times --write
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS_A_MINUTE = 200
HEADER = re.compile(r"Reading time: about \d+ min \([^)]*\) · run time: about [^\n]*? at the default size")
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’.,-]*")
FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.S)  # a fenced block's text, its info string left out
README_ROW = re.compile(r"^(\| (\d\d) \| \[[^\n]*\| )([^|\n]+)( \|)$", re.M)


def _words(markdown: str) -> int:
    """Words of ``markdown`` as read: fenced code blocks, HTML tags and link targets left out."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"<[^>]+>", " ", text)
    return len(WORD.findall(text))


def prose_words(notebook: dict) -> int:
    """Words a learner reads: every Markdown cell but the header line (``<details>`` included) and
    the Markdown the stored outputs render."""
    words = 0
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            words += _words(HEADER.sub(" ", "".join(cell["source"])))  # the header line itself is not prose
            continue
        for output in cell.get("outputs", []):
            rendered = output.get("data", {}).get("text/markdown")
            if rendered:
                words += _words("".join(rendered))
    return words


def printed_words(notebook: dict) -> int:
    """Words of the text the stored outputs print (streams, plain text not shown as a figure or as
    rendered Markdown, and the fenced text blocks inside rendered Markdown: a table a run prints
    collapsed), which a reader reads beside the prose."""
    words = 0
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if output.get("output_type") == "stream":
                text = "".join(output.get("text", ""))
            elif "text/markdown" in data:
                text = " ".join(FENCED.findall("".join(data["text/markdown"])))
            elif "text/plain" in data and not {"image/png", "text/html"} & set(data):
                text = "".join(data["text/plain"])
            else:
                continue
            words += len(WORD.findall(text))
    return words


def run_seconds(notebook: dict) -> float | None:
    """Seconds of the last stored execution (``tools.execute_notebooks``), None if never recorded."""
    return notebook.get("metadata", {}).get("lab", {}).get("run_seconds")


def reading_minutes(words_read: int) -> int:
    """Minutes to read ``words_read`` words at WORDS_A_MINUTE, to the nearest minute (at least 1)."""
    return max(1, math.floor(words_read / WORDS_A_MINUTE + 0.5))


def header_line(words: int, printed: int, seconds: float | None) -> str:
    """The header: minutes for ``words`` of prose plus ``printed`` words of printed output."""
    minutes = reading_minutes(words + printed)
    run = f"about {max(5, 5 * round(seconds / 5))} s" if seconds is not None else "not measured yet"
    return (f"Reading time: about {minutes} min ({words:,} words of prose and {printed:,} of printed output, "
            f"at {WORDS_A_MINUTE} words a minute) · run time: {run} at the default size")


def readme_cell(words: int, printed: int, seconds: float | None) -> str:
    minutes = reading_minutes(words + printed)
    run = f"{max(5, 5 * round(seconds / 5))} s run" if seconds is not None else "run time not measured yet"
    return f"{minutes} min read, {run}"


def _with_header(notebook: dict, line: str) -> bool:
    """Put ``line`` in the notebook's header (replacing an older one, or under the title); True if changed."""
    first = notebook["cells"][0]
    text = "".join(first["source"])
    if HEADER.search(text):
        new = HEADER.sub(line, text, count=1)
    else:
        title, _, rest = text.partition("\n")
        new = f"{title}\n\n{line}\n{rest if rest.startswith(chr(10)) else chr(10) + rest}"
    if new == text:
        return False
    lines = new.split("\n")
    first["source"] = [part + "\n" for part in lines[:-1]] + [lines[-1]]
    return True


def lessons() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lesson_times", description=__doc__)
    parser.add_argument("--write", action="store_true", help="write the headers and the README")
    args = parser.parse_args(argv)
    readme_path = ROOT / "README.md"
    readme = readme_path.read_text()
    cells = {}
    stale = []
    for path in lessons():
        notebook = json.loads(path.read_text())
        words, printed, seconds = prose_words(notebook), printed_words(notebook), run_seconds(notebook)
        cells[path.name[:2]] = readme_cell(words, printed, seconds)
        if _with_header(notebook, header_line(words, printed, seconds)):
            stale.append(f"{path.name}: header line")
            if args.write:
                path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")

    def row(match: re.Match) -> str:
        wanted = cells.get(match.group(2), match.group(3))
        if wanted != match.group(3):
            stale.append(f"README.md: lesson {match.group(2)}: {match.group(3)!r}, should be {wanted!r}")
        return f"{match.group(1)}{wanted}{match.group(4)}"

    new_readme = README_ROW.sub(row, readme)
    if args.write:
        readme_path.write_text(new_readme)
        for line in stale:
            print(f"updated {line}")
        return 0
    for line in stale:
        print(f"out of date: {line} (python -m tools.lesson_times --write)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
