"""helpers.measure.timing and helpers.measure.units: warm-ups excluded, medians and spreads, human formats."""

import time

import pytest

from helpers.measure.timing import Timing, stopwatch, time_in_turns, time_it
from helpers.measure.units import (
    GiB,
    KiB,
    MiB,
    approx_seconds,
    format_bytes,
    format_rate,
    format_seconds,
    shown,
)


def test_time_it_runs_warmups_untimed_then_the_repeats():
    calls, setups = [], []
    timing = time_it(lambda: calls.append(1), repeat=4, warmup=2, setup=lambda: setups.append(1))
    assert len(calls) == 6 and len(setups) == 6
    assert len(timing.runs) == 4


def test_a_slow_first_call_is_left_out_by_the_warmup():
    state = {"first": True}

    def slow_once():
        if state["first"]:
            state["first"] = False
            time.sleep(0.2)

    timing = time_it(slow_once, repeat=3, warmup=1)
    assert timing.max < 0.1


def test_time_in_turns_runs_one_call_of_each_way_per_round_and_times_each_apart():
    order = []
    timings = time_in_turns({"fast": lambda: order.append("fast"),
                             "slow": lambda: (order.append("slow"), time.sleep(0.02))},
                            repeat=3, warmup=1)
    # the warm-up round, then three timed rounds, in turns, each starting one way further on
    assert order == ["fast", "slow", "fast", "slow", "slow", "fast", "fast", "slow"]
    assert len(timings["fast"].runs) == len(timings["slow"].runs) == 3
    assert timings["slow"].min >= 0.02 > timings["fast"].max  # each way's own time, not the round's
    with pytest.raises(ValueError):
        time_in_turns({"x": lambda: None}, repeat=0)


def test_timing_statistics():
    timing = Timing((1.0, 2.0, 3.0, 4.0, 100.0))
    assert timing.median == 3.0
    assert timing.min == 1.0 and timing.max == 100.0
    assert timing.iqr == pytest.approx(2.0)
    assert Timing((5.0,)).iqr == 0.0
    assert "median 3 s" in str(timing)
    with pytest.raises(ValueError):
        time_it(lambda: None, repeat=0)


def test_stopwatch_measures_the_block_also_when_it_raises():
    outer_start = time.perf_counter()
    with stopwatch() as watch:
        time.sleep(0.05)
    outer = time.perf_counter() - outer_start
    assert 0.05 <= watch.seconds <= outer  # the block's time, within what was measured around it
    with pytest.raises(KeyError), stopwatch() as failing:
        raise KeyError("x")
    assert failing.seconds >= 0


@pytest.mark.parametrize(
    ("n_bytes", "text"),
    [(0, "0 B"), (512, "512 B"), (3 * KiB, "3 KiB"), (int(3.25 * MiB), "3.25 MiB"),
     (128 * MiB, "128 MiB"), (int(1.5 * GiB), "1.5 GiB"), (-2 * MiB, "-2 MiB")],
)
def test_format_bytes(n_bytes, text):
    assert format_bytes(n_bytes) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(2e-7, "200 ns"), (3.5e-5, "35 µs"), (0.0125, "12.5 ms"), (1.3, "1.3 s"), (125, "2 min 5 s")],
)
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


def test_format_rate():
    assert format_rate(10 * GiB) == "10 GiB/s"
    assert format_rate(250 * MiB) == "250 MiB/s"
    assert format_rate(1010 * MiB) == "1010 MiB/s"  # no exponent between 1000 MiB/s and 1 GiB/s


def test_shown_and_approx_seconds_round_as_the_page_prints():
    assert shown(0.0123456) == 0.0123
    assert approx_seconds(0.4312) == "430 ms"
    assert approx_seconds(1.234) == "1.2 s"
    assert approx_seconds(37.4e-6) == "37 µs"


def test_format_seconds_rounds_before_it_picks_the_unit():
    assert format_seconds(0.9996) == "1 s"
    assert format_seconds(0.0009996) == "1 ms"
    assert format_seconds(999.6e-9) == "1 µs"
    assert format_seconds(0.9994) == "999 ms"
