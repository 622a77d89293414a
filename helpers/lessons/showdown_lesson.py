"""Lesson 11's exercise: how many whole arrays does each way add to the machine while every worker holds it?

The showdown (``helpers.bench.showdown``) measures, for each strategy, what the tree's PSS added
while every worker held the array, in arrays (``showdown.added_arrays``: a float per strategy
name). The learner gives, for each way of ``CHOICES``, a whole number of arrays, or ``"N"`` for one
array per worker; the check compares each with this run's figure rounded to the nearest whole array
(``whole_arrays``), so a way that copies per worker cannot be passed as one shared copy, nor fork as
a copy; and, as a run with 2 workers cannot tell one copy per worker from two copies in all, it
wants ``"N"`` exactly for the ways whose copies grow with the workers (``PER_WORKER``, what their
lessons built). A strategy skipped here
is not asked about. ``pickle`` is not asked: at small sizes its figure also holds the buffers glibc
keeps after unpickling (the showdown's table note says so), which no lesson before counts.
"""

from __future__ import annotations

import math
import numbers

from helpers.lessons.exercises import Exercise

CHOICES = ("fork_cow", "send_once", "sharedctypes", "memmap_tmpfs", "shared_memory", "executor")
# How each way of ``CHOICES`` gets the array to the workers, as its lesson built it (lessons 03 to 08),
# printed where the lesson lists the ways, before the exercise: the API or mechanism and its lesson,
# never how many copies or per what (cold read 11, round 5: the old lines read off the answer).
HOW = {
    "send_once": "the pool's initializer argument (lesson 03)",
    "fork_cow": "a module global the workers inherit at fork (lesson 04)",
    "sharedctypes": "a sharedctypes RawArray made before the pool (lesson 05)",
    "memmap_tmpfs": "np.memmap of a file in /dev/shm (lesson 06)",
    "shared_memory": "a SharedMemory segment each task attaches by name (lesson 07)",
    "executor": "SharedMemoryExecutor.submit (lesson 08)",
}
# The ways whose every worker holds a copy of its own while it holds the array: send_once's
# initializer copy, and the executor's private copy per submit (one submit per worker).
PER_WORKER = ("send_once", "executor")
# The ways whose workers map one copy (a segment or a tmpfs file) made by the parent.
ONE_COPY = ("sharedctypes", "memmap_tmpfs", "shared_memory")
# The cut between one array and more, kept for the showdown's memory groups: a figure is read to the
# nearest whole array, a half rounding down (what else the processes hold moves by a few MiB between
# the idle and the holding window).
ONE_ARRAY = 1.5
# Under this many arrays added (or a little less than before: the baseline's other memory shrank
# between the two windows), a figure reads "≈0", never a bare negative.
NEAR_ZERO = 0.05


def format_arrays(arrays: float) -> str:
    """Arrays added, signed with two decimals ('+1.00'); '≈0' under ``NEAR_ZERO``, negatives included."""
    return "≈0" if arrays < NEAR_ZERO else f"{arrays:+.2f}"


def whole_arrays(arrays: float, n_workers: int) -> int:
    """``arrays`` to the nearest whole array, a half rounding down (1.5 is one), from 0 to
    ``n_workers``: no way gives the workers more than a copy each, and what a copy per worker
    measures above that is buffers the C allocator kept after pickling (send_once measured 2.76
    with 2 workers at 8 MiB), which lesson 03 shows."""
    return min(n_workers, max(0, math.ceil(arrays - 0.5)))


def at_most_one_array(added_arrays: dict[str, float]) -> set[str]:
    """The strategies of ``CHOICES`` that ran and added at most ``ONE_ARRAY`` arrays to the tree's PSS."""
    return {name for name in CHOICES if name in added_arrays and added_arrays[name] <= ONE_ARRAY}


# What an answer writes for one array per worker: a number would hold for one count of workers only.
PER_WORKER_ANSWER = "N"


def arrays_per_way(added_arrays: dict[str, float], n_workers: int) -> dict[str, int | str]:
    """The worked answer, from what the lessons built (not read off the run): fork adds none, a
    mapped copy one however many workers map it, a copy per worker ``"N"``; the ways of ``CHOICES``
    that ran here only."""
    model = {"fork_cow": 0, **dict.fromkeys(ONE_COPY, 1), **dict.fromkeys(PER_WORKER, PER_WORKER_ANSWER)}
    return {name: model[name] for name in CHOICES if name in added_arrays}


