"""Lesson 04's baseline for a fan-out's growth: this process's memory read alone, taking the read with
the largest PSS, so that a worker just joined, whose memory the kernel has not torn down yet, does not
halve our shared pages and inflate the next fan-out's growth (seen once: a read fan-out's tree PSS
grew by 0.83 arrays where the same run's readers made under 1 MiB private)."""

import pytest

from helpers.lessons import fork_copy_on_write
from helpers.measure.proctree import ProcessMemory


def test_the_baseline_is_the_read_with_the_largest_pss(monkeypatch):
    reads = iter([ProcessMemory(300, 10, 120), ProcessMemory(300, 200, 220), ProcessMemory(300, 199, 219)])
    monkeypatch.setattr(fork_copy_on_write, "process_memory", lambda pid: next(reads))
    assert fork_copy_on_write.memory_alone(reads=3, interval=0) == ProcessMemory(300, 200, 220)


@pytest.mark.timeout(60)
@pytest.mark.skipif(not fork_copy_on_write.has_fork(), reason="this platform cannot fork")
def test_an_idle_fan_out_grows_the_tree_by_the_workers_own_pages_only():
    fan = fork_copy_on_write.fan_out("fork", "idle", 2, hold_seconds=0.2)
    assert fan.growth("pss") < 0.5 * fan.parent_before.pss, (fan.growth("pss"), fan.parent_before)


@pytest.mark.timeout(60)
@pytest.mark.skipif(not fork_copy_on_write.has_fork(), reason="this platform cannot fork")
def test_a_bare_fan_out_reads_no_memory_figures_in_its_workers():
    fan = fork_copy_on_write.fan_out("fork", "idle", 2, measure=False)
    assert fan.seconds > 0 and all(w.before is None and w.after is None for w in fan.workers)
    with pytest.raises(ValueError, match="measure=True"):
        _ = fan.workers[0].uss_growth
