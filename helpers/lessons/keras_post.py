"""Lesson 03's seed at its author's own setting: the Keras ``Sequence`` post's race, as the post ran it.

The post (https://dref360.github.io/managers/) wraps 100,000 tuples ``('test_string', [1, 3, 4])``
in a ``Sequence``, starts ``multiprocessing.Pool(5)``, and times 100 tasks that each return one item:
a producer submits them with ``apply_async`` into a ``Queue(10)`` (at most ten promises wait), and a
consumer thread takes each promise in order and waits for its result. It prints the wall time of
the 100 tasks with the list passed to every task, then with the list in a ``Manager().list()``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence

from helpers.measure.units import approx_ratio, approx_seconds

POST_WORKERS = 5  # the post's multiprocessing.Pool(5), whatever the number of CPUs
POST_QUEUE = 10  # the post's Queue(10): at most this many promises wait for the consumer thread
POST_TASKS = 100  # the post's nb_files = min(len(files), 100)
LIST_TASKS = 10  # the list's tasks timed here: each costs the same, and 100 would take half a minute
# The post's printed wall times for its 100 tasks, in seconds ("Took list", "Took manager").
POST_SECONDS = {"every task": 38.654, "proxy": 0.111}


def pipelined_seconds(pool, fn: Callable, argument_tuples: Sequence[tuple]) -> float:
    """Wall seconds for the post's producer and consumer to run ``fn(*args)`` for every argument
    tuple: ``apply_async`` promises into a ``Queue(POST_QUEUE)``, a thread that takes each in order
    and waits for its result, timed from the first submit until that thread has every result. A task
    that raises does not stop the others: its error is raised here once all have ended."""
    promises: queue.Queue = queue.Queue(POST_QUEUE)
    errors: list[BaseException] = []

    def consume() -> None:
        for _ in argument_tuples:  # a failed task is kept, and the queue still drained: no deadlock
            try:
                promises.get(block=True).get()
            except Exception as error:
                errors.append(error)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    start = time.perf_counter()
    for args in argument_tuples:
        promises.put(pool.apply_async(fn, args), block=True)
    consumer.join()
    seconds = time.perf_counter() - start
    if errors:
        raise errors[0]
    return seconds


def per_task(seconds: dict[str, float], tasks: dict[str, int]) -> dict[str, float]:
    """Seconds per task, by way: each way's wall time over the number of tasks it ran."""
    return {way: seconds[way] / tasks[way] for way in seconds}


def post_per_task() -> dict[str, float]:
    """The post's seconds per task, by way: its printed times over its 100 tasks."""
    return per_task(POST_SECONDS, dict.fromkeys(POST_SECONDS, POST_TASKS))


SAME_WITHIN = 1.25  # two per-task costs closer than this factor are "about as much"


def _compared(here: float, there: float) -> str:
    if here * SAME_WITHIN < there:
        return "less"
    if here > SAME_WITHIN * there:
        return "more"
    return "about as much"


def why_the_factor_differs(at_post: dict[str, float], posted: dict[str, float], cpus: int,
                           proxy_one_at_a_time: float, pipelining_said: bool = False) -> str:
    """A sentence, chosen by the measured per-task seconds here and in the post, saying which of the
    two costs moved the proxy's factor: sending the list (pickling speed) or a proxy read (a round
    trip). A proxy dearer here is blamed on the five workers waiting for a CPU only if it cost
    more pipelined than ``proxy_one_at_a_time`` (seconds per task, one task at a time on this
    machine); when the two agree, the round trip itself is this machine's. ``pipelining_said``: the
    sentence before already set the pipelined times beside one task at a time
    (``against_one_at_a_time``), so a proxy dearer pipelined is not explained again."""
    words = {way: _compared(at_post[way], posted[way]) for way in ("every task", "proxy")}
    reasons = []
    if words["every task"] != "about as much":
        reasons.append("sending the list is pickling speed (Python and CPU: the post names neither)")
    if words["proxy"] != "about as much":
        reason = "a proxy read is a round trip to the manager"
        waited = _compared(at_post["proxy"], proxy_one_at_a_time) == "more" and cpus < POST_WORKERS
        if words["proxy"] == "more" and pipelining_said and waited:
            reason = ""  # the sentence before said it: the five workers wait for a CPU
        elif words["proxy"] == "more":
            alone = _compared(at_post["proxy"], proxy_one_at_a_time)
            seconds = approx_seconds(proxy_one_at_a_time)
            if alone == "about as much":
                reason += (f", and one task at a time it cost about as much ({seconds}): this machine's "
                           "round trip, not the five workers")
            elif alone == "more" and cpus <= POST_WORKERS:
                reason += (f", which waits for a CPU when {POST_WORKERS} workers and the manager share "
                           f"{cpus} (one task at a time: {seconds})")
            else:
                reason += f" (one task at a time: {seconds}): this machine's round trip"
        if reason:
            reasons.append(reason)
    sentence = (f"Sending the list cost {words['every task']} per task here as in the post, "
                f"and a proxy read {words['proxy']}")
    sentence = sentence.replace("less per task here as", "less per task here than").replace(
        "more per task here as", "more per task here than")
    if not reasons:
        return sentence + (": the two machines agree." if set(words.values()) == {"about as much"} else ".")
    return sentence + "." + "".join(f" {reason[0].upper()}{reason[1:]}." for reason in reasons)


def against_one_at_a_time(at_post: dict[str, float], alone: dict[str, float], cpus: int,
                          statistic: str = "medians") -> str:
    """A sentence setting each way's pipelined per-task seconds (``at_post``) beside its task one at
    a time (``alone``, same keys; ``statistic`` names which of the race's tasks: "medians",
    "fastest tasks"), with the proxy's factor, each change with its one likely reason: pipelining
    overlaps one task's pickling with another's unpickling (a cheaper list task); more workers than
    CPUs make short tasks wait (a dearer proxy task). Empty when neither moved by more than
    ``SAME_WITHIN``."""
    words = {way: _compared(at_post[way], alone[way]) for way in ("every task", "proxy")}
    if set(words.values()) == {"about as much"}:
        return ""
    alone_text = {way: approx_seconds(alone[way]) for way in words}
    factor = approx_ratio(alone["every task"] / alone["proxy"])
    sentence = (f"One task at a time (the race's {statistic}), they cost "
                f"{alone_text['every task']} and {alone_text['proxy']} ({factor}×)")
    reasons = []
    if words["every task"] == "less":
        reasons.append("the list gains as one task's pickling overlaps another's unpickling")
    if words["proxy"] == "more" and cpus < POST_WORKERS:
        reasons.append(f"the proxy loses as {POST_WORKERS} workers wait for {cpus} CPUs")
    elif words["proxy"] == "about as much" and cpus < POST_WORKERS:
        reasons.append(f"the proxy gains nothing as {POST_WORKERS} workers wait for {cpus} CPUs")
    if not reasons:
        return sentence + "."
    return sentence + "; pipelined, likely, " + ", and ".join(reasons) + "."
