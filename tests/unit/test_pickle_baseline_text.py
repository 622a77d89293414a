"""Lesson 02's wording of slicing's speed-up against its byte saving: "more than" or "less than" only
when every statistic the page shows (medians and fastest runs, both pools) clears the margin; and of
``loads`` and the round trip against the fresh floor (4 KiB pages, lesson 00), as printed."""

import pytest

from helpers.lessons.pickle_baseline import (
    BYTES_MARGIN,
    HUGE_PAGES,
    NEW_ARRAY_PAGES,
    against_bytes,
    loads_against_fresh,
    reader_share,
    shown,
    trip_against_floors,
)
from helpers.measure.timing import Timing

ABOUT = "about 2×, as the 2× fewer bytes predict"


@pytest.mark.parametrize("speed_ups, wording", [
    ((2.06, 2.22, 2.26, 1.90), ABOUT),  # a stored run: one median past the margin, one fastest below 2x
    ((2.3, 2.4, 2.25, 2.5), "more than the 2× fewer bytes"),
    ((1.6, 1.7, 1.75, 1.5), "less than the 2× fewer bytes"),
    ((2.5, 2.6, 2.7, 2.1), ABOUT),  # one statistic within the margin is enough for "about"
    ((1.5, 1.6, 1.7, 1.9), ABOUT),
    ((1.2, 3.0, 1.3, 2.9), ABOUT),  # the two directions at once
])
def test_a_direction_is_said_only_when_every_statistic_clears_the_margin(speed_ups, wording):
    assert against_bytes(speed_ups, 2.0) == wording


def test_the_margin_is_the_line_on_both_sides():
    assert against_bytes([2 * BYTES_MARGIN * 0.999] * 4, 2.0) == ABOUT
    assert against_bytes([2 * BYTES_MARGIN * 1.001] * 4, 2.0) == "more than the 2× fewer bytes"
    assert against_bytes([2 / BYTES_MARGIN * 1.001] * 4, 2.0) == ABOUT
    assert against_bytes([2 / BYTES_MARGIN * 0.999] * 4, 2.0) == "less than the 2× fewer bytes"
    assert against_bytes([3.2] * 4, 3.0) == "about 3×, as the 3× fewer bytes predict"


MS = 1e-3
WARM, FRESH, SUM = 11.2 * MS, 53.9 * MS, 8.3 * MS  # about a stored run's floors and np.sum


def trip(*runs_ms: float) -> Timing:
    return Timing(tuple(run * MS for run in runs_ms))


def test_shown_is_the_printed_figure():
    assert shown(0.06420000001) == pytest.approx(0.0642)
    assert shown(0.1048) == pytest.approx(0.105)


@pytest.mark.parametrize("runs, wording", [
    ((50.9, 52.9, 55.2), "about the fresh floor (its runs straddle it)"),  # the stored run
    ((53.9, 55.0, 56.0), "1.0× the fresh floor"),  # at the floor is not under it
    ((60.0, 65.0, 70.0), "1.2× the fresh floor"),
])
def test_loads_names_no_huge_pages_unless_every_run_is_under_the_floor(runs, wording):
    assert loads_against_fresh(trip(*runs), FRESH) == wording


def test_loads_under_the_floor_in_every_run_names_huge_pages():
    wording = loads_against_fresh(trip(40.0, 45.0, 53.8), FRESH)
    assert wording.startswith("under the fresh floor in every run") and HUGE_PAGES in wording


def test_a_trip_whose_fastest_run_beats_one_fresh_copy_names_huge_pages_not_overlap():
    wording = trip_against_floors(trip(49.2, 64.2, 64.2, 65.3, 64.5), WARM, FRESH, SUM)  # the stored run
    assert wording == ("; its fastest run (49.2 ms) beat even one copy at the fresh floor (53.9 ms): "
                       "a new array asks for 2 MiB pages (see the floors)")


def test_a_median_under_the_fresh_copy_and_the_sum_names_huge_pages_not_overlap():
    wording = trip_against_floors(trip(55.0, 58.0, 60.0), WARM, FRESH, SUM)  # 58 ms, under 62.2 ms
    assert wording.startswith(", under its copy at the fresh floor and the sum alone (62.2 ms)")
    assert NEW_ARRAY_PAGES in wording and "overlap" not in wording


def test_only_a_gap_the_warm_copy_can_hide_is_put_down_to_overlap():
    wording = trip_against_floors(trip(63.0, 66.0, 68.0), WARM, FRESH, SUM)
    assert wording == (", 7.4 ms under its two copies and the sum at the floors (73.4 ms): "
                       "its copy into the pipe overlaps them")


def test_a_trip_over_its_floors_says_by_how_much():
    wording = trip_against_floors(trip(80.0, 85.0, 90.0), WARM, FRESH, SUM)
    assert wording == ": 11.6 ms more than its two copies and the sum at the floors (73.4 ms)"


LEFT = 50 * MS  # section 2's stage through the 1 MiB pipe beyond its copies at the floors
NOT_READER = "its 50 ms beyond the floors was not the reader. "


def test_the_reader_share_works_out_the_saving_less_one_fresh_copy_from_the_printed_figures():
    assert reader_share(0.169, 0.0642, FRESH, LEFT) == (  # stored: 169 - 64.2 - 53.9 = 50.9 ms, 50 ms left
        "Against section 2's stage:\n\n```\n"
        "    169 ms  section 2's stage through the 1 MiB pipe\n"
        "-  64.2 ms  this trip (one copy fewer, its sum included)\n"
        "-  53.9 ms  that copy, at the fresh floor\n"
        "=  50.9 ms  recv_bytes beyond its copies\n"
        "```\n\n"
        "`recv_bytes` took about all of the stage's 50 ms beyond the floors. ")


@pytest.mark.parametrize("trip_s, amount", [
    (0.055, "more than"),  # 169 - 55 - 53.9 = 60.1 ms: 1.2 x the 50 ms
    (0.069, "about all of"),  # 46.1 ms: 0.92 x
    (0.075, "most of"),  # 40.1 ms: 0.8 x
    (0.089, "most of"),  # 26.1 ms: 0.52 x
    (0.095, "part of"),  # 20.1 ms: 0.4 x
])
def test_the_reader_share_is_worded_by_its_fraction_of_the_stage_beyond_the_floors(trip_s, amount):
    assert reader_share(0.169, trip_s, FRESH, LEFT).endswith(
        f"`recv_bytes` took {amount} the stage's 50 ms beyond the floors. ")


def test_no_share_is_given_to_the_reader_when_the_trip_saved_no_more_than_the_copy():
    assert reader_share(0.169, 0.120, FRESH, LEFT).endswith("no more than that copy: " + NOT_READER)
    assert reader_share(0.100, 0.120, FRESH, LEFT).endswith("no longer than this trip: " + NOT_READER)
