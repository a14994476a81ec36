"""submit, status, cancel, list: creating and following jobs (docs/contract.md sections 2-3).

`submit` is one `api.submit` call, whatever the spec (its plan decides the kind); the text of a
dry run is present.plan's, read from the plan the API returns."""

from __future__ import annotations

import shlex
from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common, tuning
from vertex_trainer.cli.common import JobPlace, OutputFormat, OutputOpt, SpecOptions, SpecPath
from vertex_trainer.cli.deploy import show_deployment
from vertex_trainer.contract import Failure, short_state
from vertex_trainer.cost.cost_text import job_cost_line
from vertex_trainer.errors import JobFailed, RunInterrupted
from vertex_trainer.performance.utilization_text import utilization_text
from vertex_trainer.present.runs import local_summary
from vertex_trainer.redact import shown_name, terminal_safe

JobArg = Annotated[str, common.resource_argument("a job", "customJobs")]
LogsOpt = Annotated[
    bool,
    typer.Option("--logs/--no-logs", help="with --wait, text output: show the job's log lines as they come"),
]
KeyOpt = Annotated[
    str | None,
    common.idempotency_key_option(
        "reuse for retries (CI: the run id): a job already created with KEY is adopted, "
        "never created twice. Lowercase letters, digits, '_' and '-', <= 63 chars. "
        "Default: random"
    ),
]


DryRunFlag = Annotated[
    bool, typer.Option("--dry-run", help="print the exact requests; send, build and run nothing")
]
LocalFlag = Annotated[bool, typer.Option("--local", help="run the same job on this machine")]
CancelFlag = Annotated[
    bool,
    typer.Option(
        "--cancel-on-interrupt",
        help="with --wait: Ctrl-C cancels the job (default: stop waiting, the job keeps running)",
    ),
]
DeployFlag = Annotated[
    bool,
    typer.Option(
        "--deploy",
        help="when the job SUCCEEDED, register its model and deploy it (the spec's deploy: block); "
        "implies --wait",
    ),
]
QuotaFlag = Annotated[
    bool,
    typer.Option(
        "--quota-check/--no-quota-check",
        help="before creating, read the project's quota for the "
        "accelerator in the region: exit 2 when clearly too small (unreadable: a warning)",
    ),
]


@common.with_option_groups
def submit(
    spec: SpecPath,
    opts: SpecOptions,
    dry_run: DryRunFlag = False,
    local: LocalFlag = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait/--no-wait",
            help="follow the job until it ends; "
            "exit 1 unless it SUCCEEDED (with scheduling.fallback: "
            "a job refused for capacity moves on to the next "
            "attempt only when followed)",
        ),
    ] = False,
    output: OutputOpt = OutputFormat.text,
    idempotency_key: KeyOpt = None,
    cancel_on_interrupt: CancelFlag = False,
    show_logs: LogsOpt = True,
    deploy_after: DeployFlag = False,
    quota_check: QuotaFlag = True,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            metavar="USD",
            min=0.01,
            help="refuse (exit 2, nothing sent) a plan whose worst "
            "case (timeout x hourly list price; a tuning job: x max_trials, a grid's combinations "
            "when fewer) costs more; "
            "wins over scheduling.max_cost",
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            metavar="RUN",
            help="continue an earlier run in its own folder (its checkpoints, model and metrics): "
            "the run's name below output_dir, or its folder. Default: a new folder for this submission",
        ),
    ] = None,
) -> None:
    """Create the Vertex AI CustomJob (or run it here with --local)."""
    cfg = common.settings()
    job_spec = opts.load(spec, cfg)
    tune = job_spec.tune  # a hyperparameter tuning job: its own display (cli/tuning.py)
    watched: dict = {}

    def follow(job, timeout) -> None:  # each job submit creates (each attempt of a fallback plan)
        _show_created(job, output)
        watched[job.name] = _watch(job, output, cancel_on_interrupt, show_logs=show_logs)

    text = output is OutputFormat.text
    options = api.SubmitOptions(
        quota_check=quota_check,
        follow=follow if tune is None else None,
        max_cost=max_cost,
        console=common.err_console() if text else None,
        summary=tune is not None or not text,
    )
    try:
        result = api.submit(
            job_spec,
            wait=wait and (local or tune is None),  # a cloud tuning job is followed by cli/tuning.py
            idempotency_key=idempotency_key,
            local=local,
            dry_run=dry_run,
            deploy=deploy_after,
            options=options,
            resume=resume,
            settings=cfg,
            log=common.stderr_line,
        )
    except RunInterrupted as stopped:  # Ctrl-C stopped the run here: its summary, exit 1 (docs/local.md)
        result = stopped.job
    if isinstance(result, api.DryRun):
        return show_dry_run(result, output)
    if tune is not None:
        return tuning.show_submitted(result, tune, output, local=local, wait=wait, cancel=cancel_on_interrupt)
    if not isinstance(result, api.Job):  # run here
        return _show_local(result, output)
    if result.name not in watched:  # not followed: --no-wait, or adopted after it ended
        _show_created(result, output)
    if wait or deploy_after:
        _end(result, output, *watched.get(result.name, (None, None)))
    elif output is OutputFormat.json:
        common.emit_json(result.to_dict())
    elif result.attempts:
        _show_attempts(result)
    if result.deployment is not None and text:
        show_deployment(result.deployment, output)


