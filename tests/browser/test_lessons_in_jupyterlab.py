"""Every lesson, run the way a learner runs it: in JupyterLab, in a real (headless) Chromium.

For each notebook: open it, clear its outputs, Run All Cells from the menu, wait until every code
cell has a number and the kernel is idle, then fail on any traceback, error output or "Error
displaying widget". In lesson 11 the widget panel is used by clicking: a size is chosen, Run is
pressed, and the plot must appear. A screenshot of each lesson goes to SCREENSHOTS (not in git).

Needs Debian's chromium at CHROMIUM (``make test`` installs it) and Playwright for Python; no
browser is downloaded. The lessons run at LAB_ARRAY_MB (the Makefile passes the test size).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from lab_server import ROOT, running_lab

CHROMIUM = Path(os.environ.get("LAB_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
NOTEBOOKS = sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))
RUN_SECONDS = 240  # one lesson at the test size; the lessons promise under a minute at full size
# Chromium as the machine's probe starts it: no sandbox as root, no GPU, and none of the background
# connections a closed network refuses.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PROMPT = re.compile(r"^\[(\d+|\*| )\]:$")

playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
if not CHROMIUM.exists():
    pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium "
                "(apt-get install -y chromium)", pytrace=False)


@pytest.fixture(scope="module")
def lab():
    with running_lab() as started:
        yield started


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                              args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module", autouse=True)
def screenshot_folder():
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    yield SCREENSHOTS
    print(f"\nscreenshots of every lesson: {SCREENSHOTS}")


def _code_cells_in(notebook: Path) -> int:
    return sum(cell["cell_type"] == "code" for cell in json.loads(notebook.read_text())["cells"])


def _menu(page, top: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{top}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).first.click()


def _prompts(page) -> list[str]:
    return [text.strip() for text in page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()]


def _wait_until_every_cell_ran(page, n_code_cells: int) -> None:
    """Every code cell shows [n] (none queued [*] or unrun [ ]) and the kernel is idle."""
    page.wait_for_function(
        """(n) => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                .map(p => p.innerText.trim());
            const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
            const idle = !indicator || indicator.getAttribute('data-status') === 'idle';
            return prompts.length === n && prompts.every(p => /^\\[\\d+\\]:$/.test(p)) && idle;
        }""",
        arg=n_code_cells, timeout=RUN_SECONDS * 1000, polling=500)


def _errors_on(page) -> list[str]:
    errors = [text[:500] for text in page.locator(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()]
    body = page.locator(".jp-NotebookPanel").inner_text()
    errors += [line for line in body.splitlines() if "Error displaying widget" in line or "Traceback" in line]
    return errors


def _use_the_showdown_panel(page) -> None:
    """Lesson 11: choose the smallest size in the panel, press Run, wait for its plot."""
    panel = page.locator(".jp-OutputArea-output .widget-box", has=page.locator("button", has_text="Run")).last
    size = panel.locator("select").first
    if size.count():
        options = size.locator("option").all_inner_texts()
        size.select_option(label=options[0])
    panel.locator("button", has_text="Run").click()
    panel.locator(".widget-output img").first.wait_for(state="visible", timeout=RUN_SECONDS * 1000)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_lesson_runs_in_jupyterlab_without_errors(lab, browser, name):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(lab.notebook_url(name), wait_until="domcontentloaded", timeout=120_000)
        n_code_cells = _code_cells_in(lab.root / name)
        page.wait_for_function(  # every cell rendered (the notebook's cells arrive a few at a time)
            "(n) => document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell').length === n",
            arg=n_code_cells, timeout=120_000, polling=250)
        _menu(page, "Edit", "Clear Outputs of All Cells")
        assert all(prompt in ("[ ]:", "") for prompt in _prompts(page))
        _menu(page, "Run", "Run All Cells")
        try:
            _wait_until_every_cell_ran(page, n_code_cells)
        except playwright_api.TimeoutError:
            pytest.fail(f"{name}: not every cell ran within {RUN_SECONDS} s; prompts {_prompts(page)}, "
                        f"errors shown {_errors_on(page)}")
        if name.startswith("10_"):
            _use_the_showdown_panel(page)
        errors = _errors_on(page)
        assert not errors, f"{name} showed errors in JupyterLab: {errors}"
        assert all(PROMPT.match(prompt) for prompt in _prompts(page))
    finally:
        page.screenshot(path=str(SCREENSHOTS / f"{Path(name).stem}.png"), full_page=True)
        page.close()
        lab.shut_down_kernels()  # the next lesson starts on a quiet machine
