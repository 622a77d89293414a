"""The decision guide of lesson 11: what each strategy allows, as the lessons showed it.

One row per strategy (the names of ``helpers.bench.strategies.NAMES``), one column per question a
reader asks before choosing (``QUESTIONS``). Every cell is a short answer and the lessons that
showed it (``Cell.lessons``: "01" ... "10"); a cell the course did not demonstrate says where the
fact comes from instead (``Cell.source``, e.g. the Python documentation). Plain data: ``as_text()``
renders every answer in full with where it comes from; ``as_markdown()`` the lesson's table, each
answer in a word or three (``Cell.short``). Nothing here measures anything.
"""

from __future__ import annotations

from dataclasses import dataclass

QUESTIONS = {
    "writable": "writable?",
    "start_methods": "start methods",
    "os": "OS",
    "crash_cleanup": "cleanup on crash",
    "multi_node": "multi-node",
    "object_dtype": "object dtype",
}


@dataclass(frozen=True)
class Cell:
    """One answer: ``text``, and the lessons that showed it (or ``source`` when none did)."""

    text: str
    lessons: tuple[str, ...] = ()
    source: str = ""
    short: str = ""  # the answer in a word or three, for the lesson's table (``as_markdown``)

    def __post_init__(self) -> None:
        if not self.lessons and not self.source:
            raise ValueError(f"cell {self.text!r} names neither a lesson nor a source")

    def render(self) -> str:
        """The answer followed by where it comes from: 'yes (06)', 'any (docs: Python)'."""
        where = ", ".join(self.lessons) if self.lessons else f"not shown; {self.source}"
        return f"{self.text} ({where})"


def _c(text: str, *lessons: str, source: str = "", short: str = "") -> Cell:
    return Cell(text, tuple(lessons), source, short)


NO_NODE = "no: one machine"
PY_DOCS = "Python docs"
RAY_DOCS = "Ray docs"
DASK_DOCS = "Dask docs"
# What both of Ray's ways share: every column but "writable"
RAY_CELLS = {
    "start_methods": _c("Ray's own worker processes", "10", short="Ray's own"),
    "os": _c("Linux (tested); macOS, Windows (beta) per the Ray docs", "10", short="any, Windows beta†"),
    "crash_cleanup": _c("objects freed with their owner; ray.shutdown() ends all", "10",
                        short="freed with owner"),
    "multi_node": _c("yes: objects move between nodes", "10", short="yes"),
    "object_dtype": _c("yes, pickled (copied, not zero-copy)", source=RAY_DOCS, short="pickled"),
}