@common.with_option_groups
def status(
    job: JobArg,
    place: JobPlace,
    wait: Annotated[
        bool, typer.Option("--wait", help="follow the job until it ends; exit 1 unless it SUCCEEDED")
    ] = False,
    output: OutputOpt = OutputFormat.text,
    show_logs: LogsOpt = True,
    utilization: Annotated[
        bool,
        typer.Option(
            "--utilization",
            help="the job's accelerator, accelerator-memory and CPU utilization per replica pool "
            "(Cloud Monitoring) and what it means; a bundled-trainer or script job alike",
        ),
    ] = False,
) -> None:
    """Show a job's state (and its error, if it failed)."""
    cfg = common.settings()
    found = api.status(job, **place.where(cfg), settings=cfg)
    # --utilization: read from Cloud Monitoring once the job's own lines are shown (after a wait)
    usage = (lambda: api.utilization(found.name, settings=cfg)) if utilization else None
    if wait and not found.done:
        # (status -o json is for scripts polling a job: its lines are not read; submit's are.)
        return _follow(
            found,
            output,
            cancel_on_interrupt=False,
            describe=True,
            show_logs=show_logs and output is OutputFormat.text,
            usage=usage,
        )
    _show_job(found, output, usage)
    if wait and not found.succeeded:
        raise JobFailed(found.failure_message())


