"""The README's promises hold: the Binder badge, the two commands, links to real lessons, CI."""

import re
from pathlib import Path

from tools import lesson_times

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_binder_badge_opens_jupyterlab_on_the_first_lesson():
    badge = re.search(r"\(https://mybinder\.org/v2/gh/[^)]+\)", README)
    assert badge, "no Binder badge link"
    assert "?urlpath=lab/tree/notebooks/00_start_here.ipynb" in badge.group(0)
    assert (ROOT / "notebooks" / "00_start_here.ipynb").exists()


def test_the_first_section_shows_the_two_commands():
    first_section = README.split("\n## ")[1]
    assert "make lab" in first_section and "make test" in first_section


def test_every_linked_notebook_exists_and_every_notebook_is_linked():
    linked = set(re.findall(r"\]\((notebooks/[^)]+\.ipynb)\)", README))
    on_disk = {f"notebooks/{p.name}" for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert linked == on_disk


def test_ci_runs_the_readmes_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_local_link_and_image_in_the_readme_exists():
    targets = re.findall(r"\]\(((?!https?://)[^)#]+)\)", README)
    assert any(target.startswith("results/") and target.endswith(".png") for target in targets), \
        "no headline figure from results/"
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, f"the README links to files that do not exist: {missing}"


def test_the_lesson_map_gives_every_lesson_a_reading_time_and_a_time_to_run():
    rows = [line for line in README.splitlines() if re.match(r"^\| \d\d \| \[", line)]
    assert len(rows) == len(list((ROOT / "notebooks").glob("*.ipynb")))
    for row in rows:
        assert re.search(r"\| \d+ min read, \d+ s run \|$", row), f"no reading and run time in: {row[:60]}"


def test_the_times_in_the_readme_and_the_headers_are_those_of_the_stored_runs(capsys):
    """Word counts and the seconds tools.execute_notebooks recorded: python -m tools.lesson_times --write."""
    assert lesson_times.main([]) == 0, capsys.readouterr().out


def test_the_top_figure_shows_the_references_times_without_lesson_11s_exercise_answers(tmp_path):
    """Cold read 11a: the PSS each way adds is lesson 11's exercise: the README's figure has the time
    panels alone (tools.readme_figure, from the shipped JSON) and its caption no memory figure."""
    import matplotlib.image

    from helpers.bench import strategies_suite
    from tools import readme_figure

    shown = readme_figure.figure_path()
    assert f"]({shown.relative_to(ROOT)})" in README.split("\n## ")[0]
    assert all("PSS" not in title for _, title, _ in strategies_suite.TIME_PANELS)
    caption = README.split(f"]({shown.relative_to(ROOT)})")[1].split("\n## ")[0]
    assert "PSS" not in caption and "held" not in caption and "none" not in caption
    assert "lesson 11's showdown asks you to predict it" in caption
    drawn = readme_figure.draw(path=tmp_path / "figure.png")
    mine, theirs = matplotlib.image.imread(drawn), matplotlib.image.imread(shown)
    assert mine.shape == theirs.shape and abs(mine - theirs).mean() < 0.01, \
        "the README's figure is not what python -m tools.readme_figure draws from the reference: rerun it"


def test_the_reference_runs_wall_time_is_the_one_its_results_file_records():
    import json

    said = re.search(r"The reference run at [^.]*? took (\d+) s on the reference VM", README)
    assert said, "the README no longer says how long the strategies reference run took"
    (results_file,) = sorted((ROOT / "results").glob("vm-*-strategies.json"))
    recorded = json.loads(results_file.read_text())["wall_seconds"]
    assert int(said.group(1)) == round(recorded), \
        f"README says {said.group(1)} s, {results_file.name} records {recorded:.1f} s"
