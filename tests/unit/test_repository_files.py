"""The repository as GitHub shows it, checked here since GitHub is out of reach.

The workflows in .github/workflows/ run only what CI runs here: each ``run:`` step calls ``.ci/run``,
or make targets that .ci/run runs (directly or as a stage of ``make test``), or moves files about for
them (``RUNNER_GLUE``); ``make bench`` and ``make notebooks`` only in the weekly run, for its
artifacts. They pass actionlint (with shellcheck on their scripts) and zizmor (its pedantic persona),
pin every action to a commit with its version beside it, and only main deploys the site, from the one
job that may write to Pages. CITATION.cff passes ``cffconvert --validate``; the course's version and
the library's agree with their changelogs. The checkers are pyproject.toml's ``checks`` group, which
``make setup`` installs into a venv of its own, ``$(VENV)/checks``.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import sharedarrays
from tools import site_build

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
CHECKS = Path(sys.prefix) / "checks" / "bin"
# What a run: step may call besides make and .ci/run: putting the runner's Pythons where .ci/run looks
# for them and moving the run into the root cgroup. None of them runs the course's code.
RUNNER_GLUE = {"mkdir", "ln", "echo", "tee"}
# make targets that .ci/run does not run and the weekly run may (in steps that run on the schedule
# only): they make its artifacts, the runner's benchmark results and its executed lessons.
WEEKLY_ARTIFACT_TARGETS = {"bench", "notebooks"}
SEPARATORS = {"&&", "||", ";", "|", "&"}
PINNED_ACTION = re.compile(r"^\s*(?:- )?uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


def makefile_targets(makefile: str) -> set[str]:
    """The Makefile's explicit targets (not .PHONY, variables or pattern rules)."""
    targets = set()
    for line in makefile.splitlines():
        rule = re.match(r"^([A-Za-z0-9_-][A-Za-z0-9_. -]*?)\s*:(?![=:])", line)
        if rule:
            targets.update(rule.group(1).split())
    return targets


def make_test_stages(makefile: str) -> list[str]:
    """The stages make test runs in turn (TEST_STAGES, a variable in it expanded to its default)."""
    stages = []
    for stage in re.search(r"^TEST_STAGES := (.+)$", makefile, re.M).group(1).split():
        variable = re.fullmatch(r"\$\((\w+)\)", stage)
        stages += (re.search(rf"^{variable.group(1)} \??= *(.*)$", makefile, re.M).group(1).split()
                   if variable else [stage])
    return stages


def recipe_make_calls(makefile: str, target: str) -> set[str]:
    """The targets ``target``'s recipe runs with ``$(MAKE) [options] TARGET``."""
    rule = re.search(rf"^{re.escape(target)}\s*:(?![=:]).*\n((?:\t.*\n?)*)", makefile, re.M)
    if rule is None:
        return set()
    recipe = rule.group(1).replace("\\\n", " ")
    calls = re.finditer(r"\$\(MAKE\)((?:[ \t]+-[-\w]+)*)[ \t]+([A-Za-z][\w-]*)", recipe)
    return {call.group(2) for call in calls}


def ci_run_targets(ci_run: str, makefile: str) -> set[str]:
    """The make targets .ci/run runs: those it names (outside comments), make test's stages, and
    what a stage's recipe runs with $(MAKE)."""
    named = set()
    for line in ci_run.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for call in re.finditer(r"\bmake((?:[ \t]+[^\s;&|]+)+)", line):
            named.update(word for word in call.group(1).split() if re.fullmatch(r"[A-Za-z][\w-]*", word))
    targets = named & makefile_targets(makefile)
    if "test" in targets:
        targets.update(make_test_stages(makefile))
    for stage in list(targets):
        targets.update(recipe_make_calls(makefile, stage) & makefile_targets(makefile))
    return targets


