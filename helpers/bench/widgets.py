"""An ipywidgets panel for lesson 11: choose a size, workers and strategies, press Run, see the plots.

``ShowdownPanel()`` builds the controls (sizes offered are only those that fit this machine now:
RAM available and free /dev/shm, as ``helpers.measure.config`` sizes a lesson); displaying it runs
nothing. Run measures the floors and runs each chosen strategy (``helpers.bench.showdown.run_showdown``:
one that fails here is listed, not fatal) in a background thread, so the kernel stays
responsive; the progress bar advances after each strategy; Stop (or the time limit) ends the run
before the next strategy starts, and every strategy cleans up after itself (processes, segments,
files). When the run ends, the time and memory plots are drawn as one PNG into the ``Output``.
Your own task: ``task`` (an importable 'module:function', called by every worker as
``function(array, worker_index, n_workers)``) and ``array_path`` (a .npy file, memory-mapped; empty:
random float64 of the size chosen) run it instead of the course's sum, each strategy in a process
of its own (``helpers.bench.own_task``); the plots are then followed by the table and the ranking
for that task. A task that cannot be imported, or an array that does not fit, is refused in
``status`` before anything starts.
The Ray strategies run in a spawned process of their own (``helpers.bench.ray_child``): Ray never
runs in the kernel, so a second run may still fork (fork_cow). Sizes are bytes, times seconds.
"""

from __future__ import annotations

import base64
import io
import threading
import time
from collections.abc import Sequence

import ipywidgets as w

from helpers.measure import config, system
from helpers.measure.units import MiB, format_bytes, format_seconds

# Sizes offered: whole powers of two MiB from the smallest up to what fits, and never above this.
SMALLEST_BYTES = 1 * MiB
LARGEST_BYTES = 512 * MiB
MAX_WORKERS = 8
DEFAULT_TIME_LIMIT_S = 600.0  # Run stops starting new strategies after this long
# Chosen when the panel opens: three cheap ways (a few seconds each at the smallest size), one per
# family: copy per task, inherit, named segment. Ray and torch start slowly; pick them by hand.
DEFAULT_NAMES = ("pickle", "fork_cow", "shared_memory")


class Cancelled(Exception):
    """Raised between two strategies to end a run early (Stop, or the time limit)."""