@common.with_option_groups
def cancel(
    job: JobArg,
    place: JobPlace,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Cancel a job (a job that already ended is left as it is)."""
    cfg = common.settings()
    found = api.status(job, **place.where(cfg), settings=cfg)
    if found.done:
        if output is OutputFormat.text:
            print(f"{found.name} already ended: {short_state(found.state)} (nothing to cancel)")
        else:
            common.emit_json(found.describe())
        return
    found.cancel()
    if output is OutputFormat.text:
        print(f"cancel requested: {found.name}\nstate    {short_state(found.state)}")
    else:
        common.emit_json(found.describe())


@common.with_option_groups
def list_jobs(
    place: JobPlace,
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label", metavar="KEY=VALUE", help="only jobs with this label (repeatable)", show_default=False
        ),
    ] = None,
    all_jobs: Annotated[
        bool, typer.Option("--all", help="include jobs not created by vertex-trainer")
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="at most this many, newest first")] = 20,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """List jobs, newest first (by default those created by vertex-trainer)."""
    labels = dict(api.parse_label(item) for item in label or ())
    cfg = common.settings()
    at = place.where(cfg, need=True)
    jobs = api.list_jobs(
        at["project"], at["region"], labels=labels, all_jobs=all_jobs, limit=limit, settings=cfg
    )
    if output is OutputFormat.json:
        return common.emit_json({"jobs": [j.describe() for j in jobs]})
    if not jobs:
        print(
            f"no jobs in {at['project']} / {at['region']}"
            + (f" with {', '.join(f'{k}={v}' for k, v in labels.items())}" if labels else "")
        )
        return
    rows = [("ID", "DISPLAY NAME", "STATE", "CREATED", "KEY")]
    rows += [
        (
            j.id,
            shown_name(j.display_name),  # anyone's in the project: any UTF-8, escapes included
            short_state(j.state),
            (j.data.get("createTime") or "")[:19].replace("T", " "),
            j.idempotency_key or "-",
        )
        for j in jobs
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


# -- showing jobs --------------------------------------------------------------------------------


def _show_created(job, output: OutputFormat) -> None:
    if output is not OutputFormat.text:
        return
    verb = "adopted" if job.adopted else "created"
    output_dir = getattr(job, "output_dir", None)
    print(
        f"{verb:8} {job.name}\nstate    {short_state(job.state)}\nconsole  {job.console_url}"
        + (f"\noutput   {output_dir}" if output_dir else ""),
        flush=True,
    )
    if job.adopted:
        common.stderr_line(
            f"a job with idempotency key {job.idempotency_key} already existed: adopted, not re-created"
        )


def _show_attempts(job) -> None:
    # capacity.fallback loads the spec's pydantic models: not for status, cancel, list or --help
    from vertex_trainer.capacity.attempts_text import attempts_line

    print(attempts_line(job.attempts))


def _cost(job) -> dict | None:
    """What an ended job cost (run time x hourly list price, an estimate), else None."""
    return api.job_cost(job.data) if job.done and isinstance(getattr(job, "data", None), dict) else None


def _with_cost(obj: dict, job) -> dict:
    cost = _cost(job)
    return {**obj, "cost": cost} if cost is not None else obj


def _cost_line(job) -> None:
    line = job_cost_line(_cost(job))
    if line:
        print(line)


def _report_line(job, ref: str | None = None) -> None:
    """An ended run's report command (docs/report.md): `report   vertex-trainer report JOB`, its
    argument shell-quoted: a local run's folder is the spec's output_dir, which may hold spaces or
    `$(...)` that a pasted line would run."""
    if job.done:
        print(f"report   vertex-trainer report {shlex.quote(ref or job.name)}")


def _show_job(job, output: OutputFormat, usage=None) -> None:
    """A job's status; `usage` (status --utilization) reads its utilization, shown after it
    (text) or as its "utilization" (JSON)."""
    if output is OutputFormat.json:
        return common.emit_json(
            {**_with_cost(job.describe(), job), **({"utilization": usage().to_dict()} if usage else {})}
        )
    d = job.describe()
    rows = [
        ("name", d["name"]),
        ("display", d["display_name"]),
        ("state", short_state(d["state"])),
        ("created", d["create_time"]),
        ("started", d["start_time"]),
        ("ended", d["end_time"]),
        ("console", d["console_url"]),
        ("tensorboard", d.get("tensorboard_url")),
        ("output", d.get("output_dir")),
        ("error", d["error"]),
    ]
    print("\n".join(f"{k:8} {terminal_safe(str(v))}" for k, v in rows if v))  # (Vertex AI's words)
    _cost_line(job)
    _report_line(job)
    if usage is not None:
        print()
        print(utilization_text(usage()))


def _follow(
    job,
    output: OutputFormat,
    cancel_on_interrupt: bool,
    describe: bool = False,
    show_logs: bool = True,
    usage=None,
) -> None:
    """submit/status --wait: show each state change and (text output) the job's log lines until
    it ends; a failure ends with the failing replica's last lines, its error and advice. `usage`:
    status --utilization's reader (with `describe`)."""
    view, failure = _watch(job, output, cancel_on_interrupt, describe=describe, show_logs=show_logs)
    _end(job, output, view, failure, describe=describe, usage=usage)


def _watch(
    job, output: OutputFormat, cancel_on_interrupt: bool, describe: bool = False, show_logs: bool = True
):
    """Follow `job` to its end on stderr; returns (the view, the Failure or None)."""
    # cli/logs and present/logs only for --wait (2f80a84: submit without --wait loads neither)
    from vertex_trainer.cli.logs import FollowView

    view = FollowView(common.err_console(), job)
    failure = None
    follow, cancel = f"vertex-trainer status {job.name} --wait", f"vertex-trainer cancel {job.name}"
    with common.stop_on_interrupt(
        job, output, cancel_on_interrupt, follow=follow, cancel=cancel, describe=describe
    ):
        with view:
            # The log lines go to stderr whatever --output: stdout stays the one JSON object.
            for item in api.logs(
                job, follow=True, lines=show_logs, settings=job.client.settings, log=view.note
            ):
                view.show(item)
                failure = item if isinstance(item, Failure) else failure
    return view, failure


def _end(job, output: OutputFormat, view, failure, describe: bool = False, usage=None) -> None:
    """The end of a followed job: the JSON object or the final line; JobFailed unless it
    SUCCEEDED (after the failing replica's last lines). `usage`: as _show_job's."""
    if describe:
        _show_job(job, output, usage)
    elif output is OutputFormat.json:
        common.emit_json(_with_cost(job.to_dict(), job))
    else:
        print(f"final    {short_state(job.state)}")
        _cost_line(job)
        _report_line(job)
        if getattr(job, "attempts", None):
            _show_attempts(job)
    if not job.succeeded:
        if view is not None:
            view.failure(failure)
        raise JobFailed(job.failure_message(), hint=failure.advice if failure else None)


def show_dry_run(dry, output: OutputFormat) -> None:
    """submit --dry-run (any kind): the JSON object, or the plan's text (present.plan)."""
    if output is OutputFormat.json:
        return common.emit_json(dry.to_dict())
    # present.plan loads the spec's pydantic models: not for status, cancel, list or --help
    from vertex_trainer.present.plan import dry_run_text

    print(dry_run_text(dry.plan))


def _show_local(result, output: OutputFormat) -> None:
    """The end of submit --local: the JSON object, or the summary on stdout (the run's progress
    went to stderr), like the tuning summary; JobFailed unless it SUCCEEDED."""
    if output is OutputFormat.json:
        common.emit_json(result.to_dict())
    else:
        print(local_summary(result))
        _report_line(result, result.output_dir)
    if result.done and not result.succeeded:  # its last lines are in the summary, on stderr
        raise JobFailed(result.failure_message(lines=False))


def register(app: typer.Typer) -> None:
    app.command()(submit)
    app.command()(status)
    app.command()(cancel)
    app.command("list")(list_jobs)
