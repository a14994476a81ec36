"""Byte counts as every command prints them (vertex_trainer.sizes): the packager's context, the
/gcs stand-in's fetch and the data conversion's summary."""

from __future__ import annotations

import pytest

from vertex_trainer.sizes import human_size


@pytest.mark.parametrize(
    "n,shown",
    [
        (0, "0 B"),
        (16, "16 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1234567, "1.2 MiB"),
        (1024**3, "1.0 GiB"),
        (1536 * 1024**3, "1.5 TiB"),
        (5 * 1024**5, "5120.0 TiB"),  # no unit past TiB: the figure grows instead
        (2048.0, "2.0 KiB"),
    ],
)
def test_sizes_read_in_binary_units(n, shown):
    assert human_size(n) == shown
