"""``python -m helpers.bench``: results written, bad input refused in one line, Ctrl-C leaves nothing.

The CLI runs as a real subprocess (its own spawn workers and segments); the autouse fixture checks
/dev/shm and the temp folder after each test.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from helpers.bench import cli, report
from helpers.lessons import ray_session
from helpers.measure.units import MiB

ROOT = Path(__file__).resolve().parents[2]


def ctrl_c_reaches_it() -> None:
    """preexec_fn: SIGINT back to its default in the child, so that Python turns it into
    KeyboardInterrupt there even when this run inherited an ignored SIGINT (a shell's background job)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_when(args: list[str], seen: str, settle_s: float, wait_s: float = 60) -> tuple[int, int, str]:
    """Run ``python -m helpers.bench *args`` in a session of its own and, ``settle_s`` after ``seen``
    appears on its stderr (or ``wait_s`` passed without it), send its whole process group SIGINT,
    what Ctrl-C in a terminal does; its pid, exit code and stderr once it has exited."""
    with subprocess.Popen([sys.executable, "-m", "helpers.bench", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, start_new_session=True,
                          preexec_fn=ctrl_c_reaches_it) as process:
        stderr: list[str] = []
        reader = threading.Thread(target=lambda: stderr.extend(iter(lambda: process.stderr.read(1), "")))
        reader.start()
        deadline = time.monotonic() + wait_s
        while seen not in "".join(stderr) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(settle_s)
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=wait_s)
        reader.join()
    return process.pid, process.returncode, "".join(stderr)
ROW_KEYS = {"name", "size_bytes", "median_s", "spread", "iqr_s", "min_s", "max_s", "runs_s", "first_s",
            "ratio_to_warm_floor", "ratio_to_fresh_floor", "what", "peak_tree_pss_bytes", "peak_shm_bytes"}
EXECUTOR_ROWS = {"stdlib_echo", "ours_first", "ours_warm", "ours_shared", "ours_plus_one"}
FLOOR_ROWS = {"floor_warm", "floor_fresh_shm", "floor_fresh_shm_create"}


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "helpers.bench", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def one_mib_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("bench") / "run.json"
    return run_cli("--suite", "transport", "--sizes", "1", "--repeat", "2", "--out", str(out)), out


def test_a_run_writes_a_valid_json_and_a_png(one_mib_run):
    done, out = one_mib_run
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == report.SCHEMA and doc["suite"] == "transport"
    assert doc["options"]["sizes_bytes"] == [MiB] and doc["options"]["repeat"] == 2
    assert doc["machine"]["host"] and doc["machine"]["memcpy_warm_seconds"] > 0
    names = {row["name"] for row in doc["rows"]}
    assert EXECUTOR_ROWS | FLOOR_ROWS <= names
    for row in doc["rows"]:
        assert ROW_KEYS <= set(row), row["name"]
        assert row["size_bytes"] == MiB and row["median_s"] > 0 and len(row["runs_s"]) >= 2
    assert all(row["speedup_over_stdlib"] > 0 for row in doc["rows"] if row["name"] in EXECUTOR_ROWS)
    assert {"target", "size_bytes", "value", "limit", "holds"} <= set(doc["targets"][0])
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ours_warm" in done.stdout and "wrote" in done.stdout


def test_a_run_compares_with_a_reference(one_mib_run, tmp_path):
    _, out = one_mib_run
    reference = report.load_reference(out)
    text = report.format_comparison(reference["rows"], reference)
    assert "ours_warm" in text and "1.00x" in text  # a run against itself: here/ref is 1
    figure = report.plot_document(reference, tmp_path / "compared.png", reference)
    assert figure.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.timeout(240)
def test_left_to_its_default_repeat_the_short_trips_run_31_times_and_the_rest_5(tmp_path):
    """``--repeat`` not given: the rows of a trip that copies nothing run SHORT_TRIP_REPEAT times,
    whatever copies runs the default number of times."""
    out = tmp_path / "run.json"
    done = run_cli("--suite", "transport", "--sizes", "1", "--out", str(out), timeout=220)
    assert done.returncode == 0, done.stderr
    runs = {row["name"]: len(row["runs_s"]) for row in json.loads(out.read_text())["rows"]}
    short = ("floor_message", "floor_shm_name", "ours_shared", "ours_tiny", "stdlib_tiny",
             "reducer_shared_memory_shared_remote", "reducer_torch_shared_local")
    assert {name: runs[name] for name in short} == dict.fromkeys(short, 31)
    assert runs["ours_warm"] == runs["stdlib_echo"] == runs["reducer_shared_memory_remote"] == 5


@pytest.mark.parametrize("args, says", [
    (["--suite", "transport", "--sizes", str(10**9)], "MiB fit"),
    (["--sizes", str(10**9)], "MiB fit for the strategies chosen"),
    (["--sizes", "1,abc"], "--sizes takes MiB"),
    (["--suite", "bogus"], "invalid choice"),
    (["--strategies", "pickle,carrier_pigeon"],
     "unknown strategy 'carrier_pigeon'; valid: threads,pickle,send_"),
    (["--suite", "all", "--compare", "x.json"], "use them with --suite strategies or"),
    (["--compare", "/nonexistent/reference.json"], "cannot read reference"),
    (["--compare", str(ROOT / "results" / "vm-2026-11-26-transport.json")], "not strategies"),
])
def test_bad_input_gets_one_line_and_exit_code_2(args, says, tmp_path):
    done = run_cli(*args, "--out", str(tmp_path / "never.json"), timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert not (tmp_path / "never.json").exists()


def test_a_too_big_size_names_what_fits():
    with pytest.raises(cli.BadInput, match=r"sizes up to \d+ MiB fit"):
        cli.check_sizes_fit([cli.largest_size_that_fits() + MiB])


def test_ctrl_c_shuts_everything_down_and_exits_130(tmp_path):
    out = tmp_path / "interrupted.json"
    # 1.5 s inside "ours first": fresh executors and their segments come and go
    pid, returncode, text = interrupt_when(["--suite", "transport", "--sizes", "1", "--repeat", "50",
                                            "--out", str(out)], "ours first", settle_s=1.5)
    assert returncode == 130, text
    assert "ours first" in text and text.strip().splitlines()[-1].startswith("interrupted:"), text
    assert "Traceback" not in text, text
    assert not out.exists()
    assert live_processes_in_group(pid) == []  # no worker, no tracker survives


HALF_STARTED_WORKER = """
import multiprocessing, sys, time
sys.path.insert(0, {root!r})
from helpers.bench import cli


def hold(lock):
    with lock:
        time.sleep(30)


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    lock = context.Lock()  # a pool's semaphore: exit removes it before it joins children
    worker = context.Process(target=hold, args=(lock,))
    worker.start()
    print(worker.pid, flush=True)
    multiprocessing.process._children.discard(worker)  # no pool holds it, as after an interrupted start
    cli._clean_after_interrupt()
"""


@pytest.mark.timeout(60)
def test_a_worker_whose_start_was_interrupted_is_ended_before_exit_and_prints_nothing(tmp_path):
    """The race CI met once: Ctrl-C between a pool worker's launch and the pool recording it. Exit
    then removes the pool's semaphores while the worker still unpickles them, and the worker printed
    a FileNotFoundError traceback after our 'interrupted:' line. The clean-up ends it first."""
    script = tmp_path / "half_started.py"
    script.write_text(HALF_STARTED_WORKER.format(root=str(ROOT)))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=50)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    worker_pid = int(done.stdout.split()[0])
    assert not psutil.pid_exists(worker_pid) or psutil.Process(worker_pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.timeout(240)
@pytest.mark.parametrize("when", ["json", "png"])
def test_ctrl_c_while_the_report_is_written_exits_130_with_both_files_or_neither(tmp_path, when):
    """Ctrl-C the moment the JSON (or the PNG) starts to be written: exit 130, no traceback, and the
    JSON and its PNG are both there or both absent, with no temporary file left."""
    out = tmp_path / "report.json"
    watched = cli.partial_paths(out)[0 if when == "json" else 1]
    # the shortest run that writes a report: one strategy at 1 MiB (the pair is written the same way
    # for every suite, cli.write_pair)
    with subprocess.Popen([sys.executable, "-m", "helpers.bench", "--suite", "strategies", "--sizes", "1",
                           "--strategies", "threads", "--repeat", "1", "--out", str(out)], cwd=ROOT,
                          stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, start_new_session=True,
                          preexec_fn=ctrl_c_reaches_it) as process:
        deadline = time.monotonic() + 180
        while not watched.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
        with contextlib.suppress(ProcessLookupError):  # a run that already ended fails the checks below
            os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1].startswith("interrupted:"), stderr
    files = sorted(path.name for path in tmp_path.iterdir())
    assert files in ([], ["report.json", "report.png"]), files
    said_kept = "kept what was written before" in stderr
    assert said_kept == bool(files), stderr


def test_a_report_stopped_before_its_figure_leaves_neither_file_and_keeps_the_old_pair(tmp_path):
    out = tmp_path / "run.json"
    out.write_text("old json")
    out.with_suffix(".png").write_text("old png")

    def interrupted_plot(doc: dict, path: Path) -> Path:
        path.write_text("half a figure")
        raise KeyboardInterrupt

    written: list[Path] = []
    with pytest.raises(KeyboardInterrupt):
        cli.write_pair(out, {"rows": []}, interrupted_plot, written)
    assert written == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run.json", "run.png"]
    assert out.read_text() == "old json" and out.with_suffix(".png").read_text() == "old png"


def live_processes_in_group(pgid: int, wait: float = 10) -> list[str]:
    """Command lines of the group's processes still running (zombies, waiting for init to reap
    them, do not count) after waiting up to ``wait`` seconds for them to leave."""
    deadline = time.monotonic() + wait
    while True:
        live = []
        for proc in psutil.process_iter(["cmdline", "status"]):
            with contextlib.suppress(psutil.Error, OSError):
                if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                    live.append(" ".join(proc.info["cmdline"] or []))
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.2)


