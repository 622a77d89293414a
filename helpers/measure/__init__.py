"""Measuring tools: sizes and machine facts (``config``, ``system``, ``machine``), timing
(``timing``), the process-tree memory sampler (``memory``, ``proctree``), the copy floors every
lesson and benchmark compares with (``copy_floors``), plots, units, and the leak check (``leftovers``).

Imports only the take-home library (``sharedarrays``) below it.
"""
