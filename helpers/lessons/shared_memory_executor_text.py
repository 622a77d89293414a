"""The sentences lesson 08 renders from its timings (the notebook shows them, not the code that words them).

``hand_built_conclusion`` words section 2 (a hand-built call against its steps and floor (b));
``round_trips_what_to_see`` words section 5 (round trips through the stdlib and ours);
``too_big_limits``, the pitfall of section 4 (which of /dev/shm's free space and the memory available
was short);
``small_echo_line``, section 5's line on the second size; ``warm_echo_takeaway``, the takeaway on
warm calls at this run's two sizes. Each takes the lesson's measurements and
returns Markdown or a printed line; the lesson's check cells assert the comparisons they state.
"""

from __future__ import annotations

import sys

from helpers.lessons.shared_memory_executor import CallAndParts, NewResultParts, RoundTrips
from helpers.lessons.shared_memory_tables import about
from helpers.measure.timing import Timing
from helpers.measure.units import format_bytes, format_seconds, shown

TREND_MARGIN = 1.1  # the takeaway's two sizes: a ratio to floor (a) this much higher is "more times"


def hand_built_conclusion(parts: CallAndParts) -> str:
    """Section 2's conclusion, from the medians of ``parts`` (as printed above it): a new segment
    against a warm copy, the call against its steps 1 and 4 (wall-clock and CPU), ``copy_of``
    against floor (b)."""
    call = parts.call
    steps = (f"its steps 1 and 4 ({format_seconds(parts.copy_of.median)} + "
             f"{format_seconds(parts.release.median)})")
    call_over_steps = call.median / (parts.copy_of.median + parts.release.median)
    paid = (f"cost {about(call_over_steps)}× {steps}" if call_over_steps < 0.9 else
            f"cost about {steps}: the message is lost in the noise" if call_over_steps < 1.1
            else f"cost {about(call_over_steps)}× {steps}: the steps, plus a round trip")
    cpu_over_steps = parts.call_cpu.median / parts.segment_steps_cpu.median
    cpu = "matched theirs" if 0.9 <= cpu_over_steps <= 1.1 else f"was {about(cpu_over_steps)}× theirs"
    if call.iqr > 3 * parts.call_cpu.iqr and call.iqr > 0.1 * call.median:  # wall time spread, CPU not
        cpu += (f" and hardly varied (IQR {format_seconds(parts.call_cpu.iqr)} against "
                f"{format_seconds(call.iqr)} wall-clock): slower runs waited on a busy machine")
    copy_of_over_b = parts.copy_of.median / parts.new_segment.median
    against_b = (f"took {round(100 * (1 - copy_of_over_b))}% less than floor (b)" if copy_of_over_b < 0.97
                 else "took longer than floor (b)" if copy_of_over_b > 1.03 else "about matched floor (b)")
    return (f"**Conclusion.** A copy into a new segment cost "
            f"**{about(parts.new_segment.median / parts.warm.median)}×** a warm copy. A hand-built call "
            f"({format_seconds(call.median)}) {paid}; its CPU time {cpu}. `copy_of` "
            f"{against_b}; giving the pages back comes on top: the call cost "
            f"{about(call.median / parts.new_segment.median)}× floor (b).")