# --- the strategies suite (the default) ---------------------------------------------------------

STRATEGY_ROW_KEYS = ROW_KEYS | {
    "skipped", "setup_s", "fan_out_median_s", "round_trip_median_s", "teardown_s", "pss_added_bytes",
    "shm_added_bytes", "object_store_bytes", "pss_added_arrays", "round_trip_ratio_to_warm_floor",
    "round_trip_ratio_to_fresh_floor", "notes"}


@pytest.fixture(scope="module")
def strategies_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """Two strategies at 2 MiB, compared with a hand-made reference holding one of them."""
    folder = tmp_path_factory.mktemp("strategies")
    reference = folder / "reference.json"
    reference.write_text(json.dumps({
        "schema": report.SCHEMA, "suite": "strategies", "machine": {"host": "refhost"},
        "rows": [{"name": "pickle", "size_bytes": 2 * MiB, "median_s": 0.01, "ratio_to_warm_floor": 123.0,
                  "round_trip_ratio_to_warm_floor": 456.0, "round_trip_median_s": 0.02,
                  "pss_added_arrays": 3.0}]}))
    out = folder / "run.json"
    return run_cli("--sizes", "2", "--strategies", "shared_memory,pickle", "--repeat", "1",
                   "--compare", str(reference), "--out", str(out)), out


