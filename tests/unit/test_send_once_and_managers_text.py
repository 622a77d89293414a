"""Lesson 03's sentences about its start-up model, the proxy across sizes and the break-even line:
worded from the figures as the page prints them (no processes started)."""

from helpers.lessons import send_once_and_managers_figures as figures
from helpers.measure.units import MiB

SIZES = [8 * MiB, 32 * MiB, 128 * MiB]
# the stored run: pickling 190 ms, unpickling 97 ms (section 1); installing added +90, +170, +580 ms
STORED = (2, 0.1932, 0.0971, SIZES, [0.0902, 0.1688, 0.5811])


def test_the_start_up_model_is_printed_at_every_size_from_the_rounded_parts():
    assert figures.start_up_model_table(*STORED).splitlines() == [
        "start-up added to an empty pool, against the model 2 × (pickling + unpickling) scaled by size:",
        "    8 MiB: measured +90 ms, model 36 ms",
        "   32 MiB: measured +170 ms, model 140 ms",
        "  128 MiB: measured +580 ms, model 570 ms",
    ]
    unmodelled = figures.start_up_model_table(2, 0.19, 0.097, SIZES, [None, 0.17, 0.58], model=False)
    assert unmodelled.splitlines() == [
        "start-up added to an empty pool:", "    8 MiB: nothing measurable", "   32 MiB: measured +170 ms",
        "  128 MiB: measured +580 ms"]


def test_the_start_up_sentence_sums_the_printed_parts_and_names_what_the_model_leaves_out():
    assert figures.start_up_against_model(*STORED) == (
        "2 × (190 ms + 97 ms, section 1) = 570 ms at 128 MiB, measured 580 ms: the model fits at 128 "
        "MiB. At 8 MiB, scaled by size, it leaves most of the start-up to a part not broken down here: "
        "54 ms of 90 ms.")
    some = figures.start_up_against_model(2, 0.1932, 0.0971, SIZES, [0.06, 0.1688, 0.5611])
    assert some.endswith("leaves some of the start-up to a part not broken down here: 24 ms of 60 ms.")
    more = figures.start_up_against_model(2, 0.1932, 0.0971, SIZES, [0.0902, 0.1688, 0.8])
    assert "measured 800 ms, more. At 8 MiB" in more


def test_the_start_up_sentence_follows_the_smaller_sizes():
    near = figures.start_up_against_model(2, 0.19, 0.097, SIZES, [0.04, 0.15, 0.58])
    assert near.endswith("near it; scaled by size (printed above), near it at every size.")
    less = figures.start_up_against_model(2, 0.19, 0.097, SIZES, [None, 0.15, 0.3])
    assert "measured 300 ms, less: some of it overlapped" in less
    assert less.endswith("less at 8 MiB: some of it overlapped.")


def test_the_proxy_across_sizes_is_flat_within_noise_or_says_how_far_it_moved():
    assert figures.proxy_across_sizes([2.5419e-3, 2.4401e-3, 1.8203e-3], 8) == (
        "the proxy's (8 reads) falls within 1.4×: flat within noise, as a read moves one item at any length")
    assert figures.proxy_across_sizes([1e-3, 2e-3, 3e-3], 8) == (
        "the proxy's (8 reads) rises 3× across the sizes, though a read moves one item at any length")
    varies = figures.proxy_across_sizes([2e-3, 1e-3, 1.8e-3], 8)
    assert varies.startswith("the proxy's (8 reads) varies 2× across")


def test_off_the_line_says_which_way_the_line_ran_in_whole_percent():
    assert figures.off_the_line([-0.1604, -0.4197]) == "ran 16% to 42% high"
    assert figures.off_the_line([0.05]) == "ran 5% low"
    assert figures.off_the_line([0.051, 0.049]) == "ran 5% low"
    assert figures.off_the_line([-0.16, 0.05, 0.02]) == "ran 16% high to 5% low"
