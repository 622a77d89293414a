"""Lesson 00's code (start here): a setup self-check, fresh pages, random shared-memory segments,
workers held still so that memory can be measured, and the lesson's "Your turn" (``EXERCISE``:
how many arrays each memory measure counts when N readers read one segment, and one reader's PSS).
``helpers.lessons.demos`` has the pieces other lessons share; the figures are in
``helpers.lessons.start_here_figures``.

Holding matters: a polled sum over a process tree overshoots while processes start and attach,
so the lessons measure steady states, the median between two marks taken while every worker
holds its memory (``MemoryReport.steady``). Every size here is in bytes, every duration in seconds.
"""

from __future__ import annotations

import inspect
import mmap
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing import shared_memory

import numpy as np

from helpers.lessons import workers
from helpers.lessons.demos import (
    HOLD_SECONDS,
    SETTLE_SECONDS,
    format_measure_table,
    hold,
    join_or_kill,
    wait_until_ready,
)
from helpers.lessons.exercises import Exercise
from helpers.measure import system
from helpers.measure.memory import release_free_heap  # noqa: F401  (lesson 00 calls it from here)
from helpers.measure.proctree import PSS_KINDS, descendant_pids
from helpers.measure.units import format_bytes


def fresh_array(n_bytes: int) -> np.ndarray:
    """A float64 array over a brand-new private anonymous mapping: none of its pages is resident yet.

    ``np.empty`` may hand back memory the allocator recycled (already resident, so already
    faulted in); a new mapping never does. Private 4 KiB pages, as ``malloc`` gives a large buffer
    (``mmap``'s default, MAP_SHARED, would make it shared memory, whose first touch costs more; no
    huge pages, which a new NumPy array may get), so a first copy into it costs what
    ``copy_floors.fresh_pages_copy`` times. The mapping is released with the last view of it.
    """
    n_items = max(1, n_bytes // 8)
    region = mmap.mmap(-1, n_items * 8, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):  # 4 KiB pages; a new NumPy array may get 2 MiB (512x fewer faults)
        region.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(region, dtype=np.float64)


def random_segment(n_bytes: int, seed: int = 0) -> shared_memory.SharedMemory:
    """A new shared-memory segment of ``n_bytes`` filled with random float64, in place.

    Checks the free space in /dev/shm first: writing past a full /dev/shm would kill this
    process with SIGBUS, so a segment that cannot fit raises MemoryError instead. The caller
    owns the segment: ``close()`` it, then ``unlink()`` it in a ``finally``.
    """
    free = system.shm_free()
    if free is not None and n_bytes > free:
        raise MemoryError(
            f"a {format_bytes(n_bytes)} segment does not fit: /dev/shm has {format_bytes(free)} "
            "free; lower array_mib (LAB_ARRAY_MB)"
        )
    segment = shared_memory.SharedMemory(create=True, size=n_bytes)
    try:
        view = np.ndarray((n_bytes // 8,), dtype=np.float64, buffer=segment.buf)
        np.random.default_rng(seed).random(out=view)  # no temporary array
        del view
    except BaseException:
        segment.close()
        segment.unlink()
        raise
    return segment


def segment_checksum(name: str) -> int:
    """Worker: attach the named segment, return the sum of its bytes (reads every page)."""
    segment = shared_memory.SharedMemory(name=name)
    try:
        view = np.ndarray((segment.size,), dtype=np.uint8, buffer=segment.buf)
        total = int(view.sum(dtype=np.uint64))
        del view
        return total
    finally:
        segment.close()


@dataclass(frozen=True)
class SelfCheck:
    """What ``self_check`` proved: the start method used, the checksum a worker read back, the
    checksum this process computed of what it wrote (``expected``), and whether the segment lived
    in /dev/shm (None where the system has no /dev/shm)."""

    start_method: str
    checksum: int
    expected: int
    segment_in_dev_shm: bool | None


def self_check(start_method: str = "spawn", n_bytes: int = 1 << 20) -> SelfCheck:
    """Prove the setup works: a worker started with ``start_method`` attaches a fresh shared
    segment of ``n_bytes`` that this process wrote, and returns its checksum, which must match.

    Raises RuntimeError naming what failed. Leaves no process and no segment behind.
    """
    segment = random_segment(n_bytes, seed=7)
    try:
        in_dev_shm = (system.SHM_DIR / segment.name.lstrip("/")).exists() if system.SHM_DIR.is_dir() else None
        view = np.ndarray((n_bytes,), dtype=np.uint8, buffer=segment.buf)
        expected = int(view.sum(dtype=np.uint64))
        del view
        with mp.get_context(start_method).Pool(1) as pool:
            answer = pool.apply_async(segment_checksum, (segment.name,)).get(timeout=60)
    finally:
        segment.close()
        segment.unlink()
    if answer != expected:
        raise RuntimeError(f"a {start_method} worker read checksum {answer}, this process wrote {expected}")
    return SelfCheck(start_method, answer, expected, in_dev_shm)


@dataclass(frozen=True)
class Held:
    """What ``hold_in_workers`` leaves: the workers' pids and what ``during`` returned."""

    pids: list[int]
    during: object = None


def hold_in_workers(
    target: Callable,
    args: tuple,
    n_workers: int,
    start_method: str = "spawn",
    hold_seconds: float = HOLD_SECONDS,
    report=None,
    label: str = "hold",
    during: Callable[[], object] | None = None,
) -> Held:
    """Start ``n_workers`` processes running ``target(*args, ready, release)``, wait until every
    one is ready, hold them ``hold_seconds`` (marked on ``report`` as ``'<label> holding'`` and
    ``'<label> end'`` when given), then release and join them.

    ``during`` (optional) is called once while every worker holds. ``target`` must be
    importable (see helpers.lessons.workers: ``hold_shared_segment``, ``allocate_and_hold``), since
    spawn and forkserver children import it by name.
    """
    context = mp.get_context(start_method)
    release = context.Event()
    readies = [context.Event() for _ in range(n_workers)]
    processes = [context.Process(target=target, args=(*args, ready, release)) for ready in readies]
    result = None
    try:
        for process in processes:
            process.start()
        wait_until_ready(readies, processes)
        time.sleep(SETTLE_SECONDS)
        if report is not None:
            result = hold(report, label, hold_seconds, during)
        else:
            time.sleep(hold_seconds / 2)
            result = during() if during is not None else None
            time.sleep(hold_seconds / 2)
    finally:
        release.set()
        join_or_kill(processes)
    return Held([p.pid for p in processes if p.pid is not None], result)


LAUNCH_LINES = ("context =", "release =", "readies =", "processes =", "try:", "for process in",
                "process.start()", "wait_until_ready(", "finally:", "release.set()", "join_or_kill(")


def launcher_lines() -> str:
    """The working lines of ``hold_in_workers`` (how it starts its workers, waits until each is
    ready, releases and joins them), dedented; ``...`` stands where two or more lines are cut."""
    kept, cut, indent, cut_at = [], 0, None, 0  # cut_at: the indentation of the first line cut
    for line in inspect.getsource(hold_in_workers).splitlines():
        at = len(line) - len(line.lstrip())
        if not line.strip().startswith(LAUNCH_LINES):
            if line.strip() and not cut:
                cut_at = at
            cut += bool(line.strip())
            continue
        indent = at if indent is None else indent
        if cut >= 2 and kept:
            kept.append(" " * (cut_at - indent) + "...")
        kept.append(line[indent:])
        cut = 0
    return "\n".join(kept)


def hold_segment_in_workers(
    segment_name: str,
    n_workers: int,
    start_method: str = "spawn",
    hold_seconds: float = HOLD_SECONDS,
    report=None,
    during: Callable[[], object] | None = None,
) -> Held:
    """``n_workers`` processes attach one shared segment, read every page and hold it still.

    What memory_profiler's ``memory_usage`` runs in lesson 00 (it calls this in the parent).
    Marks ``'shared holding'``/``'shared end'`` on ``report`` when given.
    """
    return hold_in_workers(
        workers.hold_shared_segment, (segment_name,), n_workers, start_method,
        hold_seconds, report, "shared", during,
    )


ANONYMOUS, SHARED_MEMORY, FILES = PSS_KINDS.values()  # the kind names of demos.tree_pss_by_kind
SHARED_MEMORY_PATHS = ("/dev/shm/", "/SYSV", "/dev/zero", "/memfd:")  # tmpfs-backed mappings
KIND_NAMES = {ANONYMOUS: "anonymous (heap, NumPy buffers)", SHARED_MEMORY: SHARED_MEMORY, FILES: FILES}


def _mapping_kind(header: str) -> str:
    """The kind of one /proc/PID/smaps mapping from its header line (address, perms, offset, device,
    inode, path): shared memory by its path, anonymous when it has no inode, else a file."""
    parts = header.split(maxsplit=5)
    path = parts[5] if len(parts) > 5 else ""
    if path.startswith(SHARED_MEMORY_PATHS):
        return SHARED_MEMORY
    return ANONYMOUS if parts[4] == "0" else FILES


def tree_by_kind() -> dict[str, dict[str, int]] | None:
    """USS and PSS of this process and its descendants split by kind of page, in bytes, read now:
    ``{"uss": {kind: bytes}, "pss": {kind: bytes}}`` for the kinds of ``proctree.PSS_KINDS``.

    Read mapping by mapping from /proc/PID/smaps (USS is Private_Clean + Private_Dirty). File pages
    turn private or shared as other programs on the machine map the same libraries, so they move
    both measures by MiB; the other kinds do not. None where smaps cannot be read (not Linux).
    """
    totals = {"uss": dict.fromkeys(PSS_KINDS.values(), 0), "pss": dict.fromkeys(PSS_KINDS.values(), 0)}
    for pid in [os.getpid(), *descendant_pids(os.getpid())]:
        try:
            _add_smaps(pid, totals)
        except FileNotFoundError:
            continue  # the process ended meanwhile
        except OSError:
            return None
    return totals


def _add_smaps(pid: int, totals: dict[str, dict[str, int]]) -> None:
    """Add one process's USS and PSS by kind to ``totals``, reading its smaps a line at a time (the
    file can be MiB of text: tracemalloc would count it)."""
    kind = FILES
    with open(f"/proc/{pid}/smaps") as file:
        for line in file:
            name, _, value = line.partition(" ")
            if not name.endswith(":"):
                kind = _mapping_kind(line)
            elif name in ("Private_Clean:", "Private_Dirty:"):
                totals["uss"][kind] += int(value.split()[0]) * 1024
            elif name == "Pss:":
                totals["pss"][kind] += int(value.split()[0]) * 1024


def data_growth(before: dict[str, dict[str, int]] | None,
                after: dict[str, dict[str, int]] | None) -> dict[str, int] | None:
    """Bytes USS and PSS grew between two ``tree_by_kind`` readings, in anonymous and shared-memory
    pages only (what an array is made of): ``{"uss": bytes, "pss": bytes}``; None if either is None."""
    if before is None or after is None:
        return None
    return {measure: sum(after[measure][kind] - before[measure][kind] for kind in (ANONYMOUS, SHARED_MEMORY))
            for measure in ("uss", "pss")}


def by_kind_table(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]], array_bytes: int,
                  share: float = 0.05) -> str:
    """A text table of how much USS and PSS grew between two ``tree_by_kind`` readings, kind by kind
    (bytes and arrays of ``array_bytes``); a growth under ``share`` of an array, either way, prints as
    ``~0`` and the largest such one is named in the footnote."""
    lines, small = [], []
    for measure in ("uss", "pss"):
        for kind, value in after[measure].items():
            grew = value - before[measure][kind]
            if abs(grew) < share * array_bytes:
                small.append(abs(grew))
                shown = "~0"
            else:
                shown = f"{format_bytes(grew)}  ({grew / array_bytes:.2f} arrays)"
            lines.append(f"{measure.upper()} of {KIND_NAMES[kind]:<31} {shown:>22}")
    lines.append(f"~0: under {share:.0%} of an array (here at most {format_bytes(max(small, default=0))}, "
                 "either way).\nHeaps and file pages (Python's and its libraries' code, which the counts "
                 "leave out)\nmove a little as processes start, end and run code.")
    return "\n".join(lines)


def reader_share(report, idle_pids: list[int], reader_pids: list[int]) -> float:
    """Bytes one reader's PSS grew over an idle worker's: the median reader's PSS between the marks
    ``'shared holding'`` and ``'shared end'`` minus the median idle worker's between ``'idle holding'``
    and ``'idle end'`` (``MemoryReport.by_process``): its share of the segment."""
    idle = report.by_process("idle holding", "idle end")
    held = report.by_process("shared holding", "shared end")
    return (statistics.median(held[pid][1] for pid in reader_pids if pid in held)
            - statistics.median(idle[pid][1] for pid in idle_pids if pid in idle))


def steady_by_role(report, start: str, end: str) -> dict[str, tuple[float, float]]:
    """Each process's median (RSS, PSS) in bytes between two marks of ``report``
    (``MemoryReport.by_process``), keyed by its label (its role once ``MemoryReport.name_roles`` has
    run); processes not seen there are left out."""
    return {report.process_labels.get(pid, str(pid)).split(" (")[0]: medians
            for pid, medians in report.by_process(start, end).items()}


def steady_per_process(report, start: str, end: str, names: dict[int, str] | None = None) -> str:
    """A text table of each process's median RSS and PSS between two marks of ``report``.

    ``names`` (pid -> role) overrides the report's labels (their roles once ``name_roles`` has run).
    """
    rows = [("process", "RSS", "PSS")]
    for pid, (rss, pss) in report.by_process(start, end).items():
        role = (names or {}).get(pid, report.process_labels.get(pid, str(pid)).split(" (")[0])
        rows.append((role, format_bytes(rss), format_bytes(pss)))
    width = max(len(row[0]) for row in rows)
    return "\n".join(f"{role:<{width}}  {rss:>9}  {pss:>9}" for role, rss, pss in rows)


def profiler_roles(report, worker_pids: list[int]) -> None:
    """Name the processes of a run under memory_profiler's ``memory_usage``: "parent", "worker 1..N"
    (``worker_pids``), and "memory_profiler's sampler" for any other child that is neither a
    resource tracker nor a forkserver (``memory_usage`` starts it to sample a function)."""
    others = {pid for pid, label in report.process_labels.items()
              if pid not in worker_pids and label.split(" (")[0] in ("child", "spawned child")}
    report.name_roles(workers=worker_pids, named={pid: "memory_profiler's sampler" for pid in others})


_UNIT_BYTES = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}