def shell_commands(script: str) -> list[list[str]]:
    """The simple commands of a run: script, each as its words (pipelines and lists split apart)."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        for token in lexer:
            if token in SEPARATORS:
                commands.append(words)
                words = []
            else:
                words.append(token)
        commands.append(words)
    return [words for words in commands if words]


def _program(words: list[str]) -> tuple[str, list[str]]:
    """The program a command runs and its arguments, past sudo, env and VAR=value prefixes."""
    words = list(words)
    while words:
        if words[0] in ("sudo", "env"):
            words.pop(0)
            while words and words[0].startswith("-"):
                words.pop(0)
        elif re.match(r"^[A-Za-z_]\w*=", words[0]):
            words.pop(0)
        else:
            return words[0], words[1:]
    return "", []


def _command_problems(words: list[str], weekly: bool, known: set[str], ci_runs: set[str]) -> list[str]:
    """What is wrong with one command of a run: step (nothing for .ci/run, glue, or make targets it runs)."""
    program, arguments = _program(words)
    command = shlex.join(words)
    if program in (".ci/run", "./.ci/run") or (program in ("bash", "sh") and arguments[:1] == [".ci/run"]):
        return []
    if program != "make":
        return [] if program in RUNNER_GLUE else [
            f"runs {program!r}, which is neither .ci/run nor a make target it runs: {command}"]
    problems = []
    if any(word.startswith(("-C", "-f", "--directory", "--file", "--makefile")) for word in arguments):
        problems.append(f"make with another directory or Makefile: {command}")
    targets = [word for word in arguments if not word.startswith("-") and "=" not in word]
    if not targets:
        problems.append(f"make without a target (the default goal): {command}")
    for target in targets:
        if target not in known:
            problems.append(f"make {target}: the Makefile has no target {target!r}")
        elif target not in ci_runs and not (weekly and target in WEEKLY_ARTIFACT_TARGETS):
            problems.append(f"make {target}: a target .ci/run does not run")
    return problems


def workflow_problems(text: str, makefile: str, ci_run: str) -> list[str]:
    """What a workflow's run: steps run that CI does not run here, or that does not exist."""
    known = makefile_targets(makefile)
    ci_runs = ci_run_targets(ci_run, makefile)
    problems = []
    for job_name, job in (yaml.safe_load(text).get("jobs") or {}).items():
        if "working-directory" in str(job.get("defaults", "")):
            problems.append(f"job {job_name}: a working directory other than the repository's root")
        for number, step in enumerate(job.get("steps") or [], 1):
            if "run" not in step:
                continue
            where = f"job {job_name}, step {number} ({step.get('name') or step['run'].strip()[:40]})"
            if "working-directory" in step:
                problems.append(f"{where}: a working directory other than the repository's root")
            commands = shell_commands(step["run"])
            if not commands:
                problems.append(f"{where}: runs nothing")
            weekly = "schedule" in str(step.get("if", ""))
            for words in commands:
                found = _command_problems(words, weekly, known, ci_runs)
                problems += [f"{where}: {problem}" for problem in found]
    return problems


def _workflow(name: str) -> dict:
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())
    workflow["on"] = workflow.pop(True, workflow.get("on"))  # YAML 1.1 reads the key `on` as True
    return workflow


def _makefile() -> str:
    return (ROOT / "Makefile").read_text()


def _ci_run() -> str:
    return (ROOT / ".ci" / "run").read_text()


def _checker(name: str) -> str:
    path = CHECKS / name
    assert path.exists(), f"{path} is missing: make setup installs pyproject.toml's `checks` group there"
    return str(path)


def _steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def test_the_workflows_are_the_tests_and_the_site_and_every_check_sees_them():
    names = {path.name for path in WORKFLOWS.iterdir()}
    assert {"tests.yml", "pages.yml"} <= names
    assert all(name.endswith(".yml") for name in names), f"the checks read *.yml only: {sorted(names)}"


def test_every_workflow_step_runs_what_ci_runs_here():
    for path in sorted(WORKFLOWS.glob("*.yml")):
        assert workflow_problems(path.read_text(), _makefile(), _ci_run()) == [], path.name


