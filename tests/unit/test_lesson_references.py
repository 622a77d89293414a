"""Every lesson number the README and the lessons cite points at the lesson about that topic.

A reference such as "a `SharedMemory` segment (lesson 07)" must name, in the words just before it,
something that lesson teaches: its title's words, or the topic words listed here. A renumbering
that leaves a reference one lesson off (SharedMemory "(06)") fails here.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LESSONS = {path.stem[:2]: path for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
TOPICS = {  # words a sentence uses for what the lesson teaches, beside its title's words
    "00": ["measure", "RSS", "PSS", "USS", "tracemalloc", "floor", "sampler"],
    "01": ["thread", "GIL", "BLAS", "free-threaded", "processes"],
    "02": ["pickl", "Pool.map", "slice", "send", "sent", "get the data there"],
    "03": ["initializer", "Manager", "proxy", "send", "sent", "once per worker", "Keras"],
    "04": ["fork", "copy-on-write", "inherit", "gc.freeze"],
    "05": ["sharedctypes", "RawArray", "Array(", "lock", "lost update", "race"],
    "06": ["memmap", "joblib", "file", "page cache"],
    "07": ["SharedMemory", "shared_memory", "segment", "resource tracker", "SharedNDArray", "attach",
           "dtype"],
    "08": ["executor", "Executor", "handle"],
    "09": ["reduction", "share_arrays", "torch", "queue", "pipe", "pickler"],
    "10": ["Ray", "Dask", "object store", "machine", "node"],
    "11": ["showdown", "guide", "panel", "benchmark", "every way", "strategies", "same code live"],
}
CITATION = re.compile(r"\b[Ll]essons? (\d\d)\b(?! to \d\d)|\((\d\d)\)")  # not a range "05 to 08"


def _words_of(number: str) -> list[str]:
    return LESSONS[number].stem[3:].split("_") + TOPICS[number]


def _texts():
    yield "README.md", (ROOT / "README.md").read_text()
    for path in LESSONS.values():
        cells = json.loads(path.read_text())["cells"]
        prose = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"]
        yield path.name, "\n\n".join(prose)


def _citations(text: str):
    """(lesson number, the words before it in its paragraph, up to 160 characters)."""
    for found in CITATION.finditer(text):
        number = found.group(1) or found.group(2)
        paragraph_start = text.rfind("\n\n", 0, found.start()) + 1
        yield number, text[max(paragraph_start, found.start() - 160):found.end() + 40]


def test_every_topic_table_row_is_a_lesson():
    assert set(TOPICS) == set(LESSONS)


@pytest.mark.parametrize("name, text", list(_texts()), ids=lambda value: value if len(value) < 40 else "")
def test_every_cited_lesson_number_names_that_lessons_topic(name, text):
    wrong = [(number, context) for number, context in _citations(text) if number in LESSONS
             and not any(word.lower() in context.lower() for word in _words_of(number))]
    assert not wrong, f"{name}: " + "; ".join(f"lesson {number} in {context!r}" for number, context in wrong)


def test_floor_b_means_one_thing_in_every_lesson():
    """"floor (b)" is a copy into a shared-memory segment created just before (helpers.measure.copy_floors);
    each lesson that names it says so where it first does, in its prose or its code."""
    for number, path in LESSONS.items():
        cells = json.loads(path.read_text())["cells"]
        text = "\n\n".join("".join(cell["source"]) for cell in cells)
        first = text.find("floor (b)")
        if first >= 0:
            assert "segment" in text[first:first + 200], f"lesson {number}: {text[first:first + 200]!r}"
