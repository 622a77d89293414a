"""Shared Arrays Lab helpers: measuring tools, worker functions and the finished mechanisms.

Import the submodule you need (``from helpers import config, memory``); importing ``helpers``
itself loads nothing heavy.
"""

__version__ = "0.1.0"
