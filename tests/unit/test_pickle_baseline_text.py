"""Lesson 02's wording of slicing's speed-up against its byte saving: "more than" or "less than" only
when every statistic the page shows (medians and fastest runs, both pools) clears the margin; and of
``loads`` and the round trip against the fresh floor (4 KiB pages, lesson 00), as printed; and of the
big pipe's trip against its floors, which tells where section 2's stage beyond its floors went."""

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
STORED_SUM = 8.35 * MS  # the stored run's np.sum of the array alone
AT_FLOORS = "its two copies and sum at the floors (about 73 ms)"  # 11.2 + 53.9 + 8.35 ms, at their precision
STAGE = "section 2's 50 ms beyond the floors"
PAGES = "its 2 MiB pages also help, not timed apart here"


def test_a_trip_within_its_floors_on_2_mib_pages_leaves_the_reader_at_most_the_stage():
    assert reader_share(trip(49.2, 64.2, 65.3), WARM, FRESH, STORED_SUM, LEFT) == (  # the stored run
        f"At 64.2 ms, sum included, this trip took no more than {AT_FLOORS}. It skips `recv_bytes`, "
        f"but {PAGES}: `recv_bytes` took at most {STAGE}. ")


def test_a_trip_within_its_floors_and_no_faster_than_them_apart_leaves_the_stage_to_the_reader():
    assert reader_share(trip(63.0, 64.2, 65.3), WARM, FRESH, STORED_SUM, LEFT) == (
        f"At 64.2 ms, sum included, this trip took no more than {AT_FLOORS}, so {STAGE} belongs to the step "
        "it skips, `recv_bytes`. ")
    assert reader_share(trip(73.0, 73.45, 74.0), WARM, FRESH, STORED_SUM, LEFT).startswith(  # printed 73.5 ms
        "At 73.5 ms, sum included, this trip took 50 µs more than")


def test_a_trip_over_its_floors_leaves_the_reader_only_the_rest():
    assert reader_share(trip(80.0, 84.2, 90.0), WARM, FRESH, STORED_SUM, LEFT) == (
        f"At 84.2 ms, sum included, this trip took 10.8 ms more than {AT_FLOORS}: of {STAGE}, about 39.2 ms "
        "is left for the step it skips, `recv_bytes`. ")
    assert reader_share(trip(49.2, 84.2, 90.0), WARM, FRESH, STORED_SUM, LEFT) == (
        f"At 84.2 ms, sum included, this trip took 10.8 ms more than {AT_FLOORS}: of {STAGE}, "
        f"at most 39.2 ms is left for `recv_bytes`, the step it skips ({PAGES}). ")


def test_a_trip_as_far_over_its_floors_as_the_stage_singles_out_nothing():
    assert reader_share(trip(140.0, 144.2, 150.0), WARM, FRESH, STORED_SUM, LEFT) == (
        f"At 144 ms, sum included, this trip took 70.6 ms more than {AT_FLOORS}, no less than {STAGE}: "
        "it does not single out `recv_bytes`, the step it skips. ")