def largest_size_that_fits(n_workers: int) -> int:
    """Bytes of the largest array a showdown with ``n_workers`` may use here now: the array, a few
    copies and one copy per worker in available RAM, a few in free /dev/shm (as
    ``helpers.measure.config``)."""
    fits = system.available_memory() // (n_workers + config.COPIES_BESIDES_WORKERS)
    shm_free = system.shm_free()
    if shm_free is not None:
        fits = min(fits, shm_free // config.SHM_SHARE)
    return min(fits, LARGEST_BYTES)


def sizes_that_fit(n_workers: int, include: int | None = None) -> list[int]:
    """Sizes (bytes) to offer: powers of two MiB that fit, plus ``include`` (e.g. the configured
    size) when it fits too; at least the smallest size."""
    limit = largest_size_that_fits(n_workers)
    sizes = []
    size = SMALLEST_BYTES
    while size <= limit:
        sizes.append(size)
        size *= 2
    if include is not None and include <= limit:
        sizes.append(include)
    return sorted(set(sizes)) or [SMALLEST_BYTES]


def _png_output(figure) -> dict:
    """A display_data output holding ``figure`` as PNG (what an Output widget shows)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(buffer.getvalue()).decode("ascii"),
                     "text/plain": "<Figure: showdown time and memory>"}}


class ShowdownPanel:
    """Controls for a showdown run and its two plots; ``.widget`` is the box to display.

    Attributes a program may drive: ``size``, ``workers``, ``strategies`` (values are strategy
    names), ``repeat``, ``run_button``, ``stop_button``; and read: ``progress``, ``status``,
    ``output``, ``results`` (the last run's StrategyResults), ``floors``, ``error``.
    """

    def __init__(self, names: Sequence[str] | None = None, time_limit_s: float = DEFAULT_TIME_LIMIT_S):
        from helpers.bench import strategies

        self._strategies = strategies
        self.time_limit_s = time_limit_s
        default_workers = min(config.n_workers(), MAX_WORKERS)
        self.workers = w.Dropdown(options=list(range(1, max(MAX_WORKERS, default_workers) + 1)),
                                  value=default_workers, description="workers")
        self.size = w.Dropdown(description="array")
        self._offer_sizes(config.array_bytes())
        titles = [(f"{s.title} ({s.lesson})", s.name) for s in strategies.STRATEGIES.values()]
        self.strategies = w.SelectMultiple(options=titles, value=tuple(n for n in (names or DEFAULT_NAMES)
                                                        if n in strategies.STRATEGIES),
                                           rows=min(len(titles), 13), description="strategies",
                                           layout=w.Layout(width="60%"))
        self.repeat = w.BoundedIntText(value=1, min=1, max=5, description="repeat")
        self.task = w.Text(value="", description="task", placeholder="module:function (empty: the sum)",
                           layout=w.Layout(width="40%"))
        self.array_path = w.Text(value="", description=".npy", placeholder="data.npy (empty: random)",
                                 layout=w.Layout(width="40%"))
        self.ranking: dict | None = None
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.stop_button = w.Button(description="Stop", disabled=True, icon="stop")
        self.progress = w.IntProgress(value=0, min=0, max=1, description="progress")
        self.status = w.Label(value="Choose, then press Run.")
        self.output = w.Output()
        self.results: list = []
        self.floors = None
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._deadline = 0.0
        self.workers.observe(lambda change: self._offer_sizes(self.size.value), names="value")
        self.run_button.on_click(lambda _: self.start())
        self.stop_button.on_click(lambda _: self._stop.set())
        # Run sits directly in the box that holds the size and the Output (not in a row of its
        # own): the innermost box around Run is the whole panel, as the browser test finds it.
        self.widget = w.VBox([
            w.HBox([self.size, self.workers, self.repeat]), w.HBox([self.task, self.array_path]),
            self.strategies, self.run_button,
            w.HBox([self.progress, self.stop_button]), self.status, self.output])

    def _offer_sizes(self, wanted: int | None) -> None:
        sizes = sizes_that_fit(self.workers.value, include=wanted)
        self.size.options = [(format_bytes(n), n) for n in sizes]
        self.size.value = max((n for n in sizes if wanted is None or n <= wanted), default=sizes[0])

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    @property
    def running(self) -> bool:
        """True while a run's thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start a run with the chosen values in a background thread (nothing if one is running)."""
        if self.running:
            return
        names = list(self.strategies.value)
        self._stop.clear()
        self.error = None
        self.progress.value, self.progress.max = 0, max(1, len(names))
        self.run_button.disabled, self.stop_button.disabled = True, False
        self._thread = threading.Thread(
            target=self._run, args=(names, self.size.value, self.workers.value, self.repeat.value,
                                    self.task.value.strip(), self.array_path.value.strip()),
            name="showdown-run", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the run to end (``timeout`` seconds at most); True once it has ended."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running

    def _check_not_stopped(self) -> None:
        if self._stop.is_set():
            raise Cancelled("stopped")
        if time.perf_counter() > self._deadline:
            raise Cancelled(f"time limit of {format_seconds(self.time_limit_s)} reached")

    def _array(self, n_bytes: int, path: str, names: list[str], n_workers: int):
        """The array of a run: the .npy file at ``path`` (memory-mapped, checked to fit), or random."""
        import numpy as np

        if not path:
            return np.random.default_rng(10).random(n_bytes // 8)
        from helpers.bench import strategies_suite, task_array

        source = task_array.describe_file(path)
        strategies_suite.check_sizes_fit([source.nbytes], names, n_workers)
        return task_array.make(source)

    def _run(self, names: list[str], n_bytes: int, n_workers: int, repeat: int, spec: str = "",
             path: str = "") -> None:
        """The run's thread: floors, then each strategy in turn (so a stop keeps what ran), then
        the plots. Errors end up in ``status`` and ``error``, never in the kernel's thread. ``spec``:
        a reader's 'module:function' to run instead of the sum; ``path``: their .npy file."""
        from helpers.bench import own_task, showdown

        started = time.perf_counter()
        self._deadline = started + self.time_limit_s
        self.results, self.ranking, note = [], None, ""
        try:
            if spec:
                own_task.check_task(spec)
            array = self._array(n_bytes, path, names, n_workers)
            self.status.value = "measuring the floors ..."
            self.floors = self._strategies.floor_seconds(array)
            for done, name in enumerate(names):
                self._check_not_stopped()
                self.status.value = f"running {name} ({done + 1}/{len(names)}) ..."
                if spec:
                    left = max(1.0, self._deadline - time.perf_counter())
                    self.results.append(own_task.run_strategy(name, array, spec, n_workers, repeat, left))
                else:
                    self.results += showdown.run_showdown([name], array, n_workers, repeat=repeat)
                self.progress.value = done + 1
        except Cancelled as reason:
            note = f"ended early ({reason}); "
        except Exception as error:  # shown in the panel, kept for the caller
            self.error = error
            self.status.value = f"failed: {type(error).__name__}: {error}"
        finally:
            self.run_button.disabled, self.stop_button.disabled = False, True
        if self.error is None:
            self._draw(spec)
            skipped = sum(r.skipped is not None for r in self.results)
            self.status.value = (f"{note}{len(self.results) - skipped} ran, {skipped} skipped, "
                                 f"in {format_seconds(time.perf_counter() - started)}")

    def _draw(self, spec: str = "") -> None:
        if not self.results:
            self.output.outputs = ()
            return
        from matplotlib.figure import Figure

        from helpers.bench import showdown

        rows = max(1, len(showdown.ran(self.results)))
        figure = Figure(figsize=(14, 0.45 * rows + 2), layout="constrained")
        time_ax, memory_ax = figure.subplots(1, 2)
        showdown.plot_times(self.results, self.floors, ax=time_ax)
        showdown.plot_memory(self.results, ax=memory_ax)
        memory_ax.set_yticklabels([])
        outputs = [_png_output(figure)]
        if spec:
            if len(time_ax.containers) >= 2:
                _label_for_task(time_ax, spec, self.results)
            outputs = [_png_output(figure), self._task_text(spec)]
        self.output.outputs = tuple(outputs)

    def _task_text(self, spec: str) -> dict:
        """The task suite's table and ranking for this run, as a stream output."""
        from helpers.bench import own_task, strategies_suite, task_suite
        from helpers.bench import transport_suite as transport

        warm, fresh = self.floors
        floors = {"warm": warm, "fresh_shm": fresh, "fresh_shm_create": fresh}
        array_bytes = self.results[0].array_bytes
        rows = transport.floor_rows(array_bytes, floors)[:2]
        rows += [strategies_suite.strategy_row(result, floors) for result in self.results]
        self.ranking = own_task.ranking(rows)
        text = (task_suite.format_table(rows, spec) + "\n\n"
                + own_task.format_ranking(self.ranking, spec, array_bytes))
        return {"output_type": "stream", "name": "stdout", "text": text + "\n"}


def _label_for_task(ax, spec: str, results: Sequence) -> None:
    """Relabel the time plot (drawn for the course's sum) for a reader's task and array."""
    ax.containers[0].set_label(f"fan-out: every worker calls {spec}")
    ax.containers[1].set_label("round trip: worker 0's returned array")
    done = [r for r in results if r.skipped is None]
    ax.set_title(f"Time: {format_bytes(results[0].array_bytes)}, {spec}, "
                 f"{done[0].n_workers if done else 0} workers")
    ax.legend(fontsize=7, loc="lower right")


def showdown_panel(**kwargs) -> ShowdownPanel:
    """A new ``ShowdownPanel`` (keyword arguments as its constructor's)."""
    return ShowdownPanel(**kwargs)