GUIDE: dict[str, dict[str, Cell]] = {
    "threads": {
        "writable": _c("yes, one array for all: every write seen at once (races: lock)",
                       source="NumPy docs: thread safety", short="yes (lock)"),
        "start_methods": _c("none: threads of this process", "01", short="none"),
        "os": _c("Linux (tested); any OS per the Python docs", "01", short="any†"),
        "crash_cleanup": _c("nothing shared to leak; a crash ends every thread",
                            source="one process: its memory goes with it", short="nothing to leak"),
        "multi_node": _c(NO_NODE, source="threads of one process", short="no"),
        "object_dtype": _c("yes, shared as is, but Python code on it holds the GIL", "01", short="yes (GIL)"),
    },
    "pickle": {
        "writable": _c("private copy per task: writes are lost", "05", short="private copy"),
        "start_methods": _c("any: pickled whatever the method", "02", short="any"),
        "os": _c("Linux (tested); any OS per the Python docs", "02", short="any†"),
        "crash_cleanup": _c("nothing shared to leak", "02", short="nothing to leak"),
        "multi_node": _c(NO_NODE, source="a local pipe", short="no"),
        "object_dtype": _c("yes, pickled item by item (slow)",
                           source="NumPy: an object array pickles one Python object per item",
                           short="yes (slow)"),
    },
    "send_once": {
        "writable": _c("private copy per worker: a change stays there", "03", short="private copy"),
        "start_methods": _c("any: crosses once per worker at start-up", "03", short="any"),
        "os": _c("Linux (tested); any OS per the Python docs", "03", short="any†"),
        "crash_cleanup": _c("nothing shared to leak", "03", short="nothing to leak"),
        "multi_node": _c(NO_NODE, source="a local pipe", short="no"),
        "object_dtype": _c("yes, any picklable object (not a __main__ class)", "03", short="yes"),
    },
    "manager": {
        "writable": _c("yes, through the proxy; write items back", "03", short="via the proxy"),
        "start_methods": _c("any", "03", short="any"),
        "os": _c("Linux (tested); any OS per the Python docs", "03", short="any†"),
        "crash_cleanup": _c("data dies with the manager process", "03", short="dies with manager"),
        "multi_node": _c("possible: a manager can listen on TCP", source=PY_DOCS, short="via TCP"),
        "object_dtype": _c("yes, one round trip per read", "03", short="yes (slow)"),
    },
    "fork_cow": {
        "writable": _c("writes copy pages privately; parent never sees them", "04", short="private pages"),
        "start_methods": _c("fork only (unsafe with threads)", "04", short="fork only"),
        "os": _c("Linux (tested); no fork on Windows per the Python docs", "04", short="not Windows†"),
        "crash_cleanup": _c("nothing shared to leak", "04", short="nothing to leak"),
        "multi_node": _c(NO_NODE, "04", short="no"),
        "object_dtype": _c("readable, but refcounts un-share every page read", "04",
                           short="readable, un-shares pages"),
    },
    "sharedctypes": {
        "writable": _c("yes, seen by all; += needs the lock", "05", short="yes (lock)"),
        "start_methods": _c("any, but passed only at process start (Process args / initargs), never as a "
                            "task argument", "05", short="any, at start-up"),
        "os": _c("Linux (tested); any OS per the Python docs", "05", short="any†"),
        "crash_cleanup": _c("nameless file: freed with the last mapping", "05", short="freed (nameless)"),
        "multi_node": _c(NO_NODE, "05", short="no"),
        "object_dtype": _c("no: C number types only", "05", short="no"),
    },
    "memmap_disk": {
        "writable": _c("'r+' seen by all at once; 'c' private; 'r' refuses", "06", short="yes ('r+')"),
        "start_methods": _c("any: workers map by path", "06", short="any"),
        "os": _c("Linux (tested); any OS per the NumPy docs", "06", short="any†"),
        "crash_cleanup": _c("the file stays until deleted", "06", short="file stays"),
        "multi_node": _c("no (a network filesystem is not coherent for mappings)", source="mmap(2)",
                         short="no"),
        "object_dtype": _c("no: raw bytes in a file", source="NumPy docs", short="no"),
    },
    "memmap_tmpfs": {
        "writable": _c("'r+' seen by all at once; 'c' private; 'r' refuses", "06", short="yes ('r+')"),
        "start_methods": _c("any: workers map by path", "06", short="any"),
        "os": _c("Linux (/dev/shm)", "06", short="Linux"),
        "crash_cleanup": _c("holds RAM until deleted and unmapped", "06", short="stays, holding RAM"),
        "multi_node": _c(NO_NODE, "06", short="no"),
        "object_dtype": _c("no: raw bytes in a file", source="NumPy docs", short="no"),
    },
    "joblib": {
        "writable": _c("no: read-only views (mmap_mode='r'); a reused Parallel misses in-place changes",
                       "06", short="read-only"),
        "start_methods": _c("loky's own workers (fresh interpreters, like spawn)", "06",
                            short="loky's (spawn-like)"),
        "os": _c("Linux (tested); any OS per the joblib docs", "06", short="any†"),
        "crash_cleanup": _c("worker killed: dump removed; parent killed: dump stays while its workers live",
                            "06", short="dump may stay"),
        "multi_node": _c("no with loky (other backends can, per the joblib docs)", source="joblib docs",
                         short="no"),
        "object_dtype": _c("yes, pickled: object arrays are never memory-mapped", "06", short="pickled"),
    },
    "shared_memory": {
        "writable": _c("yes, seen by every process", "07", "08", short="yes"),
        "start_methods": _c("any: attach by name", "07", short="any"),
        "os": _c("Linux (tested); macOS, Windows too per the Python docs", "07", short="any†"),
        "crash_cleanup": _c("named: the resource tracker unlinks it once the killed program's last process "
                            "has gone; a stdlib pool's orphaned workers keep it until they exit", "07", "08",
                            short="tracker unlinks"),
        "multi_node": _c(NO_NODE, "07", short="no"),
        "object_dtype": _c("no: a child crashed (SIGSEGV); helpers refuse it", "07", short="no (crashes)"),
    },
    "executor": {
        "writable": _c("private args copied per task; SharedNDArray args shared", "08",
                       short="private; `SharedNDArray` shared"),
        "start_methods": _c("any", "08", short="any"),
        "os": _c("Linux (tested); macOS simulated, not run (the library's platform table): /dev/shm and "
                 "posix_fallocate missing elsewhere give a clear error", "08",
                 short="Linux; macOS simulated†"),
        "crash_cleanup": _c("yes: workers exit, the tracker unlinks segments", "08", short="unlinked"),
        "multi_node": _c(NO_NODE, "08", short="no"),
        "object_dtype": _c("pickled as usual, not shared", source="sharedarrays.transit", short="pickled"),
    },
    "reducer_torch": {
        "writable": _c("yes: the receiver views the shared storage", "09", short="yes"),
        "start_methods": _c("any; workers enable it in an initializer", "09", short="any"),
        "os": _c("Linux (tested); where PyTorch runs per its docs", "09", short="where PyTorch runs†"),
        "crash_cleanup": _c("fd strategy: nameless; file_system: torch_* files may stay", "09",
                            short="files may stay"),
        "multi_node": _c(NO_NODE, "09", short="no"),
        "object_dtype": _c("no: refused with TypeError", "09", short="no"),
    },
    "reducer_shared_memory": {
        "writable": _c("yes: the receiver views the segment", "09", short="yes"),
        "start_methods": _c("any; workers enable it in an initializer", "09", short="any"),
        "os": _c("Linux (tested); macOS simulated, not run (the library's platform table): /dev/shm and "
                 "posix_fallocate missing elsewhere give a clear error", "09",
                 short="Linux; macOS simulated†"),
        "crash_cleanup": _c("segments live until the sender stops sharing or exits", "09",
                            short="freed with sender"),
        "multi_node": _c(NO_NODE, "09", short="no"),
        "object_dtype": _c("no: refused with TypeError", "09", short="no"),
    },
    "ray_by_value": {
        "writable": _c("no: workers get read-only views", "10", short="read-only"),
        **RAY_CELLS,
    },
    "ray_object_store": {
        "writable": _c("no: ray.get gives read-only views", "10", short="read-only"),
        **RAY_CELLS,
    },
    "dask_by_value": {
        "writable": _c("private copy per task: writes are lost", "10", short="private copy"),
        "start_methods": _c("Dask's nannies spawn the workers", "10", short="Dask's own"),
        "os": _c("Linux (tested); macOS, Windows per the Dask docs", "10", short="any†"),
        "crash_cleanup": _c("a killed worker is restarted by its nanny; closing the cluster ends all",
                            source=DASK_DOCS, short="worker restarted (nanny)"),
        "multi_node": _c("yes: workers on many machines, data over TCP", source=DASK_DOCS, short="yes"),
        "object_dtype": _c("yes, pickled (copied)", source=DASK_DOCS, short="pickled"),
    },
    "dask_scatter": {
        "writable": _c("yes, but a write changes that worker's copy only", source=DASK_DOCS,
                       short="own copy"),
        "start_methods": _c("Dask's nannies spawn the workers", "10", short="Dask's own"),
        "os": _c("Linux (tested); macOS, Windows per the Dask docs", "10", short="any†"),
        "crash_cleanup": _c("a killed worker is restarted by its nanny, without the data scattered to it "
                            "(broadcast copies on other workers remain); closing the cluster ends all",
                            source=DASK_DOCS, short="worker restarted (nanny)"),
        "multi_node": _c("yes: one copy per worker, fetched worker to worker", "10", short="yes"),
        "object_dtype": _c("yes, pickled (copied)", source=DASK_DOCS, short="pickled"),
    },
}


