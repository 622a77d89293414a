"""Two more things decide whether workers run in parallel (lesson 01): BLAS's own thread pool
inside each worker process (``blas_fan_out``, limited with threadpoolctl in the pool's initializer)
and whether this interpreter has a GIL at all (``free_threading``). Seconds throughout; the worker
functions live here, so a spawned worker imports them by name.
"""

from __future__ import annotations

import sys
import sysconfig
import time
from dataclasses import dataclass

import numpy as np

from helpers.lessons.gil_heartbeat import tree_cpu_wait_seconds
from helpers.lessons.threads_or_processes import PROCESSES, executor, timed_runs
from helpers.measure.timing import Timing
from helpers.measure.units import format_seconds, shown

# --- BLAS's own threads inside each worker process -------------------------------------------------

_matrices: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def blas_threads() -> int | None:
    """Threads in this process's BLAS pool, as threadpoolctl reads them (None: no BLAS found)."""
    from threadpoolctl import threadpool_info

    counts = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    return max(counts) if counts else None


def blas_library() -> str | None:
    """The BLAS library NumPy calls, as threadpoolctl names it ("openblas", "mkl"; None: none found)."""
    from threadpoolctl import threadpool_info

    names = [pool["internal_api"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    return names[0] if names else None


def limit_blas_threads(n: int = 1) -> None:
    """Pool initializer: limit this worker's BLAS pool to ``n`` threads (threadpoolctl). The limit
    stays for the worker's life: threadpoolctl undoes it only when asked (or when used as a ``with``)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(n, user_api="blas")


def multiply_matrices(size: int, products: int) -> tuple[int | None, float]:
    """``products`` matrix products of two random ``size`` x ``size`` matrices (made once per
    worker); returns this worker's BLAS pool size, read inside it, and a checksum."""
    if size not in _matrices:
        rng = np.random.default_rng(size)
        _matrices[size] = (rng.random((size, size)), rng.random((size, size)))
    a, b = _matrices[size]
    checksum = 0.0
    for _ in range(products):
        checksum += float((a @ b)[0, 0])
    return blas_threads(), checksum


def describe_pools(sizes: list[int | None]) -> str:
    """Workers' BLAS pool sizes in words: "2 threads each", "1, 2 threads", "unknown"."""
    if not sizes or None in sizes:
        return "of unknown size (no BLAS that threadpoolctl knows)"
    if len(set(sizes)) == 1:
        return f"{sizes[0]} thread{'s' if sizes[0] != 1 else ''} each"
    return ", ".join(map(str, sizes)) + " threads"


@dataclass(frozen=True)
class BlasRun:
    """``n`` processes doing the same matrix products: their BLAS pools' sizes, the fan-out's seconds,
    and ``waited_for_cpu``: threads of ours waiting for a CPU at once, on average while it was timed."""

    limit: int | None
    pool_sizes: list[int | None]
    timing: Timing
    waited_for_cpu: float = 0.0


def blas_fan_out(n: int, context, limit: int | None, size: int = 256, products: int = 16,
                 repeat: int = 5, budget_s: float = 10.0) -> BlasRun:
    """Time ``n`` processes multiplying matrices at once (``multiply_matrices``), each with its BLAS
    pool limited to ``limit`` threads in its initializer, or as BLAS sized it (``limit=None``); read
    how many threads of this process tree waited for a CPU meanwhile (``tree_cpu_wait_seconds``)."""
    initializer, initargs = (limit_blas_threads, (limit,)) if limit else (None, ())
    sizes: list = []

    def check(answers) -> None:
        sizes[:] = [threads for threads, _ in answers]

    with executor(PROCESSES, n, context, initializer, initargs) as pool:
        waited, start = tree_cpu_wait_seconds(), time.perf_counter()
        timing = timed_runs(lambda: list(pool.map(multiply_matrices, [size] * n, [products] * n)),
                            check, repeat, budget_s)
        waited_for_cpu = (tree_cpu_wait_seconds() - waited) / (time.perf_counter() - start)
    return BlasRun(limit, sizes, timing, waited_for_cpu)


def blas_conclusion(runs: dict[tuple[int, int | None], BlasRun], n_workers: int, limit: int,
                    usable_cpus: int) -> str:
    """Section 4's conclusion in Markdown, from ``blas_fan_out``'s runs keyed (workers, limit): the
    oversubscribed fan-out against the limited one, on fastest runs and on medians, and the control."""
    unlimited, limited = runs[n_workers, None], runs[n_workers, limit]
    # ratios of the times as printed (three figures), so that they agree with the table above
    ratio = shown(unlimited.timing.min) / shown(limited.timing.min)  # fastest runs: noise only adds time
    on_medians = shown(unlimited.timing.median) / shown(limited.timing.median)
    alone = shown(runs[1, None].timing.min) / shown(runs[1, limit].timing.min)  # the control
    total = sum(size or 1 for size in unlimited.pool_sizes)
    has_control = runs[1, None].pool_sizes != runs[1, limit].pool_sizes
    control = f"The control, one worker unlimited, took {alone:.2f}× its limited time"
    if unlimited.pool_sizes == limited.pool_sizes:
        verdict = f"The limit changed nothing here: BLAS already ran {limit} thread(s) in each worker."
    elif total <= usable_cpus:
        verdict = "Nothing was oversubscribed here: the pools fit the usable CPUs."
    elif ratio < 1.2:
        verdict = "Here it cost little."
    elif has_control and alone > 1.2:
        verdict = (f"{control} too: a pool that size was slow even alone (other programs on the CPUs, or "
                   "BLAS's threading at this size), so this run cannot pin the difference on "
                   "oversubscription.")
    else:
        why = ("OpenBLAS's idle threads keep their CPU busy (spin-wait) for a while before they sleep "
               "([OpenBLAS#5171](https://github.com/OpenMathLib/OpenBLAS/issues/5171)), so a product's "
               "last working thread can wait for a CPU until the scheduler takes one from a spinner"
               if blas_library() == "openblas" else
               "A product waits for its pool's last thread, which often had to wait for a CPU")
        verdict = why + (". " + _control(alone, runs[1, None].timing, runs[1, limit].timing)
                         if has_control else ".")
    if max(on_medians / ratio, ratio / on_medians) >= 1.5:
        spread = (f" on fastest runs, **about {_about(on_medians)}×** on medians: "
                  + ("the oversubscribed runs were also erratic" if on_medians > ratio else
                     "the limited runs were the erratic ones") + " "
                  f"(IQR {format_seconds(unlimited.timing.iqr)} against "
                  f"{format_seconds(limited.timing.iqr)} limited).")
    else:
        spread = f" on fastest runs (about {_about(on_medians)}× on medians)."
    parallel = ""
    if n_workers >= 2 and usable_cpus >= 2 and limited.pool_sizes != unlimited.pool_sizes:
        took = shown(limited.timing.min) / shown(runs[1, limit].timing.min)  # N workers' over one's, limited
        parallel = (f" Limited, {n_workers} workers took {took:.2f}× one worker's time for {n_workers}× "
                    "the work: "
                    + ("they ran at once." if took <= 0.75 * n_workers else
                       "the limit removed the loss, but they did not run at once here"
                       + (f" (the tree's threads waited for a CPU {limited.waited_for_cpu:.2f} at once, "
                          "on average)." if limited.waited_for_cpu >= 0.25 else ".")))
    return (f"**Conclusion.** As BLAS sized them, the {n_workers} workers' pools had "
            f"{describe_pools(unlimited.pool_sizes)}: {total} threads for {usable_cpus} usable "
            f"CPU{'s' * (usable_cpus > 1)}. The "
            f"unlimited fan-out took **about {_about(ratio)}×** the time of the limited one{spread} "
            f"{verdict}{parallel}")


def _control(alone: float, unlimited: Timing, limited: Timing) -> str:
    """The control's sentence: one worker unlimited against limited, ``alone`` its time over the limited
    one's (fastest runs), and which of the two ran erratically (an IQR at least 3× the other's and a
    quarter of the other's median), worded by the measured direction."""
    control = f"The control, one worker unlimited, took {alone:.2f}× its limited time"
    iqr = f"(IQR {format_seconds(unlimited.iqr)} against {format_seconds(limited.iqr)} limited)"
    pairs = (("unlimited", unlimited, limited), ("limited", limited, unlimited))
    erratic = next((name for name, one, other in pairs
                    if one.iqr >= 3 * other.iqr and one.iqr >= 0.25 * other.median), None)
    cost = "nothing" if alone >= 0.97 else "little"
    if 0.9 <= alone <= 1.1 and erratic == "unlimited":
        return (f"{control} on fastest runs, but its runs were erratic {iqr}: limiting cost {cost} and "
                "steadied them.")
    if 0.9 <= alone <= 1.1 and erratic == "limited":
        return (f"{control} on fastest runs, but its limited runs were the erratic ones {iqr}: limiting "
                f"cost {cost} on fastest runs, only steadiness.")
    if 0.9 <= alone <= 1.1:
        return (f"{control}: alone, its pool neither helped nor hurt, so limiting cost {cost} here; where "
                "a pool helps, limiting trades that for workers that run at once.")
    spread = {"unlimited": f"; its runs were erratic {iqr}", None: "",
              "limited": f"; its limited runs were erratic {iqr}"}[erratic]
    if alone < 0.9:
        return (f"{control}: alone, a pool that size helped{spread}. Limiting trades that for workers that "
                "run at once.")
    return f"{control}: a pool that size cost a little by itself{spread}."


def _about(ratio: float) -> str:
    """A ratio of noisy timings to two significant figures: '2.5', '14'."""
    return f"{ratio:.1f}" if ratio < 10 else f"{ratio:.0f}"


# --- Is there a GIL at all? -----------------------------------------------------------------------


@dataclass(frozen=True)
class FreeThreading:
    """``build``: CPython built without the GIL (``Py_GIL_DISABLED``, the ``t`` builds, PEP 703);
    ``gil_enabled``: ``sys._is_gil_enabled()`` (None before Python 3.13, which has no such call)."""

    build: bool
    gil_enabled: bool | None

    @property
    def free_threaded(self) -> bool:
        """Whether Python threads run Python code in parallel here."""
        return self.build and self.gil_enabled is False


def free_threading() -> FreeThreading:
    """What this interpreter is: a free-threaded build or not, and whether the GIL is on now."""
    is_gil_enabled = getattr(sys, "_is_gil_enabled", None)
    return FreeThreading(bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
                         None if is_gil_enabled is None else bool(is_gil_enabled()))


def describe_free_threading(status: FreeThreading) -> str:
    """One line on what this interpreter is, for the lesson."""
    version = f"Python {sys.version_info.major}.{sys.version_info.minor}"
    if status.free_threaded:
        return f"{version} is a free-threaded build and the GIL is off: Python threads run in parallel."
    if status.build:
        return (f"{version} is a free-threaded build, but the GIL is on (an extension module that is "
                "not marked safe turned it back on, or PYTHON_GIL=1): threads take turns.")
    return f"{version} is a regular build (the GIL is always on): Python threads take turns."
