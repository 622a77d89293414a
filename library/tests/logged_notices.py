"""Collect what the library says through its logger, instead of letting Python print it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def notices_of_sharedarrays() -> Iterator[list[str]]:
    """The messages of the WARNING records the ``sharedarrays`` logger emits in the block (an array
    pickled for want of room in /dev/shm, for one), in the list it yields."""
    said: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logger = logging.getLogger("sharedarrays")
    logger.addHandler(handler)
    try:
        yield said
    finally:
        logger.removeHandler(handler)