def test_ci_runs_make_test_with_all_its_stages_and_the_other_pythons_targets():
    targets = ci_run_targets(_ci_run(), _makefile())
    assert {"test", "setup", "unit"} <= targets
    assert set(make_test_stages(_makefile())) <= targets
    assert {"test-notebooks", "test-browser", "test-site"} <= targets  # test-browser-and-site runs two
    # make test's nbval pass is CI's forkserver pass, on Python 3.13
    assert re.search(r"\(NOTEBOOK_VENV=\.venv-3\.13 NOTEBOOK_START_METHOD=forkserver\)", _ci_run())
    in_both_branches = ('make test BEFORE_TIMED="bash $logs/wait-for-others" "${notebooks_on_313[@]}"',
                        'make test "${notebooks_on_313[@]}"')
    assert [_ci_run().count(call) for call in in_both_branches] == [1, 1]
    assert not targets & WEEKLY_ARTIFACT_TARGETS, "make bench or notebooks in .ci/run: no exception needed"


MADE_UP = """
on: push
jobs:
  test:
    runs-on: ubuntu-24.04
    steps:
      - run: {run}
        if: {condition}
"""


@pytest.mark.parametrize("run, condition, problem", [
    ("make no-such-target", "true", "the Makefile has no target 'no-such-target'"),
    ("sudo -E make lint no-such-target", "true", "the Makefile has no target 'no-such-target'"),
    ("make setup && make no-such-target", "true", "the Makefile has no target 'no-such-target'"),
    ("make lab", "true", "make lab: a target .ci/run does not run"),
    ("make bench", "github.event_name == 'push'", "make bench: a target .ci/run does not run"),
    ("make", "true", "make without a target"),
    ("make -C library test", "true", "make with another directory or Makefile"),
    ("pip install ruff", "true", "runs 'pip', which is neither .ci/run nor a make target it runs"),
    ("echo ok | python -m pytest", "true", "runs 'python'"),
])
def test_a_step_that_runs_what_ci_does_not_is_caught(run, condition, problem):
    problems = workflow_problems(MADE_UP.format(run=run, condition=condition), _makefile(), _ci_run())
    assert any(problem in found for found in problems), problems


def test_the_checker_passes_what_ci_runs():
    fine = MADE_UP.format(run='sudo -E env "PATH=$PATH" make setup unit TEST_ARRAY_MB=8', condition="true")
    assert workflow_problems(fine, _makefile(), _ci_run()) == []
    weekly = MADE_UP.format(run="make bench", condition="github.event_name == 'schedule'")
    assert workflow_problems(weekly, _makefile(), _ci_run()) == []


def test_the_tests_run_on_push_pull_request_and_weekly_through_ci_run_as_root():
    workflow = _workflow("tests.yml")
    assert {"push", "pull_request", "schedule"} <= set(workflow["on"])
    assert workflow["on"]["push"] is None and workflow["on"]["pull_request"] is None, "on every branch"
    assert len(workflow["on"]["schedule"]) == 1 and len(workflow["on"]["schedule"][0]["cron"].split()) == 5
    runs = [step for step in _steps(workflow) if "run" in step and ".ci/run" in step["run"]]
    assert len(runs) == 1 and "sudo" in runs[0]["run"] and "if" not in runs[0], "one .ci/run, as root, always"