def names() -> tuple[str, ...]:
    """The strategies the guide covers, in lesson order."""
    return tuple(GUIDE)


def lessons_cited() -> set[str]:
    """Every lesson some cell cites."""
    return {lesson for row in GUIDE.values() for cell in row.values() for lesson in cell.lessons}


def rows(titles: dict[str, str] | None = None) -> list[dict[str, str]]:
    """One dict per strategy: 'strategy' (its title if ``titles`` names it) and one rendered cell
    per question, keyed by the question's heading."""
    titles = titles or {}
    return [{"strategy": titles.get(name, name),
             **{heading: GUIDE[name][key].render() for key, heading in QUESTIONS.items()}}
            for name in GUIDE]


def as_markdown(titles: dict[str, str] | None = None) -> str:
    """The lesson's table (for ``IPython.display.Markdown``): each strategy (its title if ``titles``
    names it) and the lesson that builds it, then each answer in short (``Cell.short``), citing the
    lessons other than that one; † marks an answer the course did not show (``Cell.source`` says
    where it comes from: ``as_text()``). Strategies whose rows read the same share one row."""
    titles = titles or {}
    rows: dict[tuple[str, ...], list[str]] = {}  # a row's lesson and cells -> the strategies it answers for
    for name, row in GUIDE.items():
        own = _lesson_of(name)
        cells = (own, *(_short(cell, own) for cell in row.values()))
        rows.setdefault(cells, []).append(titles.get(name, name))
    lines = ["| strategy | lesson | " + " | ".join(QUESTIONS.values()) + " |",
             "|" + "---|" * (len(QUESTIONS) + 2)]
    lines += [f"| {', '.join(names)} | " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
              for cells, names in rows.items()]
    return "\n".join(lines)


