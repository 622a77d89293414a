"""The issue's performance targets, measured (``helpers.bench.transport_suite``), not timed unit tests.

At 100 MiB (and 1000 MiB with ``LAB_BENCH_LARGE=1`` when the machine has room), random float64,
medians of REPEAT runs against the floors measured just before, in the same process:
- executor round trip, pool warm: at most 2x floor (a) (one copy into warm memory);
- executor first call (fresh executor, empty pool): at most 1.2x floor (b) (one copy into a new
  shared-memory segment);
- an array already in shared memory: under 2 ms at 1 MiB and 100 MiB, and flat (ratio < 3);
- the torch-free reduction's first share with warm segments: at most 2x floor (a), local and remote.

The machine is shared and noisy: a target that fails is measured once more (a ratio target with
its floors), and fails only if both attempts miss (a real regression misses both); the limits are
the issue's, never loosened.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from helpers.bench import cli, targets
from helpers.bench import transport_suite as transport
from helpers.measure import copy_floors
from helpers.measure.units import MiB

REPEAT = 5
ATTEMPTS = 2
SIZES = [100 * MiB]
if os.environ.get("LAB_BENCH_LARGE") == "1" and cli.largest_size_that_fits() >= 1000 * MiB:
    SIZES.append(1000 * MiB)


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"{n // MiB}MiB")
def source(request) -> np.ndarray:
    return copy_floors.random_array(request.param)


def _executor_row(source: np.ndarray, label: str, floors) -> dict:
    measurements = dict(transport.executor_measurements(source, floors, repeat=REPEAT, n_workers=2,
                                                        stdlib=False))
    return measurements[label]()


def _holds_in_one_of_two(measure_row, floor: str, limit: float, source: np.ndarray) -> None:
    """Measure the floors, then the row; the median's ratio to ``floor`` must be <= ``limit``."""
    seen = []
    for _ in range(ATTEMPTS):
        floors = transport.measure_floors(source, repeat=REPEAT)
        row = measure_row(floors)
        ratio = row["median_s"] / floors[floor].median
        runs_ms = [round(run * 1e3, 1) for run in row["runs_s"]]
        seen.append(f"{ratio:.2f}x (median {row['median_s'] * 1e3:.1f} ms, "
                    f"floor {floors[floor].median * 1e3:.1f} ms, runs {runs_ms} ms)")
        if ratio <= limit:
            return
    pytest.fail(f"{row['name']} at {source.nbytes // MiB} MiB is over {limit}x floor {floor}: "
                + "; ".join(seen))


def test_warm_round_trip_costs_at_most_two_warm_copies(source):
    _holds_in_one_of_two(lambda floors: _executor_row(source, "ours warm", floors), "warm", 2.0, source)


def test_first_call_costs_at_most_1_2_fresh_segment_copies(source):
    _holds_in_one_of_two(lambda floors: _executor_row(source, "ours first", floors), "fresh_shm", 1.2, source)


def test_already_shared_round_trip_is_under_2_ms_and_flat():
    """Seconds, not a ratio: measured once more (both sizes) if the first attempt misses."""
    seen = []
    for _ in range(ATTEMPTS):
        medians = {}
        for n_bytes in (1 * MiB, 100 * MiB):
            array = copy_floors.random_array(n_bytes)
            floors = transport.measure_floors(array[: 1 * MiB // 8], repeat=1)  # ratios unused here
            medians[n_bytes] = _executor_row(array, "ours shared", floors)["median_s"]
        seen.append(medians)
        if (max(medians.values()) < targets.SHARED_LIMIT_S
                and medians[100 * MiB] / medians[1 * MiB] < targets.SHARED_GROWTH_LIMIT):
            return
    pytest.fail(f"an already-shared round trip is over 2 ms or not flat in every attempt (seconds): {seen}")


@pytest.mark.parametrize("where", ["local", "remote"])
def test_torch_free_first_share_with_warm_segments_costs_at_most_two_warm_copies(source, where):
    _holds_in_one_of_two(lambda floors: transport.reducer_row(source, "shared_memory", where, floors, REPEAT),
                         "warm", 2.0, source)
