"""``python -m helpers.bench --task module:function``: a reader's task in every strategy, the ranking it
produces, and bad input (a missing module or function, a task that raises, hangs or writes where the
views are read-only, an array too big, Ctrl-C) refused or reported, with nothing left behind.

The shipped tasks (``helpers.bench.example_tasks``) run on small arrays with two or three strategies
each, so that the whole module stays within CI's time. The autouse fixture checks /dev/shm and the
temp folder after each test. Timings are compared as ratios measured in one run, never as seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from helpers.bench import cli, own_task, report, tasks
from helpers.measure.units import MiB
from tests.unit.test_bench_cli import interrupt_when, live_processes_in_group

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = "helpers.bench.example_tasks"
ARRAY = np.random.default_rng(23).random(8 * MiB // 8)  # 8 MiB: a sum of it takes far longer than a slice's
# The strategies each shipped task runs with: enough to show what changes its ranking.
RUNS = {"sum_slice": ["threads", "shared_memory"], "sum_all": ["threads", "shared_memory"],
        "scale_share_in_place": ["threads", "joblib"], "plus_one": ["threads", "pickle"]}


def _still_running(process: psutil.Process) -> bool:
    """Running, not a zombie, and not this process's resource tracker (it lives as long as we do)."""
    try:
        command = " ".join(process.cmdline())
        return process.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in command
    except psutil.Error:
        return False


def no_children_left(wait: float = 10) -> list[psutil.Process]:
    """This process's children still running after up to ``wait`` seconds (zombies and the resource
    tracker aside)."""
    deadline = time.monotonic() + wait
    while True:
        live = [c for c in psutil.Process().children(recursive=True) if _still_running(c)]
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.2)


@pytest.fixture(scope="module")
def shipped_runs() -> dict[str, list[dict]]:
    """Each shipped task's rows (as the task suite writes them, without floors) and ranking."""
    runs = {}
    for task, names in RUNS.items():
        results = own_task.run_all(names, ARRAY, f"{EXAMPLES}:{task}", n_workers=2, repeat=3, time_limit=120)
        rows = []
        for result in results:
            row = result.as_row()
            row["ratio_to_warm_floor"] = 1.0
            rows.append(row)
        runs[task] = rows
    return runs


def by_name(rows: list[dict]) -> dict[str, dict]:
    return {row["name"]: row for row in rows}


@pytest.mark.timeout(240)
def test_a_task_that_reads_a_slice_fans_out_faster_than_one_that_reads_everything(shipped_runs):
    slice_rows, all_rows = by_name(shipped_runs["sum_slice"]), by_name(shipped_runs["sum_all"])
    for name in RUNS["sum_slice"]:
        assert slice_rows[name]["skipped"] is None and all_rows[name]["skipped"] is None, name
        assert slice_rows[name]["round_trip_median_s"] is None  # a float came back: no round trip
    # threads read the caller's array itself: nothing but the reading differs (1/128 of it against all)
    assert slice_rows["threads"]["fan_out_median_s"] < 0.7 * all_rows["threads"]["fan_out_median_s"]
    assert no_children_left() == []


@pytest.mark.timeout(240)
def test_a_task_that_writes_is_refused_where_views_are_read_only_and_the_ranking_says_so(shipped_runs):
    rows = by_name(shipped_runs["scale_share_in_place"])
    assert rows["joblib"]["skipped"].startswith(own_task.WRITES_REFUSED), rows["joblib"]["skipped"]
    assert "(06)" in rows["joblib"]["skipped"] and rows["joblib"]["traceback"] is None
    assert rows["threads"]["skipped"] is None
    rank = own_task.ranking(shipped_runs["scale_share_in_place"])
    assert [entry["name"] for entry in rank["order"]] == ["threads"]
    assert rank["writes"] is True and rank["refused_for_writing"] == ["joblib"]
    assert {c["question"] for c in rank["constraints"]} >= {"writable?", "start methods", "multi-node"}
    text = own_task.format_ranking(rank, "t:scale", ARRAY.nbytes)
    assert "refused by joblib" in text and "1. threads" in text


@pytest.mark.timeout(240)
def test_a_task_that_returns_an_array_gets_a_round_trip_that_counts_in_the_ranking(shipped_runs):
    rows = shipped_runs["plus_one"]
    for row in rows:
        assert row["skipped"] is None and row["round_trip_median_s"] > 0, row["name"]
    rank = own_task.ranking(rows)
    for entry in rank["order"]:
        row = by_name(rows)[entry["name"]]
        assert entry["seconds"] == pytest.approx(row["fan_out_median_s"] + row["round_trip_median_s"])
    # pickle copies the array to every worker and the result back; threads hand it over as is
    assert [entry["name"] for entry in rank["order"]] == ["threads", "pickle"]


