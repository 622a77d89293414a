"""Byte and second formatting for humans; every helper stores raw bytes and seconds."""

from sharedarrays.units import GiB, KiB, MiB, format_bytes

__all__ = ["GiB", "KiB", "MiB", "format_bytes", "format_seconds", "format_rate"]


def format_seconds(seconds: float) -> str:
    """Format a duration as '850 ns', '35 µs', '12.5 ms', '1.3 s' or '2 min 5 s'."""
    if seconds < 0:
        return "-" + format_seconds(-seconds)
    if seconds > 0:
        seconds = float(f"{seconds:.3g}")  # round first, then pick the unit: 0.9996 s is '1 s', not '1000 ms'
    if seconds >= 120:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes:.0f} min {rest:.0f} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def shown(seconds: float) -> float:
    """``seconds`` rounded to the three significant digits ``format_seconds`` prints, so that a ratio
    or a difference computed from it agrees with the figures on the page."""
    return float(f"{seconds:.3g}")


def approx_seconds(seconds: float) -> str:
    """A duration rounded to two significant digits, for prose where a noisy timing supports no
    more ('37 ms', '430 ms', '1.2 s')."""
    return format_seconds(float(f"{seconds:.2g}"))


def approx_ratio(ratio: float) -> str:
    """A ratio rounded to two significant digits, for prose ('1.4', '15', '140', '1,500')."""
    rounded = float(f"{ratio:.2g}")
    return f"{rounded:,.0f}" if rounded >= 10 else f"{rounded:g}"


def format_rate(bytes_per_second: float) -> str:
    """Format a throughput as 'x.y GiB/s' (or MiB/s below 1 GiB/s: '250 MiB/s', '1010 MiB/s')."""
    giga = bytes_per_second >= GiB
    value, unit = (bytes_per_second / GiB, "GiB/s") if giga else (bytes_per_second / MiB, "MiB/s")
    return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"


def format_ratio(ratio: float) -> str:
    """A measured ratio with two significant digits and no exponent, for prose and tables:
    161.6 -> '160', 7.34 -> '7.3', 0.171 -> '0.17' (append the '×' yourself)."""
    return f"{float(f'{ratio:.2g}'):,g}"
