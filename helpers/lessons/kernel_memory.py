"""What a lesson's kernel keeps once the lesson is over, and giving most of it back (the last cell of
every lesson).

JupyterLab leaves a notebook's kernel running when the learner opens the next lesson, so on a small
machine (Binder: 2 GB for everything) each lesson passed keeps its kernel's memory: the interpreter
and its imports (NumPy, Matplotlib, IPython: tens of MiB that only shutting the kernel down frees)
and what the lesson left in it: its arrays, the figures, IPython's cache of cell results, and heap
pages the allocator keeps for reuse. ``release(globals())`` gives back the second part and says, in
this process's USS (the bytes only it maps), what the kernel held before and holds after.
"""

from __future__ import annotations

import dataclasses
import gc
import pickle
import sys
import weakref
from dataclasses import dataclass

import numpy as np
import psutil

from helpers.measure.memory import release_free_heap
from helpers.measure.units import format_bytes

HEAVY_BYTES = 1 << 20  # an array of at least 1 MiB (of its own memory, or of the memory it views) is freed


@dataclass(frozen=True)
class Released:
    """``names``: the variables deleted; ``array_bytes``: bytes of the distinct arrays they held;
    ``kept_bytes``: of those, bytes still alive afterwards (something else still refers to them);
    ``uss_before`` / ``uss_after``: this process's USS in bytes."""

    names: tuple[str, ...]
    array_bytes: int
    kept_bytes: int
    uss_before: int
    uss_after: int

    def describe(self) -> str:
        if not self.names:
            deleted = "No variable held a big array"
        elif self.kept_bytes == 0:
            deleted = (f"Deleted {', '.join(self.names)}: {format_bytes(self.array_bytes)} of arrays, "
                       "all freed")
        else:
            deleted = (f"Deleted {', '.join(self.names)}: {format_bytes(self.array_bytes)} of arrays, of "
                       f"which {format_bytes(self.kept_bytes)} stay, still referenced by something else")
        return (f"This kernel held {format_bytes(self.uss_before)} of its own (USS) and holds "
                f"{format_bytes(self.uss_after)} now. {deleted}; figures closed and the cell results "
                "IPython kept dropped. What remains is the interpreter, its imports and the heap the "
                "allocator keeps for reuse; only shutting the kernel down (Kernel → Shut Down Kernel) "
                "frees that.")


def _base_array(item: object) -> np.ndarray | None:
    """The array that owns ``item``'s memory: an ndarray's base, or the array a buffer
    (memoryview, pickle.PickleBuffer) exports; None for anything else."""
    if isinstance(item, (memoryview, pickle.PickleBuffer)):
        try:
            item = memoryview(item).obj
        except ValueError:  # a released buffer exports nothing and holds nothing
            return None
    if not isinstance(item, np.ndarray):
        return None
    while isinstance(item.base, np.ndarray):
        item = item.base
    return item


def _holds_lesson_data(value: object) -> bool:
    """An instance of a dataclass or of a class of the course (``helpers``, ``sharedarrays``), whose
    attributes may hold a lesson's arrays; never IPython's or another library's objects (IPython's
    ``exit`` refers to the shell, and through it to every variable of the notebook)."""
    if isinstance(value, type) or not isinstance(getattr(value, "__dict__", None), dict):
        return False
    package = type(value).__module__.split(".")[0]
    return dataclasses.is_dataclass(value) or package in ("helpers", "sharedarrays")


def _arrays_in(value: object, depth: int = 4) -> list[np.ndarray]:
    """The arrays of at least HEAVY_BYTES that ``value`` keeps alive: an ndarray or a buffer (a view
    of a big array counts), or such items of a list, tuple or dict (its first 64) or attributes of
    an instance, nested up to ``depth`` deep (a list of objects that each hold a list of rows)."""
    base = _base_array(value)
    if base is not None:
        return [base] if base.nbytes >= HEAVY_BYTES else []
    if depth == 0:
        return []
    if isinstance(value, dict):
        items = list(value.values())[:64]
    elif isinstance(value, (list, tuple)):
        items = list(value[:64])
    elif _holds_lesson_data(value):
        items = list(vars(value).values())[:64]
    else:
        return []
    return [array for item in items for array in _arrays_in(item, depth - 1)]


def uss_bytes() -> int:
    """This process's USS: bytes of memory that only it maps (``psutil``'s ``memory_full_info``)."""
    return psutil.Process().memory_full_info().uss


def _forget_cell_results() -> None:
    """IPython keeps every cell's result (``Out``, ``_``, ``__``, ``___``): drop them."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    shell.history_manager.output_hist.clear()
    if shell.displayhook.do_full_cache:
        shell.displayhook.flush()  # Out, _, __, ___, _1, _2, ...


def release(namespace: dict) -> Released:
    """Delete from ``namespace`` (a notebook's ``globals()``) every variable holding an array of at
    least HEAVY_BYTES, a view of one or a buffer it exports (or a list, tuple or dict of them),
    close every Matplotlib figure, drop IPython's cached cell results, collect garbage and trim
    the heap. Names starting with ``_`` are left alone.
    Returns what was deleted, how much of it stayed alive, and this process's USS before and
    after, in bytes."""
    if not isinstance(namespace, dict):
        raise TypeError(f"give the notebook's globals(), got {type(namespace).__name__}")
    before = uss_bytes()
    arrays: dict[int, weakref.ref[np.ndarray]] = {}
    names, array_bytes = [], 0
    for name, value in list(namespace.items()):
        held = [] if name.startswith("_") else _arrays_in(value)
        if held:
            names.append(name)
            for array in held:
                if id(array) not in arrays:
                    arrays[id(array)] = weakref.ref(array)
                    array_bytes += array.nbytes
            del namespace[name]
    held = value = array = None  # the loop must not keep the last ones alive
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
    _forget_cell_results()
    gc.collect()
    release_free_heap()
    kept = sum(array.nbytes for array in (ref() for ref in arrays.values()) if array is not None)
    return Released(tuple(names), array_bytes, kept, before, uss_bytes())
