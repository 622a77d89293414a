"""torch is the library's optional extra: its cases run where it is installed, and are skipped,
saying so, where it is not (a venv with only the library, NumPy and pytest)."""

from __future__ import annotations

import importlib.util

import pytest

TORCH_INSTALLED = importlib.util.find_spec("torch") is not None
TORCH = pytest.param("torch", marks=pytest.mark.skipif(
    not TORCH_INSTALLED, reason="torch is not installed (pip install 'sharedarrays[torch]')"))
