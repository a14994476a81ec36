"""check and setup: is the project ready for the job, and make it so (docs/check.md, issue 33)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import OutputFormat, OutputOpt, SpecOptions, SpecPath
from vertex_trainer.readiness.check_text import check_text, setup_text


def register(app: typer.Typer) -> None:
    app.command("check")(check)
    app.command("setup")(setup)


@common.with_option_groups
def check(
    spec: Annotated[
        Path | None,
        typer.Argument(help="the job spec (YAML); without it, the project alone", show_default=False),
    ] = None,
    *,
    opts: SpecOptions,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Is the project ready for the job? Credentials, APIs, permissions, buckets, repository, quota.

    One line per item, OK, WARN or FAIL, each FAIL with the command that fixes it. Permissions
    are tested (testIamPermissions), not guessed. Exit 0 when nothing fails, 2 otherwise.
    """
    cfg = common.settings()
    job_spec = opts.load(spec, cfg) if spec is not None else None
    result = api.project_check(
        job_spec, project=opts.project, spec_path=str(spec) if spec is not None else None, settings=cfg
    )
    if output is OutputFormat.json:
        common.emit_json(result.to_dict())
    else:
        print(check_text(result))
    if not result.ok:
        raise typer.Exit(2)


@common.with_option_groups
def setup(
    spec: SpecPath,
    opts: SpecOptions,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="send nothing, not even a read: print the reads setup would make and every step "
            "it could take, if missing",
        ),
    ] = False,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan", help="read the project (as check does), change nothing: print what setup would do"
        ),
    ] = False,
    grant: Annotated[
        bool,
        typer.Option("--grant", help="also grant the IAM bindings the job needs (project roles, actAs)"),
    ] = False,
    member: Annotated[
        str | None,
        typer.Option(
            "--member",
            help="whom to grant: user:, serviceAccount:, group:EMAIL or domain:DOMAIN "
            "(default: the credentials' identity; public principals are refused)",
        ),
    ] = None,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Make what `check` finds missing: enable the APIs, create the bucket and the Docker repository.

    The IAM bindings are printed for someone with the right to grant them; --grant grants them.
    A second run changes nothing. --dry-run sends nothing at all; --plan reads and changes nothing.
    """
    cfg = common.settings()
    job_spec = opts.load(spec, cfg)
    result = api.project_setup(
        job_spec,
        dry_run=dry_run,
        plan=plan,
        grant=grant,
        member=member,
        spec_path=str(spec),
        settings=cfg,
    )
    if output is OutputFormat.json:
        return common.emit_json(result.to_dict())
    print(setup_text(result))
