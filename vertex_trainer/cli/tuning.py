"""trials, and `submit` of a spec with `tune:` (docs/contract.md section 10): hyperparameter tuning jobs.

`submit` shows here what it created when the spec has a tune: block (cli/jobs.py); `trials JOB` lists a
tuning job's trials and the best one. Text goes to stdout (the table of trials), progress to
stderr; `--output json` prints exactly one JSON object.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import JobPlace, OutputFormat, OutputOpt
from vertex_trainer.contract import short_state
from vertex_trainer.errors import JobFailed
from vertex_trainer.redact import shown_name, terminal_safe

TuningJobArg = Annotated[str, common.resource_argument("a tuning job", "hyperparameterTuningJobs")]


@common.with_option_groups
def trials(
    job: TuningJobArg,
    place: JobPlace,
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
    cfg = common.settings()
    found = api.tuning_job(job, **place.where(cfg), settings=cfg)
    if wait and not found.done:
        return _follow(found, output, cancel_on_interrupt=False, describe=True)
    _show(found, output, describe=True)
    if wait and not found.succeeded:
        raise JobFailed(found.failure_message())


def show_submitted(
    job: Any, tune: Any, output: OutputFormat, *, local: bool, wait: bool, cancel: bool
) -> None:
    """The end of `vertex-trainer submit` of a spec with tune: (cli/jobs.py; a dry run is shown
    there): the job created, then the trials as they end (--wait) and the table of trials; a run
    here, its table. JobFailed unless it SUCCEEDED."""
    if local:
        _show(job, output)
        if not job.succeeded:
            raise JobFailed(job.failure_message())
        return
    if output is OutputFormat.text:
        verb = "adopted" if job.adopted else "created"
        print(
            f"{verb:8} {job.name}\nstate    {short_state(job.state)}\nconsole  {job.console_url}\n"
            f"trials   {tune.max_trials} at most, {tune.parallel_trials} at a time "
            f"({tune.goal} {tune.metric})"
        )
        if job.adopted:
            common.stderr_line(
                f"a tuning job with idempotency key {job.idempotency_key} already existed: "
                "adopted, not re-created"
            )
    if wait:
        _follow(job, output, cancel)
    elif output is OutputFormat.json:
        common.emit_json(job.to_dict())


# -- showing -------------------------------------------------------------------------------------


def _follow(job, output: OutputFormat, cancel_on_interrupt: bool, describe: bool = False) -> None:
    """--wait: each state change and each trial as it ends (stderr), then the table (stdout)."""
    console = common.err_console()
    metric = shown_name(job.metric_id or "metric")

    def on_state(j) -> None:
        console.print(f"{time.strftime('%H:%M:%S')}  {short_state(j.state)}", markup=False, soft_wrap=True)

    def on_trial(t) -> None:
        value = f"{metric}={t.metric:.4f}" if t.metric is not None else f"no {metric}"
        console.print(
            f"{time.strftime('%H:%M:%S')}  trial {shown_name(t.id)} {shown_name(t.state)}: {value}  "
            + _params(t.parameters)
            + (f"  ({terminal_safe(t.error)})" if t.error else ""),
            markup=False,
            soft_wrap=True,
        )

    follow = f"vertex-trainer trials {job.name} --wait"
    cancel = (
        f"gcloud ai hp-tuning-jobs cancel {job.id} --project {job.client.project} "
        f"--region {job.client.region}"
    )
    with common.stop_on_interrupt(
        job, output, cancel_on_interrupt, follow=follow, cancel=cancel, describe=describe
    ):
        job.wait(on_state=on_state, on_trial=on_trial, check=False)
    _show(job, output, describe=describe)
    if not job.succeeded:
        raise JobFailed(job.failure_message())


def _show(job, output: OutputFormat, describe: bool = False) -> None:
    """The JSON object, or the table of trials with the best one marked, and the state."""
    if output is OutputFormat.json:
        return common.emit_json(job.describe() if describe else job.to_dict())
    d = job.to_dict()
    metric = shown_name(getattr(job, "metric_id", "") or "metric")
    if describe:
        print(f"name     {job.name}\nstate    {short_state(job.state)}")
    elif d.get("output_dir"):
        print(f"local    {d['name']}\nstate    {short_state(d['state'] or '')}\noutput   {d['output_dir']}")
    print(trials_table(job.trials(), metric, d["best_trial"]))


def trials_table(found: list, metric: str, best: dict | None) -> str:
    """TRIAL STATE METRIC PARAM...; the best trial starred, and a line naming it. The names and
    values are the tuning job's, anyone's in the project (any UTF-8): shown escaped, one line a
    trial (redact.shown_name)."""
    if not found:
        return "no trials yet"
    names = list(dict.fromkeys(k for t in found for k in t.parameters))
    rows = [["TRIAL", "STATE", metric.upper(), *[shown_name(n.upper()) for n in names]]]
    best_id = best["id"] if best else None
    for t in found:
        rows.append(
            [
                shown_name(t.id) + (" *" if t.id == best_id else ""),
                shown_name(t.state),
                "-" if t.metric is None else f"{t.metric:.4f}",
                *[_value(t.parameters.get(n, "-")) for n in names],
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if best:
        lines.append(
            f"best     trial {shown_name(best['id'])}: {metric}={best['metric']:.4f}  "
            + _params(best["parameters"])
        )
    else:
        lines.append("best     none yet (no trial has reported a metric)")
    return "\n".join(lines)


def _value(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else shown_name(str(value))


def _params(parameters: dict) -> str:
    return " ".join(f"{shown_name(k)}={_value(v)}" for k, v in parameters.items())


def register(app: typer.Typer) -> None:
    app.command()(trials)
