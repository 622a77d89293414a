"""Every lesson, run the way a learner runs it: in JupyterLab, in a real (headless) Chromium.

For each notebook: open it, clear its outputs, Run All Cells from the menu, wait until every code
cell has a number and the kernel is idle, then fail on any traceback, error output or "Error
displaying widget" (a library's logged warning on stderr is not an error).
In lesson 11 the widget panel is used by clicking: a size is chosen, Run is
pressed, and the plot must appear. A screenshot of each lesson goes to SCREENSHOTS (not in git).

Needs Debian's chromium at CHROMIUM (``make test`` installs it) and Playwright for Python; no
browser is downloaded. The lessons run at LAB_ARRAY_MB (the Makefile passes the test size).

With ``LAB_BINDER_PATH=1`` (``make test-browser``) the run is the path a learner takes on Binder:
every lesson in order in one JupyterLab, each lesson's kernel left running (JupyterLab keeps it
unless told otherwise; a lesson that loads something heavy, such as torch or Ray, tells the learner
to shut the earlier lessons' kernels down before it runs and its own after, and the test does
that), the server and all it starts confined to
one CPU and a memory cgroup of Binder's 2 GB, under a 64 MiB ``/dev/shm`` (the Makefile mounts it)
and at the default sizes. A sampler follows the server's whole tree; the last test fails on any OOM
kill or when the tree's peak (PSS + ``/dev/shm``) reached ``PEAK_LIMIT_BYTES``, and prints the peak
after each lesson.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from lab_server import ROOT, running_lab
from memory_cgroup import memory_cgroup

from helpers.measure.memory import track_memory
from helpers.measure.units import format_bytes
from tools.end_of_lesson_cell import SHUT_DOWN, SHUT_DOWN_EARLIER

CHROMIUM = Path(os.environ.get("LAB_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
NOTEBOOKS = sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))
# A hang guard, not a speed check: how long one lesson may take before the run gives up on it. The
# lessons' run times are measured by `make notebooks` (tools.lesson_times), on a quiet machine; here
# the server shares one CPU, which a neighbour may halve (lesson 11 took over 240 s so).
RUN_SECONDS = 600
# Chromium as the machine's probe starts it: no sandbox as root, no GPU, and none of the background
# connections a closed network refuses; its own shared memory in /tmp, not in the run's small /dev/shm.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-dev-shm-usage", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
PROMPT = re.compile(r"^\[(\d+|\*| )\]:$")
BINDER_PATH = os.environ.get("LAB_BINDER_PATH", "") not in ("", "0")
BINDER_MEMORY_BYTES = 2 * 10**9  # Binder's default memory limit: 2 GB
PEAK_LIMIT_BYTES = int(1.5 * 2**30)  # what the whole course may reach, with headroom below it

playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
if not CHROMIUM.exists():
    pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium "
                "(apt-get install -y chromium)", pytrace=False)


@pytest.fixture(scope="module")
def lab():
    if not BINDER_PATH:
        with running_lab() as started:
            yield started
        return
    try:
        cgroup_made = memory_cgroup(BINDER_MEMORY_BYTES)
        cgroup = cgroup_made.__enter__()
    except (RuntimeError, OSError) as error:
        pytest.fail(f"LAB_BINDER_PATH: cannot cap the server's memory as Binder does: {error}", pytrace=False)
    try:
        with running_lab(cgroup=cgroup, cpus={min(os.sched_getaffinity(0))}) as started, \
                track_memory(interval=0.05, trace_python=False, root_pid=started.pid) as report:
            yield BinderLab(started, cgroup, report)
    finally:
        cgroup_made.__exit__(None, None, None)


class BinderLab:
    """The lab of the Binder-path run, with its cgroup and the memory report of the server's tree."""

    def __init__(self, lab, cgroup, report):
        self.lab, self.cgroup, self.report = lab, cgroup, report
        self.starts: list[tuple[str, float]] = []

    def __getattr__(self, name):
        return getattr(self.lab, name)

    def peak_since(self, start: float) -> int:
        """The tree's highest PSS + /dev/shm bytes in the samples taken since ``start``."""
        window = [s for s in list(self.report.samples) if s.time >= start]
        return max((s.pss + max(s.shm, 0) for s in window), default=0)


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


def _says(notebook: Path, sentence: str) -> bool:
    """The lesson's Markdown tells the learner ``sentence`` (shut a kernel down: it loads torch, Ray ...)."""
    return any(cell["cell_type"] == "markdown" and sentence in "".join(cell["source"])
               for cell in json.loads(notebook.read_text())["cells"])


def _menu(page, top: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{top}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).first.click()


