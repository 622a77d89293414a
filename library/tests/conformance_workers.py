"""Tasks for test_executor_conformance.py that ``array_workers`` lacks.

A spawn or forkserver worker imports a task by module name, so they live here, not in the test
file: pytest puts this folder on ``sys.path`` (rootdir conftest, no ``__init__.py``) and a spawned
child or the forkserver inherits the parent's ``sys.path``.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np


class ConformanceError(Exception):
    """An exception type of our own: it must come back as this type, not a built-in one."""


def fail_to_initialize(message: str) -> None:
    """An initializer that fails: the worker dies before it takes any work."""
    raise ConformanceError(message)


def raise_own(message: str, payload: np.ndarray) -> None:
    """Raise ``ConformanceError(message)`` after touching the payload."""
    float(payload.sum())
    raise ConformanceError(message)


def raise_from(message: str, cause_message: str, payload: np.ndarray) -> None:
    """Raise ``ConformanceError(message)`` from ``KeyError(cause_message)``."""
    try:
        raise KeyError(cause_message)
    except KeyError as cause:
        raise ConformanceError(message) from cause


def fail_when(fail: bool, payload: np.ndarray) -> int:
    """Raise ``ConformanceError`` if ``fail``, else return the payload's size in bytes."""
    if fail:
        raise ConformanceError("asked to fail")
    return int(payload.nbytes)


def pid_and_nbytes(payload: np.ndarray) -> tuple[int, int]:
    """This worker's pid and how many bytes of payload it received."""
    return os.getpid(), int(payload.nbytes)


GATE_LIMIT_SECONDS = 60.0  # a gate the test forgot to open fails the task instead of holding the pool


def held_then_nbytes(gate: str, payload: np.ndarray) -> int:
    """Hold the payload until the file ``gate`` exists (the test makes it: "open the gate"), then
    return its size in bytes. A test that needs a task still running, or not done yet, holds it on
    a gate rather than on a sleep, which a busy machine may outlast. Raises TimeoutError after
    ``GATE_LIMIT_SECONDS``."""
    deadline = time.monotonic() + GATE_LIMIT_SECONDS
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the gate {gate} was never opened")
        time.sleep(0.005)
    return int(payload.nbytes)


def sleep_then_nbytes(seconds: float, payload: np.ndarray) -> int:
    """Wait ``seconds`` holding the payload, then return its size in bytes."""
    time.sleep(seconds)
    return int(payload.nbytes)


def return_lock(payload: np.ndarray) -> tuple[np.ndarray, object]:
    """A result that cannot be pickled: a lock next to the payload."""
    return payload, threading.Lock()


def return_local_function(payload: np.ndarray) -> tuple[np.ndarray, object]:
    """A result that cannot be pickled: a function defined inside a function."""
    def local():
        return None
    return payload, local


def return_lambda(payload: np.ndarray) -> tuple[np.ndarray, object]:
    """A result that cannot be pickled: a module-level lambda (pickle looks ``<lambda>`` up and fails)."""
    return payload, MODULE_LAMBDA


MODULE_LAMBDA = lambda value: value  # noqa: E731 (a lambda on purpose: pickle refuses it)


class NeedsTwoArguments(Exception):
    """An exception that pickles but cannot be rebuilt: unpickling calls it with one argument."""

    def __init__(self, first, second):
        super().__init__(first)
        self.second = second


REMEMBERED = None  # set by ``remember`` in a worker's initializer


def remember(value) -> None:
    """An initializer: keep ``value`` for the tasks this worker runs."""
    global REMEMBERED
    REMEMBERED = value


def remembered(payload: np.ndarray) -> tuple[float, int, int]:
    """What the initializer kept: its sum and size, and the payload's size."""
    return float(REMEMBERED.sum()), int(REMEMBERED.nbytes), int(payload.nbytes)


def keywords(**kwargs) -> dict:
    """The keyword arguments received, arrays replaced by their size in bytes."""
    return {key: int(value.nbytes) if isinstance(value, np.ndarray) else value
            for key, value in kwargs.items()}


def raise_carrying(payload: np.ndarray) -> None:
    """Raise an exception that carries the payload."""
    raise ConformanceError("carries the payload", payload)


def raise_carrying_lock(payload: np.ndarray) -> None:
    """Raise an exception that cannot be pickled (it carries a lock)."""
    raise ConformanceError("carries a lock", threading.Lock(), payload)


def raise_unrebuildable(payload: np.ndarray) -> None:
    raise NeedsTwoArguments("first", payload)


def raise_while_handling(payload: np.ndarray) -> None:
    """Raise ``ConformanceError`` while handling a ``KeyError`` (implicit chaining, ``__context__``)."""
    try:
        raise KeyError("handled")
    except KeyError:
        raise ConformanceError("while handling")  # noqa: B904 (implicit chaining on purpose)


def raise_base(kind: str, payload: np.ndarray) -> None:
    """Raise ``SystemExit(3)`` or ``KeyboardInterrupt()``: not ``Exception`` subclasses."""
    if kind == "SystemExit":
        raise SystemExit(3)
    raise KeyboardInterrupt()


def _fail_while_unpickled() -> None:
    raise ConformanceError("failed while being unpickled")


def _exit_while_unpickled() -> None:
    raise SystemExit(3)


class BreaksWhenUnpickled:
    """Pickles fine; loading it raises ``ConformanceError`` (``how="raise"``) or calls
    ``sys.exit(3)`` (``how="exit"``): what CPython's test_deadlock sends to a pool."""

    def __init__(self, how: str):
        self.how = how

    def __reduce__(self):
        return (_fail_while_unpickled if self.how == "raise" else _exit_while_unpickled), ()


def return_breaking(how: str) -> BreaksWhenUnpickled:
    """A result that breaks while the parent unpickles it."""
    return BreaksWhenUnpickled(how)


def sleep_and_print(seconds: float, message: str) -> None:
    """CPython's test_shutdown helper: print ``message`` after ``seconds`` (a task still running at exit)."""
    time.sleep(seconds)
    print(message, flush=True)
