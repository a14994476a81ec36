"""trials, and `submit` of a spec with `tune:` (docs/contract.md section 10): hyperparameter tuning jobs.

`submit` delegates here when the spec has a tune: block (cli/jobs.py); `trials JOB` lists a
tuning job's trials and the best one. Text goes to stdout (the table of trials), progress to
stderr; `--output json` prints exactly one JSON object.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from vertex_trainer.cli.common import (
    JobProjectOpt,
    JobRegionOpt,
    OutputFormat,
    OutputOpt,
    emit_json,
    err_console,
    settings,
    stderr_line,
    stop_waiting,
    where,
)
from vertex_trainer.contract import short_state
from vertex_trainer.errors import JobFailed

TuningJobArg = Annotated[  # (an alias a type checker reads, as cli/jobs.py's)
    str,
    typer.Argument(
        help="a tuning job: projects/P/locations/R/hyperparameterTuningJobs/ID, or an ID with "
        "--project/--region",
        show_default=False,
    ),
]


def trials(
    job: TuningJobArg,
    project: JobProjectOpt = None,
    region: JobRegionOpt = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="follow the job until it ends, showing each trial as it ends; exit 1 unless it SUCCEEDED",
        ),
    ] = False,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """List a hyperparameter tuning job's trials (parameters, metric) and the best trial."""
    from vertex_trainer import api

    cfg = settings()
    found = api.tuning_job(job, **where(cfg, project, region), settings=cfg)
    if wait and not found.done:
        return _follow(found, output, cancel_on_interrupt=False, describe=True)
    _show(found, output, describe=True)
    if wait and not found.succeeded:
        raise JobFailed(found.failure_message())


def submit(
    job_spec: Any,
    cfg: Any,
    *,
    dry_run: bool,
    local: bool,
    wait: bool,
    output: OutputFormat,
    idempotency_key: str | None,
    cancel_on_interrupt: bool,
    deploy: bool = False,
    quota_check: bool = True,
    max_cost: float | None = None,
    resume: str | None = None,
) -> None:
    """`vertex-trainer submit` of a spec with tune: (cloud, --local or --dry-run): one api.submit
    (the same plan, checks and budget as any submit), then the trials as they end (--wait) and
    the table of trials."""
    from vertex_trainer import api

    # A cloud tuning job is followed here (each trial as it ends), not by api.submit's wait.
    job = api.submit(
        job_spec,
        wait=wait and local,
        idempotency_key=idempotency_key,
        local=local,
        dry_run=dry_run,
        deploy=deploy,
        resume=resume,
        log=stderr_line,
        settings=cfg,
        options=api.SubmitOptions(
            console=None if output is OutputFormat.json else err_console(),
            quota_check=quota_check,
            max_cost=max_cost,
        ),
    )
    if isinstance(job, api.DryRun):  # (cli/jobs.py shows a custom job's the same way)
        if output is OutputFormat.json:
            return emit_json(job.to_dict())
        from vertex_trainer.present.plan import dry_run_text

        print(dry_run_text(job.plan))
        return None
    if local:
        _show(job, output)
        if not job.succeeded:
            raise JobFailed(job.failure_message())
        return
    if output is OutputFormat.text:
        verb = "adopted" if job.adopted else "created"
        tune = job_spec.tune
        print(
            f"{verb:8} {job.name}\nstate    {short_state(job.state)}\nconsole  {job.console_url}\n"
            f"trials   {tune.max_trials} at most, {tune.parallel_trials} at a time "
            f"({tune.goal} {tune.metric})"
        )
        if job.adopted:
            stderr_line(
                f"a tuning job with idempotency key {job.idempotency_key} already existed: "
                "adopted, not re-created"
            )
    if wait:
        _follow(job, output, cancel_on_interrupt)
    elif output is OutputFormat.json:
        emit_json(job.to_dict())


# -- showing -------------------------------------------------------------------------------------


def _follow(job, output: OutputFormat, cancel_on_interrupt: bool, describe: bool = False) -> None:
    """--wait: each state change and each trial as it ends (stderr), then the table (stdout)."""
    import time

    console = err_console()
    metric = job.metric_id or "metric"

    def on_state(j) -> None:
        console.print(f"{time.strftime('%H:%M:%S')}  {short_state(j.state)}", markup=False, soft_wrap=True)

    def on_trial(t) -> None:
        value = f"{metric}={t.metric:.4f}" if t.metric is not None else f"no {metric}"
        console.print(
            f"{time.strftime('%H:%M:%S')}  trial {t.id} {t.state}: {value}  "
            + _params(t.parameters)
            + (f"  ({t.error})" if t.error else ""),
            markup=False,
            soft_wrap=True,
        )

    try:
        job.wait(on_state=on_state, on_trial=on_trial, check=False)
    except KeyboardInterrupt:
        stop_waiting(
            job,
            output,
            cancel_on_interrupt,
            describe=describe,
            follow=f"vertex-trainer trials {job.name} --wait",
            cancel=f"gcloud ai hp-tuning-jobs cancel {job.id} --project {job.client.project} "
            f"--region {job.client.region}",
        )
    _show(job, output, describe=describe)
    if not job.succeeded:
        raise JobFailed(job.failure_message())


def _show(job, output: OutputFormat, describe: bool = False) -> None:
    """The JSON object, or the table of trials with the best one marked, and the state."""
    if output is OutputFormat.json:
        return emit_json(job.describe() if describe else job.to_dict())
    d = job.to_dict()
    metric = getattr(job, "metric_id", "") or "metric"
    if describe:
        print(f"name     {job.name}\nstate    {short_state(job.state)}")
    elif d.get("output_dir"):
        print(f"local    {d['name']}\nstate    {short_state(d['state'] or '')}\noutput   {d['output_dir']}")
    print(trials_table(job.trials(), metric, d["best_trial"]))


def trials_table(found: list, metric: str, best: dict | None) -> str:
    """TRIAL STATE METRIC PARAM...; the best trial starred, and a line naming it."""
    if not found:
        return "no trials yet"
    names = list(dict.fromkeys(k for t in found for k in t.parameters))
    rows = [["TRIAL", "STATE", metric.upper(), *[n.upper() for n in names]]]
    best_id = best["id"] if best else None
    for t in found:
        rows.append(
            [
                t.id + (" *" if t.id == best_id else ""),
                t.state,
                "-" if t.metric is None else f"{t.metric:.4f}",
                *[_value(t.parameters.get(n, "-")) for n in names],
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if best:
        lines.append(
            f"best     trial {best['id']}: {metric}={best['metric']:.4f}  " + _params(best["parameters"])
        )
    else:
        lines.append("best     none yet (no trial has reported a metric)")
    return "\n".join(lines)


def _value(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _params(parameters: dict) -> str:
    return " ".join(f"{k}={_value(v)}" for k, v in parameters.items())


def register(app: typer.Typer) -> None:
    app.command()(trials)
