"""Lesson 06's joblib strategy behind ``helpers.bench.harness.Mechanism``: what a joblib user gets from
``Parallel(n_jobs=N, backend="loky")(delayed(f)(array) for ...)``, the array auto-memmapped.

joblib has no submit/result per task, so ``ParallelWorkers`` gathers the tasks submitted together
and runs them as ONE ``Parallel`` call (in a thread, so that the harness can watch the workers hold
the array): one call, one dump of the array into joblib's temp folder, as a user's call would make.
Every batch is a new ``Parallel`` (the one-shot form): a reused ``with Parallel(...)`` would dump the
array once and then miss the caller's in-place changes (lesson 06). loky's workers are reused
between calls, so worker start-up is paid once, at ``start``. joblib is imported only when the
strategy runs (``helpers.lessons.joblib_memmap``): without it, ``missing`` says so.
"""

from __future__ import annotations

import contextlib
import importlib.util
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from helpers.bench.harness import TASK_TIMEOUT, Mechanism, Needs, Workers, warm
from helpers.measure.leftovers import SHM_DIR
from helpers.measure.units import MiB

WORKER_RAM = 64 * MiB  # one idle loky worker with NumPy imported (about 25-40 MiB here), rounded up
DUMP_BUFFER = 16 * MiB  # joblib writes a dump in chunks of up to 16 MiB: a buffer the parent may keep


@dataclass
class _Token:
    """One submitted task: its place in the batch, and the batch's Future once the batch runs."""

    fn: object
    args: tuple
    future: Future | None = None
    index: int = 0


class ParallelWorkers(Workers):
    """loky workers behind joblib's ``Parallel``: the tasks submitted since the last ``result`` or
    ``done`` run as one ``Parallel(n_jobs, backend="loky", **options)`` call in a background thread;
    ``run_each`` is one such call, made here."""

    def __init__(self, n_workers: int, stack: contextlib.ExitStack, **options):
        self.n_workers, self.options = n_workers, options
        self.caller = stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="bench-joblib"))
        self.pending: list[_Token] = []

    def _call(self, calls) -> list:
        from joblib import Parallel, delayed

        from helpers.lessons.joblib_memmap import BACKEND

        parallel = Parallel(n_jobs=self.n_workers, backend=BACKEND, **self.options)
        return parallel(delayed(fn)(*args) for fn, args in calls)

    def _flush(self) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            future = self.caller.submit(self._call, [(token.fn, token.args) for token in batch])
            for index, token in enumerate(batch):
                token.future, token.index = future, index

    def submit(self, fn, *args):
        token = _Token(fn, args)
        self.pending.append(token)
        return token

    def result(self, token, timeout=TASK_TIMEOUT):
        self._flush()
        return token.future.result(timeout)[token.index]

    def done(self, token):
        self._flush()
        return token.future.done()

    def run_each(self, fn, args):
        return self._call([(fn, a) for a in args])


class Joblib(Mechanism):
    """Lesson 06: ``joblib.Parallel`` (loky) with its defaults: an array over ``max_nbytes`` (1 MB) is
    dumped once per call into a file in /dev/shm (more than 2 GB free there) or the temp folder, and
    every worker maps it read-only."""

    start_method = "spawn"  # loky starts each worker as a fresh interpreter (fork + exec), like spawn
    notes = ("loky workers (a fresh interpreter each, like spawn), started once; every fan-out is one "
             "Parallel call, which dumps the array once into joblib's temp folder (/dev/shm when it has over "
             "2 GB free, else the temp folder) and the workers map it read-only; setup is nothing, the dump "
             "is inside each call; the round trip pickles the result back")

    @classmethod
    def missing(cls):
        if importlib.util.find_spec("joblib") is None:
            return "joblib is not installed (pip install joblib), so the joblib strategy cannot run"
        return None

    @classmethod
    def needs(cls, array_bytes, n_workers):
        ram = 3 * array_bytes + DUMP_BUFFER + (n_workers + 2) * WORKER_RAM  # + the round trip's copies
        dumps = 2 * array_bytes  # a call's dump, and the next call's while loky unlinks the last one
        from helpers.lessons.joblib_memmap import joblib_temp_root

        on_shm = joblib_temp_root().path == SHM_DIR
        return Needs(ram=ram, shm=dumps if on_shm else 0, disk=0 if on_shm else dumps)

    def start(self, data, stack):
        from helpers.lessons.joblib_memmap import release_joblib

        stack.callback(release_joblib)  # last: after the thread that calls Parallel ends
        started = ParallelWorkers(self.n_workers, stack)
        warm(started, self.n_workers)
        return started
