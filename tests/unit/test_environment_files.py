"""The conda, Binder and pip environments pin the same packages at the same versions."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _pyproject_pins() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["course"]


def _conda_pip_pins(path: Path) -> list[str]:
    environment = yaml.safe_load(path.read_text())
    pip_sections = [d["pip"] for d in environment["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, f"{path} needs exactly one pip section"
    return [line for line in pip_sections[0] if not line.startswith("-")]


def test_every_pyproject_dependency_is_pinned_exactly():
    for requirement in _pyproject_pins():
        assert "==" in requirement, f"{requirement!r} is not pinned to one version"


def test_binder_environment_is_the_root_environment():
    root = (ROOT / "environment.yml").read_text()
    binder = (ROOT / "binder" / "environment.yml").read_text()
    assert binder == root, "binder/environment.yml differs from environment.yml: copy it over"


def test_conda_environment_pins_what_pyproject_pins():
    assert _conda_pip_pins(ROOT / "environment.yml") == _pyproject_pins()


def test_conda_environment_asks_for_the_newest_python_ci_tests():
    tested = re.search(r"^versions=\(([\d. ]+)\)$", (ROOT / ".ci" / "run").read_text(), re.M).group(1).split()
    newest = max(tested, key=lambda version: tuple(int(part) for part in version.split(".")))
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert f"python={newest}" in environment["dependencies"]


def test_binder_scripts_install_the_package_and_hand_over():
    post_build = (ROOT / "binder" / "postBuild").read_text()
    start = (ROOT / "binder" / "start").read_text()
    assert "set -e" in post_build and "pip install --no-deps -e ./library -e ." in post_build
    assert "export OMP_NUM_THREADS=1" in start
    assert start.rstrip().endswith('exec "$@"')
    for script in ("postBuild", "start"):
        assert (ROOT / "binder" / script).stat().st_mode & 0o111, f"binder/{script} is not executable"


def test_the_makefile_installs_the_pinned_torch_from_its_cpu_index():
    makefile = (ROOT / "Makefile").read_text()
    torch_pin = next(pin for pin in _pyproject_pins() if pin.startswith("torch=="))
    assert f"TORCH := {torch_pin}" in makefile
    assert "TORCH_INDEX ?= https://download.pytorch.org/whl/cpu" in makefile
