"""Lesson 02's wording of slicing's speed-up against its byte saving: "more than" or "less than" only
when every statistic the page shows (medians and fastest runs, both pools) clears the margin."""

import pytest

from helpers.lessons.pickle_baseline import BYTES_MARGIN, against_bytes

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
