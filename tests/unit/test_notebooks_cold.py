"""The lessons look right when opened cold (on GitHub, in JupyterLab before running anything).

Stored by ``make notebooks`` (``tools.execute_notebooks``): executed top to bottom, every plot stored as
a PNG, no widget views or widget state (they read "model not found" when reopened), no per-cell
execution timestamps, no errors or stderr noise.
"""

import re
from pathlib import Path

import nbformat
import pytest

from helpers.lessons import exercises
from tools.end_of_lesson_cell import HEAVY, SHUT_DOWN, SHUT_DOWN_EARLIER
from tools.execute_notebooks import WIDGET_VIEW, strip_volatile
from tools.lesson_times import prose_words

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


@pytest.fixture(params=NOTEBOOKS, ids=lambda path: path.stem)
def notebook(request):
    return nbformat.read(request.param, as_version=4)


def test_there_are_lessons():
    assert len(NOTEBOOKS) >= 9


def test_is_valid_and_stored_executed_top_to_bottom(notebook):
    nbformat.validate(notebook)
    counts = [cell.execution_count for cell in _code_cells(notebook)]
    assert counts == list(range(1, len(counts) + 1)), "re-run it with make notebooks (counts out of order)"


def test_holds_no_widget_state_and_no_timestamps(notebook):
    assert "widgets" not in notebook.metadata
    for cell in notebook.cells:
        assert "execution" not in cell.metadata
        for output in cell.get("outputs", []):
            assert WIDGET_VIEW not in output.get("data", {})


def test_every_plot_is_stored_as_an_image(notebook):
    for cell in _code_cells(notebook):
        texts = [str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs]
        figures = [text for text in texts if text.startswith("<Figure")]
        images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        assert len(images) >= len(figures), f"a figure stored without its PNG in: {cell.source[:80]!r}"
        if "plt.show()" in cell.source:
            assert images, f"a plot cell stored no image: {cell.source[:80]!r}"


def test_stores_no_error_and_no_stderr(notebook):
    for cell in _code_cells(notebook):
        for output in cell.outputs:
            assert output.output_type != "error", f"stored error in: {cell.source[:80]!r}"
            assert not (output.output_type == "stream" and output.name == "stderr"), (
                f"stderr stored in: {cell.source[:80]!r}: {output.text[:200]!r}")


def test_stores_no_bare_value_under_a_cell(notebook):
    """A check cell shows what it printed, never a returned True, False or None under it."""
    for cell in _code_cells(notebook):
        for output in cell.outputs:
            if output.output_type == "execute_result":
                text = str(output.get("data", {}).get("text/plain", ""))
                assert text not in ("True", "False", "None"), f"a bare {text} under: {cell.source[:80]!r}"


# What a learner should not have to read: the repr of a record the course's helpers return (a
# dataclass such as KilledParent(folder=...): a sentence says what it holds) and process ids, which
# change every run and mean nothing on the page. The library's types (ArrayHandle: what crosses to a
# worker) and the stdlib's may be shown on purpose.
RECORD = re.compile(r"^@dataclass.*\nclass (\w+)", re.MULTILINE)
COURSE_RECORDS = sorted({name for path in (ROOT / "helpers").rglob("*.py")
                         for name in RECORD.findall(path.read_text())})
REPR = re.compile(rf"\b(?:{'|'.join(COURSE_RECORDS)})\([a-z_]+=")
PID = re.compile(r"\b(?:pid|PID|process|processes:) \[?\d{3,7}\b")


def test_shows_no_object_repr_and_no_process_id(notebook):
    for cell in _code_cells(notebook):
        if "getsource" in cell.source:
            continue  # the cell shows source code
        for output in cell.outputs:
            texts = [output.get("text", "")] + [str(value) for key, value in output.get("data", {}).items()
                                                if key in ("text/plain", "text/markdown")]
            for text in texts:
                for pattern in (REPR, PID):
                    found = pattern.search(text)
                    assert not found, f"{found.group(0)!r} shown under: {cell.source[:80]!r}"


def test_a_heavy_lesson_says_the_sentences_the_browser_run_obeys():
    """A lesson that keeps torch, Ray or Dask loaded asks, in words the Binder-path browser run looks
    for, to shut the earlier lessons' kernels down before it runs and its own kernel down after it:
    reworded, the run would leave every kernel running and exceed Binder's memory."""
    for path in NOTEBOOKS:
        if path.stem in HEAVY:
            text = path.read_text()
            assert SHUT_DOWN_EARLIER in text and SHUT_DOWN in text, path.name


READING_BUDGET_WORDS = 2000  # a lesson longer than this is cut or split


