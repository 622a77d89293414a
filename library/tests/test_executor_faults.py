"""SharedMemoryExecutor's fault matrix: whatever stops its work, nothing is left behind.

Seven faults hit a program while big arrays are in flight (two tasks of 24 MiB running, more queued
and pending, and a 4 MiB result the caller holds): a task raises, pending work is cancelled,
``shutdown(cancel_futures=True)``, a worker is SIGKILLed, the program is SIGKILLed, Ctrl-C reaches
its process group, its whole process group is SIGKILLed (then ``sweep()`` runs from a fresh process).
Each runs under fork, spawn and forkserver, in a private /dev/shm of 64 MiB (some arrays and results
do not fit and are pickled) and of 2 GiB (all fit). After each fault, within a few seconds, /dev/shm
is empty (not one file, ours or the stdlib's) and no process of the program's session is left:
workers, resource tracker and forkserver are all gone.

Each case runs ``DRIVER`` inside its own mount namespace: it starts ``PROGRAM`` in a new session,
waits until the tasks run, delivers the fault, then waits and checks, and prints a JSON report.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from private_shm import needs_private_tmpfs, run_in_private_dev_shm

pytestmark = pytest.mark.fault_matrix  # .ci/run: the default Python runs it; the others skip it for time

HERE = Path(__file__).resolve().parent

SURVIVED = ["exception", "cancel", "shutdown", "worker SIGKILL"]  # the program goes on and exits
STOPPED = ["parent SIGKILL", "Ctrl-C"]  # the program is stopped while it waits for a result
GROUP_KILLED = "group SIGKILL"  # nothing of the program can clean up: sweep() does
METHODS = ["fork", "spawn", "forkserver"]
SIZES = ["64m", "2g"]

PROGRAM = """
    import gc, json, multiprocessing as mp, os, sys
    import numpy as np
    from fault_workers import announce_then_hold
    import array_workers as workers
    from sharedarrays.executor import SharedMemoryExecutor
    from sharedarrays.room import SEGMENT_PREFIX
    MiB = 1 << 20
    N_ITEMS = 24 * MiB // 8
    WAITS_FOR_A_SIGNAL = ("parent SIGKILL", "Ctrl-C", "group SIGKILL")

    def outcome(n, future):
        if future.cancelled():
            return "cancelled"
        if future.exception() is not None:
            return type(future.exception()).__name__
        result = future.result()
        return "ok" if result.shape == (N_ITEMS,) and result[0] == n + 1 else "wrong"

    if __name__ == "__main__":
        import faulthandler, signal
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # the driver asks for stacks if it waits long
        fault, method = sys.argv[1:]
        executor = SharedMemoryExecutor(2, mp.get_context(method))
        held = executor.submit(workers.plus_one, np.zeros(4 * MiB // 8)).result()  # a result segment
        # Two tasks hold their 24 MiB argument (60 s where a kill or Ctrl-C is to cut them short, else
        # 2 s); three more wait in the call queue (packed: in segments, or pickled), three are pending.
        hold = 60.0 if fault in WAITS_FOR_A_SIGNAL + ("worker SIGKILL",) else 2.0
        futures = [executor.submit(announce_then_hold, np.full(N_ITEMS, float(n)), hold if n < 2 else 0.0,
                                   fault == "exception") for n in range(8)]
        # One os.write: where PYTHONUNBUFFERED is set (this machine sets it), print() writes "ready"
        # and its newline apart, and a worker's "running <pid>" line can land between the two.
        os.write(1, b"ready\\n")
        if fault in WAITS_FOR_A_SIGNAL:
            futures[0].result()
            sys.exit("the signal never came")
        if fault != "worker SIGKILL":
            sys.stdin.readline()  # the driver saw both tasks running
        if fault == "cancel":
            said_cancelled = [future.cancel() for future in reversed(futures)][::-1]
        elif fault == "shutdown":
            executor.shutdown(cancel_futures=True)
        outcomes = [outcome(n, future) for n, future in enumerate(futures)]
        if fault == "cancel":
            assert said_cancelled == [o == "cancelled" for o in outcomes], (said_cancelled, outcomes)
        executor.shutdown()
        del held, futures
        gc.collect()
        ours_left = sorted(name for name in os.listdir("/dev/shm") if name.startswith(SEGMENT_PREFIX))
        print(json.dumps({"outcomes": outcomes, "pickled_fallbacks": executor.pickled_fallbacks,
                          "ours_left_after_shutdown": ours_left}), flush=True)
"""

DRIVER = r"""
    import json, os, queue, shutil, signal, subprocess, sys, tempfile, threading, time

    fault, method, program = sys.argv[1:]
    RUNNING_DEADLINE_S = 60  # the program's tasks run within this (2-3 s alone; far more beside other jobs)
    EXIT_DEADLINE_S = 60  # the program exits within this after its fault (1-3 s alone; CI once took over 20)
    began = time.monotonic()
    report = {"error": None}

    def in_dev_shm():
        return sorted(os.listdir("/dev/shm"))

    def alive_in_session(session):
        '''Processes of the session that still run (a zombie has exited: it is only not reaped yet).'''
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    state = stat.read().rsplit(")", 1)[1].split()[0]  # after the command's name
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
                if os.getsid(int(entry)) == session and state != "Z":
                    found.append(f"{entry} {command[:200]}")
            except OSError:  # it ended meanwhile
                pass
        return found

    def wait_for(condition, seconds):
        deadline = time.monotonic() + seconds
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.05)

    def ctrl_c_reaches_it():
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # even where this driver inherited it ignored

    # The program's temp folder, to see what it leaves there (multiprocessing's pymp-* folders)
    program_temp = tempfile.mkdtemp(prefix="sal-fault-temp-")
    child = subprocess.Popen([sys.executable, "-c", program, fault, method], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True, preexec_fn=ctrl_c_reaches_it,
                             env={**os.environ, "TMPDIR": program_temp})
    lines, stdout, stderr = queue.Queue(), [], []

    def read_stdout():
        for line in child.stdout:
            stdout.append(line.rstrip("\n"))
            lines.put(line.rstrip("\n"))
        lines.put(None)

    readers = [threading.Thread(target=read_stdout, daemon=True),
               threading.Thread(target=lambda: stderr.append(child.stderr.read()), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        running, ready, deadline = [], False, time.monotonic() + RUNNING_DEADLINE_S
        while not (ready and len(running) >= 2):
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                os.kill(child.pid, signal.SIGUSR1)  # every thread's stack, on the program's stderr
                time.sleep(1)
                raise TimeoutError(f"{RUNNING_DEADLINE_S} s: ready={ready}, running={running}") from None
            if line is None:
                raise RuntimeError("the program ended before its tasks ran")
            ready = ready or line == "ready"
            if line.startswith("running "):
                running.append(int(line.split()[1]))
        report["at_fault"] = in_dev_shm()
        if fault == "worker SIGKILL":
            os.kill(running[0], signal.SIGKILL)
        elif fault == "parent SIGKILL":
            child.kill()
        elif fault == "Ctrl-C":
            os.killpg(child.pid, signal.SIGINT)  # what a terminal sends its foreground job
        elif fault == "group SIGKILL":
            os.killpg(child.pid, signal.SIGKILL)
        else:
            child.stdin.write("go\n")
            child.stdin.flush()
        try:
            report["returncode"] = child.wait(timeout=EXIT_DEADLINE_S)  # reaped at once, as a shell would
        except subprocess.TimeoutExpired:  # every thread's stack (program, workers) on the program's stderr
            for pid in [child.pid, *running]:
                try:
                    os.kill(pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass
            time.sleep(1)
            raise
        if fault == "group SIGKILL":
            wait_for(lambda: not alive_in_session(child.pid), 10)
            report["left_before_sweep"] = in_dev_shm()
            sweep = subprocess.run([sys.executable, "-m", "sharedarrays", "sweep", "--semaphores"],
                                   capture_output=True, text=True, timeout=20)
            report["swept"] = sweep.stdout.strip() + sweep.stderr.strip()
        stopped = time.monotonic()
        wait_for(lambda: not in_dev_shm() and not alive_in_session(child.pid), 15)
        report["seconds_to_clean"] = round(time.monotonic() - stopped, 2)
    except Exception as error:
        report["error"] = repr(error)
    finally:
        report["left"] = in_dev_shm()
        report["alive"] = alive_in_session(child.pid)
        if report["alive"]:  # never leave them running on the machine: end the group, then report
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            for line in report["alive"]:
                try:
                    os.kill(int(line.split()[0]), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        child.kill()
        child.wait()
        for reader in readers:
            reader.join(timeout=5)
        report["temp_left"] = sorted(os.listdir(program_temp))
        shutil.rmtree(program_temp, ignore_errors=True)
        report["stdout"] = stdout
        report["stderr"] = "".join(stderr)[-3000:]
        report["seconds"] = round(time.monotonic() - began, 2)
        print(json.dumps(report))
"""


def run_fault(fault: str, method: str, shm_size: str) -> dict:
    """Run ``DRIVER`` for one case in a private /dev/shm of ``shm_size``; its report."""
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    done = run_in_private_dev_shm(DRIVER, fault, method, textwrap.dedent(PROGRAM), size=shm_size, timeout=120,
                                  env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0 and done.stdout, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["error"] is None, (f"{report['error']}\nthe program's stdout: {report['stdout']}\n"
                                     f"its stderr (last 3000 characters):\n{report['stderr']}\n"
                                     f"left in /dev/shm: {report['left']}\nalive: {report['alive']}")
    print(f"{fault} / {method} / {shm_size}: {report['seconds']} s, "
          f"nothing left {report['seconds_to_clean']} s after the fault")
    return report


def assert_nothing_left(report: dict, killed: bool = False) -> None:
    """Nothing in /dev/shm, no process of the program's session, nothing in its temp folder but,
    where the program was SIGKILLed (``killed``), multiprocessing's own folder for its forkserver's
    socket: a killed process never runs the exit handler that removes it (ProcessPoolExecutor leaves
    the same), and the driver removes it."""
    assert any(name.startswith("sal_") for name in report["at_fault"]), report  # the fault hit segments
    assert report["alive"] == [], report
    assert report["left"] == [], report
    stdlib_folders = [name for name in report["temp_left"] if name.startswith("pymp-")] if killed else []
    assert report["temp_left"] == stdlib_folders, report


def program_report(report: dict) -> dict:
    """What the program printed once it had shut its executor down."""
    return json.loads(next(line for line in report["stdout"] if line.startswith("{")))


@needs_private_tmpfs
@pytest.mark.timeout(150)
@pytest.mark.parametrize("shm_size", SIZES)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("fault", SURVIVED)
def test_a_fault_the_program_survives_frees_every_segment_and_leaves_nothing_once_it_exits(
        fault, method, shm_size):
    report = run_fault(fault, method, shm_size)
    assert report["returncode"] == 0, report
    outcome = program_report(report)
    outcomes = outcome["outcomes"]
    if fault == "exception":
        assert outcomes == ["ValueError"] * 8
    elif fault == "worker SIGKILL":
        assert outcomes == ["BrokenProcessPool"] * 8
    else:  # the two running tasks finish; some pending ones are cancelled, the rest run
        assert outcomes[:2] == ["ok", "ok"] and set(outcomes) == {"ok", "cancelled"}, outcomes
    if shm_size == "64m":  # 24 MiB arguments and results beyond the first two do not fit
        assert outcome["pickled_fallbacks"] > 0
    else:
        assert outcome["pickled_fallbacks"] == 0
    # The caller shut down and dropped every array: the executor freed its segments itself, they do
    # not wait for the resource tracker at exit.
    assert outcome["ours_left_after_shutdown"] == [], outcome
    assert_nothing_left(report)


@needs_private_tmpfs
@pytest.mark.timeout(150)
@pytest.mark.parametrize("shm_size", SIZES)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("fault", STOPPED)
def test_a_program_killed_or_interrupted_mid_task_leaves_nothing_within_seconds(fault, method, shm_size):
    report = run_fault(fault, method, shm_size)
    if fault == "Ctrl-C":
        assert report["returncode"] != 0 and "KeyboardInterrupt" in report["stderr"], report
    else:
        assert report["returncode"] == -9, report
    assert_nothing_left(report, killed=fault == "parent SIGKILL")


@needs_private_tmpfs
@pytest.mark.timeout(150)
@pytest.mark.parametrize("shm_size", SIZES)
@pytest.mark.parametrize("method", METHODS)
def test_a_killed_process_group_leaves_nothing_once_a_fresh_process_sweeps(method, shm_size):
    report = run_fault(GROUP_KILLED, method, shm_size)
    assert report["returncode"] == -9, report
    assert any(name.startswith("sal_") for name in report["left_before_sweep"]), report  # no one else did
    assert "sal_" in report["swept"], report
    assert_nothing_left(report, killed=True)
