"""Byte counts as people read them: 512 B, 1.2 KiB, 3.4 MiB, 1.0 GiB, 2.0 TiB.

A leaf (standard library only): the packager's context, the /gcs stand-in's fetch and the data
conversion's summary print sizes the same way.
"""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def human_size(n: float) -> str:
    """1234567 -> '1.2 MiB': whole bytes below 1 KiB, then one decimal in binary units up to TiB."""
    value = float(n)
    if value < 1024:
        return f"{value:.0f} B"
    for unit in _UNITS[1:-1]:
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} {_UNITS[-1]}"
