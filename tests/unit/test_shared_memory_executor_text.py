"""helpers.lessons.shared_memory_executor_text: lesson 08's sentences say what its timings say."""

from __future__ import annotations

import sys

from helpers.lessons import shared_memory_executor_text as text
from helpers.lessons.shared_memory_executor import CallAndParts, NewResultParts, RoundTrips
from helpers.measure.timing import Timing

MiB = 1 << 20


def ms(*values: float) -> Timing:
    return Timing(tuple(value / 1e3 for value in values))


def parts(call: Timing, call_cpu: Timing, copy_of: Timing | None = None) -> CallAndParts:
    copy_of = ms(71, 72, 73) if copy_of is None else copy_of
    return CallAndParts(warm=ms(7, 7, 7), new_segment=ms(78, 79, 80), segment_steps=ms(101, 102, 103),
                        copy_of=copy_of, release=ms(30, 31, 32), call=call,
                        segment_steps_cpu=ms(101, 102, 103), call_cpu=call_cpu)


def test_the_hand_built_conclusion_says_what_the_medians_say():
    quiet = text.hand_built_conclusion(parts(ms(102, 103, 104), ms(101, 102, 103)))
    assert "**11×** a warm copy" in quiet
    assert "cost about its steps 1 and 4 (72 ms + 31 ms)" in quiet and "its CPU time matched theirs" in quiet
    assert "`copy_of` took 9% less than floor (b)" in quiet and "1.3× floor (b)" in quiet
    busy = text.hand_built_conclusion(parts(ms(102, 150, 200), ms(101, 102, 103), copy_of=ms(85, 86, 87)))
    assert "slower runs waited on a busy machine" in busy and "`copy_of` took longer than floor (b)" in busy


FIRSTS, ALONE = ms(71, 75, 79), ms(71, 72, 73)  # first calls; their segment and copy alone


def test_the_round_trips_paragraph_adds_up_the_parts_of_x_plus_one():
    trips = RoundTrips(0.9, ms(829, 830, 831), None, ms(7, 7, 7))
    ours = RoundTrips(0.08, ms(8, 8, 8), ms(0.4, 0.4, 0.4), ms(7, 7, 7))
    small = RoundTrips(0.01, ms(1, 1, 1), ms(0.3, 0.3, 0.3), ms(0.4, 0.4, 0.4))
    new_parts = NewResultParts(ms(35, 35, 35), ms(26, 26, 26), ms(7, 7, 7), ms(11, 11, 11))
    said = text.round_trips_what_to_see(trips, ours, small, FIRSTS, ALONE, new_parts, ms(148, 148, 148),
                                        parts(ms(102, 103, 104), ms(101, 102, 103)), 128 * MiB, 8 * MiB)
    assert "**100×** ours (8 ms, 1.1× floor (a), each result dropped by `time_round_trips`)." in said
    assert ("A first call (segment pool emptied) makes a segment: 75 ms (IQR 4 ms), against 72 ms (IQR 1 ms) "
            "for that segment and copy alone: equal within their spread; the message (400 µs) does not "
            "show.") in said
    assert ("as `copy_of` does. A call while a kept result views its segment makes one too "
            "(section 3's rule; not timed).") in said
    assert "**Conclusion.** Warm (1.1× floor (a)): the copy, the message and 600 µs not timed apart" in said
    assert ("16× the bytes added 100 µs. Nothing is copied: the message and mapping the segment cost this. "
            "The figure's line is 128 MiB's floor (a), 7 ms; the 8 MiB bar took 0.75× 8 MiB's floor (a) "
            "(400 µs, above).") in said  # 0.4 - 0.3 ms; 0.3 / 0.4 (cold read 08, F2: the line is 128 MiB's)
    faster_big = RoundTrips(0.08, ms(8, 8, 8), ms(0.2, 0.2, 0.2), ms(7, 7, 7))
    assert "16× the bytes took no longer. Nothing is copied" in text.round_trips_what_to_see(
        trips, faster_big, small, FIRSTS, ALONE, new_parts, ms(148, 148, 148),
        parts(ms(102, 103, 104), ms(101, 102, 103)), 128 * MiB, 8 * MiB)
    slow_first = text.round_trips_what_to_see(trips, ours, small, ms(90, 90, 90), ALONE, new_parts,
                                              ms(148, 148, 148), parts(ms(102, 103, 104), ms(101, 102, 103)),
                                              128 * MiB, 8 * MiB)
    assert ("; it took 18 ms more: the message and the worker's attach (an echo already shared took 400 µs, "
            "below) and 17.6 ms not timed apart.") in slow_first  # 90 - 72 ms; 18 - 0.4 ms
    slow_echo = RoundTrips(0.08, ms(8, 8, 8), ms(20, 20, 20), ms(7, 7, 7))  # already shared: 20 ms
    cheap_first = text.round_trips_what_to_see(trips, slow_echo, small, ms(90, 90, 90), ALONE, new_parts,
                                               ms(148, 148, 148), parts(ms(102, 103, 104), ms(101, 102, 103)),
                                               128 * MiB, 8 * MiB)
    assert ("; it took 18 ms more, no more than an echo already shared (20 ms, below): the message and the "
            "worker's attach.") in cheap_first  # nothing left untimed
    assert "took 148 ms warm (its result dropped, so its unlink is timed). Its parts, timed" in said
    assert "\n- the warm sum's call less the sum: 28 ms\n- `x + 1` here: 11 ms\n" in said  # 35 - 7 ms
    assert ("(section 2): 72 ms + 31 ms\n\nThey add up to 142 ms, against the call's 148 ms; 6 ms not "
            "broken down.") in said
    assert "(3 calls after a first one)" in said and "\n\nA sum took" in said
    assert "the faults took 18.6 ms to 20 ms a call." in said  # 26 - 7 - 0.4 ms; 35 - 7 - 8 ms
    slower = text.round_trips_what_to_see(trips, ours, small, FIRSTS, ALONE, new_parts, ms(130, 130, 130),
                                          parts(ms(102, 103, 104), ms(101, 102, 103)), 128 * MiB, 8 * MiB)
    assert "They add up to 142 ms, against the call's 130 ms, 9% more than the call." in slower
    close = text.round_trips_what_to_see(trips, ours, small, FIRSTS, ALONE, new_parts, ms(143, 143, 143),
                                         parts(ms(102, 103, 104), ms(101, 102, 103)), 128 * MiB, 8 * MiB)
    assert "against the call's 143 ms.\n" in close