def overlap_caption(report, reader_pids: list[int], tolerance: float = 0.05) -> str:
    """A sentence saying that the readers' lines lie on one another (with their median RSS and PSS
    between ``'shared holding'`` and ``'shared end'``), when every reader's RSS and PSS there is within
    ``tolerance`` of the others'; "" otherwise, or with fewer than 2 readers seen."""
    held = report.by_process("shared holding", "shared end")
    seen = [held[pid] for pid in reader_pids if pid in held]
    if len(seen) < 2:
        return ""
    rss, pss = ([values[i] for values in seen] for i in (0, 1))
    if any(max(column) > (1 + tolerance) * min(column) for column in (rss, pss)):
        return ""
    each = f"{format_bytes(statistics.median(rss))} RSS, {format_bytes(statistics.median(pss))} PSS"
    return f" The {len(seen)} readers' lines overlap (each about {each}): one shows for all."


def pss_extra_sentence(roles: Mapping[str, tuple[float, float]], extra: float, array_bytes: int,
                       n_readers: int, default_method: str, share: float = 0.05) -> str:
    """Where section 5's PSS bar goes past the array (``extra`` bytes), from ``steady_by_role``'s
    ``roles``: each worker's PSS less its 1/``n_readers`` of the array is its interpreter; what is left
    of ``extra`` is the sampler's part, "almost nothing" under ``share`` of an array (then, when the
    sampler was forked, its PSS is pages it splits with this kernel). "" when no worker is in ``roles``."""
    workers_pss = [pss for role, (_, pss) in roles.items() if role.startswith("worker")]
    if not workers_pss:
        return ""
    each = statistics.median(workers_pss) - array_bytes / n_readers
    rest = extra - n_readers * each
    text = (f"Each reader's interpreter takes about {format_bytes(each)} (a worker's PSS below, less its "
            f"1/{n_readers} of the array).")
    sampler = roles.get("memory_profiler's sampler")
    if sampler is None:
        return text
    if abs(rest) >= share * array_bytes:
        return text + f" The sampler and the rest add {format_bytes(rest)}."
    text += " The sampler adds almost nothing"
    if default_method == "fork":
        text += f": forked from this kernel, it splits most of its {format_bytes(sampler[1])} of PSS with it"
    return text + "."