def _lesson_of(name: str) -> str:
    from helpers.bench import strategies

    return strategies.STRATEGIES[name].lesson


def _short(cell: Cell, own: str) -> str:
    """A cell as the lesson's table shows it: its short answer, with † where no lesson showed it, or
    the lessons it cites other than ``own`` (the row's)."""
    text = cell.short or cell.text
    if not cell.lessons:
        return text if text.endswith("†") else f"{text}†"
    others = [lesson for lesson in cell.lessons if lesson != own]
    return f"{text} ({', '.join(others)})" if others else text


def as_text(titles: dict[str, str] | None = None, question: str | None = None) -> str:
    """The guide as aligned plain text: every question, or only ``question`` (a key of QUESTIONS)."""
    keys = [question] if question else list(QUESTIONS)
    table = [{"strategy": row["strategy"], **{QUESTIONS[k]: row[QUESTIONS[k]] for k in keys}}
             for row in rows(titles)]
    headings = list(table[0])
    widths = {h: max(len(h), *(len(row[h]) for row in table)) for h in headings}
    lines = ["  ".join(h.ljust(widths[h]) for h in headings),
             "  ".join("-" * widths[h] for h in headings)]
    lines += ["  ".join(row[h].ljust(widths[h]) for h in headings).rstrip() for row in table]
    return "\n".join(lines)