def test_the_tests_give_ci_run_its_pythons_where_it_looks_for_them():
    """setup-python for the default Python (3.11, the one make test runs on) and for each version .ci/run
    tests besides it, linked where .ci/run looks for them ($PYENV_ROOT/versions/<version>/bin/python3)."""
    workflow = _workflow("tests.yml")
    steps = _steps(workflow)
    set_up = {step["id"]: step["with"]["python-version"] for step in steps
              if step.get("uses", "").startswith("actions/setup-python@")}
    others = re.search(r"^versions=\(([\d. ]+)\)$", _ci_run(), re.M).group(1).split()
    assert sorted(set_up.values()) == sorted(["3.11", *others])
    assert re.search(r'"\$\{PYENV_ROOT:-\$HOME/\.pyenv\}/versions"', _ci_run())
    assert re.search(r'\$pythons"/"\$version"\.\*/bin/python3', _ci_run())
    ci_run = next(step for step in steps if "run" in step and ".ci/run" in step["run"])
    links = next(step for step in steps if "run" in step and "ln -s" in step["run"])
    assert ci_run["env"]["PYENV_ROOT"] == links["env"]["PYENV_ROOT"]
    for version in others:
        step_id = next(key for key, value in set_up.items() if value == version)
        suffix = version.replace(".", "")
        assert links["env"][f"PYTHON{suffix}"] == f"${{{{ steps.{step_id}.outputs.python-path }}}}"
        assert links["env"][f"VERSION{suffix}"] == f"${{{{ steps.{step_id}.outputs.python-version }}}}"
        assert f'ln -s "${{PYTHON{suffix}%/bin/*}}" "$PYENV_ROOT/versions/$VERSION{suffix}"' in links["run"]
    default = next(key for key, value in set_up.items() if value == "3.11")
    assert ci_run["env"]["PYTHON"] == f"${{{{ steps.{default}.outputs.python-path }}}}"
    setups = [step for step in steps if step.get("uses", "").startswith("actions/setup-python@")]
    assert setups[-1]["with"]["python-version"] == "3.11", "the default Python last: python3 on PATH"