def test_the_ranking_leaves_out_what_does_not_fit_and_cites_the_guide():
    rows = [{"name": name, "skipped": None, "fan_out_median_s": seconds, "round_trip_median_s": None,
             "ratio_to_warm_floor": 1.0, "pss_added_bytes": pss, "shm_added_bytes": 0.0, "lesson": lesson}
            for name, seconds, pss, lesson in [("pickle", 0.3, 10 * MiB, "02"),
                                                ("fork_cow", 0.1, 900 * MiB, "04"),
                                                ("shared_memory", 0.2, MiB, "07")]]
    rows.append({"name": "floor_warm", "skipped": None})
    rows.append({"name": "ray_object_store", "skipped": "ray is not installed"})
    rank = own_task.ranking(rows, available_bytes=100 * MiB)
    assert [e["name"] for e in rank["order"]] == ["shared_memory", "pickle"]
    assert [e["name"] for e in rank["over_memory"]] == ["fork_cow"]
    assert rank["writes"] is None
    assert {"name": "shared_memory", "question": "start methods", "answer": "any: attach by name (07)"} \
        in rank["constraints"]
    assert "left out: fork_cow" in own_task.format_ranking(rank, "m:f", MiB)


def test_a_write_into_a_read_only_view_is_named_and_object_arrays_are_refused_where_bytes_are_shared():
    view = ARRAY[:16].copy()
    view.flags.writeable = False
    with pytest.raises(PermissionError, match=tasks.WRITES_READ_ONLY):
        tasks.strategy_own_task(tasks.reach_argument, view, f"{EXAMPLES}:scale_share_in_place", 0, 1)
    assert tasks.strategy_own_task(tasks.reach_argument, view, f"{EXAMPLES}:plus_one", 0, 1) == \
        ("array", (16,), "<f8")
    objects = np.dtype(object)
    assert "object dtype" in own_task.object_dtype_refusal("shared_memory", objects)
    assert own_task.object_dtype_refusal("pickle", objects) is None
    assert own_task.object_dtype_refusal("shared_memory", ARRAY.dtype) is None


@pytest.mark.timeout(120)
def test_a_task_that_raises_is_reported_per_strategy_with_the_workers_traceback():
    results = own_task.run_all(["threads", "pickle"], ARRAY[:1000], f"{EXAMPLES}:fails", 2, 1, time_limit=60)
    for result in results:
        assert result.skipped.startswith("failed: RuntimeError: example task failed on purpose"), \
            result.skipped
        assert "example_tasks.py" in result.traceback and "raise RuntimeError" in result.traceback
    assert no_children_left() == []


@pytest.mark.timeout(120)
def test_a_task_that_hangs_is_ended_at_the_time_limit():
    """Threads cannot be killed: the strategy's own process is, after its short grace."""
    started = time.monotonic()
    result = own_task.run_strategy("threads", ARRAY[:1000], f"{EXAMPLES}:hangs", 2, 1, time_limit=4)
    assert result.skipped.startswith(own_task.TIMED_OUT), result.skipped
    assert time.monotonic() - started < 4 + own_task.STOP_SECONDS + 20
    assert no_children_left() == []


