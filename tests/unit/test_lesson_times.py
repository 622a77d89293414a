"""tools.lesson_times: what a lesson's reading time counts (prose, and the text its run prints)."""

from __future__ import annotations

import pytest

from tools import lesson_times

pytestmark = pytest.mark.timeout(30)


def _notebook(*cells: dict) -> dict:
    return {"cells": list(cells)}


def _code(*outputs: dict) -> dict:
    return {"cell_type": "code", "source": ["print('x')"], "outputs": list(outputs)}


def test_printed_words_count_streams_plain_text_and_fenced_text_but_not_figures_or_rendered_prose():
    notebook = _notebook(
        {"cell_type": "markdown", "source": ["Four words of prose."]},
        _code({"output_type": "stream", "name": "stdout", "text": ["three printed words\n"]}),
        _code({"output_type": "execute_result", "data": {"text/plain": ["two more"]}}),
        _code({"output_type": "display_data", "data": {"text/plain": ["<Figure size 800x400 with 1 Axes>"],
                                                        "image/png": "iVBORw0KGgo="}}),
        _code({"output_type": "display_data", "data": {"text/plain": ["<Markdown object>"],
                                                        "text/markdown": ["Rendered prose, five words."]}}),
        _code({"output_type": "display_data", "data": {"text/plain": ["<Markdown object>"], "text/markdown": [
            "<details><summary>A table</summary>\n\n```text\nway  time\nsix  7 ms\n```\n</details>"]}}))
    assert lesson_times.printed_words(notebook) == 5 + 5  # the collapsed table's fenced text is printed
    assert lesson_times.prose_words(notebook) == 4 + 4 + 2  # its summary is prose


def test_the_header_counts_prose_and_printed_output_and_matches_what_it_replaces():
    line = lesson_times.header_line(1990, 1210, 31.0)
    assert line == ("Reading time: about 16 min (1,990 words of prose and 1,210 of printed output, "
                    "at 200 words a minute) · run time: about 30 s at the default size")
    assert lesson_times.HEADER.fullmatch(line)
    assert lesson_times.readme_cell(1990, 1210, 31.0) == "16 min read, 30 s run"