def round_trips_what_to_see(stdlib: RoundTrips, ours: RoundTrips, ours_small: RoundTrips, firsts: Timing,
                            first_segments: Timing, new_parts: NewResultParts, ours_new: Timing,
                            parts: CallAndParts, array_bytes: int, small_bytes: int) -> str:
    """Section 5's *What to see* (three paragraphs, medians as in the figure) and conclusion: the
    stdlib's warm echo against ours and floor (a), a first call against its new segment and copy
    alone (``first_segments``, timed in turns with the first calls; of its excess, an echo already
    shared prices the message and the attach, the rest is not timed apart); echoes already shared at
    two sizes (the figure's line named as the big size's floor (a), the small bar set against its
    own); a sum read by the worker, and ``x + 1`` against its parts (a sum's call less the sum,
    ``x + 1`` here, section 2's new segment made and unlinked)."""
    extra = firsts.median - first_segments.median  # a first call less its segment and copy alone
    spread = max(firsts.iqr, first_segments.iqr)
    iqrs = f" (IQR {format_seconds(firsts.iqr)})", f" (IQR {format_seconds(first_segments.iqr)})"
    message = ours.shared.median  # an echo already shared: the message and the worker's attach
    untimed = shown(extra) - shown(message)  # of the excess, as the page's figures subtract
    added = (f": equal within their spread; the message ({format_seconds(message)}) does not show"
             if abs(extra) <= spread else
             f"; it took {format_seconds(extra)} more: the message and the worker's attach (an echo already "
             f"shared took {format_seconds(message)}, below) and {format_seconds(untimed)} not timed apart"
             if untimed > 0 else
             f"; it took {format_seconds(extra)} more, no more than an echo already shared "
             f"({format_seconds(message)}, below): the message and the worker's attach" if extra > 0 else
             f"; the call came {format_seconds(-extra)} under them, more than their spread")
    beat_b = firsts.median < parts.new_segment.median
    bulk = (f" It beat floor (b) ({format_seconds(parts.new_segment.median)}): the pool reserves pages in "
            "bulk, as `copy_of` does." if beat_b else "")
    first = (f"A first call (segment pool emptied) makes a segment: "
             f"{format_seconds(firsts.median)}{iqrs[0]}, against {format_seconds(first_segments.median)}"
             f"{iqrs[1]} for that segment and copy alone{added}.{bulk} A call while a kept "
             "result views its segment makes one too (section 3's rule; not timed).")
    carried = new_parts.read.median - new_parts.sum_here.median  # a warm sum's call less the sum itself
    new_sum = carried + new_parts.compute.median + parts.copy_of.median + parts.release.median
    rest = ours_new.median - new_sum  # what the parts, timed apart, leave of the call
    # Two timings of the same work, taken at different moments: section 2's copy_of and this
    # section's new segment and copy alone. A whole that differs from its parts by no more is noise.
    drift = abs(parts.copy_of.median - first_segments.median) / max(parts.copy_of.median,
                                                                    first_segments.median)
    off = abs(rest) / ours_new.median
    left = ("." if off < 0.02 else
            f"; the call came {round(100 * off)}% {'over' if rest > 0 else 'under'} them, as far apart as "
            f"two timings of one new segment ({format_seconds(parts.copy_of.median)}, section 2; "
            f"{format_seconds(first_segments.median)} here)." if off <= drift + 0.01 else
            f"; {format_seconds(rest)} not broken down." if rest > 0 else
            f", {round(100 * off)}% more than the call.")
    grew = ours.shared.median - ours_small.shared.median  # what the larger size added
    small_floor = ours_small.warm_copy.median  # floor (a) at the small size, timed in turns with its echoes
    shared = (f"Already shared, an echo took {format_seconds(ours.shared.median)} at "
              f"{format_bytes(array_bytes)} and {format_seconds(ours_small.shared.median)} at "
              f"{format_bytes(small_bytes)}: {about(array_bytes / small_bytes)}× the bytes "
              + (f"{f'added {format_seconds(grew)}' if grew > 0 else 'took no longer'}. Nothing is copied: "
                 "the message and mapping the segment cost this."
                 if grew < 0.5 * parts.warm.median else
                 f"added {format_seconds(grew)}.")
              + f" The figure's line is {format_bytes(array_bytes)}'s floor (a), "
                f"{format_seconds(parts.warm.median)}; the {format_bytes(small_bytes)} bar took "
                f"{about(ours_small.shared.median / small_floor)}× {format_bytes(small_bytes)}'s floor (a) "
                f"({format_seconds(small_floor)}, above).")
    unexplained = max(ours.warm.median - parts.warm.median - ours.shared.median, 0.0)  # warm echo's rest
    # the faults, two ways: a shared (warm) sum less the sum and a shared (warm) echo
    faults = sorted(max(call - new_parts.sum_here.median - echo, 0.0) for call, echo in (
        (new_parts.read_shared.median, ours.shared.median), (new_parts.read.median, ours.warm.median)))
    return (
        f"*What to see* (medians): a warm echo took {format_seconds(stdlib.warm.median)} "
        f"through the stdlib ({len(stdlib.warm.runs)} calls after a first one), "
        f"**{about(stdlib.warm.median / ours.warm.median)}×** ours ({format_seconds(ours.warm.median)}, "
        f"{about(ours.warm.median / parts.warm.median)}× floor (a), each result dropped by "
        f"`time_round_trips`). {first}"
        f"\n\n{shared}"
        f"\n\nA sum took {format_seconds(new_parts.read.median)} warm, "
        f"{format_seconds(new_parts.read_shared.median)} already shared and "
        f"{format_seconds(new_parts.sum_here.median)} in this process. Each task maps the segment afresh; "
        "its first touch of each page is a minor fault (mapped, not copied). Less the sum and the matching "
        f"echo, the faults took {format_seconds(faults[0])} to {format_seconds(faults[1])} a call."
        f"\n\n`x + 1` took {format_seconds(ours_new.median)} warm (its result dropped, so its unlink is "
        f"timed). Its parts, timed apart:"
        f"\n- the warm sum's call less the sum: {format_seconds(carried)}"
        f"\n- `x + 1` here: {format_seconds(new_parts.compute.median)}"
        f"\n- a new segment, made and unlinked (section 2): {format_seconds(parts.copy_of.median)} + "
        f"{format_seconds(parts.release.median)}"
        f"\n\nThey add up to {format_seconds(new_sum)}, against the call's "
        f"{format_seconds(ours_new.median)}{left}"
        f"\n\n**Conclusion.** Warm ({about(ours.warm.median / parts.warm.median)}× floor (a)): "
        + (f"the copy, the message and {format_seconds(unexplained)} not timed apart "
           f"({round(100 * unexplained / ours.warm.median)}% of the call)"
           if unexplained > 0.02 * ours.warm.median
           else f"about one warm copy ({format_seconds(parts.warm.median)}); the message does not show"
           if ours.warm.median < parts.warm.median + ours.shared.median
           else f"about the copy plus the message ({format_seconds(parts.warm.median)} + "
                f"{format_seconds(ours.shared.median)})")
        + ". Shared once: the message; reading adds page faults.")


