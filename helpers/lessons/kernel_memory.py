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

import ctypes
import ctypes.util
import gc
import sys
from dataclasses import dataclass

import numpy as np
import psutil

from helpers.measure.units import format_bytes

HEAVY_BYTES = 1 << 20  # an array of at least 1 MiB (of its own memory, or of the memory it views) is freed


@dataclass(frozen=True)
class Released:
    """``names``: the variables deleted; ``uss_before`` / ``uss_after``: this process's USS in bytes."""

    names: tuple[str, ...]
    uss_before: int
    uss_after: int

    def describe(self) -> str:
        freed = ", ".join(self.names) or "no big arrays"
        return (f"This kernel held {format_bytes(self.uss_before)} of its own (USS) and holds "
                f"{format_bytes(self.uss_after)} now: {freed}, the figures and the cell results IPython "
                "kept were given back. What remains is the interpreter and its imports; only shutting the "
                "kernel down (Kernel → Shut Down Kernel) frees that.")


def _is_heavy(value: object) -> bool:
    """An ndarray of at least HEAVY_BYTES (its own or its base's), or a list, tuple or dict of them."""
    if isinstance(value, np.ndarray):
        base = value
        while isinstance(base.base, np.ndarray):
            base = base.base
        return max(value.nbytes, base.nbytes) >= HEAVY_BYTES
    if isinstance(value, (list, tuple)):
        return any(isinstance(item, np.ndarray) and _is_heavy(item) for item in value[:64])
    if isinstance(value, dict):
        return any(isinstance(item, np.ndarray) and _is_heavy(item) for item in list(value.values())[:64])
    return False


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


def _trim_heap() -> None:
    """Hand the allocator's free heap pages back to the OS (glibc's ``malloc_trim``; no-op elsewhere)."""
    name = ctypes.util.find_library("c") if sys.platform.startswith("linux") else None
    if name:
        trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
        if trim is not None:
            trim(0)


def release(namespace: dict) -> Released:
    """Delete from ``namespace`` (a notebook's ``globals()``) every variable holding an array of at
    least HEAVY_BYTES (or a list, tuple or dict of them), close every Matplotlib figure, drop IPython's
    cached cell results, collect garbage and trim the heap. Names starting with ``_`` are left alone.
    Returns what was deleted and this process's USS before and after, in bytes."""
    if not isinstance(namespace, dict):
        raise TypeError(f"give the notebook's globals(), got {type(namespace).__name__}")
    before = uss_bytes()
    names = tuple(name for name, value in list(namespace.items())
                  if not name.startswith("_") and _is_heavy(value))
    for name in names:
        del namespace[name]
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
    _forget_cell_results()
    gc.collect()
    _trim_heap()
    return Released(names, before, uss_bytes())
