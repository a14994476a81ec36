"""cost: the list price of the spec's plan before anything is sent (docs/contract.md section 12)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import OutputFormat, OutputOpt, SpecOptions, SpecPath
from vertex_trainer.cost.cost_text import cost_text
from vertex_trainer.errors import UserError


@common.with_option_groups
def cost(
    spec: SpecPath,
    opts: SpecOptions,
    output: OutputOpt = OutputFormat.text,
    throughput: Annotated[
        float | None,
        typer.Option(
            "--throughput",
            metavar="EX_PER_S",
            help="the job's training examples per second (all replicas): gives the expected hours and cost",
        ),
    ] = None,
    bench: Annotated[
        Path | None,
        typer.Option(
            "--bench", metavar="FILE", help="a `bench --output json` result: its measured throughput"
        ),
    ] = None,
    examples_per_epoch: Annotated[
        int | None,
        typer.Option(
            "--examples-per-epoch",
            metavar="N",
            help="a job running your own code (no trainer:): the examples one epoch trains on; "
            "with --throughput, gives the expected hours",
        ),
    ] = None,
    epochs: Annotated[
        int | None,
        typer.Option(
            "--epochs", metavar="E", help="a job running your own code: how many epochs (default 1)"
        ),
    ] = None,
    live_prices: Annotated[
        bool,
        typer.Option(
            "--live-prices",
            help="read the prices from the Cloud Billing Catalog API now, not the "
            "snapshot shipped with vertex-trainer",
        ),
    ] = False,
    compare: Annotated[
        bool,
        typer.Option(
            "--compare",
            help="the alternatives (same accelerator generation and size, each strategy, "
            "the regions that offer them) and one recommendation",
        ),
    ] = False,
    start_now: Annotated[
        bool, typer.Option("--start-now", help="with --compare: the start cannot wait for capacity")
    ] = False,
    checkpoints: Annotated[
        bool | None,
        typer.Option(
            "--checkpoints/--no-checkpoints",
            help="with --compare: the trainer resumes from "
            "checkpoints (default: yes for the bundled trainer, no for an image of your own)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Hourly list price, worst case (timeout x hourly) and expected cost of every attempt of the
    plan; with --compare, the alternatives and a recommendation (flex-start, spot, standard or a
    reservation) with its reason. Nothing is sent (unless --live-prices)."""
    if throughput is not None and bench is not None:
        raise UserError("--throughput and --bench both give the throughput: pass one")
    cfg = common.settings()
    job_spec = opts.load(spec, cfg)
    result = api.cost(
        job_spec,
        throughput=throughput,
        bench=str(bench) if bench else None,
        live=live_prices,
        compare=compare,
        can_wait=not start_now,
        checkpoints=checkpoints,
        examples_per_epoch=examples_per_epoch,
        epochs=epochs,
        settings=cfg,
    )
    if output is OutputFormat.json:
        common.emit_json(result.to_json())
        return
    print(cost_text(result))


def register(app: typer.Typer) -> None:
    app.command()(cost)
