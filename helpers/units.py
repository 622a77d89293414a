"""Byte and second formatting for humans; every helper stores raw bytes and seconds."""

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


def format_seconds(seconds: float) -> str:
    """Format a duration as '850 ns', '35 µs', '12.5 ms', '1.3 s' or '2 min 5 s'."""
    if seconds < 0:
        return "-" + format_seconds(-seconds)
    if seconds >= 120:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes:.0f} min {rest:.0f} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def format_rate(bytes_per_second: float) -> str:
    """Format a throughput as 'x.y GiB/s' (or MiB/s below 1 GiB/s)."""
    if bytes_per_second >= GiB:
        return f"{bytes_per_second / GiB:.3g} GiB/s"
    return f"{bytes_per_second / MiB:.3g} MiB/s"
