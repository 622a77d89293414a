"""The showdown panel driven from Python: build it, choose, click Run, wait, read what it drew."""

import multiprocessing as mp
import sys

import pytest

from helpers.bench import strategies, widgets
from helpers.lessons import fork_copy_on_write, ray_session
from helpers.measure import config, leftovers
from helpers.measure.units import MiB


def test_sizes_offered_fit_this_machine_and_include_the_configured_size():
    sizes = widgets.sizes_that_fit(2, include=config.array_bytes())
    assert sizes == sorted(sizes) and sizes[0] == widgets.SMALLEST_BYTES
    assert all(size <= widgets.largest_size_that_fits(2) for size in sizes)
    assert config.array_bytes() in sizes or config.array_bytes() > widgets.largest_size_that_fits(2)
    assert widgets.sizes_that_fit(2) == [s for s in sizes if s & (s - 1) == 0]


def test_panel_opens_with_a_size_dropdown_a_run_button_and_cheap_strategies():
    panel = widgets.ShowdownPanel()
    assert panel.run_button.description == "Run" and not panel.running
    assert panel.size.value in [value for _, value in panel.size.options]
    assert panel.size.options[0][1] == widgets.SMALLEST_BYTES
    assert set(panel.strategies.value) == set(widgets.DEFAULT_NAMES)
    assert [value for _, value in panel.strategies.options] == list(strategies.NAMES)
    assert panel.output.outputs == ()


def test_clicking_run_measures_draws_both_plots_and_leaves_nothing_behind():
    before = leftovers.snapshot()
    panel = widgets.showdown_panel()
    panel.size.value = widgets.SMALLEST_BYTES
    panel.workers.value = 2
    panel.strategies.value = ("pickle", "shared_memory")
    panel.run_button.click()
    assert panel.wait(timeout=180), "the run did not end within 3 minutes"
    assert panel.error is None, panel.status.value
    assert [r.name for r in panel.results] == ["pickle", "shared_memory"]
    assert all(r.skipped is None and r.fan_out.median > 0 for r in panel.results)
    assert all(r.array_bytes == 1 * MiB and r.n_workers == 2 for r in panel.results)
    assert panel.progress.value == panel.progress.max == 2
    (figure,) = panel.output.outputs
    assert figure["data"]["image/png"].startswith("iVBOR")  # base64 of a PNG's signature
    assert "2 ran, 0 skipped" in panel.status.value
    assert not panel.run_button.disabled and panel.stop_button.disabled
    assert not mp.active_children()
    assert not leftovers.new_since(before)


@pytest.mark.skipif(not fork_copy_on_write.has_fork(), reason="this platform cannot fork")
@pytest.mark.timeout(600)
def test_a_second_run_after_ray_still_forks_because_ray_never_runs_in_the_kernel():
    """Issue 13: Ray ran in the first run; the second run's fork_cow forks the same process. Ray runs
    in a spawned process of its own, so the fork is safe and runs (not skipped). The learner unticks
    Ray for the second run: a second Ray start-up (half a minute) would show nothing more."""
    before = leftovers.snapshot()
    panel = widgets.ShowdownPanel(names=["ray_object_store", "fork_cow"])
    panel.size.value = widgets.SMALLEST_BYTES
    panel.workers.value = 2
    for run, names in enumerate((("ray_object_store", "fork_cow"), ("fork_cow",))):
        panel.strategies.value = names
        panel.run_button.click()
        assert panel.wait(timeout=280), f"run {run + 1} did not end within 280 s"
        assert panel.error is None, panel.status.value
        by_name = {result.name: result for result in panel.results}
        assert list(by_name) == list(names)
        assert by_name["fork_cow"].skipped is None and by_name["fork_cow"].fan_out.median > 0
        if "ray_object_store" in names and ray_session.ray_installed() is None:
            assert by_name["ray_object_store"].skipped is None, by_name["ray_object_store"].skipped
            assert "2 ran" in panel.status.value
    assert not ray_session.ray_has_run()
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
    assert not mp.active_children()
    assert not leftovers.new_since(before)


def test_stop_ends_the_run_before_the_next_strategy():
    panel = widgets.ShowdownPanel(names=["pickle", "shared_memory", "sharedctypes"])
    panel.size.value = widgets.SMALLEST_BYTES
    panel.workers.value = 1
    panel.run_button.click()
    panel.stop_button.click()
    assert panel.wait(timeout=180)
    assert panel.error is None
    assert len(panel.results) < 3 and panel.status.value.startswith("ended early (stopped)")
    assert not mp.active_children()


def test_the_innermost_box_around_run_holds_the_size_first_and_the_output():
    panel = widgets.ShowdownPanel()

    def boxes_with_run(box):
        inner = [found for child in box.children if hasattr(child, "children")
                 for found in boxes_with_run(child)]
        return inner or ([box] if panel.run_button in box.children else [])

    (innermost,) = boxes_with_run(panel.widget)
    assert innermost is panel.widget and panel.output in innermost.children
    assert panel.widget.children[0].children[0] is panel.size  # the first <select> in the page
