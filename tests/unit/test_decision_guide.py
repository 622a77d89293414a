"""The decision guide of lesson 11: complete, every cell sourced, rendered as tables."""

import re

import pytest

from helpers.bench import decision_guide, strategies
from helpers.bench.decision_guide import QUESTIONS, Cell


def test_guide_covers_every_strategy_in_lesson_order():
    assert decision_guide.names() == strategies.NAMES


def test_every_cell_answers_and_says_where_it_was_shown():
    for name, row in decision_guide.GUIDE.items():
        assert set(row) == set(QUESTIONS), name
        for key, cell in row.items():
            assert cell.text, (name, key)
            assert cell.lessons or cell.source, (name, key)
            assert all(lesson in {f"{n:02d}" for n in range(12)} for lesson in cell.lessons), (name, key)


def test_cells_cite_the_lesson_that_builds_the_strategy():
    for name, row in decision_guide.GUIDE.items():
        lesson = strategies.STRATEGIES[name].lesson
        assert any(lesson in cell.lessons for cell in row.values()), name


def test_a_cell_renders_its_lessons_or_its_source():
    assert Cell("yes", ("06", "07")).render() == "yes (06, 07)"
    assert Cell("any", source="Python docs").render() == "any (not shown; Python docs)"
    with pytest.raises(ValueError, match="neither a lesson nor a source"):
        Cell("unsourced")


def test_markdown_table_has_a_row_per_strategy_and_a_column_per_question():
    lines = decision_guide.as_markdown({"pickle": "pickle per task"}).splitlines()
    assert lines[0] == "| strategy | lesson | " + " | ".join(QUESTIONS.values()) + " |"
    assert all(line.count("|") == len(QUESTIONS) + 3 for line in lines)
    rows = {name: line for line in lines[2:] for name in line.split(" | ")[0].lstrip("| ").split(", ")}
    assert set(rows) == set(strategies.NAMES) - {"pickle"} | {"pickle per task"}
    assert len(lines) == 2 + len(set(rows.values()))  # rows that read the same are shown once
    assert rows["ray_by_value"] == rows["ray_object_store"]
    assert rows["pickle per task"].startswith("| pickle per task | 02 | private copy (05) | ")
    assert rows["threads"].startswith("| threads | 01 | yes (lock)† | none | any† | ")


def test_every_cell_has_a_short_answer_for_the_lessons_table():
    for name, row in decision_guide.GUIDE.items():
        for key, cell in row.items():
            assert cell.short and len(cell.short.split()) <= 3, (name, key, cell.short)
        if re.search(r"per (the|its) \w* ?docs", row["os"].text):  # beyond Linux only as the docs' word
            assert row["os"].short.endswith("†"), name
    assert "†" in decision_guide.as_markdown().splitlines()[2]  # threads: a cell no lesson showed


def test_text_table_can_show_one_question():
    text = decision_guide.as_text(question="object_dtype")
    header, rule, *body = text.splitlines()
    assert header.split() == ["strategy", "object", "dtype"]
    assert len(body) == len(strategies.NAMES)
    assert "TypeError" in text and "(07)" in text
    with pytest.raises(KeyError):
        decision_guide.as_text(question="colour")


def test_the_os_column_claims_only_what_the_tests_run():
    for name, row in decision_guide.GUIDE.items():
        assert row["os"].text.startswith("Linux"), name  # other platforms only as the docs' word
        assert row["os"].lessons, name
