"""Append (or refresh) the "Before the next lesson" section at the end of lessons: a Markdown cell and
one code cell that calls ``helpers.lessons.kernel_memory.release(globals())``. Lessons that keep
something heavy in the kernel (torch, Ray, Dask) also tell the learner to shut the kernel down; the
browser test (tests/browser) does what that sentence says.

    python -m tools.end_of_lesson_cell notebooks/03_*.ipynb
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HEADING = "## Before the next lesson"
SHUT_DOWN = "Shut this kernel down before the next lesson"
HEAVY = {  # lesson stem -> what it keeps loaded
    "09_pickler_reductions_torch": "PyTorch",
    "10_ray_object_store": "Ray's and Dask's modules",
    "11_showdown": "every mechanism's modules, PyTorch included",
}


def markdown_for(stem: str) -> str:
    text = (f"{HEADING}\n\nJupyterLab keeps this kernel running when you open the next lesson. The next "
            "cell frees what this lesson left in it (its arrays, figures and cached cell results: run the "
            "lesson again to explore further) and measures what stays.")
    if stem in HEAVY:
        text += (f" **{SHUT_DOWN}** (Kernel → Shut Down Kernel): it keeps {HEAVY[stem]} loaded, which only "
                 "a shutdown frees, and on Binder one memory limit covers every kernel you leave running.")
    return text


CODE = ("from helpers.lessons import kernel_memory\n\n"
        "print(kernel_memory.release(globals()).describe())")


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]]


def add_to(path: Path) -> None:
    notebook = json.loads(path.read_text())
    cells = notebook["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "markdown" and "".join(cell["source"]).startswith(HEADING):
            del cells[index:index + 2]
            break
    cells.append({"cell_type": "markdown", "id": "before-the-next-lesson", "metadata": {},
                  "source": _lines(markdown_for(path.stem))})
    cells.append({"cell_type": "code", "execution_count": None, "id": "release-this-kernel",
                  "metadata": {"tags": ["nbval-ignore-output"]}, "outputs": [], "source": _lines(CODE)})
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        add_to(Path(argument))