def small_echo_line(ours_small: RoundTrips, small_bytes: int) -> str:
    """Section 5's printed line on the second size: its warm echo against its own floor (a) (timed in
    turns with it), and the echo already shared as a share of the warm one."""
    warm, floor, shared = ours_small.warm.median, ours_small.warm_copy.median, ours_small.shared.median
    return (f"at {format_bytes(small_bytes)}, a warm echo took {format_seconds(warm)}, "
            f"{about(warm / floor)}× its floor (a) ({format_seconds(floor)}); an echo already shared took "
            f"{format_seconds(shared)}, {_as_long(shared / warm)}")


def _as_long(share: float) -> str:
    return "as long or longer" if share >= 1 else f"{round(100 * share)}% as long"


def warm_echo_takeaway(ours: RoundTrips, ours_small: RoundTrips, parts: CallAndParts, array_bytes: int,
                       small_bytes: int) -> str:
    """The takeaway on warm calls (a Markdown list item), from this run's echoes at section 5's two sizes:
    the big one against section 2's floor (a) (as section 5 words it), the small one against its own
    floor (a) (as ``small_echo_line`` prints it); which paid more times its floor is worded from these
    two ratios alone (a difference under ``TREND_MARGIN`` is "about")."""
    big = ours.warm.median / parts.warm.median
    small = ours_small.warm.median / ours_small.warm_copy.median
    trend = ("the smaller array cost more times its floor" if small >= TREND_MARGIN * big else
             "the smaller array cost fewer times its floor" if small * TREND_MARGIN <= big else
             "each cost about as many times its floor")
    return (f"- Warm segments cut an echo of {format_bytes(array_bytes)} to {about(big)}× floor (a) and one "
            f"of {format_bytes(small_bytes)} to {about(small)}× its floor (a): {trend}. Already shared: "
            "the message; reading adds page faults (section 5). A hand-built swap (section 2), a new big "
            "result (`x + 1`) or, by section 3's rule, kept results viewing their arguments pay for a new "
            "segment every call.")


def too_big_limits(claimed_bytes: int, shm_free: int | None, available: int) -> str:
    """The pitfall's first line: how far the broadcast array (``claimed_bytes``) was over /dev/shm's
    free space, and whether it was over the memory available too, so which of the library's two checks
    failed (bytes; ``available`` is ``sys.maxsize`` where the machine does not say)."""
    size = f"one float broadcast to {format_bytes(claimed_bytes)}"
    if shm_free is None:
        return f"{size}; this machine has no /dev/shm"
    over_shm = (f"about {format_bytes(claimed_bytes - shm_free)} over the {format_bytes(shm_free)} "
                "free in /dev/shm")
    if available == sys.maxsize:
        return f"{size}: {over_shm}; this machine does not say how much memory is available"
    if claimed_bytes > available:
        return (f"{size}: {over_shm}, and more than the {format_bytes(available)} of memory available: "
                "both checks failed")
    return (f"{size}: {over_shm}, within the {format_bytes(available)} of memory available: only "
            "/dev/shm's check failed")
