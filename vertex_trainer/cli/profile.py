"""profile and tensorboard: where a run's step time goes (its profiler trace), and TensorBoard
on 127.0.0.1 over its logs (docs/cli.md)."""

from __future__ import annotations

import signal
from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import JobPlace, OutputFormat, OutputOpt
from vertex_trainer.performance.profile_text import profile_text

RunArg = Annotated[
    str,
    typer.Argument(
        metavar="RUN_OR_JOB",
        help="a local run (its output directory, or its name), a folder holding a trace, or a "
        "Vertex AI or sandbox job (projects/P/locations/R/customJobs/ID, or an ID with --project "
        "and --region)",
        show_default=False,
    ),
]


@common.with_option_groups
def profile(
    target: RunArg,
    output: OutputOpt = OutputFormat.text,
    *,
    place: JobPlace,
) -> None:
    """Where a run's step time goes, from its newest profiler trace (trainer.profile_steps):
    device busy, idle between steps, input, host-to-device, the top ops, and the verdict."""
    cfg = common.settings()
    found = api.profile(target, **place.where(cfg), settings=cfg)
    if output is OutputFormat.json:
        common.emit_json(found.to_dict())
    else:
        print(profile_text(found))


@common.with_option_groups
def tensorboard(
    target: RunArg,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            min=0,
            max=65535,
            help="the port on 127.0.0.1 (0: any free one; default: 6006, or the next free one)",
        ),
    ] = None,
    *,
    place: JobPlace,
) -> None:
    """Start TensorBoard on 127.0.0.1 over a run's logs (a local run, a sandbox job, or gs://)
    and print its URL; Ctrl-C stops it."""
    cfg = common.settings()
    board = api.tensorboard(target, port=port, **place.where(cfg), settings=cfg)
    before = signal.signal(signal.SIGTERM, _interrupt)  # a kill ends TensorBoard too
    try:
        print(board.url, flush=True)
        common.stderr_line(f"TensorBoard over {board.logdir}; Ctrl-C stops it")
        if board.wait():
            common.stderr_line("TensorBoard ended: " + " | ".join(list(board.output)[-3:]))
            raise typer.Exit(1)
    except KeyboardInterrupt:
        common.stderr_line("stopped")
    finally:
        board.stop()
        signal.signal(signal.SIGTERM, before)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def register(app: typer.Typer) -> None:
    app.command()(profile)
    app.command()(tensorboard)
