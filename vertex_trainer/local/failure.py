"""What a failed replica's last lines say: the exception it died of, and a short excerpt.

A replica that dies of an uncaught Python exception prints a traceback whose last part is the
exception's type and message (`ValueError: bad shape ...`). A message may span many lines (a
tensor printed into it), so the last N lines of the log can be numbers only: the excerpt keeps
the exception's first line whatever the message's length, and cuts lines too long to read.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator, Sequence

EXCERPT_LINES = 20  # lines of a failed replica shown in the summary
LINE_CHARS = 300  # a longer line is cut, saying how much was left out
_TRACEBACK = "Traceback (most recent call last):"
# `ValueError: ...`, `tensorflow.python.framework.errors_impl.InvalidArgumentError: ...`,
# `KeyboardInterrupt`: a dotted name at the start of an unindented line, then ':' or the end.
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")


def cut(line: str, limit: int = LINE_CHARS) -> str:
    """`line`, cut to `limit` characters with the number of characters left out."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]} ... ({len(line) - limit:,} more characters)"


class Tail:
    """A replica's last `size` lines, and the head of the last exception it printed (the
    raising frame and the exception's first line), kept however many lines followed it."""

    def __init__(self, size: int) -> None:
        self.lines: deque[str] = deque(maxlen=size)
        self.raised: tuple[str, ...] = ()  # the last traceback's raising frame and exception line
        self.after = 0  # lines printed after the exception's first line
        self._frames: deque[str] = deque(maxlen=2)
        self.in_traceback = False  # after a traceback's first line, before its exception's

    def append(self, line: str) -> None:
        self.lines.append(line)
        self.after += 1
        if line.rstrip() == _TRACEBACK:
            self.in_traceback = True
            self._frames.clear()
        elif self.in_traceback:
            if line and not line[0].isspace() and _EXCEPTION.match(line.rstrip()):
                self.raised = (*self._frames, line)
                self.in_traceback = False
                self.after = 0
            else:
                self._frames.append(line)

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines)

    def __len__(self) -> int:
        return len(self.lines)

    def excerpt(self, limit: int = EXCERPT_LINES) -> list[str]:
        """At most `limit` of the last lines, each cut to LINE_CHARS; when the exception's line
        is not among them (its message is longer), the traceback's first line, the raising frame
        and the exception's line first, then how many lines were left out, then the last ones."""
        lines = list(self.lines)
        shown = lines[-limit:]
        if not self.raised or self.after < len(shown):  # no exception, or its line is shown
            return [cut(line) for line in shown]
        head = [_TRACEBACK, *self.raised]
        tail = lines[-(limit - len(head) - 1) :] if limit > len(head) + 1 else []
        marker = f"... ({self.after - len(tail):,} lines of the message left out)"
        return [cut(line) for line in (*head, marker, *tail)]


def _read(lines: Sequence[str]) -> Tail:
    """A Tail that has read all of `lines` (and kept them all)."""
    tail = Tail(max(len(lines), 1))
    for line in lines:
        tail.append(line.rstrip("\n"))
    return tail


def exception_line(lines: Sequence[str]) -> str | None:
    """The exception the replica died of, `Type: first line of its message` (cut): the first line
    at the margin after the last `Traceback (most recent call last):` and its indented frames
    (a chained exception's traceback comes after the first one's); None when there is none."""
    tail = _read(lines)
    return cut(tail.raised[-1].rstrip()) if tail.raised and not tail.in_traceback else None


def excerpt(lines: Sequence[str], limit: int = EXCERPT_LINES) -> list[str]:
    """Tail.excerpt of these lines (all of them kept)."""
    return _read(lines).excerpt(limit)
