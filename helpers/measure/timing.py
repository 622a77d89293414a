"""Time a piece of code honestly: warm-up runs, then repeats; medians and spread, in seconds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from helpers.measure.units import format_seconds


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of repeated runs of one piece of code (warm-up runs excluded)."""

    runs: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median run time in seconds."""
        return statistics.median(self.runs)

    @property
    def min(self) -> float:
        """Fastest run in seconds."""
        return min(self.runs)

    @property
    def max(self) -> float:
        """Slowest run in seconds."""
        return max(self.runs)

    @property
    def iqr(self) -> float:
        """Interquartile range of the runs in seconds (0 with fewer than two runs)."""
        if len(self.runs) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.runs, n=4, method="inclusive")
        return q3 - q1

    def __str__(self) -> str:
        return (
            f"median {format_seconds(self.median)} "
            f"(IQR {format_seconds(self.iqr)}, min {format_seconds(self.min)}, n={len(self.runs)})"
        )


def time_it(
    fn: Callable[[], object],
    repeat: int = 5,
    warmup: int = 1,
    setup: Callable[[], object] | None = None,
) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then ``repeat`` times timed; return the Timing.

    ``setup`` (optional) runs before every call, untimed: use it to undo what ``fn`` did.
    """
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
    runs = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return Timing(tuple(runs))


def time_in_turns(ways: Mapping[str, Callable[[], object]], repeat: int = 5,
                  warmup: int = 0) -> dict[str, Timing]:
    """Time several pieces of code in turns: each round runs every way once, so that a busy moment
    of the machine slows one run of each rather than every run of one; each round starts one way
    further on (``rotated``), so that no way always runs at the same point of a round (under a CPU
    quota, the last runs of a round are the likeliest to wait for the next period). ``warmup``
    rounds run untimed first. Returns each way's Timing (seconds), by the keys of ``ways``."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    for _ in range(warmup):
        for fn in ways.values():
            fn()
    runs: dict[str, list[float]] = {name: [] for name in ways}
    for round_number in range(repeat):
        for name, fn in rotated(list(ways.items()), round_number):
            start = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - start)
    return {name: Timing(tuple(seconds)) for name, seconds in runs.items()}


def rotated(items: list, round_number: int) -> list:
    """``items`` in the order round ``round_number`` runs them: starting ``round_number`` places on."""
    start = round_number % len(items) if items else 0
    return items[start:] + items[:start]


@dataclass
class Stopwatch:
    """Seconds elapsed inside a ``stopwatch()`` block; ``seconds`` is set when the block ends."""

    start: float = field(default_factory=time.perf_counter)
    seconds: float = float("nan")

    def __str__(self) -> str:
        return format_seconds(self.seconds)


@contextmanager
def stopwatch() -> Iterator[Stopwatch]:
    """Time one block of code: ``with stopwatch() as sw: ...``, then ``sw.seconds``."""
    watch = Stopwatch()
    try:
        yield watch
    finally:
        watch.seconds = time.perf_counter() - watch.start
