"""The Ray strategies run in a spawned process of their own, so that Ray never runs in this one.

A process in which Ray has run must never fork afterwards (``helpers.lessons.ray_session``: Ray's
gRPC threads' locks), yet the showdown, its panel and ``python -m helpers.bench`` run the Ray
strategies and fork-started ones in one process, a panel run after another. So the Ray
strategies run in a child started with spawn (a fresh interpreter that forks nothing of ours).
``RayChild`` is this side of it: ``run(name, n_workers, repeat)`` starts the child when first
needed, hands it the caller's array once (through a pipe, in pieces: no extra copy here), and
returns the child's ``StrategyResult``. The child (``serve``) measures the way this process
would (``helpers.bench.harness``): its own memory windows over its own process tree, which holds
Ray's processes, and sends the results back.

Nothing is left behind. ``close()`` asks the child to stop: it shuts Ray down and removes Ray's
folder itself. On an error here or Ctrl-C the child gets SIGINT instead: its first SIGINT raises
KeyboardInterrupt there and unwinds the same way, later ones are ignored (a terminal's Ctrl-C
reaches both processes; a second one must not cut the clean-up short). While it runs, this side
records every process the child started and the ``sal-ray-*`` folders their command lines name:
a child that dies, or does not end within ``STOP_SECONDS``, is killed, then so is every recorded
process still running and every process started since the child whose command line or
environment names one of those folders or raylets (Ray's agents, started just before the child
died, and orphaned), and those folders are removed. The child's own temporary files (the
harness's signal folders) go to a scratch folder this side makes and always removes. Sizes are
bytes, times seconds.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil

from helpers.measure.leftovers import TEMP_PREFIX
from helpers.measure.quiet_processes import quiet_context
from helpers.measure.units import MiB

CHUNK_BYTES = 16 * MiB  # the array crosses the pipe in pieces of this size (one piece in flight)
WATCH_SECONDS = 0.5  # how often this side records the child's processes while it waits
STOP_SECONDS = 60.0  # a child told to stop gets this long to shut Ray down itself
KILL_SECONDS = 10.0  # how long to wait for killed processes to be gone
LOCAL_ONLY_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's node address is 127.0.0.1
CHILD_RAM = 256 * MiB  # the child's interpreter with NumPy and Ray imported, rounded up
_RAY_FOLDER = re.compile(rf"(/[^\s=:,]*/{re.escape(TEMP_PREFIX)}ray-[A-Za-z0-9_]+)")


class RayChildFailed(RuntimeError):
    """The child could not measure a strategy: it raised (the message says what), or it ended."""


class _ChildState:
    """Whether this process is a RayChild's child (set by ``serve``)."""

    inside = False


_state = _ChildState()


def in_ray_child() -> bool:
    """True in the process a ``RayChild`` started: the one place where the Ray strategies run Ray."""
    return _state.inside


# --- the child ------------------------------------------------------------------------------------


def serve(connection, layout: tuple, scratch: str, run: Callable,
          session: Callable[[], contextlib.AbstractContextManager]) -> None:
    """The child's main: temporary files go to ``scratch`` (this side removes it, whatever happens
    here); receive the array (``layout``: its shape and dtype string), then answer each request
    ``("run", name, n_workers, repeat)`` with ``("result", run(name, array, n_workers, repeat))``, or
    ``("failed", "Type: message")`` if ``run`` raised, until ``("stop",)``, the end of the pipe or
    SIGINT (then ``("interrupted",)``). ``session()`` is entered around the requests (e.g. one Ray
    instance shared by them); every ``with`` block unwinds on the way out, so Ray shuts down."""
    _state.inside = True
    tempfile.tempdir = scratch
    # One local node: take 127.0.0.1 as its address, as Ray does on macOS and Windows. On Linux Ray
    # would probe a public DNS server for it and, where none can be reached (a container or
    # namespace without a network), write a warning to stderr, which a lesson would then store.
    os.environ.setdefault(LOCAL_ONLY_VARIABLE, "0")
    _interrupt_once()
    try:
        array = _receive_array(connection, layout)
        with session():
            while (request := connection.recv())[0] != "stop":
                connection.send(_answer(run, array, request))
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):
            connection.send(("interrupted",))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # this side has gone: nothing to answer
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # done: a late Ctrl-C must not print a traceback
        connection.close()


