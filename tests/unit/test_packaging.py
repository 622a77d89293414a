"""`pip install .` (no extras) in a clean venv gives a working library and measuring tools, without
torch, Ray or JupyterLab; and the layers' import contract holds and catches a violation."""

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tools import check_layers

ROOT = Path(__file__).resolve().parents[2]

SMOKE = r"""
import importlib.util, multiprocessing as mp
import numpy as np
from concurrent.futures import ProcessPoolExecutor
import helpers.shared as shared
from helpers.measure import config, copy_floors
from helpers.measure.memory import track_memory

assert set(shared.__all__) >= {"SharedNDArray", "SharedMemoryExecutor", "attach", "handle_of", "sweep"}
for name in ("torch", "ray", "jupyterlab"):
    assert importlib.util.find_spec(name) is None, f"{name} came with a plain install"
array = np.random.default_rng(0).random(1 << 18)
with shared.SharedNDArray.copy_of(array) as held, shared.attach(held.handle) as view:
    assert np.array_equal(view, array)
with track_memory() as report:
    with shared.SharedMemoryExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
        assert np.array_equal(pool.submit(np.negative, array).result(), -array)
assert report.samples and config.array_bytes() > 0
assert copy_floors.measure_floors(array, repeat=1).warm.median > 0
print("smoke test passed")
"""


@pytest.mark.timeout(600)
def test_a_plain_install_works_without_the_course_extras(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    shutil.copytree(ROOT / "helpers", source / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              str(source)],
                             capture_output=True, text=True, timeout=540)
    if install.returncode != 0 and "No matching distribution" in install.stderr + install.stdout:
        pytest.skip(f"no package index reachable for a clean install: {install.stderr[-300:]}")
    assert install.returncode == 0, install.stderr
    clean_env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    smoke = subprocess.run([python, "-c", SMOKE], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path, env=clean_env)
    assert smoke.returncode == 0, smoke.stderr
    assert "smoke test passed" in smoke.stdout


def test_the_import_contract_holds():
    assert check_layers.violations(ROOT / "helpers") == []


def _copy_of_helpers(tmp_path: Path) -> Path:
    copy = tmp_path / "helpers"
    shutil.copytree(ROOT / "helpers", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_contract_catches_an_upward_import_inside_a_function(tmp_path):
    copy = _copy_of_helpers(tmp_path)
    with (copy / "shared" / "shm.py").open("a") as module:
        module.write("\n\ndef _late():\n    from helpers.bench import strategies\n    return strategies\n")
    problems = check_layers.violations(copy)
    assert any("shared/shm.py" in p and "helpers.bench.strategies (bench), a layer above it" in p
               for p in problems)


def test_the_contract_catches_a_cycle_a_private_name_and_a_third_party_import(tmp_path):
    copy = _copy_of_helpers(tmp_path)
    with (copy / "lessons" / "workers.py").open("a") as module:
        module.write("\n\ndef _back():\n    from helpers.lessons import memmap\n    return memmap\n")
    with (copy / "measure" / "timing.py").open("a") as module:
        module.write("\nfrom helpers.shared._segments import alive  # noqa\n")
    with (copy / "shared" / "room.py").open("a") as module:
        module.write("\nimport psutil  # noqa\n")
    problems = check_layers.violations(copy)
    assert any(p.startswith("import cycle:") and "helpers.lessons.workers" in p for p in problems)
    assert any("imports private helpers.shared._segments" in p for p in problems)
    assert any("the library imports psutil" in p for p in problems)


def test_the_command_exits_1_on_a_violation_and_0_on_the_project(tmp_path):
    copy = _copy_of_helpers(tmp_path)
    with (copy / "measure" / "config.py").open("a") as module:
        module.write("\nfrom helpers.lessons import workers  # noqa\n")
    broken = subprocess.run([sys.executable, "-m", "tools.check_layers", str(copy)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert broken.returncode == 1 and "a layer above it" in broken.stdout
    kept = subprocess.run([sys.executable, "-m", "tools.check_layers"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert kept.returncode == 0 and "kept" in kept.stdout