def shown_bytes(n_bytes: float) -> float:
    """``n_bytes`` rounded as ``format_bytes`` prints it ('572 MiB' gives 572 MiB, in bytes), so that a
    ratio or a difference computed from it agrees with the figures on the page."""
    number, unit = format_bytes(n_bytes).split()
    return float(number) * _UNIT_BYTES[unit]


# The five memory measures of section 4, as the exercise names them, and their rows in
# ``demos.increase``; the exercise's sixth prediction is ``READER``, one reader's PSS (``reader_share``).
MEASURES = {"tracemalloc": "tracemalloc peak (this process)", "RSS sum": "tree RSS sum",
            "USS sum": "tree USS sum", "PSS sum": "tree PSS sum", "/dev/shm": "/dev/shm bytes"}
READER = "one reader's PSS"


def arrays_counted(measures: Mapping[str, float | None], array_bytes: int,
                   data: Mapping[str, float] | None = None, reader: float | None = None) -> dict[str, float]:
    """How many arrays each of the five measures counted: its growth (``demos.increase``, bytes)
    over one array's ``array_bytes``. ``data`` (``data_growth``), when given, stands in for the
    tree's USS and PSS sums: their growth in anonymous and shared-memory pages, without file
    pages. ``reader`` (``reader_share``, bytes), when given, adds ``READER``."""
    counted = {name: measures[row] / array_bytes for name, row in MEASURES.items()}
    if data is not None:
        counted["USS sum"], counted["PSS sum"] = data["uss"] / array_bytes, data["pss"] / array_bytes
    if reader is not None:
        counted[READER] = reader / array_bytes
    return counted


