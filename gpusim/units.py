"""Units: the only home of 1e9, 1024**3 and friends.

Inside gpusim every quantity is a float64 in SI base units with the unit in its name
(``step_s``, ``grad_bytes``, ``busbw_bytes_per_s``, ``fwd_flop``, ``peak_flop_per_s``).
Files and people use human units (``memory_gib: 80``, ``gbyte_per_s: 3350``); conversion happens
here and in the schema's properties, nowhere else.

Decimal prefixes follow SI (1 GB = 1e9 bytes, as GPU and network vendors quote bandwidth);
binary prefixes follow IEC 80000-13 (1 GiB = 2**30 bytes, as memory capacity and buffer sizes are).
"""

from __future__ import annotations

import math
import re

# --- bytes -------------------------------------------------------------------------------------
KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KIB = 1024.0
MIB = 1024.0**2
GIB = 1024.0**3
TIB = 1024.0**4

# --- bits (network links are quoted in bit/s) ---------------------------------------------------
BITS_PER_BYTE = 8.0
GBIT = 1e9 / BITS_PER_BYTE  # bytes in one gigabit

# --- rates and counts ---------------------------------------------------------------------------
KILO = 1e3
MEGA = 1e6
GIGA = 1e9
TERA = 1e12
PETA = 1e15

# --- time ---------------------------------------------------------------------------------------
NS = 1e-9
US = 1e-6
MS = 1e-3
MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0

# --- energy -------------------------------------------------------------------------------------
KWH = 3.6e6  # joules in one kilowatt-hour


def gib_to_bytes(gib: float) -> float:
    return float(gib) * GIB


def gbyte_per_s_to_bytes_per_s(gbyte_per_s: float) -> float:
    return float(gbyte_per_s) * GB


def gbit_per_s_to_bytes_per_s(gbit_per_s: float) -> float:
    return float(gbit_per_s) * GBIT


def tflop_per_s_to_flop_per_s(tflop_per_s: float) -> float:
    return float(tflop_per_s) * TERA


def flop_per_s_to_tflop_per_s(flop_per_s: float) -> float:
    return flop_per_s / TERA


def us_to_s(us: float) -> float:
    return float(us) * US


_BYTES_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_BYTE_UNITS = {
    "b": 1.0, "kb": KB, "mb": MB, "gb": GB, "tb": TB,
    "kib": KIB, "mib": MIB, "gib": GIB, "tib": TIB,
}


def parse_bytes(text: str | float | int) -> float:
    """Parse ``"25MiB"``, ``"1GB"``, ``"4096"`` or ``1e9`` into bytes (float).

    Raises ``ValueError`` with the accepted forms when the text is not a size.
    """
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _BYTES_RE.match(str(text))
        if not m:
            raise ValueError(f"not a size in bytes: {text!r} (use e.g. 4096, 25MiB, 1GB, 1.5GiB)")
        value = float(m.group(1)) * _BYTE_UNITS[(m.group(2) or "B").lower()]
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"a size in bytes must be finite and >= 0 (got {text!r})")
    return value


_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(s|sec|m|min|h|hr|d|day|days|w|wk|week|weeks)?\s*$",
                          re.IGNORECASE)
_DURATION_UNITS = {
    "s": 1.0, "sec": 1.0, "m": MINUTE, "min": MINUTE, "h": HOUR, "hr": HOUR,
    "d": DAY, "day": DAY, "days": DAY, "w": 7 * DAY, "wk": 7 * DAY, "week": 7 * DAY, "weeks": 7 * DAY,
}


def parse_duration_s(text: str | float | int) -> float:
    """Parse ``"72h"``, ``"3d"``, ``"90min"`` or a number of seconds into seconds."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _DURATION_RE.match(str(text))
        if not m:
            raise ValueError(f"not a duration: {text!r} (use e.g. 3600, 90min, 72h, 14d, 2w)")
        value = float(m.group(1)) * _DURATION_UNITS[(m.group(2) or "s").lower()]
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"a duration must be finite and > 0 (got {text!r})")
    return value


def parse_count(text: str | float | int) -> float:
    """Parse ``"1e11"``, ``"300B"``, ``"2T"``, ``"15M"`` (tokens or samples) into a float count."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        s = str(text).strip().replace("_", "").replace(",", "")
        mult = {"k": KILO, "m": MEGA, "b": GIGA, "g": GIGA, "t": TERA}.get(s[-1:].lower(), None)
        try:
            value = float(s[:-1]) * mult if mult else float(s)
        except ValueError:
            raise ValueError(f"not a count: {text!r} (use e.g. 1e11, 300B, 2T, 15M)") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"a count must be finite and > 0 (got {text!r})")
    return value


def _sig(v: float, digits: int) -> str:
    """``v`` to ``digits`` significant figures without an exponent: 1,000-1,023 of a binary unit is '1,000', not
    '1e+03' (stop 51: a validation line printed '1e+03 MiB')."""
    text = f"{v:.{digits}g}"
    return f"{float(text):,.0f}" if "e+" in text else text


def _scaled(value: float, steps: list[tuple[float, str]], digits: int) -> str:
    for scale, suffix in steps:
        if abs(value) >= scale:
            return f"{_sig(value / scale, digits)} {suffix}"
    scale, suffix = steps[-1]
    return f"{_sig(value / scale, digits)} {suffix}"


def format_bytes(n_bytes: float, digits: int = 3) -> str:
    """``format_bytes(25 * MIB) == '25 MiB'`` (binary prefixes for sizes)."""
    return _scaled(n_bytes, [(TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB"), (1.0, "B")], digits)


def format_rate_bytes(bytes_per_s: float, digits: int = 3) -> str:
    """``format_rate_bytes(450e9) == '450 GB/s'`` (decimal prefixes for bandwidth, as vendors quote it)."""
    return _scaled(bytes_per_s, [(TB, "TB/s"), (GB, "GB/s"), (MB, "MB/s"), (KB, "kB/s"), (1.0, "B/s")], digits)


def format_flop_rate(flop_per_s: float, digits: int = 3) -> str:
    return _scaled(flop_per_s, [(PETA, "PFLOP/s"), (TERA, "TFLOP/s"), (GIGA, "GFLOP/s"), (1.0, "FLOP/s")], digits)


def format_count(x: float, digits: int = 3) -> str:
    """A count or rate without a unit prefix, to ``digits`` significant figures, with thousands separators:
    ``format_count(19321.7) == '19,300'``, ``format_count(0.4567) == '0.457'``."""
    if not math.isfinite(x):
        return str(x)
    rounded = float(f"{x:.{digits}g}")  # (first: 999.96 rounds to 1,000, not '1e+03')
    if abs(rounded) < 1000:
        return f"{rounded:.{digits}g}"
    return f"{rounded:,.0f}"


def format_duration(seconds: float, digits: int = 3) -> str:
    """Human duration: µs and ms for steps, h and days for training runs."""
    if not math.isfinite(seconds):
        return "inf"
    a = abs(seconds)
    if a < MS:
        return f"{seconds / US:.{digits}g} µs"
    if a < 1.0:
        return f"{seconds / MS:.{digits}g} ms"
    if a < 2 * MINUTE:
        return f"{seconds:.{digits}g} s"
    if a < 2 * HOUR:
        return f"{seconds / MINUTE:.{digits}g} min"
    if a < 3 * DAY:
        return f"{seconds / HOUR:.{digits}g} h"
    return f"{seconds / DAY:.{digits}g} days"
