"""Lesson 11's exercise: which ways add at most one array to the machine while every worker holds it?

The showdown (``helpers.bench.showdown``) measures, for each strategy, what the tree's PSS added
while every worker held the array, in arrays (``showdown.added_arrays``: a float per strategy
name). The learner picks, among ``CHOICES``, the strategies that add at most one array
(``ONE_ARRAY``); the check reads the answer off this run's measurements, so a strategy skipped
here is not asked about.
"""

from __future__ import annotations

from helpers.lessons.exercises import Exercise

CHOICES = ("pickle", "send_once", "fork_cow", "sharedctypes", "memmap_tmpfs", "shared_memory", "executor")
# "At most one array": under this many arrays added. One shared copy adds 1.0, a copy per worker
# adds n_workers (2 or more), so the cut sits halfway between: what else the processes hold moves by
# a few MiB between the idle and the holding window, so a figure is read to the nearest whole array.
ONE_ARRAY = 1.5
# Under this many arrays added (or a little less than before: the baseline's other memory shrank
# between the two windows), a figure reads "≈0", never a bare negative.
NEAR_ZERO = 0.05


def format_arrays(arrays: float) -> str:
    """Arrays added, signed with two decimals ('+1.00'); '≈0' under ``NEAR_ZERO``, negatives included."""
    return "≈0" if arrays < NEAR_ZERO else f"{arrays:+.2f}"


def at_most_one_array(added_arrays: dict[str, float]) -> set[str]:
    """The strategies of ``CHOICES`` that ran and added at most ``ONE_ARRAY`` arrays to the tree's PSS."""
    return {name for name in CHOICES if name in added_arrays and added_arrays[name] <= ONE_ARRAY}


def _check(answer, added_arrays: dict[str, float]) -> str | None:
    if isinstance(answer, str) or not isinstance(answer, set | list | tuple | frozenset):
        return "give a set of strategy names, e.g. {'pickle', 'fork_cow'}"
    unknown = sorted(str(name) for name in set(answer) - set(CHOICES))
    if unknown:
        return f"{', '.join(unknown)} is not one of the choices: {', '.join(CHOICES)}"
    picked = {name for name in answer if name in added_arrays}
    right = at_most_one_array(added_arrays)
    for name in sorted(picked - right):
        return (f"{name} added {format_arrays(added_arrays[name])} arrays here: each worker holds a copy of "
                "its own (or each task's), so the copies add up")
    for name in sorted(right - picked):
        return (f"{name} added only {format_arrays(added_arrays[name])} arrays here: its workers map one "
                "copy (or the parent's own pages) instead of holding their own")
    return None


EXERCISE = Exercise(
    name="at most one array",
    question=("which of " + ", ".join(CHOICES) + " (executor: one submit per worker) add at most one "
              f"array (under {ONE_ARRAY:g} arrays) to the machine while every worker holds it? Answer with a "
              "set of names."),
    check=_check,
    solution=at_most_one_array,
    explanation=("The ways that map one shared copy (sharedctypes, a tmpfs memmap, SharedMemory) add "
                 "one array however many workers read it, and fork adds none: the workers read the "
                 "parent's own pages. Pickling, sending once and the executor (one submit per worker) "
                 "give each worker its own copy."),
    misconceptions=(
        ({"send_once", "fork_cow", "sharedctypes", "memmap_tmpfs", "shared_memory"},
         "sending the array once per worker (an initializer) is sharing it: one array in all"),
        ({"sharedctypes", "memmap_tmpfs", "shared_memory"},
         "fork copies the parent's memory into every worker, so fork_cow adds a copy per worker"),
        (set(CHOICES),
         "PSS divides every page among the workers, private copies too, so no way adds more than one array"),
    ),
)