NO_FILE_PAGES = "no code/library pages"  # the USS and PSS rows read from smaps, file pages left out


def answer_table(columns: Mapping[str, Mapping[str, float | None]], counted: Mapping[str, float],
                 array_bytes: int, share: float = 0.05,
                 kinds: Mapping[str, tuple[dict | None, dict | None]] | None = None) -> str:
    """What answers the exercise, as text: ``demos.format_measure_table`` of ``columns`` (bytes grown
    per workload; the last one is the shared segment's, whose check counts are ``counted``, from
    ``arrays_counted``). ``kinds`` (optional) maps a column to its two ``tree_by_kind`` readings
    (before, after): that column's USS and PSS rows are then their growth without file pages
    (``data_growth``), as the check counts them, in place of the sampler's medians. The last column
    also gets one reader's PSS (``counted[READER]``, when there), and a note gives its rows that moved
    by under ``share`` of an array either way: noise that counts 0 arrays. The cgroup counter is left
    out: other programs (the page cache) move it, and the exercise does not ask for it."""
    rows = {MEASURES["USS sum"]: "uss", MEASURES["PSS sum"]: "pss"}
    table = {}
    for column, grown in columns.items():
        grown = {name: value for name, value in grown.items() if name != "cgroup counter"}
        data = data_growth(*(kinds or {}).get(column, (None, None)))
        table[column] = dict(grown) if data is None else {  # USS and PSS in place, read page by page
            (f"{name}, {NO_FILE_PAGES}" if name in rows else name):
                data[rows[name]] if name in rows else value
            for name, value in grown.items()}
    last = list(table.values())[-1]
    if READER in counted:
        last[READER] = counted[READER] * array_bytes
    lines = [format_measure_table(table, array_bytes)]
    if any(name.endswith(f", {NO_FILE_PAGES}") for name in last):
        lines.append("USS and PSS: /proc/PID/smaps read once in each state, code and library pages left "
                     "out\n(as the check counts them); the other rows: track_memory's medians.")
    short = {row: name for name, row in MEASURES.items()}
    small = [f"{short.get(row.removesuffix(f', {NO_FILE_PAGES}'), row)} {format_bytes(grew)}"
             for row, grew in last.items() if grew is not None and abs(grew) < share * array_bytes]
    if small:
        lines.append(f"Anything under {share:.0%} of an array counts as 0: heaps move a little, either way "
                     f"(here {', '.join(small)}).")
    return "\n".join(lines)