@pytest.mark.parametrize("args, says", [
    (["--task", "no_such_module_23:f"], "no module named 'no_such_module_23'"),
    (["--task", f"{EXAMPLES}:no_such_function"], "has no 'no_such_function'"),
    (["--task", f"{EXAMPLES}"], "--task takes module:function"),
    (["--task", "__main__:f"], "cannot name __main__"),
    (["--task", f"{EXAMPLES}:SLICE_FRACTION"], "is a int, not a function"),
    (["--task", f"{EXAMPLES}:sum_all", "--shape", "10,x"], "--shape takes positive integers"),
    (["--task", f"{EXAMPLES}:sum_all", "--dtype", "U8"], "numbers and booleans only"),
    (["--task", f"{EXAMPLES}:sum_all", "--shape", str(2**40)], "MiB fit for the strategies chosen"),
    (["--task", f"{EXAMPLES}:sum_all", "--array", "/nonexistent/a.npy"], "No such file"),
    (["--task", f"{EXAMPLES}:sum_all", "--sizes", "4"], "leave out --suite and --sizes"),
    (["--shape", "10"], "go with --task"),
    (["--task", f"{EXAMPLES}:sum_all", "--compare", str(ROOT / "results" / "vm-2026-11-26-transport.json")],
     "not task"),
])
def test_bad_task_input_gets_one_line_exit_code_2_and_nothing_written(args, says, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([*args, "--out", str(tmp_path / "never.json")])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and says in lines[0], captured.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.timeout(180)
def test_the_command_runs_a_task_on_a_npy_file_and_writes_the_table_ranking_json_and_png(tmp_path):
    data = tmp_path / "data.npy"
    np.save(data, np.random.default_rng(1).random((512, 1024)).astype(np.float32))  # 2 MiB, 2-D
    out = tmp_path / "run.json"
    done = subprocess.run([sys.executable, "-m", "helpers.bench", "--task", f"{EXAMPLES}:plus_one",
                           "--array", str(data), "--strategies", "shared_memory,threads", "--repeat", "1",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == report.SCHEMA and doc["suite"] == "task"
    assert doc["task"]["spec"] == f"{EXAMPLES}:plus_one" and doc["task"]["shape"] == [512, 1024]
    assert doc["task"]["dtype"] == "<f4" and doc["options"]["sizes_bytes"] == [2 * MiB]
    rows = by_name(doc["rows"])
    for name in ("shared_memory", "threads"):
        assert rows[name]["skipped"] is None and rows[name]["round_trip_median_s"] > 0, name
        assert rows[name]["ratio_to_warm_floor"] > 0 and rows[name]["pss_added_bytes"] is not None
        assert "plus_one" in rows[name]["what"]
    assert {e["name"] for e in doc["ranking"]["order"]} == {"shared_memory", "threads"}
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ranking for helpers.bench.example_tasks:plus_one" in done.stdout and "(07)" in done.stdout
    assert "wrote" in done.stdout


@pytest.mark.timeout(180)
def test_ctrl_c_during_a_task_run_leaves_nothing_and_exits_130(tmp_path):
    out = tmp_path / "interrupted.json"
    # 4 s after pickle's start: the strategy's process, its pool and the timed runs are under way
    args = ["--task", f"{EXAMPLES}:sum_all", "--shape", "524288", "--strategies", "pickle,shared_memory",
            "--repeat", "100000", "--out", str(out)]
    pid, returncode, text = interrupt_when(args, ": pickle", settle_s=4)
    assert returncode == 130, text
    assert text.strip().splitlines()[-1].startswith("interrupted:") and "Traceback" not in text, text
    assert list(tmp_path.iterdir()) == []
    assert live_processes_in_group(pid) == []


@pytest.mark.timeout(120)
def test_lesson_11s_panel_runs_a_task_on_a_npy_file_and_shows_the_plots_table_and_ranking(tmp_path):
    from helpers.bench import widgets

    data = tmp_path / "data.npy"
    np.save(data, ARRAY[:2 * MiB // 8])  # over joblib's max_nbytes (1 MiB): it memory-maps, read-only
    panel = widgets.ShowdownPanel()
    panel.workers.value = 2
    panel.strategies.value = ("threads", "joblib")
    panel.task.value = f"{EXAMPLES}:scale_share_in_place"
    panel.array_path.value = str(data)
    panel.run_button.click()
    assert panel.wait(timeout=100), "the run did not end within 100 s"
    assert panel.error is None, panel.status.value
    assert [r.name for r in panel.results] == ["threads", "joblib"]
    assert panel.results[0].skipped is None and panel.results[0].array_bytes == 2 * MiB
    assert panel.results[1].skipped.startswith(own_task.WRITES_REFUSED)
    figure, text = panel.output.outputs
    assert figure["data"]["image/png"].startswith("iVBOR")
    assert "ranking for" in text["text"] and "refused by joblib" in text["text"]
    assert panel.ranking["order"][0]["name"] == "threads"
    assert no_children_left() == []


@pytest.mark.parametrize("field, value, says", [("task", "no_such_module_23:f", "no module named"),
                                                 ("array_path", "/nonexistent/a.npy", "No such file")])
def test_lesson_11s_panel_refuses_a_task_or_file_it_cannot_use_before_anything_starts(field, value, says):
    from helpers.bench import widgets

    panel = widgets.ShowdownPanel()
    panel.strategies.value = ("threads",)
    getattr(panel, field).value = value
    panel.run_button.click()
    assert panel.wait(timeout=30)
    assert isinstance(panel.error, ValueError) and says in panel.status.value, panel.status.value
    assert panel.results == [] and no_children_left() == []


@pytest.mark.timeout(120)
def test_a_task_that_writes_runs_where_the_workers_map_the_file_read_write():
    """The memmap strategies map the file 'r+' for a reader's task: a write lands in the shared file."""
    (result,) = own_task.run_all(["memmap_tmpfs"], ARRAY[:MiB // 8], f"{EXAMPLES}:scale_share_in_place", 2, 1,
                                 time_limit=60)
    assert result.skipped is None and result.fan_out.median > 0, result.skipped
