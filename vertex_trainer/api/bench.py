"""The API of `bench` (docs/contract.md section 9): the job on synthetic, then real data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from vertex_trainer import pricing
from vertex_trainer.api.core import _stderr, settings_from_env
from vertex_trainer.api.cost import _reader
from vertex_trainer.api.execute import submit
from vertex_trainer.api.plan import SubmitOptions
from vertex_trainer.contract import short_state
from vertex_trainer.cost import estimate as cost
from vertex_trainer.errors import JobFailed
from vertex_trainer.log import Log
from vertex_trainer.performance import benchmark
from vertex_trainer.performance import sweep as sweeps  # bench's `sweep` is its argument
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import JobsClient, check_key, new_key

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.api.handles import Job
    from vertex_trainer.api.results import LocalJob
    from vertex_trainer.spec import JobSpec

__all__ = ["bench"]


def bench(
    spec: JobSpec,
    *,
    local: bool = False,
    steps: int | None = None,
    idempotency_key: str | None = None,
    log: Log | None = None,
    console: Any = None,
    client: JobsClient | None = None,
    settings: Settings | None = None,
    dry_run: bool = False,
    sweep: str | None = None,
    repeat: int = 1,
) -> dict:
    """Run the spec's job briefly twice, on synthetic then on real data (docs/contract.md
    section 9; vertex_trainer.performance.benchmark); with `sweep`, once per value of one field
    (vertex_trainer.performance.sweep).

    Args:
        spec: the job spec.
        local: run both here; else each is a short CustomJob on the spec's hardware, followed to
            its end.
        steps: training steps of each run (default: benchmark.DEFAULT_STEPS).
        idempotency_key: each job's key is derived from it, so a retried bench adopts the jobs
            it already created; None picks a random key.
        log: where progress lines go (default: stderr).
        console: a rich Console for the local runs' progress (default: stderr).
        client: the JobsClient to create with (default: one for the spec's project and region).
        settings: the process settings (default: read from the environment).
        dry_run: send, build and run nothing; return the requests each of the two jobs would send.
        sweep: "FIELD=V1,V2,..." (steps_per_execution: integers and auto; batch_size: integers,
            the learning rate scaled as the trainer scales it): one brief job per value on the
            spec's data instead of the two, and the value to use (UserError, exit 2, for a bad
            one).
        repeat: with `sweep`, run each value this many times, every other round in reverse, and
            report the median of each value's runs (evens out a load that changes).

    Returns:
        ``{"synthetic_examples_per_sec", "real_examples_per_sec", "input_wait_fraction",
        "bound", "reference", ...}``; with ``dry_run``, ``{"dry_run": true, "runs": {kind: the
        submit dry run of that job}, ...}``. With ``sweep``: ``{"field", "rows": [{"value",
        "examples_per_sec", "input_wait_fraction", "host_overhead_fraction", ...}],
        "recommendation": {"value", "rule", ...}, ...}``; its dry run ``{"dry_run": true,
        "runs": {value: the submit dry run}, ...}``.
    """
    settings = settings or (client.settings if client else settings_from_env())
    log = log or _stderr
    key = check_key(idempotency_key) if idempotency_key is not None else new_key()
    if sweep is not None:
        return _sweep(
            spec,
            sweep,
            local=local,
            steps=steps,
            key=key,
            log=log,
            console=console,
            client=client,
            settings=settings,
            dry_run=dry_run,
            repeat=repeat,
        )
    plan = benchmark.plan(spec, steps=steps or benchmark.DEFAULT_STEPS, local=local)
    for note in plan.notes:
        log(f"bench: {note}")
    if dry_run:
        jobs = [(run.kind, run.spec, benchmark.run_key(key, run.kind)) for run in plan.runs]
        runs = _dry_runs(jobs, local=local, log=log, settings=settings, client=client)
        return {
            "dry_run": True,
            "local": local,
            "spec": spec.name,
            "steps": plan.steps,
            "steps_per_execution": plan.steps_per_execution,
            "notes": list(plan.notes),
            "idempotency_key": None if local else key,
            "runs": runs,
        }
    results = {}
    for run in plan.runs:
        log(f"bench: the {run.kind}-data run ({run.spec.name}, {plan.steps} steps)")
        results[run.kind] = _run(
            run.spec,
            run.kind,
            local=local,
            key=benchmark.run_key(key, run.kind),
            log=log,
            console=console,
            client=client,
            settings=settings,
        )
    report = benchmark.report(spec, plan, results)
    report["cost_per_epoch"] = _cost_per_epoch(spec, report, local=local, settings=settings)
    return {**report, "idempotency_key": None if local else key}


def _run(
    spec: JobSpec,
    kind: str,
    *,
    local: bool,
    key: str,
    log: Log,
    console: Any,
    client: JobsClient | None,
    settings: Settings,
) -> benchmark.Result:
    """One brief job, run here (a LocalJob) or as a CustomJob with idempotency key `key`, to its
    end; JobFailed (exit 1) when a local run fails."""
    if local:
        # a bench run has no tune: block (brief_sets drops it), so a local submit is one LocalJob
        here = cast(
            "LocalJob",
            submit(
                spec,
                local=True,
                wait=True,
                options=SubmitOptions(console=console),
                log=log,
                settings=settings,
            ),
        )
        if not here.succeeded:
            raise JobFailed(here.failure_message())
        return benchmark.Result(kind, here.name, here.state, here.result.output_dir, here.result.metrics)
    # a bench run has no tune: block (brief_sets drops it): a custom or fallback plan's Job
    job = cast(
        "Job",
        submit(
            spec,
            wait=True,
            idempotency_key=key,
            log=log,
            settings=settings,
            options=SubmitOptions(
                client=client, on_state=lambda j: log(f"bench: {j.name}: {short_state(j.state)}")
            ),
        ),
    )
    folder = job.output_dir  # the run's own folder below <output_dir>/bench/<kind>
    return benchmark.Result(kind, job.name, job.state, folder, benchmark.read_metrics(settings, folder))


def _dry_runs(
    jobs: list[tuple[str, JobSpec, str]],
    *,
    local: bool,
    log: Log,
    settings: Settings,
    client: JobsClient | None,
) -> dict:
    """label -> the submit dry run of each (label, spec, idempotency key) job (no key locally)."""
    return {
        label: submit(
            spec,
            local=local,
            dry_run=True,
            log=log,
            settings=settings,
            client=client,
            idempotency_key=None if local else job_key,
        ).to_dict()
        for label, spec, job_key in jobs
    }


def _sweep(
    spec: JobSpec,
    text: str,
    *,
    local: bool,
    steps: int | None,
    key: str,
    log: Log,
    console: Any,
    client: JobsClient | None,
    settings: Settings,
    dry_run: bool,
    repeat: int,
) -> dict:
    """bench(sweep=...): one brief job per value (`repeat` times each), then the table and the
    recommendation."""
    swept = sweeps.plan(
        spec, sweeps.parse(text), steps=steps or benchmark.DEFAULT_STEPS, local=local, repeat=repeat
    )
    for note in swept.notes:
        log(f"bench: {note}")
    head = {
        "local": local,
        "spec": spec.name,
        "field": swept.field,
        "steps": swept.steps,
        "repeat": swept.repeat,
        "order": [swept.runs[i].value for i in swept.order],
        "idempotency_key": None if local else key,
    }
    if dry_run:
        jobs = [(run.value, run.spec, sweeps.run_key(key, i)) for i, run in enumerate(swept.runs)]
        runs = _dry_runs(jobs, local=local, log=log, settings=settings, client=client)
        values = {
            run.value: {
                "steps_per_execution": run.steps_per_execution,
                "batch_size": run.batch_size,
                "peak_learning_rate": run.peak_learning_rate,
            }
            for run in swept.runs
        }
        return {"dry_run": True, **head, "notes": list(swept.notes), "values": values, "runs": runs}
    results = []
    for i, index in enumerate(swept.order):
        run = swept.runs[index]
        of = f", run {i + 1} of {len(swept.order)}" if swept.repeat > 1 else ""
        log(f"bench: {swept.field}={run.value} ({run.spec.name}, {swept.steps} steps{of})")
        results.append(
            _run(
                run.spec,
                run.value,
                local=local,
                key=sweeps.run_key(key, i),
                log=log,
                console=console,
                client=client,
                settings=settings,
            )
        )
    return {**sweeps.report(spec, swept, results), **head}


def _cost_per_epoch(spec: JobSpec, report: dict, *, local: bool, settings: Settings) -> dict | None:
    """What one epoch costs at the measured throughput on the spec's hardware, strategy and
    region (docs/contract.md section 12), so two hardware choices compare in dollars."""
    rate = report.get("real_examples_per_sec") or report.get("synthetic_examples_per_sec")
    found = cost.cost_per_epoch(spec, pricing.load_snapshot(), rate, _reader(settings))
    if found is not None and local:
        found["note"] = "at this machine's throughput: a cloud bench measures the spec's hardware"
    return found
