"""Append (or refresh) the "Before the next lesson" section at the end of lessons: a Markdown cell and
one code cell that calls ``helpers.lessons.kernel_memory.release(globals())``. Lessons that keep
something heavy in the kernel (torch, Ray, Dask) also tell the learner to shut the kernel down
(``SHUT_DOWN``), and, in a note under their first cell, to shut the earlier lessons' kernels down
before running them (``SHUT_DOWN_EARLIER``): on Binder one memory limit covers every kernel. The
browser test (tests/browser) does what those sentences say.

    python -m tools.end_of_lesson_cell notebooks/03_*.ipynb
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HEADING = "## Before the next lesson"
LAST_HEADING = "## When you are done"  # the last lesson has no next one
SHUT_DOWN = "Shut this kernel down"  # what the browser test looks for, in either heading's text
SHUT_DOWN_EARLIER = "shut down the kernels of the earlier lessons before you run this one"
HEAVY = {  # lesson stem -> what it keeps loaded
    "09_pickler_reductions_torch": "PyTorch",
    "10_ray_object_store": "Ray's and Dask's modules",
    "11_showdown": "most mechanisms' modules (PyTorch too, if the panel runs its reduction)",
}


def markdown_for(stem: str, last: bool = False) -> str:
    """The closing section's text; ``last``: the course's last lesson, which has no next one."""
    heading, when = (LAST_HEADING, "when you are done") if last else (HEADING, "before the next lesson")
    keeps = "until you shut it down" if last else "when you open the next lesson"
    text = (f"{heading}\n\nJupyterLab keeps this kernel running {keeps}. The next "
            "cell frees what this lesson left in it (its arrays, figures and cached cell results: run the "
            "lesson again to explore further) and measures what stays.")
    if stem in HEAVY:
        text += (f" **{SHUT_DOWN} {when}** (Kernel → Shut Down Kernel): it keeps {HEAVY[stem]} loaded, "
                 "which only a shutdown frees, and on Binder one memory limit covers every kernel you leave "
                 "running.")
    return text


def note_for(stem: str) -> str:
    return (f"> **Memory.** This lesson loads {HEAVY[stem]} in its kernel and its workers. On a small "
            f"machine (Binder: one memory limit for everything you run), **{SHUT_DOWN_EARLIER}**: in "
            "JupyterLab's left bar, open *Running Terminals and Kernels* and shut down (✕) every other "
            "notebook's kernel.")


CODE = ("from helpers.lessons import kernel_memory\n\n"
        "print(kernel_memory.release(globals()).describe())")


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]]


def add_to(path: Path) -> None:
    notebook = json.loads(path.read_text())
    cells = notebook["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "markdown" and "".join(cell["source"]).startswith((HEADING, LAST_HEADING)):
            del cells[index:index + 2]
            break
    for index, cell in enumerate(cells):
        if cell.get("id") == "before-you-run-this-lesson":
            del cells[index]
            break
    if path.stem in HEAVY:
        cells.insert(1, {"cell_type": "markdown", "id": "before-you-run-this-lesson", "metadata": {},
                         "source": _lines(note_for(path.stem))})
    last = path == max(path.parent.glob("[0-9][0-9]_*.ipynb"))
    cells.append({"cell_type": "markdown", "id": "before-the-next-lesson", "metadata": {},
                  "source": _lines(markdown_for(path.stem, last))})
    cells.append({"cell_type": "code", "execution_count": None, "id": "release-this-kernel",
                  "metadata": {"tags": ["nbval-ignore-output"]}, "outputs": [], "source": _lines(CODE)})
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        add_to(Path(argument))
