"""The lessons look right when opened cold (on GitHub, in JupyterLab before running anything).

Stored by ``make notebooks`` (``tools.execute_notebooks``): executed top to bottom, every plot stored as
a PNG, no widget views or widget state (they read "model not found" when reopened), no per-cell
execution timestamps, no errors or stderr noise.
"""

from pathlib import Path

import nbformat
import pytest

from tools.execute_notebooks import WIDGET_VIEW, strip_volatile

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
