"""Lesson 10's measurements on a running Ray (``helpers.lessons.ray_session``): a fan-out by value against
one ``ray.put``, the read-only view and its fix, which arrays cross without a copy, and what
crosses between nodes. Times are seconds, sizes bytes. The functions Ray's workers run are at the
end of this module, plain Python: ``remote(fn)`` wraps them with ``ray.remote`` when they are
called, so importing ``helpers`` never needs Ray, and a worker imports them by name (a function
defined in a notebook cell would live in ``__main__``). Their times come from ``time.perf_counter``
(CLOCK_MONOTONIC on Linux, one clock for every process on the machine).
"""

from __future__ import annotations

import functools
import os
import pickle
import statistics
import time
from dataclasses import dataclass

import numpy as np

from helpers.lessons import memmap
from helpers.measure.memory import MemoryReport, track_memory
from helpers.measure.proctree import pss_by_kind, tree_pss_by_kind
from helpers.measure.ray_processes import copies_on, node_memory, node_pss_by_kind, store_bytes_used
from helpers.measure.timing import Timing, time_it
from helpers.measure.units import format_seconds

REPORT_SECONDS = 0.05  # how often we read Ray's store accounting while tasks run


@functools.cache
def remote(fn):
    """``ray.remote(fn)``, made once per function (Ray re-exports it to each new session)."""
    import ray

    return ray.remote(fn)


def on(fn, node=None):
    """The remote function of ``fn``, pinned to ``node`` (a ``RayNode``) when one is given: on a
    cluster an unpinned task may run on any node, and its argument would be copied there."""
    task = remote(fn)
    return task if node is None else task.options(scheduling_strategy=node.pinned())


def warm_up(nodes, tasks_per_node: int) -> None:
    """Start the workers on every node and load ``helpers.lessons.ray_object_store`` there, so that no timing
    below includes a worker's start-up (a second or more)."""
    import ray

    refs = [on(hello, node).remote(i)
            for node in nodes.nodes for i in range(tasks_per_node)]
    ray.get(refs)