def test_the_weekly_run_keeps_the_benchmark_results_and_the_executed_lessons():
    steps = _steps(_workflow("tests.yml"))
    weekly = [step for step in steps if "schedule" in str(step.get("if", ""))]
    assert [shell_commands(step["run"])[0][-2:] for step in weekly if "run" in step] == [
        ["make", "bench"], ["make", "notebooks"]]
    upload = [step for step in weekly if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert len(upload) == 1 and upload[0] is steps[-1]
    assert upload[0]["with"]["path"].split() == ["results/", "notebooks/*.ipynb"]
    assert upload[0]["with"]["if-no-files-found"] == "error"


def test_the_site_is_built_tested_and_deployed_from_main_only():
    workflow = _workflow("pages.yml")
    assert workflow["on"]["push"] == {"branches": ["main"]}
    assert set(workflow["on"]) <= {"push", "workflow_dispatch"}
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    assert [step["run"] for step in build["steps"] if "run" in step] == ["make test-site"]
    upload = build["steps"][-1]
    assert upload["uses"].startswith("actions/upload-pages-artifact@")
    assert upload["with"]["path"] == str(site_build.HTML.relative_to(ROOT))
    assert deploy["needs"] == "build" and deploy["if"] == "github.ref == 'refs/heads/main'"
    assert deploy["environment"]["name"] == "github-pages"
    assert [step["uses"].split("@")[0] for step in deploy["steps"]] == ["actions/deploy-pages"]


def test_permissions_are_least_privilege():
    """Nothing at the top; read-only checkouts; write access to Pages in the deploy job alone."""
    for name in ("tests.yml", "pages.yml"):
        workflow = _workflow(name)
        assert workflow["permissions"] == {}, name
        for job_name, job in workflow["jobs"].items():
            expected = ({"pages": "write", "id-token": "write"} if (name, job_name) == ("pages.yml", "deploy")
                        else {"contents": "read"})
            assert job["permissions"] == expected, f"{name}: {job_name}"
        for step in _steps(workflow):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, name


def test_every_action_is_pinned_to_a_commit_with_its_version_beside_it():
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            if re.match(r"^\s*(- )?uses:", line):
                assert PINNED_ACTION.match(line), f"{path.name}: {line.strip()}"


@pytest.mark.timeout(120)
def test_actionlint_with_shellcheck_passes_the_workflows():
    result = subprocess.run([_checker("actionlint"), "-no-color", "-shellcheck", _checker("shellcheck"),
                             *map(str, sorted(WORKFLOWS.glob("*.yml")))],
                            cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(120)
def test_actionlint_and_shellcheck_catch_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  test:\n    runs-on: ubuntu-24.04\n    steps:\n"
                      "      - run: echo $UNQUOTED_PATH\n        timeout-minute: 5\n")
    result = subprocess.run([_checker("actionlint"), "-no-color", "-shellcheck", _checker("shellcheck"),
                             str(broken)], cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert result.returncode == 1
    assert "timeout-minute" in result.stdout and "SC2086" in result.stdout, result.stdout


@pytest.mark.timeout(120)
def test_zizmor_pedantic_passes_the_workflows():
    result = subprocess.run([_checker("zizmor"), "--offline", "--persona", "pedantic", "--no-progress",
                             "--color", "never", str(WORKFLOWS)],
                            cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout, result.stdout


@pytest.mark.timeout(120)
def test_zizmor_catches_an_unpinned_action_and_write_access_for_all(tmp_path):
    (tmp_path / "lax.yml").write_text("on: push\npermissions: write-all\njobs:\n  test:\n"
                                      "    runs-on: ubuntu-24.04\n    steps:\n"
                                      "      - uses: astral-sh/setup-uv@v7\n")
    result = subprocess.run([_checker("zizmor"), "--offline", "--persona", "pedantic", "--no-progress",
                             "--color", "never", str(tmp_path / "lax.yml")],
                            cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert result.returncode != 0
    assert "unpinned-uses" in result.stdout and "excessive-permissions" in result.stdout, result.stdout


@pytest.mark.timeout(120)
def test_the_citation_file_is_valid_cff():
    result = subprocess.run([_checker("cffconvert"), "--validate", "-i", str(ROOT / "CITATION.cff")],
                            cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert result.returncode == 0, result.stdout + result.stderr


def _newest_release(changelog: Path) -> tuple[str, str]:
    """The newest entry of a changelog: its version and date (## X.Y.Z — YYYY-MM-DD)."""
    releases = re.findall(r"^## (\d+\.\d+\.\d+) — (\d{4}-\d\d-\d\d)$", changelog.read_text(), re.M)
    assert releases, f"{changelog} has no '## X.Y.Z — YYYY-MM-DD' entry"
    return releases[0]


def test_the_course_has_one_version_in_pyproject_citation_and_changelog():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert _newest_release(ROOT / "CHANGELOG.md") == (version, citation["date-released"])
    assert citation["version"] == version
    import helpers
    assert helpers.__version__ == version, "helpers.__version__ is the course's version too"


def test_the_library_has_one_version_in_its_code_pyproject_and_changelog():
    pyproject = tomllib.loads((ROOT / "library" / "pyproject.toml").read_text())
    assert pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "sharedarrays.__version__"}
    assert _newest_release(ROOT / "library" / "CHANGELOG.md")[0] == sharedarrays.__version__
    library_dependency = f"Depends on `sharedarrays` {sharedarrays.__version__}."
    assert library_dependency in (ROOT / "CHANGELOG.md").read_text().split("\n## ")[1]


def test_the_citation_names_the_repository_and_the_site_the_readme_gives():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    readme = (ROOT / "README.md").read_text()
    assert citation["repository-code"] == site_build.repository()["url"]
    assert citation["url"] in readme


def test_the_readme_has_the_tests_badge_and_codespaces_beside_binder_and_says_how_to_cite():
    readme = (ROOT / "README.md").read_text()
    badges = readme.split("\n\n")[1]
    repository = site_build.repository()["url"]
    slug = repository.removeprefix("https://github.com/")
    workflow = f"{repository}/actions/workflows/tests.yml"
    assert f"[![tests]({workflow}/badge.svg)]({workflow})" in badges
    binder = badges.index("https://mybinder.org/v2/gh/")
    codespaces = badges.index(f"(https://codespaces.new/{slug}?quickstart=1)")
    assert binder < codespaces and "https://github.com/codespaces/badge.svg" in badges
    citing = readme.split("\n## Citing\n")[1].split("\n## ")[0]
    assert "](CITATION.cff)" in citing and "](CHANGELOG.md)" in citing and "](library/CHANGELOG.md)" in citing
