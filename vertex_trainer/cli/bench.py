"""bench: the spec's job briefly on synthetic then on real data; where the time goes
(docs/contract.md section 9)."""

from __future__ import annotations

from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import OutputFormat, OutputOpt, SpecOptions, SpecPath
from vertex_trainer.errors import UserError
from vertex_trainer.performance.bench_text import bench_text, dry_run_text, sweep_dry_run_text, sweep_text


@common.with_option_groups
def bench(
    spec: SpecPath,
    opts: SpecOptions,
    local: Annotated[bool, typer.Option("--local", help="run both jobs on this machine")] = False,
    steps: Annotated[
        int, typer.Option("--steps", min=4, help="training steps per run (one epoch, no evaluation)")
    ] = 400,
    output: OutputOpt = OutputFormat.text,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="print the two jobs' exact requests; send, build and run nothing"),
    ] = False,
    idempotency_key: Annotated[
        str | None,
        common.idempotency_key_option(
            "reuse to retry a cloud bench: its jobs (KEY-bench-syn, KEY-bench-real) are "
            "adopted, never created twice. Default: random"
        ),
    ] = None,
    sweep: Annotated[
        str | None,
        typer.Option(
            "--sweep",
            metavar="FIELD=V1,V2,...",
            help="run the job briefly once per value instead (steps_per_execution=1,8,32,auto or "
            "batch_size=256,512,1024, the learning rate scaled): each value's examples/s, input wait "
            "and host overhead, and the value to use (within 5% of the best rate)",
        ),
    ] = None,
    repeat: Annotated[
        int,
        typer.Option(
            "--repeat",
            min=1,
            max=5,
            help="with --sweep: run each value N times, every other round in reverse (1,8,auto,auto,8,1), "
            "and compare the medians: evens out a machine whose load changes",
        ),
    ] = 1,
) -> None:
    """Run the job briefly twice, on synthetic then on real data: both throughputs, the measured
    input wait, input- or compute-bound, and the published reference for known hardware. With
    --sweep, once per value of one field, and the value to use."""
    if idempotency_key is not None:
        api.check_key(idempotency_key)
    if repeat != 1 and sweep is None:
        raise UserError(
            f"--repeat {repeat} is for --sweep: bench without it runs the synthetic and real jobs once",
            hint="add --sweep FIELD=V1,V2,... (e.g. steps_per_execution=1,auto), or drop --repeat",
        )
    cfg = common.settings()
    job_spec = opts.load(spec, cfg)
    result = api.bench(
        job_spec,
        local=local,
        steps=steps,
        idempotency_key=idempotency_key,
        log=common.stderr_line,
        settings=cfg,
        dry_run=dry_run,
        console=None if output is OutputFormat.json else common.err_console(),
        sweep=sweep,
        repeat=repeat,
    )
    if output is OutputFormat.json:
        common.emit_json(result)
    elif sweep is not None:
        print(sweep_dry_run_text(result) if dry_run else sweep_text(result))
    elif dry_run:
        print(dry_run_text(result))
    else:
        print(bench_text(result))


def register(app: typer.Typer) -> None:
    app.command()(bench)
