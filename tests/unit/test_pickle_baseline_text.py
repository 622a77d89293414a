"""Lesson 02's wording of slicing's speed-up against its byte saving: "more than" or "less than" only
when every statistic the page shows (medians and fastest runs, both pools) clears the margin; and of
``loads`` and the round trip against the fresh floor (4 KiB pages, lesson 00), as printed; and of the
big pipe's trip: only the pipe grew from the small pipe's trip, and against section 2's stage through
the same pipe it differs in reader and pages, not timed apart (no floor sum it is not bound by)."""

import pytest

from helpers.lessons.pickle_baseline import (
    BYTES_MARGIN,
    HUGE_PAGES,
    against_bytes,
    against_stage,
    loads_against_fresh,
    pipe_grew,
    shown,
    trip_against_fresh,
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


def test_a_trip_whose_fastest_run_beats_one_fresh_copy_names_huge_pages():
    wording = trip_against_fresh(trip(49.2, 64.2, 64.2, 65.3, 64.5), FRESH)  # the stored run
    assert wording == (  # the cause is not measured here: worded so
        "; its fastest run (49.2 ms), its other steps included, beat even one copy at the fresh floor "
        "(53.9 ms): its new array's pages cost less than 4 KiB ones, as 2 MiB pages (see the floors) "
        "would; this page does not time that copy")


@pytest.mark.parametrize("runs", [(55.0, 58.0, 60.0), (63.0, 66.0, 68.0), (80.0, 85.0, 90.0)])
def test_a_trip_is_held_to_no_floor_sum(runs):  # its copies land in 2 MiB pages: "fresh" bounds none
    assert trip_against_fresh(trip(*runs), FRESH) == ""


MiB = 1 << 20
SMALL_TRIP, BIG_TRIP = trip(125.0, 136.0, 137.0), trip(49.2, 64.2, 65.3)  # stored: 64 KiB and 1 MiB pipes


def test_only_the_pipe_grew_between_the_two_trips():
    assert pipe_grew(SMALL_TRIP, BIG_TRIP, FRESH, 128 * MiB, 65536, MiB) == (
        "A 1 MiB pipe cut it to 64.2 ms (only the pipe grew, fills 2,048 → 128); its fastest run "
        "(49.2 ms), its other steps included, beat even one copy at the fresh floor (53.9 ms): its new "
        "array's pages cost less than 4 KiB ones, as 2 MiB pages (see the floors) would; this page does not "
        "time that copy. ")


def test_a_big_pipe_no_faster_on_medians_says_so_and_gives_the_fastest_runs():
    assert pipe_grew(trip(60.0, 64.2, 65.0), trip(58.0, 64.2, 66.0), FRESH, 128 * MiB, None, MiB) == (
        "A 1 MiB pipe took 64.2 ms (only the pipe grew): no faster on medians "
        "(fastest runs 60 ms and 58 ms). ")


def test_the_trip_against_section_2s_stage_gives_the_gap_and_leaves_reader_and_pages_together():
    stage = trip(160.0, 169.0, 175.0)
    wording = against_stage(BIG_TRIP, stage)  # the stored run: 169 - 64.2 ms as printed
    assert wording == (
        "Section 2's stage through that pipe took 169 ms; this trip, sum included, took 105 ms less. "
        "They differ in reader (into a new array, not `recv_bytes`) and so in pages, not timed apart here. ")
    assert "took 11 ms more." in against_stage(trip(170.0, 179.8, 185.0), stage)  # printed 180 ms
    assert "took as long." in against_stage(stage, stage)
    assert "floor" not in wording and "MiB" not in wording  # no page size this page does not measure
