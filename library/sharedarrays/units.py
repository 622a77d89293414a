"""Byte units and byte counts for humans (binary units); the library's messages use them.

Internal to ``sharedarrays``: not part of its API (``sharedarrays.__all__``), and may change
between versions.
"""

KiB = 1024
MiB = 1024**2
GiB = 1024**3


def format_bytes(n_bytes: float) -> str:
    """Format a byte count as '512 B', '3.2 MiB', '1.25 GiB' (binary units)."""
    sign = "-" if n_bytes < 0 else ""
    size = abs(float(n_bytes))
    for unit, scale in (("TiB", 1024**4), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size >= scale:
            value = size / scale
            return f"{sign}{value:.3g} {unit}" if value < 100 else f"{sign}{value:.0f} {unit}"
    return f"{sign}{size:.0f} B"
