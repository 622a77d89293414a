"""The conda, Binder, dev container and pip environments pin the same packages at the same versions."""

import json
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


def _devcontainer() -> dict:
    """.devcontainer/devcontainer.json, whose comments (JSONC) are whole lines of their own."""
    text = (ROOT / ".devcontainer" / "devcontainer.json").read_text()
    return json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))


def test_the_dev_container_asks_for_the_python_binder_gets():
    """Binder's Python is environment.yml's (binder/ is a copy of it); the dev container's image is
    Microsoft's Python image of that version, on a named Debian release (not a moving `latest`)."""
    name = _devcontainer()["image"]
    image = re.fullmatch(r"mcr\.microsoft\.com/devcontainers/python:1-(\d+\.\d+)-bookworm", name)
    assert image, f"not a pinned Python image: {name}"
    environment = yaml.safe_load((ROOT / "binder" / "environment.yml").read_text())
    assert f"python={image.group(1)}" in environment["dependencies"]
    assert sorted(path.name for path in (ROOT / ".devcontainer").iterdir()) == ["devcontainer.json"]


def test_the_dev_container_sets_up_with_the_readmes_command_and_its_pins():
    """Its set-up is `make setup`, what `make lab` does before it opens JupyterLab: .venv with
    pyproject.toml's course extra (the pins environment.yml repeats) and torch from its CPU index, as
    binder/environment.yml asks; nothing in the container installs or overrides anything else."""
    container = _devcontainer()
    assert container["postCreateCommand"] == "make setup"
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^setup: \$\(INSTALLED\)$", makefile, re.M)
    assert re.search(r"^lab: \$\(INSTALLED\)$", makefile, re.M)
    assert '-e ".[$(EXTRAS)]"' in makefile
    assert re.search(r"^EXTRAS := \$\(if \$\(LESSONS_ONLY\),course,course,", makefile, re.M)  # course first
    readme_first_section = (ROOT / "README.md").read_text().split("\n## ")[1]
    assert "make lab    # creates .venv if missing, installs the pinned dependencies" in readme_first_section
    binder = (ROOT / "binder" / "environment.yml").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in binder
    text = json.dumps(container)
    for override in ("pip install", "TORCH_INDEX", "PYTHON=", "VENV=", "LAB_ARRAY_MB", "LAB_WORKERS"):
        assert override not in text, f"the dev container sets {override}"
    interpreter = container["customizations"]["vscode"]["settings"]["python.defaultInterpreterPath"]
    assert interpreter == "${containerWorkspaceFolder}/.venv/bin/python"
    assert container["customizations"]["codespaces"]["openFiles"] == ["notebooks/00_start_here.ipynb"]
    assert (ROOT / "notebooks" / "00_start_here.ipynb").exists()
