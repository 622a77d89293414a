"""tools.check_prose_claims: a What to see / Conclusion paragraph that compares (an ordering, a
grouping, a "same", a count of copies) is rendered from the run or names the asserts that hold it."""

from pathlib import Path

import nbformat
import pytest

from tools import check_prose_claims as tool

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def lesson(tmp_path: Path, *cells) -> Path:
    """A notebook of the given ("markdown" | "code", source) cells, written to tmp_path."""
    notebook = nbformat.v4.new_notebook()
    make = {"markdown": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    notebook.cells = [make[kind](source) for kind, source in cells]
    path = tmp_path / "lesson.ipynb"
    nbformat.write(notebook, path)
    return path


@pytest.mark.parametrize("text, words", [
    ("*What to see:* the first bar stands above the rest.", ("above",)),
    ("**Conclusion.** Both ways take about the same time; pickling is the slowest.", ("the same", "slowest")),
    ("*What to see:* the tree's PSS stays flat while each worker steps up by a copy.",
     ("stays flat", "steps up", "a copy")),
    ("*What to see:* the red stars are the exact reads of the tables.", ()),
    ("*What to see:* `a faster b` is code, and [a post](https://example.org/slower) a link.", ()),
])
def test_comparing_words_are_found_in_the_prose_only(text, words):
    assert tool.comparisons(text) == words


def test_only_what_to_see_and_conclusion_paragraphs_outside_details_are_read():
    text = ("Some text that is faster.\n\n*What to see:* one bar is higher.\n\n"
            "<details><summary>Why</summary>\n\n**Conclusion.** hidden and slower.\n</details>\n\n"
            "**Conclusion.** The same again.")
    assert tool.claim_paragraphs(text) == ["*What to see:* one bar is higher.",
                                           "**Conclusion.** The same again."]


def test_an_unbound_comparison_is_a_finding_and_a_bound_one_is_not(tmp_path):
    unbound = lesson(tmp_path, ("markdown", "*What to see:* the first bar stands above the rest."),
                     ("code", "assert first > 1.2 * later"))
    assert [finding.problem for finding in tool.check_notebook(unbound)] == [
        "compares (above) with no assert bound"]
    bound = lesson(tmp_path, ("markdown", "*What to see:* the first bar stands above the rest. "
                                          "<!-- asserted: first-slowest -->"),
                   ("code", "x = 1\nassert first > 1.2 * later, first  # claim: first-slowest"))
    assert tool.check_notebook(bound) == []


def test_a_key_without_its_assert_and_a_tag_without_its_paragraph_are_findings(tmp_path):
    path = lesson(tmp_path, ("markdown", "**Conclusion.** One copy per worker. <!-- asserted: copy-each -->"),
                  ("code", "print('no assert')  # claim: copy-each\nassert ok  # claim: orphan"))
    problems = [finding.problem for finding in tool.check_notebook(path)]
    assert problems == ["names 'copy-each', which no assert of the lesson carries",
                        "claim 'orphan' is bound by no paragraph"]


def test_a_paragraph_rendered_from_the_run_is_listed_as_rendered(tmp_path):
    path = lesson(tmp_path, ("code", 'display(Markdown(f"*What to see:* {name} took {seconds:.1f} s."))'))
    assert tool.check_notebook(path) == []
    assert tool.listing(path) == ["== lesson.ipynb", "cell 0: rendered from the run"]


@pytest.mark.parametrize("source", [
    # the word is chosen by the values
    'display(Markdown(f"**Conclusion.** {name} was {\'faster\' if ratio > 1 else \'slower\'}."))',
    # a ratio that reads true at any value
    'display(Markdown(f"**Conclusion.** Pickling took {ratio:.1f}× as long as sharing."))',
    # set in a branch: chosen by the values
    'if ratio > 1:\n    verdict = "faster"\nelse:\n    verdict = "slower"\n'
    'display(Markdown(f"**Conclusion.** It was {verdict}."))',
    # fixed words outside a What to see / Conclusion / Found paragraph
    'display(Markdown("## References\\n\\n- The post: pickling is slower."))',
])
def test_words_the_values_choose_are_not_findings(tmp_path, source):
    assert tool.check_notebook(lesson(tmp_path, ("code", source))) == []


def test_fixed_comparing_words_of_a_rendered_paragraph_need_their_asserts(tmp_path):
    faster = 'display(Markdown(f"*What to see:* {name} is {ratio:.1f}× faster."))'
    unbound = lesson(tmp_path, ("code", faster))
    assert [finding.problem for finding in tool.check_notebook(unbound)] == [
        "renders fixed words that compare (faster) with no assert bound"]
    # followed into a name the call uses, set in the same cell
    via_name = lesson(tmp_path, ("code", 'text = f"**Found.** one copy per worker ({n})"\n'
                                         "display(Markdown(text))"))
    assert [finding.problem for finding in tool.check_notebook(via_name)] == [
        "renders fixed words that compare (one copy, per worker) with no assert bound"]
    bound = lesson(tmp_path,
                   ("code", faster + "\n# asserted: ratio-above-one"),
                   ("code", "assert ratio > 1.2, ratio  # claim: ratio-above-one"))
    assert tool.check_notebook(bound) == []
    assert tool.listing(bound)[1:] == [
        "cell 0: rendered from the run (fixed: faster)",
        "    ratio-above-one: cell 1: assert ratio > 1.2, ratio  # claim: ratio-above-one"]
    missing = lesson(tmp_path, ("code", faster + "  # asserted: gone"))
    assert [finding.problem for finding in tool.check_notebook(missing)] == [
        "names 'gone', which no assert of the lesson carries"]


def test_markdown_an_exercise_reveals_is_read_as_rendered(tmp_path):
    revealed = 'exercises.reveal(answer, f"**Found.** {name} was {ratio:.1f}× faster.", markdown=True)'
    assert [finding.problem for finding in tool.check_notebook(lesson(tmp_path, ("code", revealed)))] == [
        "renders fixed words that compare (faster) with no assert bound"]
    printed = 'exercises.reveal(answer, f"**Found.** {name} was {ratio:.1f}× faster.")'
    assert tool.check_notebook(lesson(tmp_path, ("code", printed))) == []  # printed text is not Markdown


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_every_comparison_of_a_lesson_is_rendered_or_asserted(path):
    assert [str(finding) for finding in tool.check_notebook(path)] == []
