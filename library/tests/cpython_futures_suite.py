"""Run CPython's own ``concurrent.futures`` tests with ``SharedMemoryExecutor`` as the process pool.

Run by test_executor_cpython_suite.py in a Python of its own (``python cpython_futures_suite.py``):
the suite's process-pool tests read ``concurrent.futures.ProcessPoolExecutor`` when their classes
are made and when they run, so this process sets it to ``SharedMemoryExecutor`` before importing
them (only here; the library patches nothing). Two tests start a fresh interpreter that imports the
executor by its class name from ``concurrent.futures``, which ours cannot be there; they are left
out here and run against ours by test_executor_cpython_suite.py with the same script and checks.
Prints one line ``RESULT: {json}`` with the ids of the tests that ran, failed, errored and were
skipped.
"""

from __future__ import annotations

import concurrent.futures
import io
import json
import sys
import unittest

from sharedarrays.executor import SharedMemoryExecutor

SUITE = "test.test_concurrent_futures"
IN_A_FRESH_INTERPRETER = ("test_interpreter_shutdown", "test_submit_after_interpreter_shutdown")


def process_pool_tests(tests: unittest.TestSuite) -> unittest.TestSuite:
    """``tests`` without the process-pool tests that import the executor by name in a new interpreter."""
    kept = unittest.TestSuite()
    for test in _flat(tests):
        name = test.id().rsplit(".", 1)[-1]
        if not (name in IN_A_FRESH_INTERPRETER and "ProcessPool" in test.id()):
            kept.addTest(test)
    return kept


def _flat(tests):
    for test in tests:
        if isinstance(test, unittest.TestSuite):
            yield from _flat(test)
        else:
            yield test

if __name__ == "__main__":
    concurrent.futures.ProcessPoolExecutor = SharedMemoryExecutor
    tests = process_pool_tests(unittest.defaultTestLoader.loadTestsFromName(SUITE))
    stream = io.StringIO()
    result = unittest.TextTestRunner(stream=stream, verbosity=0).run(tests)
    print(stream.getvalue()[-20000:], file=sys.stderr)
    print("\nRESULT: " + json.dumps({
        "ran": result.testsRun,
        "failed": sorted(test.id() for test, _ in result.failures),
        "errors": sorted(test.id() for test, _ in result.errors),
        "skipped": len(result.skipped),
    }), flush=True)