def _nearest_count(arrays: float, n_readers: int) -> float:
    """The count among 0, 1 / ``n_readers``, 1 and ``n_readers`` nearest to a measured number of arrays."""
    return min((0, 1 / n_readers, 1, n_readers), key=lambda count: abs(count - arrays))


def _check_counts(answer, counted: Mapping[str, float], n_readers: int) -> str | None:
    keys = [*MEASURES, READER]
    if not isinstance(answer, Mapping) or set(answer) != set(keys):
        return f"answer with a dict of one number of arrays per measure, keys {keys}"
    for name in keys:
        predicted, seen = answer[name], _nearest_count(counted[name], n_readers)
        if isinstance(predicted, bool) or not isinstance(predicted, int | float):
            return f"{name!r}: give a number of arrays (N_READERS={n_readers}), not {predicted!r}"
        if abs(predicted - seen) > 0.01:
            return (f"{name!r}: with {n_readers} readers it counted {counted[name]:.2f} arrays, nearest to "
                    f"{seen:.3g}, not {predicted:.3g}")
    return None


def _worked_counts(counted: Mapping[str, float], n_readers: int) -> dict[str, float]:
    return {"tracemalloc": 0, "RSS sum": n_readers, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1,
            READER: 1 / n_readers}


# The check cell's margins around the worked solution's count: (lowest, highest) as a share of
# the expected count, or, where it is 0, the most arrays that still count as 0 (heaps move a little).
_MARGINS = {"tracemalloc": 0.1, "USS sum": 0.25, "RSS sum": (0.75, None), "PSS sum": (0.75, 1.35),
            "/dev/shm": (0.75, 1.25)}


