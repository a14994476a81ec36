"""One way to speak: what the tool tells a person while it works, below the edge.

Below the CLI and the API every function that has something to say while it works (a build's
progress, an attempt refused, a retry) takes one `log: Log` argument and calls it with one line of
text; the edge decides where the lines go (the CLI: stderr, or the live view of `submit --wait`; a
notebook: `print`, or nothing). It is the one log type of the package: no module declares its own.
"""

from __future__ import annotations

from collections.abc import Callable

Log = Callable[[str], None]
"""Where a line of progress for people goes: called with the line, without its newline."""


def silent(_: str) -> None:
    """The `Log` that says nothing (a default where no one listens)."""


__all__ = ["Log", "silent"]