def test_the_strategies_suite_writes_rows_a_figure_and_the_comparison(strategies_run):
    done, out = strategies_run
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == report.SCHEMA and doc["suite"] == "strategies"
    assert doc["options"]["strategies"] == ["shared_memory", "pickle"] and doc["options"]["repeat"] == 1
    assert doc["options"]["sizes_bytes"] == [2 * MiB] and doc["targets"] == []
    rows = {row["name"]: row for row in doc["rows"]}
    assert set(rows) == FLOOR_ROWS | {"shared_memory", "pickle"}
    for name in ("shared_memory", "pickle"):
        row = rows[name]
        assert STRATEGY_ROW_KEYS <= set(row), name
        assert row["skipped"] is None and row["median_s"] > 0 and row["round_trip_median_s"] > 0
        assert row["ratio_to_warm_floor"] == pytest.approx(row["median_s"] / rows["floor_warm"]["median_s"])
    assert rows["pickle"]["pss_added_arrays"] > rows["shared_memory"]["pss_added_arrays"]
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "2 MiB: pickle" in done.stderr  # the progress bar names each step
    assert "shared_memory" in done.stdout and "123.00x" in done.stdout and "456.00x" in done.stdout
    assert "refhost" in done.stdout and "wrote" in done.stdout


def test_the_strategies_suite_refuses_a_size_too_big_naming_what_fits():
    from helpers.bench import strategies_suite

    # what fits follows the memory available, which moves between two readings when other programs
    # run (3,281 then 3,282 MiB in a CI run): far below and far above it, and the size it names near it
    fits = strategies_suite.largest_size_that_fits(["pickle"], 2)
    assert fits > 0
    strategies_suite.check_sizes_fit([fits // 2], ["pickle"], 2)
    with pytest.raises(ValueError, match=r"sizes up to (\d+) MiB fit") as refused:
        strategies_suite.check_sizes_fit([2 * fits], ["pickle"], 2)
    named = int(re.search(r"sizes up to (\d+) MiB fit", str(refused.value)).group(1))
    assert abs(named - fits // MiB) <= 0.1 * fits // MiB, (named, fits // MiB)


def test_ctrl_c_in_the_strategies_suite_shuts_everything_down_and_exits_130(tmp_path):
    out = tmp_path / "interrupted.json"
    # 4 s after the manager's start: the manager and the pool are up, tasks in flight
    args = ["--sizes", "4", "--strategies", "shared_memory,manager", "--repeat", "200", "--out", str(out)]
    pid, returncode, text = interrupt_when(args, "4 MiB: manager", settle_s=4, wait_s=90)
    assert returncode == 130, text
    assert "4 MiB: manager" in text and text.strip().splitlines()[-1].startswith("interrupted:"), text
    assert "Traceback" not in text, text
    assert not out.exists()
    assert live_processes_in_group(pid) == []


@pytest.mark.skipif(ray_session.ray_installed() is not None, reason=str(ray_session.ray_installed()))
@pytest.mark.timeout(300)
def test_ctrl_c_while_a_ray_strategy_runs_shuts_ray_down_and_exits_130(tmp_path):
    """The Ray strategy runs in a spawned process of the CLI's (with Ray's processes below it): Ctrl-C
    reaches the whole group; every process of the CLI's tree ends, Ray's folder is removed (the
    autouse fixture checks the temp folder), and the CLI exits with 130."""
    out = tmp_path / "interrupted.json"
    with subprocess.Popen([sys.executable, "-m", "helpers.bench", "--sizes", "4", "--strategies",
                           "ray_object_store", "--repeat", "2000", "--out", str(out)], cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, preexec_fn=ctrl_c_reaches_it) as process:
        stderr: list[str] = []
        reader = threading.Thread(target=lambda: stderr.extend(iter(lambda: process.stderr.read(1), "")))
        reader.start()
        tree = wait_for_a_raylet(process.pid, timeout=120)
        time.sleep(4)  # Ray has started; its workers warm up or the timed runs go on
        tree = tree | set(descendants(process.pid))
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=120)
        reader.join()
    text = "".join(stderr)
    assert process.returncode == 130, text
    assert text.strip().splitlines()[-1].startswith("interrupted:"), text
    assert "Traceback" not in text, text
    assert not out.exists()
    assert live_processes_in_group(process.pid) == []
    assert still_running(tree) == []  # Ray's workers too (they run in sessions of their own)


def descendants(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).children(recursive=True)
    return []


def wait_for_a_raylet(pid: int, timeout: float) -> set[psutil.Process]:
    """The processes below ``pid`` once one of them is a raylet (Ray has started); up to ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tree = descendants(pid)
        with contextlib.suppress(psutil.Error):
            if any(child.name() == "raylet" for child in tree):
                return set(tree)
        time.sleep(0.1)
    raise AssertionError(f"no raylet below process {pid} within {timeout:.0f} s")


def still_running(processes: set[psutil.Process], wait: float = 10) -> list[str]:
    """Command lines of ``processes`` still running (zombies aside) after waiting up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        live = []
        for process in processes:
            with contextlib.suppress(psutil.Error):
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    live.append(" ".join(process.cmdline())[:160])
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.2)
