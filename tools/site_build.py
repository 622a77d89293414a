"""Build the course's website (``make site``): the stored notebooks as pages, never executed.

Sphinx with MyST-NB and sphinx-book-theme (the ``site`` extra) reads a staged copy of the sources in
``build/site/src`` and writes ``build/site/html``; nothing is fetched from the network. The stage holds
``site/`` (conf.py, the landing, machine and API pages, the panel pictures), every lesson as stored
(with a picture of its ipywidgets panel after the cell that shows it, where it has one), the lessons'
own files for download, ``results/`` (README and plots) and the README, whose machine table the site
includes. Reading and run times come from ``tools.lesson_times``; the Binder repository from the
README's badge. ``--check`` builds from nothing with ``-W --keep-going``: any warning fails the build.

    python -m tools.site_build [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tools import lesson_times

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "site"
BUILD = ROOT / "build" / "site"
STAGE = BUILD / "src"
HTML = BUILD / "html"
BINDER_BADGE = re.compile(r"https://mybinder\.org/v2/gh/([^/\s)]+)/([^/\s)]+)/([^?\s)]+)\?urlpath=lab/tree/")
# Lessons with an ipywidgets panel: the code that shows it, and its picture in site/panels/ (a widget
# needs a kernel, so the page shows what the panel looked like in JupyterLab; tools.site_panel_pictures
# takes the picture).
PANELS = {
    "11_showdown": ("panel = widgets.ShowdownPanel()\npanel", "panels/11_showdown.png",
                    "The showdown panel as JupyterLab showed it, before Run was pressed, on the machine "
                    "that took the picture: the array size and workers it offers there, the repeats, a task "
                    "and a .npy file of your own (empty: the sum of random data), the strategies to race "
                    "(three chosen), Run and Stop, a progress bar."),
}


def repository() -> dict[str, str]:
    """The GitHub repository and branch the README's Binder badge launches."""
    match = BINDER_BADGE.search((ROOT / "README.md").read_text())
    if match is None:
        raise SystemExit("README.md has no Binder badge (https://mybinder.org/v2/gh/ORG/REPO/BRANCH?urlpath=...)")
    org, repo, branch = match.groups()
    return {"url": f"https://github.com/{org}/{repo}", "branch": branch,
            "binder": f"https://mybinder.org/v2/gh/{org}/{repo}/{branch}?urlpath=lab/tree/"}


def binder_url(lesson: str) -> str:
    """The Binder link that opens ``notebooks/<lesson>.ipynb`` in JupyterLab."""
    return f"{repository()['binder']}notebooks/{lesson}.ipynb"


def lessons() -> list[dict]:
    """Every lesson in order: its name, title and the README's 'N min read, N s run'."""
    found = []
    for path in lesson_times.lessons():
        notebook = json.loads(path.read_text())
        title = "".join(notebook["cells"][0]["source"]).partition("\n")[0].lstrip("# ").strip()
        words, seconds = lesson_times.prose_words(notebook), lesson_times.run_seconds(notebook)
        times = lesson_times.readme_cell(words, lesson_times.printed_words(notebook), seconds)
        found.append({"name": path.stem, "number": path.name[:2], "title": title, "times": times})
    return found


def _write(path: Path, data: bytes) -> None:
    """Write only what changed, so that Sphinx rereads only what changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)


def with_panel_picture(notebook: dict, lesson: str) -> dict:
    """The notebook with a Markdown cell after its panel's cell: the panel's picture, and that it runs in
    JupyterLab only. Raises if the panel's cell is gone (PANELS is then out of date)."""
    code, picture, what = PANELS[lesson]
    index = next((i for i, cell in enumerate(notebook["cells"])
                  if cell["cell_type"] == "code" and "".join(cell["source"]).strip() == code), None)
    if index is None:
        raise SystemExit(f"{lesson}: no code cell is {code!r} any more: update PANELS in tools/site_build.py")
    note = {"cell_type": "markdown", "id": "site-panel-picture", "metadata": {}, "source": [
        f"```{{figure}} /{picture}\n:alt: {what}\n:figclass: panel-picture\n\n"
        f"*A picture, not the panel:* {what} The panel is an ipywidgets panel: it runs in JupyterLab "
        "(launch this lesson on Binder or run `make lab`), not on this static page.\n```\n"]}
    return {**notebook, "cells": notebook["cells"][:index + 1] + [note] + notebook["cells"][index + 1:]}


def stage() -> None:
    """Lay out build/site/src from site/, notebooks/, results/ and the README."""
    for source in SITE.rglob("*"):
        if source.is_file() and "__pycache__" not in source.parts:
            _write(STAGE / source.relative_to(SITE), source.read_bytes())
    for path in lesson_times.lessons():
        _write(STAGE / "_extra" / "notebooks" / path.name, path.read_bytes())
        notebook = json.loads(path.read_text())
        if path.stem in PANELS:
            notebook = with_panel_picture(notebook, path.stem)
        _write(STAGE / "notebooks" / path.name, json.dumps(notebook, indent=1, ensure_ascii=False).encode())
    results = ROOT / "results"
    for path in sorted(results.iterdir()):
        if path.suffix in (".png", ".json", ".md"):
            _write(STAGE / "_includes" / "results" / path.name, path.read_bytes())
    _write(STAGE / "_includes" / "README.md", (ROOT / "README.md").read_bytes())
    figures = sorted(results.glob("*.png"))
    _write(STAGE / "_generated" / "results_figures.md", "\n\n".join(
        f"### `{png.stem}`\n\n![The reference run {png.stem}: see its JSON for every figure]"
        f"(/_includes/results/{png.name})\n\n"
        f"{{download}}`{png.stem}.json </_includes/results/{png.stem}.json>`"
        for png in figures).encode())
    rows = "\n".join(f"| {lesson['number']} | [{lesson['title']}](notebooks/{lesson['name']}.ipynb) | "
                     f"{lesson['times']} |" for lesson in lessons())
    _write(STAGE / "_generated" / "lessons_table.md",
           f"| # | lesson | reading time, run time (default size) |\n|---|---|---|\n{rows}\n".encode())
    first = lesson_times.lessons()[0].stem
    _write(STAGE / "_generated" / "launch_badge.md",
           f"[![Launch the course on Binder](/_static/binder_badge.svg)]({binder_url(first)})\n".encode())
    _write(STAGE / "_generated" / "site.json", json.dumps(
        {"repository": repository(), "lessons": lessons()}, indent=1).encode())


def build(check: bool) -> int:
    """Stage, then run Sphinx; returns its exit code. A check builds from nothing: Sphinx reports a
    page's warnings only when it reads the page, and a page of an earlier build may be stale."""
    if check:
        shutil.rmtree(BUILD, ignore_errors=True)
    stage()
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-d", str(BUILD / "doctrees"),
               str(STAGE), str(HTML)]
    if check:
        command[3:3] = ["-W", "--keep-going"]
    return subprocess.run(command, cwd=ROOT).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.site_build", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail on any warning (sphinx -W --keep-going)")
    args = parser.parse_args(argv)
    status = build(args.check)
    if status == 0:
        print(f"site built: {HTML / 'index.html'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