def test_every_lesson_reads_in_at_most_2000_words(notebook):
    """What a learner reads (Markdown cells, <details> included, and the Markdown the stored run
    renders: ``tools.lesson_times.prose_words``) stays within the reading budget."""
    words = prose_words(notebook)
    assert words <= READING_BUDGET_WORDS, (
        f"{words:,} words read: cut it to {READING_BUDGET_WORDS:,} or split it")


def test_every_exercise_asks_before_it_tells(notebook):
    """The learner's answer cell (``answer = ...``) comes right after the Markdown that asks the
    question, with no output between them, and before the check cell that measures and grades it;
    no cell between the answer and its check shows a stored output (a reader scrolling the stored
    lesson would see the measurement before grading: it runs in the check cell, or after it)."""
    cells = notebook.cells
    answers = [index for index, cell in enumerate(cells)
               if cell.cell_type == "code" and re.match(r"answer\s*=", cell.source)]
    checks = [index for index, cell in enumerate(cells)
              if cell.cell_type == "code" and "exercises.check(" in cell.source]
    assert answers and len(answers) == len(checks), "one answer cell per check cell"
    for answer, check in zip(answers, checks, strict=True):
        assert cells[answer - 1].cell_type == "markdown", (
            f"the cell before {cells[answer].source[:60]!r} is code: ask, then let the learner answer")
        assert "Your turn" in cells[answer - 1].source, cells[answer - 1].source[:80]
        assert answer < check
        shown = [index for index in range(answer + 1, check)
                 if cells[index].cell_type == "code" and cells[index].get("outputs")]
        assert not shown, f"cells {shown}, between the answer and its check, show outputs: move them after it"


def test_what_answers_an_exercise_is_collapsed_until_answered(notebook):
    """The code cells right after an exercise's check (up to the next Markdown cell; a collapsed
    <details> aside, such as the Solution, is skipped) show what they measured only through
    ``exercises.reveal``: collapsed in the stored lesson, printed once the learner has answered;
    nbval ignores their output, which differs once the worked solution is checked."""
    cells = notebook.cells
    checks = [index for index, cell in enumerate(cells)
              if cell.cell_type == "code" and "exercises.check(" in cell.source]
    for check in checks:
        index = check + 1
        while index < len(cells) and (cells[index].cell_type == "code"
                                      or cells[index].source.startswith("<details>")):
            cell = cells[index]
            if cell.cell_type == "code" and cell.get("outputs"):
                assert "exercises.reveal(" in cell.source, (
                    f"cell {index}, right after the check, shows an output: pass it through exercises.reveal")
                assert "nbval-ignore-output" in cell.metadata.get("tags", []), f"cell {index}"
            index += 1


def test_the_worked_solution_holds_on_the_stored_run(notebook):
    """The unanswered check cell says whether the worked solution holds on the run it is stored with
    (without giving it away): a solution the stored run contradicts fails here."""
    checks = [cell for cell in _code_cells(notebook) if "exercises.check(" in cell.source]
    for cell in checks:
        text = "".join(output.get("text", "") for output in cell.outputs)
        assert exercises.SOLUTION_HOLDS in text, text[-300:]
        assert exercises.SOLUTION_FAILS not in text, text[-300:]


def test_the_last_cell_freed_every_array_it_deleted(notebook):
    """The closing cell's message is true of the stored run: no array it deleted stayed alive."""
    last = _code_cells(notebook)[-1]
    text = "".join(output.get("text", "") for output in last.outputs)
    assert "kernel_memory.release" in last.source and "This kernel held" in text, last.source
    assert "still referenced" not in text, text


def test_strip_volatile_drops_widgets_and_timestamps_and_keeps_the_rest():
    widget = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    cell = nbformat.v4.new_code_cell("panel", execution_count=1, outputs=[
        nbformat.v4.new_output("display_data", data={WIDGET_VIEW: widget, "text/plain": "Panel(...)"}),
        nbformat.v4.new_output("display_data", data={WIDGET_VIEW: widget, "image/png": "iVBOR"}),
        nbformat.v4.new_output("stream", name="stdout", text="kept\n"),
    ])
    cell.metadata["execution"] = {"iopub.execute_input": "2026-11-23T10:00:00Z"}
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
    stripped = strip_volatile(notebook)
    assert "widgets" not in stripped.metadata and "execution" not in stripped.cells[0].metadata
    assert [dict(o.get("data", {})) for o in stripped.cells[0].outputs[:1]] == [{"image/png": "iVBOR"}]
    assert stripped.cells[0].outputs[1].text == "kept\n"
