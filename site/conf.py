"""Sphinx configuration of the course's website; tools/site_build.py stages it beside the notebooks.

The notebooks are rendered as stored (nb_execution_mode = "off"): their outputs are the reference VM's.
The repository and branch come from the README's Binder badge (_generated/site.json).
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SITE = json.loads((HERE / "_generated" / "site.json").read_text())
REPOSITORY = SITE["repository"]

project = "Shared Arrays Lab"
author = "Shared Arrays Lab contributors"
copyright = "Shared Arrays Lab contributors (MIT licence)"
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
exclude_patterns = ["_includes/**", "_generated/**", "_extra/**", "panels/**", "**.ipynb_checkpoints"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}

nb_execution_mode = "off"
nb_merge_streams = True
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
# The stdlib's docstrings (Executor.submit's fn(*args, **kwargs)) are not ours and not MyST.
autodoc_inherit_docstrings = False
autodoc_default_options = {"members": True, "show-inheritance": False}

html_theme = "sphinx_book_theme"
html_title = "Shared Arrays Lab"
html_favicon = "_static/favicon.svg"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_extra_path = ["_extra"]
html_last_updated_fmt = None
# Light, dark or the reader's system setting, chosen with the theme's switch (auto is the default).
html_context = {"default_mode": "auto"}
html_theme_options = {
    "repository_url": REPOSITORY["url"],
    "repository_branch": REPOSITORY["branch"],
    "path_to_docs": "",
    "use_repository_button": True,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "launch_buttons": {"binderhub_url": "https://mybinder.org", "notebook_interface": "jupyterlab"},
    "show_navbar_depth": 1,
    "home_page_in_toc": True,
}

LESSONS = {f"notebooks/{lesson['name']}": lesson for lesson in SITE["lessons"]}


def lesson_links(app, pagename, templatename, context, doctree):
    """Under each lesson's title: launch it on Binder, download its .ipynb, its reading and run time."""
    lesson = LESSONS.get(pagename)
    if lesson is None or "body" not in context:
        return
    name = lesson["name"]
    badge = context["pathto"]("_static/binder_badge.svg", 1)
    links = (
        f'<p class="lesson-links">'
        f'<a class="lesson-launch" href="{REPOSITORY["binder"]}notebooks/{name}.ipynb">'
        f'<img src="{badge}" alt="Launch this lesson on Binder"></a> '
        f'<a class="lesson-download" href="{name}.ipynb" download>Download the notebook ({name}.ipynb)</a>'
        f' <span class="lesson-times">{lesson["times"]}</span></p>'
    )
    body = context["body"]
    end = body.find("</h1>")
    context["body"] = body[:end + 5] + links + body[end + 5:] if end >= 0 else links + body


def setup(app):
    app.connect("html-page-context", lesson_links)
