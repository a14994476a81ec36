"""The report's data of a job on Vertex AI (or the sandbox's stand-in), and the cost of any run.

A CustomJob's outputs are under its base output directory (gs:// on Vertex AI): metrics.json and
trainer_config.json are read through the one storage client (gcp/storage.py); the curves come
from the TensorBoard event files under <base>/logs (tensorboard's reader, which reads gs:// through
TensorFlow's file system). What cannot be read is left out of the page, never a failure: a report
of a job still running, or of a job whose bucket this machine cannot read, shows what there is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertex_trainer import capacity, performance, pricing
from vertex_trainer import cost as costs
from vertex_trainer.contract import ATTEMPT_LABEL, KEY_LABEL, METRICS_FILE
from vertex_trainer.durations import timestamp_seconds
from vertex_trainer.errors import VertexTrainerError
from vertex_trainer.gcp import storage
from vertex_trainer.regions import TRAINING
from vertex_trainer.reporting import bounded_read as report_read
from vertex_trainer.reporting.run_data import TRAINER_CONFIG, Epoch, RunData, event_epochs, read_event_epochs
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import JobsClient
from vertex_trainer.vertex.names import split_name
from vertex_trainer.vertex.utilization import MonitoringClient
from vertex_trainer.vertex.utilization import read as read_utilization

if TYPE_CHECKING:  # (a report of a local run loads no pydantic model)
    from vertex_trainer.spec import JobSpec

__all__ = ["from_custom_job", "from_tuning_job", "run_cost", "utilization"]

Reader = Callable[[str], dict[str, Any] | None]


def _reader(settings: Settings) -> Reader:
    def read(uri: str) -> dict[str, Any] | None:
        if uri.startswith("gs://"):
            try:
                return storage.read_json(settings, uri)
            except Exception:  # an unreadable bucket leaves the figures out, not the report
                return None
        return report_read.read_json(Path(uri), report_read.Notes())  # bounded, a regular file

    return read


def base_output(data: Mapping[str, Any]) -> str | None:
    """The CustomJob's base output directory (jobSpec.baseOutputDirectory.outputUriPrefix)."""
    spec = data.get("jobSpec") or (data.get("trialJobSpec") or {})
    prefix = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    return str(prefix).rstrip("/") if prefix else None


def from_custom_job(
    data: Mapping[str, Any],
    settings: Settings,
    *,
    attempts: Sequence[Mapping[str, Any]] = (),
    max_cost: float | None = None,
    read: Reader | None = None,
    events: Callable[[str], list[Epoch]] = read_event_epochs,
) -> RunData:
    """The report's data of a CustomJob.

    Args:
        data: the CustomJob as the REST API returns it.
        settings: the process settings (the storage endpoint).
        attempts: a fallback plan's attempt records (docs/contract.md section 11).
        max_cost: the spec's scheduling.max_cost, when known.
        read: reads a JSON object at a gs:// or local path (default: the storage client).
        events: reads the epochs of TensorBoard event files under a log directory.
    Returns:
        the RunData.
    """
    reader = read or _reader(settings)
    notes = report_read.Notes()
    base = base_output(data)
    metrics = (reader(f"{base}/{METRICS_FILE}") if base else None) or {}
    metrics = report_read.clean_figures(metrics, f"{base}/{METRICS_FILE}", notes)
    config = (reader(f"{base}/{TRAINER_CONFIG}") if base else None) or {}
    config = report_read.clean_config(config, f"{base}/{TRAINER_CONFIG}", notes)
    # The bundled trainer writes trainer_config.json first and TensorBoard's files under <base>/logs;
    # a job without it (your own code, a stand-in) has no such files to look for (no TensorFlow).
    epochs, note = event_epochs(f"{base}/logs", events) if base and config else ([], None)
    if note:
        notes.add(note)
    book = _book()
    return RunData(
        source=str(data.get("name") or ""),
        name=str(data.get("displayName") or data.get("name") or "job"),
        kind="fallback" if attempts else "run",
        state=data.get("state"),
        metrics=metrics,
        config=config,
        epochs=tuple(epochs),
        epochs_from="tensorboard",
        notes=notes.all(),
        custom_job=dict(data),
        elapsed_s=_elapsed(data),
        attempts=tuple(dict(a) for a in attempts),
        cost=_cost_so_far(data, book),
        max_cost=max_cost,
    )


def utilization(data: Mapping[str, Any], settings: Settings) -> tuple[dict[str, Any] | None, str | None]:
    """A CustomJob's utilization from Cloud Monitoring (vertex/utilization.py) for the report, as
    (its object, None) or (None, the note saying why not): no series yet, a refusal, an
    unreachable service, or a stand-in Vertex AI without a Monitoring stand-in (never Google's)."""
    if settings.offline and not settings.monitoring_endpoint:
        return None, None
    project = str(data.get("name") or "").split("/")[1:2]
    if not project:
        return None, None
    try:
        use = read_utilization(dict(data), MonitoringClient(project[0], settings=settings))
    except VertexTrainerError as exc:
        return None, f"utilization not read from Cloud Monitoring: {exc.message}"
    if use.empty:
        return None, "; ".join(use.notes) or None
    return use.to_dict(), None