def test_a_first_call_under_floor_b_and_a_whole_under_its_parts_are_said_plainly():
    trips = RoundTrips(0.9, ms(829, 830, 831), None, ms(7, 7, 7))
    ours = RoundTrips(0.08, ms(8, 8, 8), ms(0.4, 0.4, 0.4), ms(7, 7, 7))
    small = RoundTrips(0.01, ms(1, 1, 1), ms(0.3, 0.3, 0.3), ms(0.4, 0.4, 0.4))
    new_parts = NewResultParts(ms(35, 35, 35), ms(26, 26, 26), ms(7, 7, 7), ms(11, 11, 11))
    call = parts(ms(102, 103, 104), ms(101, 102, 103))
    said = text.round_trips_what_to_see(trips, ours, small, FIRSTS, ms(68, 68, 68), new_parts,
                                        ms(137, 137, 137), call, 128 * MiB, 8 * MiB)  # copy_of 72 ms
    assert ("makes a segment: 75 ms (IQR 4 ms), against 68 ms (IQR 0 ns) for that segment and copy alone; "
            "it took 7 ms more: the message and the worker's attach (an echo already shared took 400 µs, "
            "below) and 6.6 ms not timed apart. It beat floor (b) (79 ms): the pool reserves pages in bulk, "
            "as `copy_of` does.") in said  # 75 against 79 ms
    assert "took 137 ms warm (its result dropped, so its unlink is timed)." in said
    assert ("against the call's 137 ms; the call came 4% under them, as far apart as "
            "two timings of one new segment (72 ms, section 2; 68 ms here).") in said
    assert "600 µs not timed apart (8% of the call)." in said
    above_b = text.round_trips_what_to_see(trips, ours, small, ms(85, 85, 85), ALONE, new_parts,
                                           ms(137, 137, 137), call, 128 * MiB, 8 * MiB)
    assert "beat floor (b)" not in above_b and "makes a segment: 85 ms (IQR 0 ns), against 72 ms" in above_b
    assert "against the call's 137 ms, 4% more than the call." in above_b  # drift 0: not noise
    warm_as_parts = RoundTrips(0.08, ms(7.5, 7.5, 7.5), ms(0.4, 0.4, 0.4), ms(7, 7, 7))
    assert "Warm (1.1× floor (a)): about the copy plus the message (7 ms + 400 µs). Shared once" in (
        text.round_trips_what_to_see(trips, warm_as_parts, small, FIRSTS, ALONE, new_parts, ms(137, 137, 137),
                                     call, 128 * MiB, 8 * MiB))
    warm_as_copy = RoundTrips(0.08, ms(7.1, 7.1, 7.1), ms(0.4, 0.4, 0.4), ms(7, 7, 7))  # under copy + message
    assert "Warm (1× floor (a)): about one warm copy (7 ms); the message does not show. Shared once" in (
        text.round_trips_what_to_see(trips, warm_as_copy, small, FIRSTS, ALONE, new_parts, ms(137, 137, 137),
                                     call, 128 * MiB, 8 * MiB))
    under = text.round_trips_what_to_see(trips, ours, small, ms(60, 60, 60), ALONE, new_parts,
                                         ms(137, 137, 137), call, 128 * MiB, 8 * MiB)
    assert "; the call came 12 ms under them, more than their spread." in under


