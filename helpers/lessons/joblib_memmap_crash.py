"""What a SIGKILLed joblib parent leaves behind, measured for lesson 06: its dump in /dev/shm or the
temp folder and its orphaned loky workers, and how long loky's resource tracker takes to remove the
dump once those workers end.

``kill_parent_while_holding`` runs this module as a parent program (``parent_program``) whose reused
``Parallel`` holds an array in its workers, SIGKILLs it, looks at what is left, then ends the orphans
and removes whatever loky's resource tracker did not. Sizes are bytes, durations seconds.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
from joblib import Parallel, delayed

from helpers.lessons.joblib_memmap import BACKEND, bytes_in, describe_argument, joblib_folders
from helpers.lessons.workers import touch_pages
from helpers.measure.leftovers import SHM_DIR, TEMP_PREFIX


@dataclass(frozen=True)
class KilledParent:
    """What a SIGKILLed joblib parent left: its dump (bytes in /dev/shm or the temp folder), how many
    joblib folders of its own (the dump's, and the empty one each Parallel call makes), and live
    children ``settle_s`` after the kill; then, once we ended its orphaned workers, how long loky's
    resource tracker took to remove the folder, what it printed, and what we had to remove ourselves."""

    folder: str
    bytes_left: int
    folders_left: int
    orphans: dict[str, int]
    cleaned_after_s: float | None
    tracker_said: list[str]
    removed_by_us: list[str]


def kill_parent_while_holding(n_items: int, n_workers: int, settle_s: float = 1.0,
                              timeout: float = 60.0) -> KilledParent:
    """Run a parent program (this module as ``__main__``) whose reused Parallel's workers hold an
    ``n_items`` float64 array; SIGKILL it; see what is left ``settle_s`` later; SIGKILL its orphaned
    workers (by the pids it reported); see whether loky's resource tracker removes the rest; remove
    whatever is still there. Never leaves a process or a file of it behind."""
    if n_items < 1 or n_workers < 1:
        raise ValueError(f"n_items and n_workers must be at least 1, got {n_items} and {n_workers}")
    with tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as scratch:
        said, errors = Path(scratch, "pids.json"), Path(scratch, "stderr.txt")
        with open(errors, "w") as stderr:
            command = [sys.executable, "-m", __name__, str(n_items), str(n_workers), str(said)]
            parent = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
        report: dict = {}
        try:
            report = _wait_for_report(parent, said, timeout)
            parent.send_signal(signal.SIGKILL)
            parent.wait()
            time.sleep(settle_s)
            folder = Path(report["folder"])
            bytes_left = bytes_in([folder])
            folders_left = len(joblib_folders(parent.pid))
            roles = report["pids"]
            orphans = {role: sum(psutil.pid_exists(int(pid)) for pid, r in roles.items() if r == role)
                       for role in set(roles.values())}
            start = time.monotonic()
            for pid, role in report["pids"].items():
                if role == "worker":
                    _kill(int(pid))
            cleaned = _seconds_until_gone(folder, start, timeout=10.0)
        finally:
            parent.kill()
            parent.wait()
            for pid in report.get("pids", {}):
                _kill(int(pid))
            removed = _remove_leftovers_of(parent.pid)
        tracker_said = [line.split("resource_tracker: ")[-1].split(" {")[0].rstrip(":")
                        for line in errors.read_text().splitlines() if "leaked" in line]
    return KilledParent(str(folder), bytes_left, folders_left, orphans, cleaned, tracker_said,
                        [str(p) for p in removed])


def _wait_for_report(parent: subprocess.Popen, said: Path, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while not said.exists() or not said.read_text().endswith("\n"):
        if parent.poll() is not None:
            raise RuntimeError(f"the parent program exited with code {parent.returncode} before it held")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the parent program did not hold its array within {timeout:.0f} s")
        time.sleep(0.02)
    return json.loads(said.read_text())


def _kill(pid: int) -> None:
    try:
        process = psutil.Process(pid)
        process.kill()
        process.wait(10)
    except psutil.NoSuchProcess:
        pass


def _seconds_until_gone(folder: Path, start: float, timeout: float) -> float | None:
    while folder.exists():
        if time.monotonic() - start > timeout:
            return None
        time.sleep(0.02)
    return time.monotonic() - start


def _remove_leftovers_of(pid: int) -> list[Path]:
    """Remove the joblib folders and loky semaphores (``sem.loky-<pid>-*``) a dead process left."""
    found = joblib_folders(pid)
    found += sorted(SHM_DIR.glob(f"sem.loky-{pid}-*")) if SHM_DIR.is_dir() else []
    for path in found:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return found


def _role(cmdline: str) -> str:
    if "LokyProcess" in cmdline:
        return "worker"
    return "loky resource tracker" if "loky" in cmdline else "resource tracker"


def parent_program(n_items: int, n_workers: int, report_path: str) -> None:
    """The program ``kill_parent_while_holding`` SIGKILLs: a reused Parallel whose workers hold a random
    array; it writes its joblib folder and its children's pids (by role) to ``report_path``."""
    array = np.random.default_rng(6).random(n_items)
    with Parallel(n_jobs=n_workers, backend=BACKEND) as parallel:
        views = parallel(delayed(describe_argument)(array) for _ in range(n_workers))
        pids = {str(child.pid): _role(" ".join(child.cmdline()))
                for child in psutil.Process().children(recursive=True)}
        Path(report_path).write_text(json.dumps({"folder": str(Path(views[0].filename).parent), "pids": pids})
                                     + "\n")
        parallel(delayed(sleep_holding)(array, 600.0) for _ in range(n_workers))


# --- Worker function (runs in the parent program's loky workers; importable by name) ---


def sleep_holding(array: np.ndarray, seconds: float) -> None:
    """Keep ``array`` (a worker's mapping of joblib's file) for ``seconds``."""
    touch_pages(array)
    time.sleep(seconds)


if __name__ == "__main__":
    parent_program(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
