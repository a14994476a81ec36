"""logs: a job's log lines (docs/contract.md section 7); and `FollowView`, what `submit/status --wait`
show on stderr while they follow a job (state changes, replica-prefixed lines, the failure)."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Annotated

import typer

from vertex_trainer.cli.common import (
    JobProjectOpt,
    JobRegionOpt,
    OutputFormat,
    OutputOpt,
    settings,
    stderr_line,
    where,
)
from vertex_trainer.contract import Failure, JobEvent, LogEntry, short_state
from vertex_trainer.errors import JobFailed
from vertex_trainer.local.display import StatusLine, is_banner

LogJobArg = Annotated[
    str,
    typer.Argument(
        help="a Vertex AI job (projects/P/locations/R/customJobs/ID, or an ID with --project), or a "
        "local run (its output directory, or its name)",
        show_default=False,
    ),
]
LogsOpt = Annotated[
    bool,
    typer.Option("--logs/--no-logs", help="with --wait, text output: show the job's log lines as they come"),
]
_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red")
_NOTE_EVERY_S = 600.0  # without a terminal: how often a long Flex Start wait is reported


def logs(
    job: LogJobArg,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", "-f", help="keep reading until the job has ended; exit 1 unless it SUCCEEDED"
        ),
    ] = False,
    replica: Annotated[
        str | None, typer.Option("--replica", metavar="NAME", help="one replica's lines, e.g. workerpool0-0")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="entries from this long ago (30m, 4h, 2d) or since this time (2026-11-29T18:00:00Z)",
        ),
    ] = None,
    output: OutputOpt = OutputFormat.text,
    project: JobProjectOpt = None,
    region: JobRegionOpt = None,
) -> None:
    """Show a job's log lines in time order, each once: a Vertex AI job's (Cloud Logging) or a
    local run's."""
    from vertex_trainer import api

    cfg = settings()
    _check_reference(job)
    if follow and cfg.offline and not cfg.logging_endpoint:
        stderr_line(
            "note: Vertex AI is an emulator and Cloud Logging is not "
            "($VERTEX_TRAINER_LOGGING_ENDPOINT): following the job's state only"
        )
    items = api.logs(
        job,
        follow=follow,
        replica=replica,
        since=since,
        settings=cfg,
        log=stderr_line,
        **where(cfg, project, region),
    )
    last, failure = None, None
    try:
        for item in items:
            if isinstance(item, LogEntry):
                _write(item, output)
            elif isinstance(item, JobEvent):
                last = item.job
                if item.changed:
                    stderr_line(
                        f"{time.strftime('%H:%M:%S')}  {short_state(item.state)}"
                        + (f"  ({item.note})" if item.note else "")
                    )
            elif isinstance(item, Failure):
                failure = item
    except BrokenPipeError:  # `logs JOB | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0)
    if follow and last is not None and not last.succeeded:
        raise JobFailed(
            failure.message if failure else last.failure_message(), hint=failure.advice if failure else None
        )


def _check_reference(job: str) -> None:
    """Exit 2 for what is neither a job (a resource name or a numeric id) nor a local run (its
    output directory or its name): the one message says both readings."""
    import re

    from vertex_trainer.errors import UserError
    from vertex_trainer.local import runlog

    text = job.strip()
    if re.fullmatch(r"[0-9]+|projects/[^/]+/locations/[^/]+/[A-Za-z]+/[^/]+", text) or runlog.find_run(text):
        return
    if os.path.isdir(text):
        what = f"{job!r} is a directory, but no local run wrote to it (no vertex-trainer/logs/ inside)"
    elif os.path.exists(text):
        what = f"{job!r} is a file, neither a job nor a local run's output directory"
    else:
        what = f"{job!r} is neither a job nor a local run's directory (no such file or directory)"
    raise UserError(
        what,
        hint="pass a Vertex AI job (projects/P/locations/R/customJobs/ID, or its "
        "numeric id with --project and --region), or a local run's output_dir "
        "(e.g. runs/quickstart) or name",
    )


def _write(entry: LogEntry, output: OutputFormat) -> None:
    if output is OutputFormat.json:
        sys.stdout.write(json.dumps(entry.to_dict()) + "\n")
    else:
        for line in entry.message.split("\n") or [""]:
            if is_banner(line):  # TensorFlow's start-up banner: the record keeps it, the screen not
                continue
            sys.stdout.write(f"[{entry.replica}] {line}\n")
    sys.stdout.flush()


class FollowView(StatusLine):
    """What `--wait` shows on stderr: a line per state change, the job's log lines prefixed by
    replica (as local runs show them), and at the end the failing replica's last lines. On a
    terminal, a spinner says what the job is doing (for Flex Start: how long it has queued)."""

    def __init__(self, console, job):
        from rich.text import Text

        self._Text = Text
        self.console, self.job_id = console, job.id
        self.colors: dict[str, str] = {}
        self.width = len("workerpool0-0")
        self._status = None
        self._noted = 0.0

    def _opening_status(self) -> str | None:
        return f"waiting for {self.job_id} (Ctrl-C stops waiting)" if self.console.is_terminal else None

    def show(self, item) -> None:
        if isinstance(item, LogEntry):
            self.entry(item)
        elif isinstance(item, JobEvent):
            self.event(item)

    def event(self, event: JobEvent) -> None:
        state = short_state(event.state)
        now = time.monotonic()
        if event.changed or (event.note and self._status is None and now - self._noted >= _NOTE_EVERY_S):
            self._noted = now
            self.note(f"{time.strftime('%H:%M:%S')}  {state}" + (f"  ({event.note})" if event.note else ""))
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
        name = entry.replica
        if name not in self.colors:
            self.colors[name] = _COLORS[len(self.colors) % len(_COLORS)]
            self.width = max(self.width, len(name))
        for line in entry.message.split("\n"):
            text = self._Text()
            text.append(f"{name:<{self.width}} | ", style=self.colors[name])
            text.append(line)
            self.console.print(text, soft_wrap=True, highlight=False, markup=False)

    def note(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False, soft_wrap=True)

    def failure(self, failure: Failure | None) -> None:
        """The failing replica's last lines (the error and advice follow as the exit message)."""
        if failure is None or not failure.lines:
            return
        who = failure.replica or "the job"
        self.console.print(self._Text(f"{who}: its last lines:", style="red"), soft_wrap=True)
        for line in failure.lines:
            self.console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(logs)