def as_solved(counted: Mapping[str, float], name: str, n_readers: int) -> bool:
    """Whether measure ``name`` counted (``arrays_counted``) what the worked solution says, within
    the check's margins; the check cell asserts this without stating the answer it checks."""
    expected = _worked_counts(counted, n_readers)[name]
    margin = _MARGINS[name]
    if expected == 0:
        return abs(counted[name]) < margin
    low, high = margin
    return counted[name] >= low * expected and (high is None or counted[name] <= high * expected)


MIN_READERS = 3  # workload B's readers read every page, then wait: at least 3 of them, so that the
# counts (3, 1/3) differ from the 2 and 1/2 of "a shared page is counted twice, each sharer pays half"


def readers(n_workers: int) -> int:
    """How many readers workload B starts: ``n_workers``, at least ``MIN_READERS``."""
    return max(MIN_READERS, n_workers)


EXERCISE = Exercise(
    name="who counts the shared array how often",
    question=("N_READERS workers each read every page of one shared segment. How many arrays does each "
              "measure count: a dict {'tracemalloc': ..., 'RSS sum': ..., 'USS sum': ..., 'PSS sum': ..., "
              "'/dev/shm': ...}, each 0, 1 or N_READERS? And how much of the array does one reader's PSS "
              "hold (its PSS minus an idle worker's, as a fraction of the array; key \"one reader's PSS\")?"),
    check=_check_counts,
    solution=_worked_counts,
    explanation=("RSS counts a shared page once per process that maps it, USS only private pages, PSS "
                 "divides each page among its mappers (each reader holds 1/N_READERS of the array), /dev/shm "
                 "holds the segment once, and tracemalloc sees only this process's heap, never a file "
                 "mapped with mmap such as a segment."),
    misconceptions=(  # with N_READERS = 3, as the lesson's unit test measures
        ({"tracemalloc": 0, "RSS sum": 1, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1, READER: 1 / 3},
         "RSS is the RAM a process uses, so the tree's RSS sum counts one shared array once"),
        ({"tracemalloc": 0, "RSS sum": 2, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1, READER: 0.5},
         "a shared array is counted twice and each sharer pays half, whatever the number of readers"),
        ({"tracemalloc": 0, "RSS sum": 3, "USS sum": 0, "PSS sum": 3, "/dev/shm": 1, READER: 1},
         "PSS, like RSS, counts a shared page in full in every process that maps it"),
        ({"tracemalloc": 0, "RSS sum": 3, "USS sum": 3, "PSS sum": 3, "/dev/shm": 1, READER: 1},
         "each reader gets a private copy of the segment when it reads it"),
        ({"tracemalloc": 1, "RSS sum": 3, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1, READER: 1 / 3},
         "this kernel made and filled the segment, so its tracemalloc counts it"),
        ({"tracemalloc": 0, "RSS sum": 3, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1, READER: 1},
         "the tree's PSS counts the array once, so each reader's PSS holds all of it"),
    ),
)