def _prompts(page) -> list[str]:
    return [text.strip() for text in page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()]


def _wait_until_every_cell_ran(page, n_code_cells: int) -> None:
    """Every code cell shows [n] (none queued [*] or unrun [ ]) and the kernel is idle; or Run All
    stopped at an error (a traceback shown, nothing queued, the kernel idle): the caller fails then,
    without waiting out the hang guard."""
    page.wait_for_function(
        """(n) => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                .map(p => p.innerText.trim());
            const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
            const idle = !indicator || indicator.getAttribute('data-status') === 'idle';
            const stderr = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']";
            const stopped = [...document.querySelectorAll(stderr)].some(e => /Traceback/.test(e.innerText))
                && !prompts.includes('[*]:');
            return prompts.length === n && idle && (prompts.every(p => /^\\[\\d+\\]:$/.test(p)) || stopped);
        }""",
        arg=n_code_cells, timeout=RUN_SECONDS * 1000, polling=500)


def _head_and_tail(text: str, head: int = 300, tail: int = 700) -> str:
    """``text`` whole if short, else its first ``head`` and last ``tail`` characters."""
    return text if len(text) <= head + tail else f"{text[:head]} [...] {text[-tail:]}"


def _errors_on(page) -> list[str]:
    stderr = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
    shown = page.locator(stderr).all_inner_texts()
    # An exception's output is stderr too; a library's logged warning (Ray's "object store is using
    # /tmp" on a small /dev/shm, which lesson 10 teaches) is not an error.
    # an error's head (which cell, which call) and its tail (the exception's message, which says why)
    errors = [_head_and_tail(text) for text in shown if re.search(r"Traceback|Error|Exception", text)]
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
@pytest.mark.timeout(RUN_SECONDS + 180)  # the hang guard above, plus opening the lesson and its checks
def test_the_lesson_runs_in_jupyterlab_without_errors(lab, browser, name):
    if BINDER_PATH:
        if _says(lab.root / name, SHUT_DOWN_EARLIER):  # as the lesson's note asks, before it runs
            lab.shut_down_kernels()
        lab.starts.append((name, lab.report.mark(name)))
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
        errors = _errors_on(page)
        assert not errors, f"{name} showed errors in JupyterLab: {errors}"
        if "showdown" in name:
            _use_the_showdown_panel(page)
            errors = _errors_on(page)
            assert not errors, f"{name} showed errors in JupyterLab: {errors}"
        assert all(PROMPT.match(prompt) for prompt in _prompts(page))
    finally:
        page.screenshot(path=str(SCREENSHOTS / f"{Path(name).stem}.png"), full_page=True)
        page.close()
        if BINDER_PATH:
            shut = _says(lab.root / name, SHUT_DOWN)
            if shut:  # what the lesson tells the learner to do before the next one
                lab.shut_down_kernels(name)
            kernel = "its kernel shut down, as the lesson says" if shut else "its kernel left running"
            peak = format_bytes(lab.peak_since(lab.starts[-1][1]))
            print(f"\n{name}: tree peak {peak} (PSS + /dev/shm); {kernel}")
        else:
            lab.shut_down_kernels()  # the next lesson starts on a quiet machine


@pytest.mark.skipif(not BINDER_PATH, reason="the Binder-path run only (LAB_BINDER_PATH=1)")
def test_the_whole_course_fits_binders_memory_with_the_kernels_a_learner_leaves_running(lab):
    """After every lesson ran, in order, with its kernel left running unless the lesson said to shut it
    down: no process was OOM-killed and
    the server's tree never reached PEAK_LIMIT_BYTES (PSS + /dev/shm)."""
    assert [name for name, _ in lab.starts] == NOTEBOOKS, "run the whole module: every lesson, in order"
    ends = [start for _, start in lab.starts[1:]] + [float("inf")]
    rows = []
    for (name, start), end in zip(lab.starts, ends, strict=True):
        window = [s for s in list(lab.report.samples) if start <= s.time <= end]
        rows.append((name, max((s.pss + max(s.shm, 0) for s in window), default=0)))
    print("\nBinder path: peak of the server's tree (PSS + /dev/shm) during each lesson:")
    for name, peak in rows:
        print(f"  {name:45s} {format_bytes(peak):>10s}")
    print(f"  cgroup peak charge (page cache included): {format_bytes(lab.cgroup.peak_bytes() or 0)}")
    assert lab.cgroup.oom_kills() == 0, "the OOM killer ended a process of the course"
    over = [(name, format_bytes(peak)) for name, peak in rows if peak >= PEAK_LIMIT_BYTES]
    assert not over, f"over {format_bytes(PEAK_LIMIT_BYTES)} on Binder's path: {over}"
