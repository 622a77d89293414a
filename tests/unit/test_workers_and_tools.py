"""helpers.lessons.workers in real child processes; helpers.measure.leftovers; tools.execute_notebooks."""

import multiprocessing as mp
from multiprocessing import shared_memory

import nbformat
import numpy as np

from helpers.lessons import workers
from helpers.measure import leftovers
from helpers.measure.units import MiB
from tools.execute_notebooks import WIDGET_VIEW, strip_volatile


def test_workers_run_in_a_spawned_pool():
    array = np.random.default_rng(0).random(1000)
    with mp.get_context("spawn").Pool(2) as pool:
        assert np.isclose(pool.apply(workers.sum_array, (array,)), array.sum())
        assert np.isclose(pool.apply(workers.sum_slice, (array, 10, 20)), array[10:20].sum())
        assert pool.apply(workers.array_nbytes, (array,)) == array.nbytes
        assert pool.apply(workers.echo, ({"a": 1},)) == {"a": 1}
        assert len(set(pool.map(workers.worker_pid, range(8)))) >= 1


def test_touch_pages_reads_one_byte_per_page():
    array = np.random.default_rng(0).random(MiB // 8)
    assert workers.touch_pages(array) == MiB // workers.PAGE
    assert workers.touch_pages(array[::2]) == MiB // workers.PAGE
    assert workers.touch_pages(np.asfortranarray(array.reshape(256, -1))) == MiB // workers.PAGE


def test_a_new_segment_is_reported_until_it_is_unlinked():
    before = leftovers.snapshot()
    segment = shared_memory.SharedMemory(create=True, size=MiB)
    try:
        assert str(leftovers.SHM_DIR / segment.name.lstrip("/")) in leftovers.new_since(before)
    finally:
        segment.close()
        segment.unlink()
    assert leftovers.new_since(before) == []


KILLED_WITH_A_FORKSERVER = """
import multiprocessing as mp, os, signal, sys
context = mp.get_context("forkserver")
with context.Pool(1) as pool:
    pool.apply(abs, (-1,))
print(mp.util.get_temp_dir(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no exit handlers: the folder of the forkserver's socket stays
"""


def test_a_killed_process_leaves_its_multiprocessing_folder_and_the_check_sees_it():
    import shutil
    import subprocess
    import sys

    before = leftovers.multiprocessing_temp_dirs()
    killed = subprocess.run([sys.executable, "-c", KILLED_WITH_A_FORKSERVER], capture_output=True,
                            text=True, timeout=60)
    left = killed.stdout.strip()
    try:
        assert killed.returncode == -9 and left.startswith(str(leftovers.temp_dir()))
        assert leftovers.multiprocessing_temp_dirs() - before == {left}
    finally:
        shutil.rmtree(left, ignore_errors=True)
    own = mp.util.get_temp_dir()  # this process's own folder goes with its exit handlers: not counted
    assert own not in leftovers.multiprocessing_temp_dirs()
    assert leftovers.multiprocessing_temp_dirs() - before == set()


def test_remove_ours_removes_only_prefixed_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    (tmp_path / f"{leftovers.TEMP_PREFIX}scratch").mkdir()
    (tmp_path / "someone-elses").write_text("keep me")
    ours = shared_memory.SharedMemory(name=f"{leftovers.SEGMENT_PREFIX}test_remove", create=True, size=4096)
    theirs = shared_memory.SharedMemory(create=True, size=4096)
    try:
        removed = {p.name for p in leftovers.remove_ours()}
        assert removed == {f"{leftovers.TEMP_PREFIX}scratch", f"{leftovers.SEGMENT_PREFIX}test_remove"}
        assert (tmp_path / "someone-elses").exists()
        assert (leftovers.SHM_DIR / theirs.name.lstrip("/")).exists()
    finally:
        ours.close()
        theirs.close()
        theirs.unlink()
        from multiprocessing import resource_tracker

        resource_tracker.unregister(ours._name, "shared_memory")  # removed above, by name


def test_strip_volatile_drops_widgets_and_timestamps_but_keeps_text_and_images():
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["widgets"] = {"state": {}}
    cell = nbformat.v4.new_code_cell("x")
    cell.metadata["execution"] = {"iopub.status.busy": "2026-01-01"}
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": "1"}, "text/plain": "W"}),
        nbformat.v4.new_output("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure>"}),
        nbformat.v4.new_output("stream", name="stdout", text="hello"),
    ]
    notebook.cells.append(cell)
    stripped = strip_volatile(notebook)
    assert "widgets" not in stripped.metadata
    assert "execution" not in stripped.cells[0].metadata
    kinds = [o.get("data", {}).keys() or {o.output_type} for o in stripped.cells[0].outputs]
    assert len(kinds) == 2 and "image/png" in kinds[0]
