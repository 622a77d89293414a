"""One module per lesson, named after its notebook: the lesson's demo code and its worker functions.

A spawned or forkserver-started child imports a worker function by its module's name, so every
worker a lesson runs lives here, never in a notebook cell. ``workers`` holds the tasks many lessons
share (it imports NumPy and ``sharedarrays`` only); ``demos`` the hold-in-workers and
table helpers several lessons use; ``ray_session`` the local Ray that lesson 10 and the benchmark
start. Imports ``helpers.measure`` and ``sharedarrays`` below it, never ``helpers.bench``.
"""
