"""How much of a call lets other Python threads run: a heartbeat probe of the GIL (lesson 01).

``gil_probe`` calls a function again and again in one thread while a ``Heartbeat`` thread sleeps a
millisecond at a time: a wake-up that comes late means the call held the GIL. Time the heartbeat
spent waiting for a CPU (a busy machine, or Binder's one CPU) is read from the kernel
(``cpu_wait_seconds``, Linux's schedstat) and not counted as late, so the probe works on one CPU.
``EXERCISE`` asks the learner to predict six calls (``exercise_calls``). Seconds throughout.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import psutil

from helpers.lessons.exercises import Exercise

RELEASED = 0.5  # a call "releases the GIL" when other threads could run for more than this share of it
PROBE_SWITCH_INTERVAL = 0.05  # seconds: sys.setswitchinterval while gil_probe runs (default 0.005)


@dataclass(frozen=True)
class GilProbe:
    """What a ``Heartbeat`` saw while ``name`` ran in another thread: ``released``, the share of
    the time (0 to 1) it woke on time, i.e. other Python threads could run; ``ticks`` wake-ups over
    ``seconds`` of ``calls`` calls."""

    name: str
    released: float
    ticks: int
    calls: int
    seconds: float

    @property
    def releases(self) -> bool:
        """Whether the call let other threads run for most of its time."""
        return self.released > RELEASED


def cpu_wait_seconds(thread_id: int, pid: int | str = "self") -> float | None:
    """Seconds the thread ``thread_id`` (a native id) of process ``pid`` has spent runnable but
    waiting for a CPU (Linux: /proc/PID/task/ID/schedstat); None where the kernel does not say."""
    try:
        with open(f"/proc/{pid}/task/{thread_id}/schedstat") as file:
            return int(file.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def tree_cpu_wait_seconds() -> float:
    """Seconds every thread of this process and of its descendants has spent runnable but waiting
    for a CPU, summed (0.0 where the kernel does not say): other programs took the CPUs."""
    pids = [os.getpid(), *(child.pid for child in psutil.Process().children(recursive=True))]
    total = 0.0
    for pid in pids:
        try:
            thread_ids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # ended meanwhile, or not Linux
        total += sum(cpu_wait_seconds(int(tid), pid) or 0.0 for tid in thread_ids)
    return total


class Heartbeat:
    """A thread that sleeps ``tick`` seconds at a time, and must take the GIL back to wake up.

    A thread that waits for the GIL asks the holder to hand it over after one
    ``sys.getswitchinterval()``, and a C call that holds it hands it over only when it returns: so
    while a call holds the GIL, each wake-up comes at least one switch interval late. ``late`` is
    half the switch interval in force when the heartbeat is made: a later wake-up means the GIL was
    held. ``gil_probe`` raises the interval from its default 5 ms to ``PROBE_SWITCH_INTERVAL``
    (50 ms) while it probes, because a machine wakes a sleeping thread a few milliseconds late on
    its own: on a virtual machine whose host is busy, np.sum read as holding the GIL for 9-43% of
    its time with 2.5 ms as the limit, 0-10% with 5 ms, and in one CI run 85% with 5 ms. Time spent
    waiting for a CPU (a busy machine, or one CPU) is not counted as late (``cpu_wait_seconds``).
    ``free`` and ``total`` are seconds: of all the time between wake-ups, the intervals that ended
    on time, each weighed by the time the heartbeat could have run in it (its CPU wait taken off).
    """

    def __init__(self, tick: float = 0.001):
        self.tick, self.late = tick, sys.getswitchinterval() / 2
        self.free = self.total = 0.0
        self.ticks = 0
        self.stop = threading.Event()

    def run(self) -> None:
        me = threading.get_native_id()
        before, waited = time.perf_counter(), cpu_wait_seconds(me)
        while not self.stop.is_set():
            time.sleep(self.tick)  # lets go of the GIL; waking up needs it back
            now, waited_now = time.perf_counter(), cpu_wait_seconds(me)
            for_cpu = waited_now - waited if waited is not None and waited_now is not None else 0.0
            # Late is measured from the last wake-up, not from this sleep: the interpreter may also
            # hand the GIL over between two sleeps, and that wait counts as held too.
            # Weighed by the time the heartbeat could have run: time spent waiting for a CPU (a
            # CPU quota's pause of tens of milliseconds among them) counts for neither side.
            could_run = max(0.0, now - before - for_cpu)
            if could_run - self.tick < self.late:  # on time, but for a busy CPU
                self.free += could_run
            self.total += could_run
            self.ticks += 1
            before, waited = now, waited_now


def gil_probe(name: str, fn: Callable, *args, seconds: float = 0.25, tick: float = 0.001,
              min_heartbeats: int = 10, max_seconds: float = 5.0) -> GilProbe:
    """Call ``fn(*args)`` in a thread, again and again for at least ``seconds`` and until the
    heartbeat woke ``min_heartbeats`` times (a call that holds the GIL lets it wake only every
    few switch intervals; at most ``max_seconds`` in all), while a ``Heartbeat`` runs in another;
    the share of the time the heartbeat woke on time is the share of the call during which other
    Python threads could run. The switch interval is ``PROBE_SWITCH_INTERVAL`` meanwhile, and set
    back after."""
    calls = 0
    heartbeat: Heartbeat | None = None

    def call_repeatedly() -> None:
        nonlocal calls
        start = time.perf_counter()
        end, last = start + seconds, start + max(seconds, max_seconds)
        while (calls == 0 or (now := time.perf_counter()) < end
               or (heartbeat.ticks < min_heartbeats and now < last)):
            fn(*args)
            calls += 1

    default_interval = sys.getswitchinterval()
    sys.setswitchinterval(PROBE_SWITCH_INTERVAL)  # a held GIL now shows as a 50 ms wait
    try:
        heartbeat = Heartbeat(tick)
        beating = threading.Thread(target=heartbeat.run, name="gil-probe-heartbeat", daemon=True)
        caller = threading.Thread(target=call_repeatedly, name="gil-probe-call", daemon=True)
        beating.start()
        start = time.perf_counter()
        caller.start()
        caller.join()
        elapsed = time.perf_counter() - start
        heartbeat.stop.set()
        beating.join()
    finally:
        sys.setswitchinterval(default_interval)
    released = heartbeat.free / heartbeat.total if heartbeat.total else 0.0
    return GilProbe(name, released, heartbeat.ticks, calls, elapsed)


def exercise_calls(array: np.ndarray) -> dict[str, tuple[Callable, tuple]]:
    """The calls of the exercise, on data cut from ``array``: name -> (function, arguments)."""
    import hashlib
    import zlib

    data = array[: 2**16].tobytes()  # 512 KiB of bytes
    numbers = array[: 2**17].tolist()  # Python floats; sorting them takes well over 5 ms
    objects = array[: 2**17].astype(object)  # Python objects: adding them needs the GIL
    return {
        "hashlib.sha256(data).digest()": (lambda d: hashlib.sha256(d).digest(), (data,)),
        "hashlib.sha256(short).digest()": (lambda d: hashlib.sha256(d).digest(), (data[:100],)),  # 100 bytes
        "zlib.compress(data)": (zlib.compress, (data,)),
        "data.count(0)": (bytes.count, (data, 0)),  # how many zero bytes
        "sorted(numbers)": (sorted, (numbers,)),
        "np.sort(values)": (np.sort, (array[: 2**18],)),
        "np.sum(objects)": (np.sum, (objects,)),
    }


# What the documentation says of each call of the exercise: True, it releases the GIL (hashlib only
# for data over 2047 bytes, so not for the 100 bytes of ``short``). bytes.count's
# docs say nothing: it runs in C on raw memory, yet CPython's bytes methods do not release the GIL
# (the probe in the lesson and test_threads_or_processes hold this).
DOCUMENTED = {"hashlib.sha256(data).digest()": True, "hashlib.sha256(short).digest()": False,
              "zlib.compress(data)": True,
              "data.count(0)": False, "sorted(numbers)": False,
              "np.sort(values)": True, "np.sum(objects)": False}


def measured_releases(probes: Mapping[str, GilProbe]) -> dict[str, bool]:
    """Call name -> whether its probe saw it release the GIL (``GilProbe.releases``)."""
    return {name: probe.releases for name, probe in probes.items()}


def _check_predictions(answer, probes: Mapping[str, GilProbe]) -> str | None:
    """None when ``answer`` (call name -> True: releases the GIL, False: holds it) matches every
    probe; else one sentence naming what is missing or wrong."""
    if not isinstance(answer, Mapping):
        return f"answer with a dict of call name -> True or False, not a {type(answer).__name__}"
    unknown, missing = sorted(set(answer) - set(probes)), [name for name in probes if name not in answer]
    if unknown or missing:
        return f"predict exactly these calls: {sorted(probes)} (unknown: {unknown}, missing: {missing})"
    not_bool = [name for name, guess in answer.items() if not isinstance(guess, bool)]
    if not_bool:
        return f"predict True (releases the GIL) or False (holds it) for {not_bool}"
    wrong = [f"{name} {'released' if probes[name].releases else 'held'} it (other threads could run "
             f"alongside it {probes[name].released:.0%} of the time)"
             for name, guess in answer.items() if guess != probes[name].releases]
    return None if not wrong else "; ".join(wrong) + "."


EXERCISE = Exercise(
    name="which calls release the GIL",
    question=("predict, for each call of gil_heartbeat.exercise_calls, whether it lets other "
              "threads run: answer = {call name: True (releases the GIL) or False (holds it)}"),
    check=_check_predictions,
    solution=measured_releases,
    explanation=("Only C code written to release the GIL does (NumPy on numeric dtypes, hashlib over "
                 "2047 bytes, zlib); code that touches Python objects cannot, and most built-in methods on "
                 "bytes and str hold it although they work on raw memory."),
    misconceptions=(
        ({**DOCUMENTED, "np.sum(objects)": True},
         "every NumPy call releases the GIL, whatever the array holds"),
        ({**DOCUMENTED, "sorted(numbers)": True},
         "a builtin written in C, like sorted, releases the GIL"),
        ({**DOCUMENTED, "hashlib.sha256(short).digest()": True},
         "a call that releases the GIL releases it whatever the size of its input"),
        ({**DOCUMENTED, "data.count(0)": True},
         "C code on raw bytes releases the GIL"),
        ({name: False for name in DOCUMENTED},
         "no call lets another thread run: the GIL serialises all of Python's threads"),
    ),
)
