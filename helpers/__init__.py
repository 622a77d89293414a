"""Shared Arrays Lab helpers: three layers on top of the take-home library; each imports only the
layers listed before it.

- ``sharedarrays``: the take-home library, a distribution of its own (``library/``; NumPy and the
  standard library only).
- ``helpers.measure``: sizes and machine facts, timing, the process-tree memory sampler, floors.
- ``helpers.lessons``: one module per lesson, with its demo code and worker functions.
- ``helpers.bench``: ``python -m helpers.bench``, every strategy side by side, lesson 11's panel.

Import the module you need (``from helpers.measure import config, memory``); importing
``helpers`` itself loads nothing heavy.
"""

__version__ = "0.2.0"
