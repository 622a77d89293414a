"""Every strategy run once in the pytest process, shared by the tests that need such a run.

A run of every strategy takes about a minute and a half (two Ray start-ups in the Ray strategies'
own spawned process, a Dask cluster, every pool): test_strategies checks its results, and
test_no_fork_after_ray checks the forks this process made during it (none after Ray had run here).
``forks_recorded`` records each ``os.fork`` of this process while it is on.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import psutil

from helpers.bench import strategies
from helpers.lessons import ray_session
from helpers.measure.units import MiB

ARRAY_BYTES = 8 * MiB
N_WORKERS = 2


class _ForkRecord:
    """Forks of this process while ``forks_recorded`` is on: whether Ray had run here at each."""

    forks: list[bool] | None = None
    hooked = False


_record = _ForkRecord()


def _note_fork() -> None:
    if _record.forks is not None:
        _record.forks.append(ray_session.ray_has_run())


@contextlib.contextmanager
def forks_recorded() -> Iterator[list[bool]]:
    """For the block: one entry per ``os.fork`` of this process (a fork-started pool's workers; not a
    spawn, which starts a fresh interpreter), True if Ray had run here by then."""
    if not _record.hooked:
        os.register_at_fork(before=_note_fork)  # stays registered; records only inside the block
        _record.hooked = True
    _record.forks = []
    try:
        yield _record.forks
    finally:
        _record.forks = None


@dataclass(frozen=True)
class EveryStrategyRun:
    """What one ``strategies.run_all`` of every strategy gave and did."""

    results: dict  # name -> StrategyResult
    progress_calls: list[tuple[str, int, int]]  # what run_all passed to ``progress``, in order
    children_after: list[psutil.Process]  # this process's descendants once it had returned
    forks: list[bool]  # one per os.fork of this process during the run: had Ray run here by then?


def run_every_strategy() -> EveryStrategyRun:
    """Every strategy once at 8 MiB with 2 workers, one timed run each, as the benchmark runs them."""
    array = np.random.default_rng(0).random(ARRAY_BYTES // 8)
    calls: list[tuple[str, int, int]] = []
    with forks_recorded() as forks:
        results = strategies.run_all(strategies.NAMES, array, N_WORKERS, repeat=1,
                                     progress=lambda *call: calls.append(call))
        forks = list(forks)
    return EveryStrategyRun({result.name: result for result in results}, calls,
                            psutil.Process().children(recursive=True), forks)
