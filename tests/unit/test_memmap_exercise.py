"""Lesson 06's "Your turn" on a real measurement (one loky call that reports what each worker received
for five arrays, as the lesson makes them): a wrong prediction fails the check cell with a hint naming
the array to look at again, the worked solution passes."""

import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from exercise_asserts import (
    assert_misconception_rejected,
    assert_worked_solution_passes,
    assert_wrong_answer_fails,
)
from joblib import Parallel, delayed

from helpers.lessons import joblib_memmap, memmap
from helpers.measure.leftovers import TEMP_PREFIX

pytestmark = pytest.mark.timeout(180)
N_WORKERS = 2
RIGHT = {"big": "joblib's file", "small view": "pickled", "objects": "pickled", "own file": "its own file",
         "own slice": "its own file"}


@pytest.fixture(scope="module")
def measured():
    """What loky workers received for the lesson's five kinds of array; loky's workers, joblib's
    folders and our file are gone before the tests run (each test checks that nothing is left)."""
    source = np.random.default_rng(6).random(4 * 2**20 // 8)  # 4 MiB: over joblib's max_nbytes
    with tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as folder:
        own = memmap.owner_only_memmap(Path(folder) / "own.f64", (300_000,))
        own[:] = source[:300_000]
        arrays = {"big": source, "small view": source[:100], "objects": source[:200_000].astype(object),
                  "own file": own, "own slice": own[:100]}
        try:
            received = Parallel(n_jobs=N_WORKERS, backend=joblib_memmap.BACKEND)(
                delayed(joblib_memmap.describe_argument)(array) for array in arrays.values())
        finally:
            del own, arrays
            joblib_memmap.release_joblib()
    return {"views": dict(zip(RIGHT, received, strict=True))}


def test_the_measurement_gives_the_lessons_answer(measured):
    assert {name: view.where for name, view in measured["views"].items()} == RIGHT


def test_a_strided_view_of_a_file_is_reported_as_that_file(tmp_path):
    """joblib sends a strided view of a memmap as the file too, but the worker gets a plain ndarray over
    a memmap: ``describe_argument`` finds the file along ``.base``, it does not say "pickled"."""
    own = memmap.owner_only_memmap(tmp_path / "own.f64", (300_000,))
    own[:] = np.arange(300_000.0)
    try:
        [view] = Parallel(n_jobs=N_WORKERS, backend=joblib_memmap.BACKEND)(
            delayed(joblib_memmap.describe_argument)(own[1::2]) for _ in range(1))
    finally:
        del own
        joblib_memmap.release_joblib()
    assert (view.where, view.filename, view.mode) == ("its own file", str(tmp_path / "own.f64"), "r+")
    assert view.type_name == "ndarray" and view.first == 1.0


@pytest.mark.parametrize("wrong, hint", [
    ({**RIGHT, "big": "pickled"}, "look again at 'big'"),  # "joblib pickles everything"
    ({**RIGHT, "objects": "joblib's file"}, "look again at 'objects'"),  # "over max_nbytes, so dumped"
    ({**RIGHT, "small view": "joblib's file"}, "look again at 'small view'"),  # "a view of a big array"
    ({**RIGHT, "own file": "joblib's file"}, "look again at 'own file'"),  # "a memmap is dumped again"
    ({**RIGHT, "own slice": "pickled"}, "look again at 'own slice'"),  # "small: pickled"
    ({"big": "joblib's file"}, "dict of the 5 names"),
    ("pickled", "dict of the 5 names"),
])
def test_a_wrong_prediction_fails_the_check_cell_with_a_hint(measured, wrong, hint, monkeypatch):
    assert_wrong_answer_fails(joblib_memmap.EXERCISE, wrong, hint, monkeypatch, **measured)


def test_the_worked_solution_passes(measured, monkeypatch, capsys):
    assert_worked_solution_passes(joblib_memmap.EXERCISE, monkeypatch, capsys, **measured)


@pytest.mark.parametrize("answer, misconception", joblib_memmap.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(measured, answer, misconception, monkeypatch):
    """The misconceptions answer for the lesson's names of the five arrays: the same measurement, under
    those names."""
    assert list(joblib_memmap.LESSON_ANSWER.values()) == list(RIGHT.values())
    views = dict(zip(joblib_memmap.LESSON_ANSWER, measured["views"].values(), strict=True))
    assert_misconception_rejected(joblib_memmap.EXERCISE, answer, misconception, monkeypatch, views=views)
    assert_wrong_answer_fails(joblib_memmap.EXERCISE, answer, "look again at", monkeypatch, views=views)


def test_the_misconceptions_use_the_lessons_names_for_its_arrays():
    """LESSON_ANSWER's keys are the names lesson 06's ``candidates`` gives its five arrays."""
    notebook = json.loads(Path(__file__).parents[2].joinpath("notebooks", "06_memmap.ipynb").read_text())
    (cell,) = ["".join(c["source"]) for c in notebook["cells"] if "candidates = {" in "".join(c["source"])]
    names = re.findall(r'^\s+"([^"]+)":', cell.split("candidates = {", 1)[1], flags=re.MULTILINE)
    assert names == list(joblib_memmap.LESSON_ANSWER), names


def test_the_check_cell_holds_the_worked_solution_without_stating_it(measured):
    """``as_solved`` holds on the measurement under the lesson's names, and fails when one array went
    elsewhere or another file was mapped."""
    views = dict(zip(joblib_memmap.LESSON_ANSWER, measured["views"].values(), strict=True))
    own = views["mapped"].filename
    assert joblib_memmap.as_solved(views, own)
    assert not joblib_memmap.as_solved(views, own + ".other")
    assert not joblib_memmap.as_solved({**views, "objects": views["joblib_array"]}, own)
