"""Run a Python program in a private mount namespace whose /dev/shm is a tmpfs of its own.

Needs root and ``unshare``. The program sees an empty /dev/shm of the size asked for (so a small one
can be tested, and another test's segments are never seen); it vanishes with the namespace, so
whatever checks what was left must run inside, as part of the program.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

UNSHARE = shutil.which("unshare")
needs_private_tmpfs = pytest.mark.skipif(UNSHARE is None or os.geteuid() != 0,
                                         reason="needs root and unshare for a private tmpfs")


def run_in_private_dev_shm(code: str, *args: str, size: str, timeout: float = 150,
                           env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run Python ``code`` with ``args`` in a private mount namespace whose /dev/shm is a tmpfs of
    ``size`` (mount's spelling: "64m", "2g")."""
    script = f"mount -t tmpfs -o size={size} tmpfs /dev/shm && exec {sys.executable} -c \"$0\" \"$@\""
    return subprocess.run([UNSHARE, "--mount", "sh", "-c", script, textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def run_in_64_mib_dev_shm(code: str, *args: str) -> subprocess.CompletedProcess:
    """Run Python ``code`` with ``args`` in a private mount namespace whose /dev/shm is a 64 MiB tmpfs."""
    return run_in_private_dev_shm(code, *args, size="64m")
