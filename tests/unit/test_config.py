"""helpers.measure.config: sizes, worker counts and start methods from the environment or the machine."""

import multiprocessing

import pytest
from private_shm import needs_private_tmpfs, run_in_64_mib_dev_shm

from helpers.measure import config, system
from helpers.measure.units import MiB


def test_array_size_comes_from_lab_array_mb(monkeypatch):
    monkeypatch.setenv("LAB_ARRAY_MB", "3")
    assert config.array_bytes() == 3 * MiB
    assert config.array_length() == 3 * MiB // 8
    assert config.array_length(itemsize=4) == 3 * MiB // 4


@pytest.mark.parametrize("raw", ["lots", "-1", "0"])
def test_a_bad_lab_array_mb_is_refused_with_its_name(monkeypatch, raw):
    monkeypatch.setenv("LAB_ARRAY_MB", raw)
    with pytest.raises(ValueError, match="LAB_ARRAY_MB"):
        config.array_bytes()


def test_the_default_size_fits_memory_and_dev_shm(monkeypatch):
    monkeypatch.delenv("LAB_ARRAY_MB", raising=False)
    size = config.array_bytes()
    assert config.MIN_ARRAY_BYTES <= size <= config.DEFAULT_CAP_BYTES
    assert size % MiB == 0
    shm_free = system.shm_free()
    if shm_free is not None and shm_free // config.SHM_SHARE >= config.MIN_ARRAY_BYTES:
        assert size <= shm_free // config.SHM_SHARE
    assert size * (config.n_workers() + config.COPIES_BESIDES_WORKERS) <= max(
        system.available_memory(), config.MIN_ARRAY_BYTES * 16
    )


def test_workers_come_from_lab_workers_or_the_usable_cpus(monkeypatch):
    monkeypatch.setenv("LAB_WORKERS", "3")
    assert config.n_workers() == 3
    monkeypatch.delenv("LAB_WORKERS")
    assert config.n_workers() == max(2, system.usable_cpus())
    monkeypatch.setenv("LAB_WORKERS", "0")
    with pytest.raises(ValueError, match="at least 1"):
        config.n_workers()
    monkeypatch.setenv("LAB_WORKERS", "two")
    with pytest.raises(ValueError, match="whole number"):
        config.n_workers()


def test_start_method_is_the_lessons_unless_the_environment_says_otherwise(monkeypatch):
    monkeypatch.delenv("LAB_START_METHOD", raising=False)
    assert config.start_method("spawn") == "spawn"
    monkeypatch.setenv("LAB_START_METHOD", "forkserver")
    assert config.start_method("spawn") == "forkserver"
    monkeypatch.setenv("LAB_START_METHOD", "teleport")
    with pytest.raises(ValueError, match=str(multiprocessing.get_all_start_methods()[0])):
        config.start_method("spawn")


def test_describe_names_where_each_value_came_from(monkeypatch):
    monkeypatch.setenv("LAB_ARRAY_MB", "2")
    monkeypatch.delenv("LAB_WORKERS", raising=False)
    line = config.describe()
    assert "2 MiB (LAB_ARRAY_MB)" in line
    assert "usable CPUs" in line


def test_a_lesson_that_keeps_more_arrays_in_dev_shm_gets_a_smaller_default(monkeypatch):
    monkeypatch.delenv("LAB_ARRAY_MB", raising=False)
    assert config.array_bytes(shm_copies=8) <= config.array_bytes()
    shm_free = system.shm_free()
    if shm_free is not None and shm_free // 8 >= config.MIN_ARRAY_BYTES:
        assert config.array_bytes(shm_copies=8) <= shm_free // 8
    monkeypatch.setenv("LAB_ARRAY_MB", "3")  # the reader's choice always wins
    assert config.array_bytes(shm_copies=8) == 3 * MiB


# --- knobs(): the knobs cell of a lesson --------------------------------------------------------------


def test_knobs_arguments_win_over_the_environment_and_the_environment_over_defaults(monkeypatch):
    monkeypatch.setenv("LAB_ARRAY_MB", "3")
    monkeypatch.setenv("LAB_WORKERS", "2")
    monkeypatch.setenv("LAB_START_METHOD", "spawn")
    assert config.knobs(default_method="fork") == config.Knobs(3 * MiB, 2, "spawn")
    assert config.knobs(5, 3, "forkserver", default_method="fork") == config.Knobs(5 * MiB, 3, "forkserver")
    for name in ("LAB_ARRAY_MB", "LAB_WORKERS", "LAB_START_METHOD"):
        monkeypatch.delenv(name)
    chosen = config.knobs(default_method="spawn")
    assert chosen == config.Knobs(config.array_bytes(), config.n_workers(), "spawn")
    assert chosen.describe().startswith("array: ") and "start method: spawn" in chosen.describe()


@pytest.mark.parametrize("bad, words", [
    (dict(array_mib=-1), "positive number of MiB"),
    (dict(array_mib="big"), "positive number of MiB"),
    (dict(workers=0), "at least 1"),
    (dict(workers=1.5), "whole number"),
    (dict(method="threads"), "not available here"),
])
def test_knobs_refuse_bad_settings_in_one_line(bad, words):
    with pytest.raises(ValueError, match=words) as raised:
        config.knobs(default_method="spawn", **bad)
    assert "\n" not in str(raised.value)


def test_knobs_refuse_a_size_that_does_not_fit_in_ram_and_say_what_fits():
    too_big = system.available_memory() // MiB  # one array fits, but not 2 workers' copies + 4
    with pytest.raises(ValueError, match=r"does not fit: .* RAM .* choose at most \d+ MiB") as raised:
        config.knobs(too_big, 2, default_method="spawn", shm_copies=0)
    at_most = int(str(raised.value).rsplit("at most ", 1)[1].split()[0])
    # the RAM's answer fits the RAM (no copies in /dev/shm asked for: its size is not what this checks)
    assert config.knobs(at_most, 2, default_method="spawn", shm_copies=0).array_bytes == at_most * MiB


@needs_private_tmpfs
def test_knobs_refuse_a_size_that_does_not_fit_in_a_64_mib_dev_shm():
    done = run_in_64_mib_dev_shm("""
        from helpers.measure import config
        assert config.knobs(8, 1, default_method="spawn").array_bytes == 8 * 2**20
        try:
            config.knobs(32, 1, default_method="spawn")
        except ValueError as error:
            print(error)
    """)
    assert done.returncode == 0, done.stderr
    assert "does not fit: this lesson may keep 4 copies in /dev/shm" in done.stdout
    assert "choose at most 16 MiB" in done.stdout or "choose at most 15 MiB" in done.stdout
