"""Durations as people write them in specs and flags: 90s, 30m, 4h, 2d, 1h30m, or seconds.

A leaf (standard library only): the spec model, the hardware rules, the log reader and the CLI
all parse and print durations the same way.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(value: Any) -> int:
    """A duration in seconds.

    Args:
        value: '90s', '30m', '4h', '2d', '1h30m', a whole number of seconds (int, integral float
            or digits), or 0.

    Returns:
        The number of seconds; ValueError (naming the accepted forms) for anything else,
        negative values and booleans included.
    """
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string like 90s, 30m, 4h, 2d")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    text = str(value).strip().lower()
    if text.isascii() and text.isdigit():  # ("²".isdigit() too)
        return int(text)
    m = _DURATION.match(text)
    if not text or m is None or not any(m.groups()):
        raise ValueError(f"invalid duration {value!r}; use 90s, 30m, 4h, 2d, 1h30m or a number of seconds")
    d, h, mi, s = (int(g or 0) for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def fmt_duration(seconds: int) -> str:
    """The short form of a duration: 3600 -> '1h', 5400 -> '1h30m', 0 -> '0s'.

    Args:
        seconds: a whole, non-negative number of seconds.

    Returns:
        The text `parse_duration` reads back to the same number.
    """
    if seconds == 0:
        return "0s"
    out, rest = "", seconds
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out += f"{rest // size}{unit}"
            rest %= size
    return out


def timestamp_seconds(stamp: str) -> float:
    """An RFC 3339 timestamp as Google's APIs write it (`2026-12-03T18:50:16.123456789Z`: nanoseconds,
    a `Z`) -> seconds since the epoch."""
    stamp = re.sub(r"(\.\d{6})\d+", r"\1", stamp.replace("Z", "+00:00"))
    return datetime.datetime.fromisoformat(stamp).timestamp()