def _count(given, n_workers: int) -> int:
    return n_workers if given == PER_WORKER_ANSWER else int(given)


def _check(answer, added_arrays: dict[str, float], n_workers: int) -> str | None:
    if not isinstance(answer, dict):
        return "give a dict of whole numbers or \"N\", e.g. {'fork_cow': 3, 'shared_memory': 2, ...}"
    unknown = sorted(str(name) for name in set(answer) - set(CHOICES))
    if unknown:
        return f"{', '.join(unknown)} is not one of the ways asked: {', '.join(CHOICES)}"
    asked = [name for name in CHOICES if name in added_arrays]
    missing = [name for name in asked if name not in answer]
    if missing:
        return f"give a count for {', '.join(missing)} too"
    for name in asked:
        given = answer[name]
        if given == PER_WORKER_ANSWER:
            continue
        if isinstance(given, bool) or not isinstance(given, numbers.Real) or given != int(given):
            return f"give {name} a whole number of arrays or \"N\" (one per worker), not {given!r}"
    for name in asked:
        measured = added_arrays[name]
        whole = whole_arrays(measured, n_workers)
        if _count(answer[name], n_workers) != whole:
            why = ("the workers read the parent's own pages: nothing new" if whole == 0 else
                   "one copy, which PSS counts once however many workers map it" if whole == 1 else
                   "each worker holds a copy of its own, so the copies add up")
            return (f"{name} added {format_arrays(measured)} arrays here ({n_workers} workers), not "
                    f"{_count(answer[name], n_workers)}: {why}")
    for name in asked:
        if name in PER_WORKER and answer[name] != PER_WORKER_ANSWER:
            return (f"{name}: {answer[name]} holds with {n_workers} workers; with 8, would it still be "
                    f"{answer[name]}? Write \"N\" for a count that grows with the workers")
        if name not in PER_WORKER and answer[name] == PER_WORKER_ANSWER:
            return f"{name}: its count does not grow with the workers; give the number"
    return None


def _answer(fork, once, shared, executor) -> dict[str, int | str]:
    """An answer in the exercise's format (a misconception's, with 2 workers as the unit test runs)."""
    return {"fork_cow": fork, "send_once": once, **dict.fromkeys(ONE_COPY, shared), "executor": executor}


EXERCISE = Exercise(
    name="arrays added",
    question=("while every worker holds the array, how many whole arrays does each of " + ", ".join(CHOICES)
              + " (executor: one submit per worker) add to the tree's PSS? Answer with a dict of whole "
              "numbers, or \"N\" for one array per worker."),
    check=_check,
    solution=arrays_per_way,
    explanation=("fork adds none (the workers read the parent's own pages); sharedctypes, a tmpfs memmap "
                 "and SharedMemory add one however many workers map it (PSS divides a shared page among "
                 "them); sending once and the executor (one submit per worker) give each worker its own "
                 "copy: \"N\", as a number would hold for one count of workers only."),
    misconceptions=(
        (_answer(fork=0, once="N", shared=0, executor="N"),
         "shared memory costs nothing: only private copies add to the machine"),
        (_answer(fork=1, once="N", shared=1, executor="N"),
         "fork copies the array once, into the workers' side"),
        (_answer(fork="N", once="N", shared=1, executor="N"),
         "fork copies the parent's memory into every worker"),
        (_answer(fork=0, once=1, shared=1, executor="N"),
         "sending the array once per worker (an initializer) is sharing it: one array in all"),
        (_answer(fork=0, once="N", shared=1, executor=1),
         "the executor shares one segment among its workers, as SharedMemory does"),
        (_answer(fork=0, once=1, shared=1, executor=1),
         "PSS divides every page among the workers, private copies too, so no way adds more than one array"),
        (_answer(fork=0, once=2, shared=1, executor=2),
         "sending once and the executor add two arrays (the sender's and the receiver's), whatever the "
         "workers' count: right with 2 workers only"),
        (_answer(fork=0, once="N", shared="N", executor="N"),
         "every worker that maps a segment or file adds a copy of its own"),
    ),
)