def random_array(n_bytes: int, seed: int = 0) -> np.ndarray:
    """A float64 array of ``n_bytes`` (rounded down to whole items) of random numbers."""
    return np.random.default_rng(seed).random(max(1, n_bytes // 8))


def fan_out(array_or_ref, n_tasks: int, node=None) -> list[float]:
    """``sum_array`` in ``n_tasks`` tasks, all given the same argument (an array or an ObjectRef)."""
    import ray

    task = on(sum_array, node)
    return ray.get([task.remote(array_or_ref) for _ in range(n_tasks)])


def time_fan_outs(array: np.ndarray, n_tasks: int, rounds: int = 4, repeat: int = 5, node=None
                  ) -> dict[str, Timing]:
    """Seconds of ``rounds`` fan-outs of ``n_tasks`` tasks each (on ``node`` if given): passing the
    array itself every time (Ray stores it again for every call) or ``ray.put`` once and passing
    the ObjectRef."""
    import ray

    def by_value():
        for _ in range(rounds):
            fan_out(array, n_tasks, node)

    def by_reference():
        ref = ray.put(array)
        for _ in range(rounds):
            fan_out(ref, n_tasks, node)

    return {"by value": time_it(by_value, repeat=repeat),
            "ray.put once": time_it(by_reference, repeat=repeat)}


@dataclass(frozen=True)
class FanOutMemory:
    """Bytes one held fan-out took: Ray's store accounting (peak above the level before) and the
    tree's PSS and RSS, and the driver's own PSS, while every task held its argument (medians above
    the baseline)."""

    how: str
    store_bytes: int
    tree_pss: float
    tree_rss: float
    report: MemoryReport
    driver_pss: float = 0.0  # this process's own PSS growth, store pages it maps included


def _held_fan_out(argument, n_tasks: int, hold_seconds: float, clock_offset: float, node=None,
                  report: MemoryReport | None = None):
    """Run ``sum_and_hold`` in ``n_tasks`` tasks (on ``node`` if given); return the store's peak
    bytes (that node's, else all stores') and the window (report's seconds) in which every task
    was holding. Each poll marks ``report``, so that its sampler reads PSS afresh while the tasks
    hold (a PSS carried over from before a task mapped a copy counts that copy whole in the driver)."""
    import ray

    node_id = None if node is None else node.node_id
    store_peak = store_bytes_used(node_id)
    task = on(sum_and_hold, node)
    refs = [task.remote(argument, hold_seconds) for _ in range(n_tasks)]
    pending = refs
    while pending:
        _, pending = ray.wait(pending, timeout=REPORT_SECONDS)
        store_peak = max(store_peak, store_bytes_used(node_id))
        if report is not None:
            report.mark("polled")
    results = ray.get(refs)
    began = max(r[1] for r in results) - clock_offset
    ended = min(r[2] for r in results) - clock_offset
    return store_peak, began, ended


def compare_fan_out_memory(array: np.ndarray, n_tasks: int, hold_seconds: float = 0.8, node=None
                           ) -> tuple[FanOutMemory, FanOutMemory]:
    """What a fan-out to ``n_tasks`` tasks (on ``node`` if given) holds, ``ray.put`` once, then by
    value.

    Run it on a store whose pages are still unwritten (the lesson's working lines before it write
    a sixty-fourth of the array): the store is one file whose pages stay resident once written (its
    allocator reuses them for later objects), so only pages touched for the first time show
    in PSS. That is why the ObjectRef's object stays alive during the by-value fan-out: its
    copies must go to fresh pages, and each shows.
    """
    import ray

    _wait_until_store_empty(None if node is None else node.node_id)
    results = []
    kept = None
    for how in ("ray.put once", "by value"):
        store_before = store_bytes_used(None if node is None else node.node_id)
        with track_memory() as report:
            clock_offset = time.perf_counter() - report.mark("before")
            if how == "ray.put once":
                kept = argument = ray.put(array)
            else:
                argument = array
            store_peak, began, ended = _held_fan_out(argument, n_tasks, hold_seconds, clock_offset, node,
                                                     report)
        margin = min(0.1, (ended - began) / 4)
        held = report.steady(began + margin, ended - margin)
        _, driver_held = report.by_process(began + margin, ended - margin).get(os.getpid(), (0.0, 0.0))
        driver = report.baseline.processes.get(os.getpid())
        driver_before = driver.pss if driver is not None else 0
        results.append(FanOutMemory(how, store_peak - store_before, held.pss - report.baseline.pss,
                                    held.rss - report.baseline.rss, report, driver_held - driver_before))
    del kept
    return results[0], results[1]


def pss_beyond_store(memory: FanOutMemory, array_bytes: int, driver_share: float) -> str:
    """Why the tree's PSS growth and the store's bytes differ, in arrays, where they do at one decimal
    (as the conclusion prints them): ' (X beyond the store's, Y of it the driver's own memory)' where
    the driver grew 0.1 array or more beyond its share, else ' (X beyond the store's: ...)' or
    ' (X below the store's: ...)'; '' where they agree.
    ``driver_share``: the bytes of the store's copies the driver's PSS counts (by value: half of
    each copy, which it wrote and its task maps)."""
    tree, store = (float(f"{value / array_bytes:.1f}") for value in (memory.tree_pss, memory.store_bytes))
    gap = round(tree - store, 1)
    if not gap:
        return ""
    why = "other memory in the tree moves too"
    if gap < 0:
        return f" ({-gap:.1f} below the store's: {why})"
    in_driver = (memory.driver_pss - driver_share) / array_bytes
    if in_driver >= 0.1:
        return f" ({gap:.1f} beyond the store's, {min(in_driver, gap):.1f} of it the driver's own memory)"
    return f" ({gap:.1f} beyond the store's: {why})"


def _wait_until_store_empty(node_id: str | None, timeout: float = 5.0) -> None:
    """Wait (at most ``timeout`` seconds) until Ray counts nothing in the store: objects of earlier
    cells are freed a moment after their last reference goes, and one freed while a fan-out is
    measured would hide that many bytes of it (the store's peak is taken above its level before)."""
    deadline = time.monotonic() + timeout
    while store_bytes_used(node_id) and time.monotonic() < deadline:
        time.sleep(REPORT_SECONDS)


@dataclass(frozen=True)
class Pitfall:
    """A real error: where it was raised, its type and message."""

    where: str
    error_type: str
    message: str


def read_only_pitfalls(ref, threshold: float = 0.5, node=None) -> list[Pitfall]:
    """Write into an array from the object store, in the driver and in a task (on ``node`` if
    given); catch what is raised."""
    import ray

    caught = []
    view = ray.get(ref)
    try:
        view[view < threshold] = 0.0
    except ValueError as error:
        caught.append(Pitfall("driver: ray.get(ref) then write", type(error).__name__, str(error)))
    try:
        ray.get(on(zero_small_values_in_place, node).remote(ref, threshold))
    except ray.exceptions.RayTaskError as error:
        cause = error.cause
        caught.append(Pitfall("task: write into its argument",
                              f"{type(error).__name__} caused by {type(cause).__name__}", str(cause)))
    return caught


def zeroed_in_a_copy(ref, threshold: float = 0.5, node=None) -> int:
    """The fix, in a task (on ``node`` if given): copy, then write. Returns how many values the task
    set to zero."""
    import ray

    return ray.get(on(zero_small_values_in_a_copy, node).remote(ref, threshold))


def dtype_variants(n_bytes: int) -> dict[str, np.ndarray]:
    """Arrays of about ``n_bytes`` each, random data: plain float64, a strided view of float64 (every
    second element: not contiguous, so NumPy pickles its elements in band), a structured array of plain
    fields, the same as ``np.recarray``, a structured array with a datetime64 field, datetime64; then
    a fix for two of the four that cannot cross out of band (the strided view and the structured array
    with a datetime64 field get none here), each viewed as a plain ``ndarray``: the recarray's
    ``.view(np.ndarray)`` and the datetime64's ``.view("i8")`` (a task can view them back)."""
    rng = np.random.default_rng(3)
    n = max(1, n_bytes // 16)
    plain = rng.random(n * 2)
    fields = np.empty(n, dtype=[("x", "f8"), ("n", "i8")])
    fields["x"], fields["n"] = rng.random(n), rng.integers(0, 1000, n)
    stamped = np.empty(n, dtype=[("x", "f8"), ("t", "M8[ns]")])
    stamped["x"] = rng.random(n)
    stamped["t"] = np.datetime64("2024-01-01", "ns") + rng.integers(0, 10**15, n).astype("m8[ns]")
    times = np.datetime64("2024-01-01", "ns") + rng.integers(0, 10**15, n * 2).astype("m8[ns]")
    records = fields.view(np.recarray)
    return {
        "float64": plain,
        "float64[::2] (strided)": rng.random(n * 4)[::2],
        "structured (f8, i8)": fields,
        "np.recarray (f8, i8)": records,
        "structured with datetime64": stamped,
        "datetime64": times,
        "recarray.view(np.ndarray)": records.view(np.ndarray),
        "datetime64.view('i8')": times.view("i8"),
    }


def out_of_band_buffers(array: np.ndarray) -> int:
    """How many buffers pickle protocol 5 hands out of band for ``array`` (1: zero copy possible,
    0: the bytes go inside the pickle, so a reader gets its own copy)."""
    buffers: list = []
    pickle.dumps(array, protocol=5, buffer_callback=buffers.append)
    return len(buffers)


def what_workers_get(arrays: dict[str, np.ndarray], node=None) -> dict[str, dict]:
    """For each array: ``ray.put`` it, let a task (on ``node`` if given) ``ray.get`` it; what the
    task got (read-only? in the object store's mapping?), how long its get took, and pickle's
    out-of-band count."""
    import ray

    rows = {}
    for name, array in arrays.items():
        ref = ray.put(array)
        facts = ray.get(on(facts_after_get, node).remote([ref]))
        rows[name] = {**facts, "out_of_band_buffers": out_of_band_buffers(array), "bytes": array.nbytes}
        del ref
    return rows


@dataclass(frozen=True)
class NodeRead:
    """One read of the driver's object in a task pinned to a node: how long ``ray.get`` took
    there, whether the array was in that node's store, the nodes holding a copy afterwards,
    and how much each node's memory (PSS of its raylet and workers) grew since the put, in all
    and by kind of page."""

    label: str
    node: int
    get_seconds: float  # this read's ray.get
    fastest_get_seconds: float  # the fastest of READ_REPEAT reads on that node: this one, then more tasks
    in_object_store: bool
    copies_on: list[int]
    node_pss_growth: list[float]
    node_growth_by_kind: list[dict[str, float]]  # per node, PSS growth by kind of page (may be empty)
    raylet_anonymous_growth: list[float | None]  # per node, its raylet's own anonymous PSS growth (bytes)
    raylet_shared_growth: list[float | None]  # per node, its raylet's own shared-memory PSS growth (bytes)


READ_REPEAT = 5  # read tasks per node for its fastest read: this one, then four more (local reads)


def reads_across_nodes(nodes, array: np.ndarray, plan: list[tuple[str, int]]) -> list[NodeRead]:
    """``ray.put`` on the head (the driver's node), then read it in a task on each node of
    ``plan`` (label, node index) in turn. After each, ``READ_REPEAT - 1`` more read tasks on that
    node, which find the object in its store: ``fastest_get_seconds`` is a local read there, timed
    where a busy machine disturbs it least (a get repeated within one task would only find the
    worker's own reference: faster than any read)."""
    import ray

    before = [node_memory(node).pss for node in nodes.nodes]
    kinds_before = [node_pss_by_kind(node) for node in nodes.nodes]
    raylets_before = [_raylet_kinds(node) for node in nodes.nodes]
    ref = ray.put(array)
    reads = []
    for label, index in plan:
        node = nodes.nodes[index]
        facts = ray.get(on(facts_after_get, node).remote([ref]))
        growth = [node_memory(n).pss - b for n, b in zip(nodes.nodes, before, strict=True)]
        by_kind = [{kind: now[kind] - was[kind] for kind in now.keys() & was.keys()}
                   for now, was in zip((node_pss_by_kind(n) for n in nodes.nodes), kinds_before, strict=True)]
        raylets_now = [_raylet_kinds(n) for n in nodes.nodes]
        raylets, raylets_shared = ([None if kind not in now or kind not in was else now[kind] - was[kind]
                                    for now, was in zip(raylets_now, raylets_before, strict=True)]
                                   for kind in ("anonymous", "shared memory"))
        copies = copies_on(ref, nodes)
        fastest = min([facts["get_seconds"], *(ray.get(on(facts_after_get, node).remote([ref]))["get_seconds"]
                                               for _ in range(READ_REPEAT - 1))])
        reads.append(NodeRead(label, index, facts["get_seconds"], fastest, facts["in_object_store"],
                              copies, growth, by_kind, raylets, raylets_shared))
    del ref
    return reads


def _raylet_kinds(node) -> dict[str, int]:
    """The PSS (bytes) of a node's raylet itself, without its workers, by kind of page; empty where
    the kernel does not split PSS."""
    return pss_by_kind(node.raylet_pid) or {}


def store_page_kind(store_directory: str) -> str:
    """The kind of page (``proctree.PSS_KINDS``' names) a node's store is made of: a store on tmpfs
    (/dev/shm, or a /tmp that is tmpfs) is shared memory, a file on a disk is file pages."""
    tmpfs = memmap.filesystem_of(store_directory).fstype == "tmpfs"
    return "shared memory" if tmpfs else "files (code, libraries)"


def growth_by_kind_markdown(growth: dict[str, float], store_kind: str, array_bytes: int,
                            raylet_heap: float | None = None) -> str:
    """': X in its store and Y of heap its raylet kept after the transfer' (in arrays) from a node's
    PSS growth by kind of page (bytes) and its raylet's own anonymous growth (bytes; None where
    unknown). Where the raylet's heap is not all of the node's anonymous growth, both are given
    ('Y of private memory, Z of it heap its raylet kept ...'); empty where the kernel does not split
    PSS."""
    if not growth:
        return ""
    store, private = growth[store_kind] / array_bytes, growth["anonymous"] / array_bytes
    text = f": {store:.1f} in its store and "
    if raylet_heap is not None and f"{raylet_heap / array_bytes:.1f}" == f"{private:.1f}":
        return text + f"{private:.1f} of heap its raylet kept after the transfer"
    text += f"{private:.1f} of private memory"
    if raylet_heap is not None:
        text += f", {raylet_heap / array_bytes:.1f} of it heap its raylet kept after the transfer"
    return text


def put_and_get_per_node(nodes, n_bytes: int, repeat: int = 3) -> dict[int, dict]:
    """In a task on each node: median seconds of ``ray.put`` and ``ray.get`` into that node's own
    store, with the folder the store lives in (/dev/shm, or a file on disk). Each timed put is
    also sorted by the store pages it wrote first (its node's PSS of the store's kind of page grew
    by half an array or more: fresh pages; less: pages already written): ``written_put_seconds``
    and ``fresh_put_seconds``, their medians (None where no put was of that kind, or the kernel
    does not split PSS), ``written_puts`` and ``fresh_puts``, how many puts each median is of, and
    ``fresh_bytes``, each timed put's growth (bytes). Puts go on until ``repeat`` went into written
    pages (at most ``3 * repeat``; just ``repeat`` where PSS is not split)."""
    import ray

    rows = {}
    for node in nodes.nodes:
        facts = ray.get(on(time_put_and_get, node).remote(
            n_bytes, repeat, node.raylet_pid, store_page_kind(node.store_directory)))
        sorted_puts = {"written": [], "fresh": []}
        for seconds, grew in zip(facts["puts"], facts["fresh_bytes"], strict=True):
            if grew is not None:
                sorted_puts["fresh" if grew >= n_bytes / 2 else "written"].append(seconds)
        rows[node.index] = {**facts, "store_directory": node.store_directory,
                            **{f"{kind}_put_seconds": statistics.median(puts) if puts else None
                               for kind, puts in sorted_puts.items()},
                            **{f"{kind}_puts": len(puts) for kind, puts in sorted_puts.items()}}
    return rows


def put_figure(seconds: float | None, puts: int) -> str:
    """A put time as a table shows it, with how many puts stand behind it: '7.76 ms (median of 3)',
    '55.4 ms (1 put)', or '-' where there was none."""
    if not puts or seconds is None:
        return "-"
    return f"{format_seconds(seconds)} ({_of_puts(puts)})"


def _of_puts(puts: int) -> str:
    """'1 put' (one sample is no median) or 'median of 3'."""
    return "1 put" if puts == 1 else f"median of {puts}"


def _as_shown(seconds: float) -> float:
    """``seconds`` rounded as ``format_seconds`` shows it (3 significant figures)."""
    return float(f"{seconds:.3g}")


def node_put_markdown(transfer_seconds: float, node_row: dict, head_row: dict, head_in_shm: bool) -> str:
    """Section 5's split of node 1's first read (a transfer of ``transfer_seconds``) by a put into
    node 1's own store: that put against the head's (with how many puts each figure is of, and
    'too few to rank the stores' under 3 each), and the transfer's rest, subtracted from the figures
    as shown so that the sentence adds up on the page. Rows: ``put_and_get_per_node``'s."""
    written, fresh = node_row["written_put_seconds"], node_row["fresh_put_seconds"]
    if head_row["written_put_seconds"]:
        head, head_puts = head_row["written_put_seconds"], head_row["written_puts"]
    else:
        head, head_puts = head_row["put_seconds"], len(head_row["puts"])
    if written:
        put, puts, pages = written, node_row["written_puts"], " into pages already written"
    elif fresh:
        put, puts, pages = fresh, node_row["fresh_puts"], " into fresh pages"
    else:
        put, puts, pages = node_row["put_seconds"], len(node_row["puts"]), ""
    samples = (f"medians of {puts} and {head_puts} puts" if min(puts, head_puts) >= 3 else
               f"{puts} put{'s' * (puts != 1)} against {head_puts}: too few to rank the stores")
    ratio = _as_shown(put) / _as_shown(head)  # of the figures as shown
    text = (f"A put into node 1's file store took {format_seconds(put)}{pages} ({ratio:.1f}× the head's "
            f"{'`/dev/shm`' if head_in_shm else 'store'}, {format_seconds(head)}; {samples})")
    if written and fresh:
        text += f" and {format_seconds(fresh)} into fresh ones ({_of_puts(node_row['fresh_puts'])})"
    closest = fresh or put  # the transfer wrote fresh pages: a fresh put is the closest
    rest = _as_shown(transfer_seconds) - _as_shown(closest)
    if rest <= 0:
        return text + ". That put took as long as the whole transfer: nothing is left to split."
    return (text + f". The transfer's other {format_seconds(rest)} we did not split: TCP"
            + ("" if fresh else ", fresh pages") + " and the raylet heap below.")


# --- Functions Ray's workers run: plain Python, wrapped with ray.remote(fn) by remote() when called ---


def mapping_of(address: int) -> str:
    """What this process has mapped at ``address``: the file name from /proc/self/maps (e.g.
    '/dev/shm/plasmaXXXX (deleted)'), '[heap]', 'anonymous', or 'not mapped'."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            start, end = (int(value, 16) for value in fields[0].split("-"))
            if start <= address < end:
                return fields[5].strip() if len(fields) == 6 else "anonymous"
    return "not mapped"


def store_mapping_names() -> set[str]:
    """Names of this process's mappings that belong to Ray's object store (its plasma file(s))."""
    with open("/proc/self/maps") as maps:
        return {line.split(maxsplit=5)[5].strip() for line in maps
                if len(line.split(maxsplit=5)) == 6 and "plasma" in line.split(maxsplit=5)[5]}


def array_facts(array: np.ndarray) -> dict:
    """What a worker got: its type, dtype, whether it may write, whether the bytes lie in the
    object store's mapping (zero copy) or in this worker's own memory (a copy), and its pid."""
    mapping = mapping_of(array.ctypes.data) if array.size else "empty"
    return {
        "type": type(array).__name__,
        "dtype": str(array.dtype),
        "writeable": bool(array.flags.writeable),
        "in_object_store": "plasma" in mapping,
        "mapping": mapping,
        "pid": os.getpid(),
    }


def facts_after_get(boxed_refs: list) -> dict:
    """``array_facts`` of ``ray.get(boxed_refs[0])``, plus ``get_seconds``: how long that get took
    here (the ref comes in a list so that Ray does not fetch it before the task starts)."""
    import ray

    start = time.perf_counter()
    array = ray.get(boxed_refs[0])
    seconds = time.perf_counter() - start
    return {**array_facts(array), "get_seconds": seconds}


def sum_array(array: np.ndarray) -> float:
    """Read every element once (the fan-out's work)."""
    return float(array.sum())


def sum_and_hold(array: np.ndarray, hold_seconds: float) -> tuple[float, float, float]:
    """Sum the array, then keep it (and the store's copy) alive ``hold_seconds``; return the sum
    and the perf_counter instants the hold began and ended."""
    total = float(array.sum())
    began = time.perf_counter()
    time.sleep(hold_seconds)
    return total, began, time.perf_counter()


def zero_small_values_in_place(array: np.ndarray, threshold: float) -> int:
    """Set every value below ``threshold`` to 0 in the array given; return how many were set.
    On an array from Ray's object store this raises ValueError: the view is read-only."""
    small = array < threshold
    array[small] = 0.0
    return int(small.sum())


def zero_small_values_in_a_copy(array: np.ndarray, threshold: float) -> int:
    """The fix: copy first (a private, writeable array in this worker), then zero in place."""
    own = array.copy()
    return zero_small_values_in_place(own, threshold)


def time_put_and_get(n_bytes: int, repeat: int = 3, raylet_pid: int | None = None,
                     store_kind: str | None = None) -> dict:
    """In this worker: median seconds of ``ray.put`` of a random float64 array of ``n_bytes``
    into this node's store, and of ``ray.get`` of it back, with where the store's file lives;
    ``puts``, each timed put's seconds, and ``fresh_bytes``, how much the PSS of ``store_kind``
    pages of the node's raylet and its processes grew over each (None without ``raylet_pid``, or
    where the kernel does not split PSS). After a warm-up, puts go on until ``repeat`` of them grew
    those pages by less than half an array (pages already written), at most ``3 * repeat``."""
    import ray

    def store_pages() -> int | None:
        kinds = tree_pss_by_kind(raylet_pid) if raylet_pid is not None and store_kind else None
        return kinds.get(store_kind) if kinds else None

    def enough() -> bool:
        timed = grew[1:]
        if len(timed) >= 3 * repeat:
            return True
        if any(growth is None for growth in timed):  # no split: just ``repeat``
            return len(timed) >= repeat
        return sum(growth < n_bytes / 2 for growth in timed) >= repeat

    array = np.random.default_rng(7).random(max(1, n_bytes // 8))
    puts, gets, grew, mappings = [], [], [], set()
    while not enough():  # the first round is a warm-up
        pages_before = store_pages()
        start = time.perf_counter()
        ref = ray.put(array)
        put_done = time.perf_counter()
        pages_after = store_pages()
        view = ray.get(ref)
        gets.append(time.perf_counter() - put_done)
        puts.append(put_done - start)
        grew.append(None if pages_before is None or pages_after is None else pages_after - pages_before)
        mappings.add(mapping_of(view.ctypes.data))
        del view, ref
    return {"put_seconds": statistics.median(puts[1:]), "get_seconds": statistics.median(gets[1:]),
            "puts": puts[1:], "fresh_bytes": grew[1:], "mappings": sorted(mappings), "pid": os.getpid()}


def hello(_: int = 0) -> int:
    """Return this worker's pid (to start workers and load this module before anything is timed)."""
    return os.getpid()
