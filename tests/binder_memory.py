"""pytest plugin for ``make test-binder``: the process tree's peak memory during each lesson.

Loaded with ``-p tests.binder_memory`` around the nbval run of the notebooks. One
``helpers.measure.memory.track_memory`` sampler watches this pytest process and every descendant (the
kernel nbval starts, the lesson's workers, Ray's processes) for the whole run; each notebook's
window runs from its first cell to the next notebook's first cell (kernel start and shutdown
included). Its peak is the highest tree PSS plus the bytes in ``/dev/shm`` (counted twice where a
process maps them: an upper bound). The run fails when a lesson's peak reaches ``LIMIT_BYTES``,
what a Binder machine (2 GB of RAM) leaves the lessons beside the Jupyter server.
"""

from __future__ import annotations

import os
from contextlib import ExitStack

import pytest

from helpers.measure import system
from helpers.measure.memory import track_memory
from helpers.measure.units import format_bytes

LIMIT_BYTES = int(os.environ.get("LAB_BINDER_PEAK_LIMIT_BYTES", 1.5e9))

_stack = ExitStack()
_report = None
_starts: list[tuple[str, float]] = []  # (notebook, seconds since tracking began) in run order


def pytest_sessionstart(session):
    global _report
    _report = _stack.enter_context(track_memory(interval=0.05, trace_python=False))


def pytest_runtest_logstart(nodeid, location):
    notebook = nodeid.split("::")[0]
    if _report is not None and (not _starts or _starts[-1][0] != notebook):
        _starts.append((notebook, _report.mark(notebook)))


def peaks() -> list[tuple[str, float, int, int]]:
    """(notebook, seconds, peak tree PSS + /dev/shm bytes, peak /dev/shm bytes) for each notebook."""
    ends = [start for _, start in _starts[1:]] + [float("inf")]
    found = []
    for (notebook, start), end in zip(_starts, ends, strict=True):
        window = [s for s in _report.samples if start <= s.time <= end]
        if not window:
            continue
        last = min(end, window[-1].time)
        found.append((notebook, last - start, max(s.pss + max(s.shm, 0) for s in window),
                      max(max(s.shm, 0) for s in window)))
    return found


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    _stack.close()  # stops the sampler; the report is complete
    if _report is None:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    rows = peaks()
    lines = [f"Binder-sized run: /dev/shm {format_bytes(system.shm_size() or 0)}, "
             f"{system.usable_cpus()} usable CPU(s); peak of the process tree (PSS + /dev/shm) per lesson, "
             f"limit {LIMIT_BYTES / 1e9:.2g} GB ({format_bytes(LIMIT_BYTES)}):"]
    lines += [f"  {notebook:45s} {seconds:6.1f} s  peak {format_bytes(peak):>10s}"
              f"  (/dev/shm {format_bytes(shm)})"
              for notebook, seconds, peak, shm in rows]
    over = [notebook for notebook, _, peak, _ in rows if peak >= LIMIT_BYTES]
    if reporter is not None:
        for line in lines:
            reporter.write_line(line)
        if over:
            reporter.write_line(f"OVER THE BINDER LIMIT: {over}", red=True, bold=True)
    if over:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