def test_the_warm_echo_takeaway_words_which_size_paid_more_floors_from_this_runs_two_sizes():
    """Cold read 08 (reads7, F1): the rule rests on this run's two ratios only, worded by their direction
    (the reference run's 5.53x at 10 MiB beside this run's 3.8x at 8 MiB read against it)."""
    ours = RoundTrips(0.08, ms(8, 8, 8), ms(0.4, 0.4, 0.4), ms(7, 7, 7))
    call = parts(ms(102, 103, 104), ms(101, 102, 103))  # floor (a): 7 ms, so 1.1x at 128 MiB

    def takeaway(warm_ms: float, floor_ms: float) -> str:  # the 8 MiB echo: warm, and its floor (a)
        small = RoundTrips(0.01, ms(warm_ms, warm_ms), ms(0.3, 0.3), ms(floor_ms, floor_ms))
        return text.warm_echo_takeaway(ours, small, call, 128 * MiB, 8 * MiB)

    assert takeaway(1, 0.4) == (
        "- Warm segments cut an echo of 128 MiB to 1.1× floor (a) and one of 8 MiB to 2.5× its floor (a): "
        "the smaller array cost more times its floor. Already shared: the message; reading adds page faults "
        "(section 5). A hand-built swap (section 2), a new big result (`x + 1`) or, by section 3's rule, "
        "kept results viewing their arguments pay for a new segment every call.")
    assert "to 10× its floor (a): the smaller array cost more times its floor." in takeaway(1, 0.1)
    assert "to 1× its floor (a): the smaller array cost fewer times its floor." in takeaway(0.4, 0.4)
    assert "to 1.2× its floor (a): each cost about as many times its floor." in takeaway(0.48, 0.4)


def test_the_small_echo_line_gives_the_figures_the_takeaway_quotes():
    small = RoundTrips(0.01, ms(1, 1, 1), ms(0.3, 0.3, 0.3), ms(0.4, 0.4, 0.4))
    assert text.small_echo_line(small, 8 * MiB) == (
        "at 8 MiB, a warm echo took 1 ms, 2.5× its floor (a) (400 µs); an echo already shared took 300 µs, "
        "30% as long")


def test_the_too_big_line_gives_the_shortfall_and_says_which_checks_failed():
    free = 24 * 1024 * MiB  # prints as the array does: the shortfall is what tells them apart
    both = text.too_big_limits(free + MiB, free, 22 * 1024 * MiB)
    assert both == ("one float broadcast to 24 GiB: about 1 MiB over the 24 GiB free in /dev/shm, "
                    "and more than the 22 GiB of memory available: both checks failed")
    shm_only = text.too_big_limits(65 * MiB, 64 * MiB, 2048 * MiB)
    assert shm_only == ("one float broadcast to 65 MiB: about 1 MiB over the 64 MiB free in /dev/shm, "
                        "within the 2 GiB of memory available: only /dev/shm's check failed")
    untold = text.too_big_limits(65 * MiB, 64 * MiB, sys.maxsize)
    assert untold.endswith("; this machine does not say how much memory is available")
    assert "checks failed" not in untold and "check failed" not in untold
    no_shm = text.too_big_limits(MiB, None, sys.maxsize)
    assert no_shm == "one float broadcast to 1 MiB; this machine has no /dev/shm"
