"""tools.check_prose_figures: a figure in a lesson's prose either comes from this run (rendered from
the measured values, so not in a Markdown cell) or names its source."""

from pathlib import Path

import pytest

from tools import check_prose_figures as tool

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("text, figures", [
    ("A round trip costs 3.5 ms here.", ["3.5 ms"]),
    ("On a 2-core VM we saw (b) about ten times (a), 7.0x in the table.", ["ten times", "7.0x"]),
    ("It reads at 1.3 GiB/s and keeps 64 MiB.", ["1.3 GiB/s", "64 MiB"]),
    ("Pickling is about 100x slower [in this post](https://example.org/post).", []),
    ("Binder's default /dev/shm is 64 MiB.", []),
    ("Run it with `LAB_ARRAY_MB=16` or `sleep(0.5)`.", []),
    ("Lesson 08 and 2 workers, in 2026.", []),
])
def test_figures_without_a_source_are_found_and_sourced_or_code_ones_are_not(text, figures):
    assert [figure for figure, _ in tool.unsourced_figures(text)] == figures


def test_each_list_item_is_its_own_sentence():
    text = "- the [docs](https://numpy.org) say 1 GiB\n- we saw 2 GiB"
    assert tool.unsourced_figures(text) == [("2 GiB", "we saw 2 GiB")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_no_lesson_states_a_figure_that_is_neither_rendered_nor_sourced(path):
    assert [str(finding) for finding in tool.check_notebook(path)] == []
