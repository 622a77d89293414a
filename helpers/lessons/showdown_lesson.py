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
# adds n_workers (2 or more), so the cut sits halfway between.
ONE_ARRAY = 1.5


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
        return (f"{name} added {added_arrays[name]:.2f} arrays here: each worker holds a copy of its "
                "own (or each task's), so the copies add up")
    for name in sorted(right - picked):
        return (f"{name} added only {added_arrays[name]:.2f} arrays here: its workers map one copy "
                "(or the parent's own pages) instead of holding their own")
    return None


EXERCISE = Exercise(
    name="at most one array",
    question=("which of " + ", ".join(CHOICES) + " add at most one array to the machine while every "
              "worker holds it? Answer with a set of names."),
    check=_check,
    solution=at_most_one_array,
    explanation=("The ways that map one shared copy (sharedctypes, a tmpfs memmap, SharedMemory) add "
                 "one array however many workers read it, and fork adds none: the workers read the "
                 "parent's own pages. Pickling, sending once and the executor give each worker (or "
                 "task) its own copy."),
)


def _arrays(added: dict[str, float], name: str) -> str:
    return f"added {added[name]:.2f} arrays" if name in added else "was not measured here"


def _times(ratios: dict[str, float], name: str) -> str:
    return f"{ratios[name]:.2g}× floor (a)" if name in ratios else "did not run here"


def references_found(ratios: dict[str, float], added: dict[str, float], claims: list,
                     n_workers: int) -> list[str]:
    """What this run found about each source of the References, one line each: ``ratios`` are
    fan-out medians over floor (a) by strategy, ``added`` arrays added to the tree's PSS by
    strategy, ``claims`` the blog's claims checked on this run (``showdown.Claim``)."""
    held = [c.claim for c in claims if c.holds]

    def arrays(name: str) -> str:
        return _arrays(added, name)

    def times(name: str) -> str:
        return _times(ratios, name)

    return [
        f"Blog: of its {len(claims)} claims, {len(held)} held in this run"
        + (f" ({'; '.join(held)})." if held else "."),
        f"`SharedMemory`: with {n_workers} workers mapping one segment, the tree {arrays('shared_memory')}; "
        f"fan-out {times('shared_memory')}.",
        f"`sharedctypes.RawArray`: {arrays('sharedctypes')}; fan-out {times('sharedctypes')}.",
        f"`fork`: the workers {arrays('fork_cow')} (they read the parent's pages); fan-out "
        f"{times('fork_cow')}.",
        f"`numpy.memmap`: on disk {times('memmap_disk')}, on tmpfs {times('memmap_tmpfs')}.",
        f"Ray: by value {times('ray_by_value')}, `ray.put` once {times('ray_object_store')}.",
    ]
