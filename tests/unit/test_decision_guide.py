"""The decision guide of lesson 11: complete, every cell sourced, rendered as tables."""

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
    assert len(lines) == 2 + len(strategies.NAMES)
    assert lines[0].count("|") == len(QUESTIONS) + 2
    assert all(line.count("|") == len(QUESTIONS) + 2 for line in lines[2:])
    row_of = {name: 2 + index for index, name in enumerate(strategies.NAMES)}
    assert lines[row_of["pickle"]].startswith("| pickle per task | ")
    assert lines[row_of["threads"]].startswith("| threads | ")


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
