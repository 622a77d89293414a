"""CPython's own ``concurrent.futures`` tests, run against ``SharedMemoryExecutor``.

Every process-pool test of ``test.test_concurrent_futures`` (fork, spawn and forkserver) runs with
our executor in place of ``ProcessPoolExecutor`` (cpython_futures_suite.py, in a Python of its
own). Exactly the cases where ours differs by design fail: a call or a result that raises or
exits while it is unpickled fails its own future here, where the stdlib's pool breaks
(``BrokenProcessPool``). The suite ships with CPython's test package, which not every Python has
(here only 3.13 does): the test is skipped where it is missing. Two of its tests start a new
interpreter that imports the executor by its class name from ``concurrent.futures``; they run here,
on every Python, with the same scripts importing ours and the same checks.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cpython_futures_suite import DIFFERENT_BY_DESIGN

HERE = Path(__file__).resolve().parent
# About 400 s on a quiet machine; CI's lane runs it below make test's priority, beside it
SUITE_SECONDS = 1200


def has_cpython_suite() -> bool:
    try:
        return importlib.util.find_spec("test.test_concurrent_futures") is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.skipif(not has_cpython_suite(), reason="this Python has no test.test_concurrent_futures")
@pytest.mark.timeout(SUITE_SECONDS + 60)
def test_cpython_s_own_suite_passes_but_for_the_four_unpickling_cases_under_each_start_method():
    done = subprocess.run([sys.executable, str(HERE / "cpython_futures_suite.py")], cwd=HERE,
                          capture_output=True, text=True, timeout=SUITE_SECONDS)
    # the suite prints each test's seconds on stdout, on one line: the driver's line follows it
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT: ")]
    assert lines, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    result = json.loads(lines[-1][len("RESULT: "):])
    assert result["ran"] > 200, result
    # a failed assertRaises, or the call's own error (SystemExit, RuntimeError) escaping it
    assert sorted(result["failed"] + result["errors"]) == DIFFERENT_BY_DESIGN, done.stderr[-6000:]
    if result["passed_when_run_again"]:  # a test of the suite that times in seconds, on a busy machine
        print(f"passed when run again, as CPython's runner reruns them: {result['passed_when_run_again']}")


# CPython's test_shutdown.test_interpreter_shutdown and test_submit_after_interpreter_shutdown, their
# scripts with our executor imported (conformance_workers.sleep_and_print is the suite's helper)
INTERPRETER_SHUTDOWN = textwrap.dedent("""
    from sharedarrays.executor import SharedMemoryExecutor
    from conformance_workers import sleep_and_print
    if __name__ == "__main__":
        from multiprocessing import get_context
        t = SharedMemoryExecutor(5, mp_context=get_context("{context}"))
        t.submit(sleep_and_print, 1.0, "apple")
""")
SUBMIT_AFTER_INTERPRETER_SHUTDOWN = textwrap.dedent("""
    import atexit
    @atexit.register
    def run_last():
        try:
            t.submit(id, None)
        except RuntimeError:
            print("runtime-error")
            raise
    from sharedarrays.executor import SharedMemoryExecutor
    if __name__ == "__main__":
        from multiprocessing import get_context
        t = SharedMemoryExecutor(5, mp_context=get_context("{context}"))
        t.submit(id, 42).result()
""")


def run_script(script: str, context: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script.format(context=context)], cwd=HERE,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_a_task_running_at_interpreter_exit_finishes_first(context):
    done = run_script(INTERPRETER_SHUTDOWN, context)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.strip() == "apple"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_a_submit_from_an_atexit_hook_is_refused(context):
    done = run_script(SUBMIT_AFTER_INTERPRETER_SHUTDOWN, context)
    assert done.returncode == 0, done.stderr
    assert "RuntimeError: cannot schedule new futures" in done.stderr
    assert done.stdout.strip() == "runtime-error"
