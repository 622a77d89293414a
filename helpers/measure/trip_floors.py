"""The floors of a round trip that copies nothing, measured on this machine in the same run.

A copy-based round trip is compared with the copy floors (``helpers.measure.copy_floors``). A round
trip that copies nothing (an array already in shared memory, a small message) has no copy to
compare with; its floor is what the operating system charges for the trip itself. Both are timed
against one started process (the start is not timed), over one ``multiprocessing.Pipe``:

- ``message``: a small message (the int 0) sent to the other process and sent back. Every round
  trip through a pool pays at least this.
- ``shm_name``: a shared-memory segment's name sent to the other process, which attaches it
  (``shm_open`` + ``mmap``, the calls ``SharedMemory(name)`` makes) and views it as an array, and
  sends the name back; the caller attaches it again and views it. A handle each way and no copy:
  the physical floor of passing an array that already lives in shared memory. Neither side touches
  the array's pages, so it does not grow with the size.

All times are wall-clock seconds. The segment is created, filled and unlinked here (its name is
one of ours: ``helpers.measure.leftovers`` finds it if a kill stops us mid-way).
"""

from __future__ import annotations

import _posixshmem
import contextlib
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from helpers.measure.quiet_processes import quiet_context
from helpers.measure.timing import Timing, time_it
from sharedarrays.room import creator_prefix

OWNER_ONLY = 0o600
STOP = None  # what tells the other process to end
REPLY_TIMEOUT_S = 60.0  # a reply later than this means the other process died or hangs: raise, never wait on


@dataclass(frozen=True)
class TripFloors:
    """Seconds of a small message's round trip and of a bare segment name's, over one pipe."""

    message: Timing
    shm_name: Timing


def attach_and_view(name: str, n_bytes: int, dtype: str, shape: tuple[int, ...]) -> None:
    """Attach the segment ``name`` as ``SharedMemory(name)`` does (shm_open, mmap), view it as an
    array of ``dtype`` and ``shape`` (no page touched), then let the view and the mapping go."""
    fd = _posixshmem.shm_open(name, os.O_RDWR, mode=OWNER_ONLY)
    try:
        mapping = mmap.mmap(fd, n_bytes)
    finally:
        os.close(fd)
    view = np.frombuffer(mapping, dtype=dtype, count=int(np.prod(shape))).reshape(shape)
    del view  # the view goes before the mapping it borrows
    mapping.close()


def serve(connection) -> None:
    """The other process: echo every message; attach and view every segment named, then echo."""
    while (message := connection.recv()) is not STOP:
        if isinstance(message, tuple):
            attach_and_view(*message)
        connection.send(message)


@contextlib.contextmanager
def _segment_holding(source: np.ndarray) -> Iterator[str]:
    """A new segment of ours with a copy of ``source``; unlinked on exit."""
    name = f"/{creator_prefix()}tripfloor_{os.urandom(4).hex()}"
    fd = _posixshmem.shm_open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode=OWNER_ONLY)
    try:
        os.ftruncate(fd, max(source.nbytes, 1))
        with mmap.mmap(fd, max(source.nbytes, 1)) as mapping:
            target = np.frombuffer(mapping, dtype=source.dtype, count=source.size)
            np.copyto(target, source.reshape(-1))
            del target
        yield name
    finally:
        os.close(fd)
        _posixshmem.shm_unlink(name)


def measure_trip_floors(source: np.ndarray, repeat: int = 5, start_method: str = "spawn") -> TripFloors:
    """Both floors for an array like ``source``, each ``repeat`` runs after one warm-up, against a
    process started with ``start_method`` (its start is not timed)."""
    context = quiet_context(start_method)
    parent_end, child_end = context.Pipe()
    process = context.Process(target=serve, args=(child_end,), daemon=True)
    process.start()
    child_end.close()
    try:
        with _segment_holding(source) as name:
            request = (name, max(source.nbytes, 1), source.dtype.str, source.shape)

            def reply():
                if not parent_end.poll(REPLY_TIMEOUT_S):
                    raise TimeoutError(f"the floor's other process did not answer in {REPLY_TIMEOUT_S:g} s")
                return parent_end.recv()

            def message() -> None:
                parent_end.send(0)
                reply()

            def shm_name() -> None:
                parent_end.send(request)
                attach_and_view(*reply())

            return TripFloors(time_it(message, repeat=repeat, warmup=1),
                              time_it(shm_name, repeat=repeat, warmup=1))
    finally:
        with contextlib.suppress(OSError):
            parent_end.send(STOP)
        process.join(timeout=10)
        if process.is_alive():
            process.kill()
            process.join()
        parent_end.close()
