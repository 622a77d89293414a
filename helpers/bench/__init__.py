"""The benchmark: ``python -m helpers.bench`` (``cli``), the strategies registry (``strategies``),
its harness and mechanisms, the two suites and their targets, and lesson 11's showdown tables,
reference loader, decision guide and widget panel. The top layer: it may import every other one.
"""
