"""The take-home library installs alone from ``library/`` (NumPy only) and the course's helpers on top
of it, each in a clean venv without torch, Ray or JupyterLab; and the layers' import contract holds
and catches a violation."""

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tools import check_layers

ROOT = Path(__file__).resolve().parents[2]

LIBRARY_SMOKE = r"""
import importlib.metadata, importlib.resources, importlib.util, multiprocessing as mp
import numpy as np
import sharedarrays

expected = {"ArrayHandle", "SharedMemoryExecutor", "SharedNDArray", "__version__",
            "active_way", "attach", "handle_of", "share_arrays", "sharing_arrays", "stop_sharing_arrays",
            "sweep"}
assert set(sharedarrays.__all__) == expected, sorted(sharedarrays.__all__)
assert all(getattr(sharedarrays, name) is not None for name in sharedarrays.__all__)  # loaded when used
assert sharedarrays.__version__ == importlib.metadata.version("sharedarrays")
assert importlib.resources.files("sharedarrays").joinpath("py.typed").is_file()
license_files = [f for f in importlib.metadata.files("sharedarrays") if f.name == "LICENSE"]
assert license_files and "MIT License" in license_files[0].read_text()
for name in ("helpers", "psutil", "matplotlib", "torch", "ray", "jupyterlab"):
    assert importlib.util.find_spec(name) is None, f"{name} came with the library"
array = np.random.default_rng(0).random(1 << 18)
with sharedarrays.SharedNDArray.copy_of(array) as held, sharedarrays.attach(held.handle) as view:
    assert np.array_equal(view, array)
with sharedarrays.SharedMemoryExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
    assert np.array_equal(pool.submit(np.negative, array).result(), -array)
print("library smoke test passed")
"""

COURSE_SMOKE = r"""
import importlib.util
import numpy as np
from helpers.measure import config, copy_floors
from helpers.measure.memory import track_memory
from sharedarrays import SharedNDArray

for name in ("torch", "ray", "jupyterlab"):
    assert importlib.util.find_spec(name) is None, f"{name} came with a plain install"
array = np.random.default_rng(0).random(1 << 18)
with track_memory() as report, SharedNDArray.copy_of(array):
    pass
assert report.samples and config.array_bytes() > 0
assert copy_floors.measure_floors(array, repeat=1).warm.median > 0
print("course smoke test passed")
"""


def _pip_install(python: Path, *targets: Path) -> None:
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              *map(str, targets)], capture_output=True, text=True, timeout=540)
    if install.returncode != 0 and "No matching distribution" in install.stderr + install.stdout:
        pytest.skip(f"no package index reachable for a clean install: {install.stderr[-300:]}")
    assert install.returncode == 0, install.stderr


def _run(python: Path, code: str, cwd: Path) -> str:
    clean_env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    smoke = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd,
                           env=clean_env)
    assert smoke.returncode == 0, smoke.stderr
    return smoke.stdout


@pytest.mark.timeout(600)
def test_the_library_installs_alone_and_the_course_on_top_of_it(tmp_path):
    """``pip install ./library`` gives ``sharedarrays`` with NumPy only (no course package, no
    psutil or matplotlib); ``pip install .`` then adds the course's ``helpers`` on top of it."""
    source = tmp_path / "source"
    shutil.copytree(ROOT / "library", source / "library",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    shutil.copytree(ROOT / "helpers", source / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    _pip_install(python, source / "library")
    assert "library smoke test passed" in _run(python, LIBRARY_SMOKE, tmp_path)
    _pip_install(python, source)
    assert "course smoke test passed" in _run(python, COURSE_SMOKE, tmp_path)


def test_both_licenses_are_the_mit_text_the_pyprojects_name():
    assert (ROOT / "LICENSE").read_text() == (ROOT / "library" / "LICENSE").read_text()
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    for pyproject in (ROOT / "pyproject.toml", ROOT / "library" / "pyproject.toml"):
        text = pyproject.read_text()
        assert 'license = "MIT"' in text and 'license-files = ["LICENSE"]' in text


def test_the_import_contract_holds():
    assert check_layers.violations(ROOT / "helpers", ROOT / "library" / "sharedarrays") == []


def test_the_librarys_tests_import_nothing_of_the_course(tmp_path):
    assert check_layers.library_test_violations(ROOT / "library" / "tests") == []
    copy = tmp_path / "tests"
    shutil.copytree(ROOT / "library" / "tests", copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "test_shm.py").open("a") as module:
        module.write("\n\ndef _late():\n    from helpers.lessons import workers\n    return workers\n")
    problems = check_layers.library_test_violations(copy)
    assert len(problems) == 1
    assert "tests/test_shm.py" in problems[0] and "import helpers.lessons" in problems[0]


def _copy_of_helpers(tmp_path: Path) -> Path:
    """A copy of ``helpers/`` and of the library beside it, as ``tmp/helpers`` and ``tmp/sharedarrays``."""
    copy = tmp_path / "helpers"
    shutil.copytree(ROOT / "helpers", copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "library" / "sharedarrays", tmp_path / "sharedarrays",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _violations(copy: Path) -> list[str]:
    return check_layers.violations(copy, copy.parent / "sharedarrays")


def test_the_contract_catches_an_upward_import_inside_a_function(tmp_path):
    copy = _copy_of_helpers(tmp_path)
    with (copy.parent / "sharedarrays" / "shm.py").open("a") as module:
        module.write("\n\ndef _late():\n    from helpers.bench import strategies\n    return strategies\n")
    problems = _violations(copy)
    assert any("sharedarrays/shm.py" in p and "helpers.bench.strategies (helpers.bench), a layer above" in p
               for p in problems)


def test_the_contract_catches_a_cycle_a_private_name_and_a_third_party_import(tmp_path):
    copy = _copy_of_helpers(tmp_path)
    with (copy / "lessons" / "workers.py").open("a") as module:
        module.write("\n\ndef _back():\n    from helpers.lessons import memmap\n    return memmap\n")
    with (copy / "measure" / "timing.py").open("a") as module:
        module.write("\nfrom sharedarrays._segments import alive  # noqa\n")
    with (copy.parent / "sharedarrays" / "room.py").open("a") as module:
        module.write("\nimport psutil  # noqa\n")
    problems = _violations(copy)
    assert any(p.startswith("import cycle:") and "helpers.lessons.workers" in p for p in problems)
    assert any("imports private sharedarrays._segments" in p for p in problems)
    assert any("the library imports psutil" in p for p in problems)


def test_the_command_exits_1_on_a_violation_and_0_on_the_project(tmp_path):
    copy = _copy_of_helpers(tmp_path)
    with (copy / "measure" / "config.py").open("a") as module:
        module.write("\nfrom helpers.lessons import workers  # noqa\n")
    library = copy.parent / "sharedarrays"
    broken = subprocess.run([sys.executable, "-m", "tools.check_layers", str(copy), str(library)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert broken.returncode == 1 and "a layer above it" in broken.stdout
    kept = subprocess.run([sys.executable, "-m", "tools.check_layers"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert kept.returncode == 0 and "kept" in kept.stdout
