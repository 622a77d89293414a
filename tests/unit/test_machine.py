"""helpers.measure.machine and helpers.measure.system: the machine report, its warnings and the
memcpy floors."""

import json

import pytest

from helpers.measure import machine, system
from helpers.measure.units import MiB


@pytest.fixture(scope="module")
def report():
    return machine.machine_report(floor_bytes=8 * MiB)


def test_the_report_describes_cpus_memory_and_dev_shm(report):
    assert 1 <= report["usable_cpus"] <= report["logical_cpus"]
    assert 0 < report["ram_available_bytes"] <= report["ram_total_bytes"]
    assert report["shm_size_bytes"] == system.shm_size()
    assert report["default_start_method"] in report["start_methods"]
    assert report["libraries"]["numpy"] and report["libraries"]["psutil"]
    json.dumps(report)  # it is saved beside every result


def test_fresh_pages_cost_more_than_warm_ones(report):
    # Fresh pages are faulted and zeroed by the kernel on first write: never faster than warm ones.
    assert report["memcpy_warm_bytes_per_second"] > 0.9 * report["memcpy_fresh_bytes_per_second"]
    assert report["memcpy_warm_seconds"] > 0


def _binder_like(report, **changes):
    small = dict(report, usable_cpus=1, shm_size_bytes=64 * MiB, cgroup_memory_limit_bytes=2048 * MiB)
    small.update(changes)
    return small


def test_binder_sized_limits_get_plain_warnings(report):
    warnings = " ".join(machine.limits_warnings(_binder_like(report)))
    assert "Only 1 CPU" in warnings
    assert "/dev/shm holds only 64 MiB" in warnings and "SIGBUS" in warnings
    assert "Memory is limited to 2 GiB" in warnings
    no_shm = " ".join(machine.limits_warnings(_binder_like(report, shm_size_bytes=None)))
    assert "No /dev/shm" in no_shm


def test_a_roomy_machine_gets_no_warning(report):
    roomy = dict(report, usable_cpus=8, shm_size_bytes=8192 * MiB, cgroup_memory_limit_bytes=None,
                 ram_total_bytes=32768 * MiB)
    assert machine.limits_warnings(roomy) == []


def test_the_printed_report_has_one_line_per_fact(report, capsys):
    machine.print_machine_report(_binder_like(report))
    printed = capsys.readouterr().out
    for name in ("CPUs you may use", "/dev/shm", "start methods", "memcpy", "WARNING"):
        assert name in printed


def test_shm_counters_follow_a_real_segment():
    from multiprocessing import shared_memory

    before = system.shm_used()
    segment = shared_memory.SharedMemory(create=True, size=4 * MiB)
    try:
        segment.buf[::4096] = b"\x01" * len(segment.buf[::4096])
        assert system.shm_used() - before >= 4 * MiB
        assert system.shm_free() <= system.shm_size()
    finally:
        segment.close()
        segment.unlink()
