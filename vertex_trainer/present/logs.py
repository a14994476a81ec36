"""A job's log for people (docs/contract.md section 7): the lines `logs` prints, and `FollowView`,
what `submit/status --wait` show on stderr while they follow a job (state changes,
replica-prefixed lines, the failure)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from vertex_trainer.contract import Failure, JobEvent, LogEntry, short_state
from vertex_trainer.local.display import StatusLine, is_banner
from vertex_trainer.redact import shown_name, terminal_safe

__all__ = ["FollowView", "entry_lines", "event_line", "terminal_safe"]

_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red")
_NOTE_EVERY_S = 600.0  # without a terminal: how often a long Flex Start wait is reported


def entry_lines(entry: LogEntry) -> Iterator[str]:
    """The lines `logs` prints for one entry, "[workerpool0-0] ...", without TensorFlow's
    start-up banner (the run's record keeps it, the screen does not); `terminal_safe`."""
    for line in entry.message.split("\n") or [""]:
        if not is_banner(line):
            yield f"[{shown_name(entry.replica)}] {terminal_safe(line)}"


def event_line(event: JobEvent) -> str:
    """A state change as `logs --follow` notes it: "18:02:11  RUNNING  (note)"."""
    return f"{time.strftime('%H:%M:%S')}  {short_state(event.state)}" + (
        f"  ({event.note})" if event.note else ""
    )


class FollowView(StatusLine):
    """What `--wait` shows on stderr: a line per state change, the job's log lines prefixed by
    replica (as local runs show them), and at the end the failing replica's last lines. On a
    terminal, a spinner says what the job is doing (for Flex Start: how long it has queued)."""

    def __init__(self, console: Any, job: Any):
        from rich.text import Text

        self._Text = Text
        self.console, self.job_id = console, job.id
        self.colors: dict[str, str] = {}
        self.width = len("workerpool0-0")
        self._status = None
        self._noted = 0.0

    def _opening_status(self) -> str | None:
        return f"waiting for {self.job_id} (Ctrl-C stops waiting)" if self.console.is_terminal else None

    def show(self, item: Any) -> None:
        if isinstance(item, LogEntry):
            self.entry(item)
        elif isinstance(item, JobEvent):
            self.event(item)

    def event(self, event: JobEvent) -> None:
        state = short_state(event.state)
        now = time.monotonic()
        if event.changed or (event.note and self._status is None and now - self._noted >= _NOTE_EVERY_S):
            self._noted = now
            self.note(event_line(event))
        if self._status is not None:
            extra = (
                f": {event.note}"
                if event.note
                else ": reading its last lines"
                if event.job.done
                else " (Ctrl-C stops waiting)"
            )
            self._status.update(f"{self.job_id} {state}{extra}")

    def entry(self, entry: LogEntry) -> None:
        name = shown_name(entry.replica)  # (a log entry's task_name: whoever wrote the entry)
        if name not in self.colors:
            self.colors[name] = _COLORS[len(self.colors) % len(_COLORS)]
            self.width = max(self.width, len(name))
        for line in entry.message.split("\n"):
            text = self._Text()
            text.append(f"{name:<{self.width}} | ", style=self.colors[name])
            text.append(terminal_safe(line))
            self.console.print(text, soft_wrap=True, highlight=False, markup=False)

    def note(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False, soft_wrap=True)

    def failure(self, failure: Failure | None) -> None:
        """The failing replica's last lines (the error and advice follow as the exit message)."""
        if failure is None or not failure.lines:
            return
        who = shown_name(failure.replica) if failure.replica else "the job"
        self.console.print(self._Text(f"{who}: its last lines:", style="red"), soft_wrap=True)
        for line in failure.lines:
            self.console.print(f"  {terminal_safe(line)}", markup=False, highlight=False, soft_wrap=True)
