"""What runs in a ``SharedMemoryExecutor``'s workers, and the result segments they make.

Internal to ``sharedarrays``: not part of its API (``sharedarrays.__all__``), and may change
between versions.

``start_worker`` is every worker's initializer: it watches for the death of the program that made
the executor, then runs the caller's initializer. ``run_in_worker`` is the function the pool runs
for each task: it attaches the task's segments, calls the caller's function and packs the result
(``sharedarrays.transit``). A worker's big result goes into a segment the parent named; the
parent unlinks it (``release_result_segment``) once its arrays on it are gone, or, if the pool broke
before the result could be taken, once every worker is gone (``unlink_when_gone``).
"""

from __future__ import annotations

import os
import threading
import time
import traceback

from sharedarrays._names import segment_exists
from sharedarrays._segments import PLACEMENT_FAILURES, process_alive, tell_tracker, unlink
from sharedarrays.transit import Packed, WorkerSide, pack_result, pack_result_pickled, watch_forks

ORPHAN_CHECK_SECONDS = 0.5


def unlink_when_gone(result_name: str, worker_pids: list[int], wait_seconds: float = 60) -> None:
    """Wait (up to ``wait_seconds``) until none of ``worker_pids`` runs, then unlink ``result_name``
    if a worker made it after all (the resource tracker would only do so when the program ends)."""
    deadline = time.monotonic() + wait_seconds
    while any(process_alive(pid) for pid in worker_pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    if segment_exists(result_name):
        release_result_segment(result_name)


def release_result_segment(name: str) -> None:
    """Unlink a worker's result segment and drop the tracker entry the worker made for it (at once,
    or at the library's next call when a finalizer runs this: ``_names.tell_tracker``)."""
    if unlink(name):
        tell_tracker("unregister", name)


def start_worker(creator_pid: int, initializer, initargs: tuple) -> None:
    """Worker start-up: watch for the death of the process that made the executor, then run the
    caller's initializer.

    A stdlib worker whose parent was killed waits for work forever, and so keeps the resource
    tracker (which would unlink the dead program's segments) waiting too. Ours exits within a
    second of being orphaned: its parent changed (the creator, or the forkserver that leaves with
    it, died), or the creator is gone or a zombie (it died before this worker even started).
    """
    parent_pid = os.getppid()

    def exit_when_orphaned() -> None:
        while os.getppid() == parent_pid and process_alive(creator_pid):
            time.sleep(ORPHAN_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=exit_when_orphaned, name="exit-when-orphaned", daemon=True).start()
    watch_forks()  # a child a task forks inherits its views: the reply then names all its segments
    if initializer is not None:
        initializer(*initargs)


def payload(packed: Packed, result_name: str, min_shared_bytes: int) -> tuple[Packed, str, int]:
    return packed, result_name, min_shared_bytes


def run_in_worker(payload: tuple[Packed, str, int]) -> Packed:
    """Worker side: attach the shared arguments, call the function, put big results in shared memory.

    Every view of an argument is gone before the result is sent (an error's frames are cleared; its
    traceback travels as text), so the parent can lend a segment again as soon as the task is over,
    unless the function kept an argument: the reply names it (``Packed.kept``) and the parent never
    lends it again. A task that raised cannot say so: the parent retires all of its segments.
    """
    packed, result_name, min_shared_bytes = payload
    if packed is None:  # the parent could not pickle the call and has failed its future: nothing to run
        return None
    side = WorkerSide()
    try:
        reply = call_in_worker(side, packed, result_name, min_shared_bytes)
    except BaseException as error:
        traceback.clear_frames(error.__traceback__)
        side.end()
        raise
    side.end()
    return reply._replace(kept=side.kept) if side.kept else reply


def call_in_worker(side: WorkerSide, packed: Packed, result_name: str, min_shared_bytes: int) -> Packed:
    fn, args, kwargs = side.unpack(packed)
    result = fn(*args, **kwargs)
    del fn, args, kwargs
    try:
        return pack_result(result, result_name, min_shared_bytes, side)
    except PLACEMENT_FAILURES:  # no room, or no new segment, for the result: pickle it, as the stdlib does
        return pack_result_pickled(result, min_shared_bytes, side)