def _answer(run: Callable, array: np.ndarray, request: tuple) -> tuple:
    _, name, n_workers, repeat = request
    try:
        return ("result", run(name, array, n_workers, repeat))
    except Exception as error:  # the strategy cleaned up after itself; say what happened
        return ("failed", one_line(error))


def one_line(error: BaseException) -> str:
    """'Type: first line of the message' (160 characters at most)."""
    first_line = (str(error).strip().splitlines() or [""])[0][:160]
    return f"{type(error).__name__}: {first_line}"


def _interrupt_once() -> None:
    """From now on the first SIGINT raises KeyboardInterrupt here, and later ones are ignored. Until
    now SIGINT was ignored (and blocked) since the start (a quiet spawn context): a Ctrl-C while the
    child imported is dropped, and this side sends another one if it still wants the child to stop."""

    def interrupted(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def layout_of(array: np.ndarray) -> tuple[tuple[int, ...], str]:
    """What the child needs to receive ``array``: its shape and dtype string."""
    return tuple(array.shape), array.dtype.str


def _send_array(connection, array: np.ndarray) -> None:
    if array.dtype.hasobject:  # its items are pointers: they cross pickled
        connection.send(array)
        return
    view = memoryview(np.ascontiguousarray(array)).cast("B")
    for start in range(0, len(view), CHUNK_BYTES):
        connection.send_bytes(view[start:start + CHUNK_BYTES])


def _receive_array(connection, layout: tuple) -> np.ndarray:
    shape, dtype = layout
    if np.dtype(dtype).hasobject:
        return connection.recv()
    array = np.empty(shape, dtype)
    view = memoryview(array).cast("B")
    for start in range(0, len(view), CHUNK_BYTES):
        connection.recv_bytes_into(view[start:start + CHUNK_BYTES])
    return array


# --- this side ------------------------------------------------------------------------------------


class RayChild:
    """A spawned process that runs the Ray strategies on ``array`` for this one (a context manager).

    ``target(connection, layout, share, scratch)`` is the child's main (it calls ``serve``); ``share``: its
    strategies share one Ray instance. Nothing starts before the first ``run``; ``close()`` (or the
    end of the ``with`` block) ends the child and leaves nothing behind; a later ``run`` starts a
    fresh one. ``stop_seconds``: how long a child told to stop gets before it is killed.
    """

    def __init__(self, target: Callable, array: np.ndarray, share: bool = False,
                 stop_seconds: float = STOP_SECONDS):
        self.target, self.array, self.share = target, array, share
        self.stop_seconds = stop_seconds
        self.process = None
        self.connection = None
        self.scratch: Path | None = None
        self.seen: set[psutil.Process] = set()
        self.folders: set[Path] = set()
        self.raylets: set[str] = set()  # pids of the raylets seen, as Ray's processes' environment has them
        self.started_at = 0.0  # the child's start time (psutil's create_time)

    def __enter__(self) -> RayChild:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        self.close(interrupt=kind is not None)

    @property
    def running(self) -> bool:
        """True while a child is started and not yet closed."""
        return self.process is not None

    def run(self, name: str, n_workers: int, repeat: int, timeout: float | None = None):
        """The child's StrategyResult for one strategy; RayChildFailed if the child raised or ended,
        or did not answer within ``timeout`` seconds (the child is then ended and cleaned up first, and
        the next ``run`` starts a fresh one)."""
        if not self.running:
            self._start()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self.connection.send(("run", name, n_workers, repeat))
            kind, *payload = self._receive(deadline)
        except (RayChildFailed, BrokenPipeError, ConnectionResetError) as error:
            message = str(error) if isinstance(error, RayChildFailed) else self._ended()
            self.close(interrupt=True)
            raise RayChildFailed(message) from None
        if kind == "result":
            return payload[0]
        if kind == "interrupted":
            self.close(interrupt=True)
            raise RayChildFailed("the Ray strategies' process was interrupted (SIGINT)")
        raise RayChildFailed(payload[0])

    def _start(self) -> None:
        context = quiet_context("spawn")
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}rayrun-"))
        self.connection, child_end = context.Pipe()
        self.process = context.Process(target=self.target, name="ray-strategies",
                                       args=(child_end, layout_of(self.array), self.share,
                                             str(self.scratch)))
        self.seen, self.folders, self.raylets = set(), set(), set()
        try:
            self.process.start()
        except BaseException:
            child_end.close()
            self.connection.close()
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.process = None
            raise
        child_end.close()
        with contextlib.suppress(psutil.Error):
            self.started_at = psutil.Process(self.process.pid).create_time()
        try:
            _send_array(self.connection, self.array)
        except (BrokenPipeError, ConnectionResetError):
            self.process.join(KILL_SECONDS)
            message = self._ended(started=False)
            self.close(interrupt=True)
            raise RayChildFailed(message) from None
        except BaseException:
            self.close(interrupt=True)
            raise

    def _ended(self, started: bool = True) -> str:
        code = self.process.exitcode if self.process is not None else None
        return (f"the Ray strategies' process ended {'unexpectedly' if started else 'while it started'}"
                f" (exit code {code})")

    def _receive(self, deadline: float | None = None) -> tuple:
        """The child's next message; RayChildFailed when it ended without one, or none came before
        ``deadline`` (``time.monotonic``). Records the child's processes meanwhile (every
        ``WATCH_SECONDS``)."""
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise RayChildFailed("no answer within the time limit")
            self._record()
            if self.connection.poll(WATCH_SECONDS):
                try:
                    return self.connection.recv()
                except EOFError:
                    break
            if not self.process.is_alive():
                break
        self.process.join(KILL_SECONDS)
        raise RayChildFailed(self._ended())

    def _record(self) -> None:
        """Remember every process the child has started so far, and the Ray folders their command
        lines name (what to kill and remove if the child cannot clean up itself)."""
        try:
            descendants = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.Error:
            return
        for process in descendants:
            if process in self.seen:
                continue
            self.seen.add(process)
            with contextlib.suppress(psutil.Error):
                if process.name() == "raylet":
                    self.raylets.add(str(process.pid))
                for folder in _RAY_FOLDER.findall(" ".join(process.cmdline())):
                    self.folders.add(Path(folder))

    def close(self, interrupt: bool = False) -> None:
        """End the child, if one runs: a stop request (or SIGINT when ``interrupt``), up to
        ``STOP_SECONDS`` for it to shut Ray down itself, then it is killed if still there; every
        process it started that still runs is killed and the Ray folders it left are removed."""
        if not self.running:
            return
        try:
            if self.process.is_alive():
                if interrupt:
                    self._signal_child()
                else:
                    with contextlib.suppress(OSError):
                        self.connection.send(("stop",))
                self._wait(interrupt)
        finally:
            if self.process.is_alive():
                self._record()
                self.process.kill()
                self.process.join(KILL_SECONDS)
            self._remove_leftovers()
            self.connection.close()
            self.process.close()
            self.process = self.connection = None

    def _signal_child(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGINT)

    def _wait(self, interrupt: bool) -> None:
        """Wait up to STOP_SECONDS for the child to end, recording its processes; when interrupting,
        send SIGINT again every second (one sent before the child listened was dropped)."""
        deadline = time.monotonic() + self.stop_seconds
        last_signal = time.monotonic()
        while self.process.is_alive() and time.monotonic() < deadline:
            self._record()
            self.process.join(WATCH_SECONDS)
            if interrupt and time.monotonic() - last_signal >= 1.0:
                self._signal_child()
                last_signal = time.monotonic()

    def _remove_leftovers(self) -> None:
        """After the child ended: kill (by pid, checked against its start time) every process it started
        that still runs; remove the Ray folders of ours their command lines named, and the scratch folder."""
        alive = [process for process in self.seen if process.is_running()] + self._unseen_orphans()
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(alive, timeout=KILL_SECONDS)
        for folder in self.folders:
            if folder.name.startswith(f"{TEMP_PREFIX}ray-") and folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _unseen_orphans(self) -> list[psutil.Process]:
        """Processes started since the child, not recorded, whose command line or environment
        (``RAY_TMPDIR``, ``RAY_RAYLET_PID``) names a Ray folder or raylet of the child's."""
        folders = {str(folder) for folder in self.folders}
        if not folders and not self.raylets:
            return []
        found = []
        for process in psutil.process_iter():
            try:
                if process in self.seen or process.create_time() < self.started_at:
                    continue
                environment = process.environ()
                named = any(folder in " ".join(process.cmdline()) for folder in folders)
            except psutil.Error:
                continue
            if (named or environment.get("RAY_TMPDIR") in folders
                    or environment.get("RAY_RAYLET_PID") in self.raylets):
                found.append(process)
        return found