def from_tuning_job(
    data: Mapping[str, Any],
    trials: Sequence[Mapping[str, Any]],
    *,
    goal: str,
    metric_id: str,
    best: RunData | None = None,
) -> RunData:
    """The report's data of a hyperparameter tuning job.

    Args:
        data: the HyperparameterTuningJob as the REST API returns it.
        trials: its trials (docs/contract.md section 10 objects).
        goal: MAXIMIZE or MINIMIZE.
        metric_id: the study's metric.
        best: the best trial's own run (its curves and figures), when it could be read.
    Returns:
        the RunData.
    """
    notes = report_read.Notes()
    out = RunData(
        source=str(data.get("name") or ""),
        name=str(data.get("displayName") or data.get("name") or "tuning job"),
        kind="tuning",
        state=data.get("state"),
        custom_job=dict(data),
        elapsed_s=_elapsed(data),
        trials=tuple(report_read.clean_trials([dict(t) for t in trials], "the trials", notes)),
        notes=notes.all(),
        goal=goal,
        metric_id=metric_id,
    )
    if best is not None:
        out = out.with_(
            metrics=best.metrics,
            config=best.config,
            epochs=best.epochs,
            points=best.points,
            verdict=best.verdict,
            notes=(*out.notes, *best.notes),
            epochs_from=best.epochs_from,
        )
    return out


def _cost_so_far(data: Mapping[str, Any], book: pricing.PriceBook) -> dict[str, Any] | None:
    """cost.job_cost of an ended job; of a running one, its time so far (now as its end)."""
    if data.get("startTime") and not data.get("endTime"):
        now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
        cost = costs.job_cost({**data, "endTime": now}, book)
        return None if cost is None else {**cost, "what": "so far: the job is still running"}
    return costs.job_cost(dict(data), book)


def _elapsed(data: Mapping[str, Any]) -> float | None:
    start, end = data.get("startTime"), data.get("endTime")
    if not start or not end:
        return None
    return round(timestamp_seconds(str(end)) - timestamp_seconds(str(start)), 3)


def _book() -> pricing.PriceBook:
    return pricing.load_snapshot()


def run_cost(run: RunData) -> RunData:
    """A local run's cost: what its time (elapsed_s) on its CustomJob's machines would cost on
    Vertex AI at list price in its spec's region (as the run recorded it: run.region). Unchanged
    when the run has no recorded CustomJob or time (RunData's figures are checked: report_read)."""
    region = run.region
    if not run.custom_job or not run.elapsed_s or "jobSpec" not in run.custom_job:
        return run
    end = datetime.now(timezone.utc)
    start = end - timedelta(seconds=float(run.elapsed_s))
    data = {
        **run.custom_job,
        "name": f"projects/-/locations/{region or 'us-central1'}/customJobs/local",
        "startTime": start.isoformat().replace("+00:00", "Z"),
        "endTime": end.isoformat().replace("+00:00", "Z"),
    }
    cost = costs.job_cost(data, _book())
    if cost is not None:
        cost = {**cost, "what": f"this run's time on Vertex AI in {region or 'us-central1'}"}
    return run.with_(cost=cost)


def reference_of(spec: JobSpec | None) -> dict[str, Any] | None:
    """The published throughput for the spec's model, accelerator and precision, for all its
    devices (performance/benchmark.py `reference_for`, per accelerator, x spec.total_devices), or
    None when there is none (only ResNet-50 at 224 px on some GPUs has one)."""
    ref = performance.reference_for(spec) if spec is not None else None
    if spec is None or ref is None:
        return None
    devices = int(spec.total_devices)
    return {
        "examples_per_sec": ref.examples_per_sec * devices,
        "setup": f"{ref.examples_per_sec:,.0f} per accelerator x {devices}: {ref.setup}",
        "source": ref.source,
    }


def attempts_of(data: Mapping[str, Any], settings: Settings) -> list[dict[str, Any]]:
    """A fallback job's attempts (docs/contract.md section 11 records), found by its idempotency
    key in its region and in every region that offers its accelerator (`regions.TRAINING`), as
    the fallback itself finds an earlier run's (capacity/fallback.py `earlier_jobs`). An attempt
    whose create was refused left no job, so it is not found. [] for a job of no fallback plan,
    or when the jobs cannot be listed."""
    labels = data.get("labels") or {}
    if ATTEMPT_LABEL not in labels or KEY_LABEL not in labels:
        return []
    try:
        project, region = split_name(str(data.get("name") or ""), "customJobs")[:2]
        pools = (data.get("jobSpec") or {}).get("workerPoolSpecs") or [{}]
        accelerator = ((pools[0] or {}).get("machineSpec") or {}).get("acceleratorType")
        regions = tuple(dict.fromkeys([region, *TRAINING.get(str(accelerator), ())]))
        clients = capacity.region_clients(JobsClient(project, region, settings=settings))
        found = capacity.earlier_jobs(clients, regions, str(labels[KEY_LABEL]))
    except Exception:  # a report shows what it can read
        return []
    return [capacity.record_of(found[n], None, n).to_dict() for n in sorted(found)]
