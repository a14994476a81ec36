"""Jobs by name in the Python API (vertex_trainer.api re-exports them): fetch a job, cancel it,
list a project's jobs, read a job's log."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from vertex_trainer.api.core import settings_from_env
from vertex_trainer.api.handles import Job
from vertex_trainer.api.inputs import check_region
from vertex_trainer.contract import SPEC_LABEL
from vertex_trainer.log import Log
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import JobsClient

if TYPE_CHECKING:  # pragma: no cover
    from datetime import datetime

    from vertex_trainer.vertex.hptuning import TuningJob
    from vertex_trainer.vertex.utilization import Utilization

__all__ = [
    "cancel",
    "check_replica",
    "find_local_run",
    "job_replicas",
    "list_jobs",
    "logs",
    "status",
    "tuning_job",
    "utilization",
]


def status(
    job: str,
    *,
    project: str | None = None,
    region: str | None = None,
    client: JobsClient | None = None,
    settings: Settings | None = None,
) -> Job:
    """A CustomJob, freshly fetched.

    Args:
        job: a resource name (projects/P/locations/R/customJobs/ID), or an id with project
            and region.
        project: the project of an id (default: the settings').
        region: the region of an id (default: the settings').
        client: the JobsClient to read with (default: a new one).
        settings: the process settings (default: read from the environment).

    Returns:
        the Job (state, error, console_url; refresh, wait, cancel).
    """
    return Job.get(job, project=project, region=region, client=client, settings=settings)


def utilization(
    job: str,
    *,
    project: str | None = None,
    region: str | None = None,
    settings: Settings | None = None,
    now: datetime | None = None,
) -> Utilization:
    """A CustomJob's accelerator, accelerator-memory and CPU utilization from Cloud Monitoring,
    per replica pool, and what it means (`status JOB --utilization`; vertex/utilization.py).

    Args:
        job: a resource name (projects/P/locations/R/customJobs/ID), or an id with project
            and region; a job that does not exist is exit 2.
        project: the project of an id (default: the settings').
        region: the region of an id (default: the settings').
        settings: the process settings (default: read from the environment).
        now: the end of the interval read while the job runs (default: the clock).

    Returns:
        the Utilization: each pool's mean and peak figures, a verdict per pool, notes (empty
        pools: no series yet).
    """
    from vertex_trainer.vertex.utilization import MonitoringClient, read

    cfg = settings or settings_from_env()
    found = status(job, project=project, region=region, settings=cfg)
    owner = found.name.split("/")[1]
    return read(found.data, MonitoringClient(owner, settings=cfg), now=now)


def tuning_job(
    job: str, *, project: str | None = None, region: str | None = None, settings: Settings | None = None
) -> TuningJob:
    """A hyperparameter tuning job, freshly fetched (docs/contract.md section 10).

    Args:
        job: a resource name (projects/P/locations/R/hyperparameterTuningJobs/ID), or an id
            with project and region.
        project: the project of an id (default: the settings').
        region: the region of an id (default: the settings').
        settings: the process settings (default: read from the environment).

    Returns:
        the TuningJob: ``.trials()``, ``.best_trial()``, ``.wait()``.
    """
    from vertex_trainer.vertex.hptuning import TuningJob

    return TuningJob.get(job, project=project, region=region, settings=settings or settings_from_env())


def cancel(
    job: str,
    *,
    project: str | None = None,
    region: str | None = None,
    client: JobsClient | None = None,
    settings: Settings | None = None,
) -> Job:
    """Request a job's cancellation (nothing is sent for a job that already ended).

    Args:
        job: a resource name, or an id with project and region.
        project: the project of an id (default: the settings').
        region: the region of an id (default: the settings').
        client: the JobsClient to use (default: a new one).
        settings: the process settings (default: read from the environment).

    Returns:
        the Job, refreshed after the request.
    """
    return status(job, project=project, region=region, client=client, settings=settings).cancel()


def list_jobs(
    project: str,
    region: str,
    *,
    labels: Mapping[str, str] | None = None,
    all_jobs: bool = False,
    limit: int | None = 50,
    client: JobsClient | None = None,
    settings: Settings | None = None,
) -> list[Job]:
    """The CustomJobs of a project and region, newest first.

    Args:
        project: the Google Cloud project.
        region: the Vertex AI region.
        labels: only jobs carrying every one of these labels.
        all_jobs: include jobs not created by vertex-trainer (default: only those carrying the
            spec label).
        limit: at most this many (None: every one).
        client: the JobsClient to list with (default: a new one).
        settings: the process settings (default: read from the environment).

    Returns:
        a list of Job.

    Raises:
        UserError: `region` is not a Vertex AI training region (nothing is sent).
    """
    check_region(region)
    terms = [] if all_jobs else [f"labels.{SPEC_LABEL}:*"]
    terms += [f'labels.{k}="{v}"' for k, v in (labels or {}).items()]
    client = client or JobsClient(project, region, settings=settings or settings_from_env())
    found = client.list(" AND ".join(terms) or None, limit=limit)
    return [Job(data, client) for data in found]


def find_local_run(reference: str) -> str | None:
    """The record of a local run (``submit --local``), which ``logs`` reads instead of Cloud Logging.

    Args:
        reference: the run's folder (or its records, or their logs/), its spec's output_dir
            (the newest run there), or the name of a spec whose runs went to the default place
            (the newest such run; docs/contract.md section 15).

    Returns:
        the run's records (<output_dir>/.vertex-trainer/<run>), or None when no local run wrote
        there (the reference may still name a Vertex AI job).
    """
    from vertex_trainer.local import runlog

    return runlog.find_run(reference)


def logs(
    job: str | Job,
    *,
    follow: bool = False,
    lines: bool = True,
    replica: str | None = None,
    since: str | None = None,
    project: str | None = None,
    region: str | None = None,
    settings: Settings | None = None,
    log: Log | None = None,
) -> Iterable[Any]:
    """A job's log in time order, each entry once (docs/contract.md section 7; see
    vertex_trainer.vertex.job_logs).

    A Vertex AI job is looked up first (one GET), as :func:`status` does: a job that does not
    exist is the same UserError (exit 2, its 404 and hint), not an empty log; and ``replica``
    must be one the job has (its workerPoolSpecs' replicas), or one a local run ran.

    Args:
        job: a Vertex AI job (a resource name, an id with ``project`` and ``region``, or a Job),
            or a local run (its output directory, or its name).
        follow: go on until the job has ended, with a JobEvent at each look at its state and,
            unless it succeeded, a Failure last.
        lines: False leaves the log entries out (only the events and the Failure).
        replica: only this replica's lines (e.g. ``workerpool1-0``).
        since: only entries after this (``30m``, or an RFC 3339 time).
        project: the project of a job id (default: the settings').
        region: the region of a job id (default: the settings').
        settings: the process settings (default: read from the environment).
        log: where the client's notes (retries) go.

    Returns:
        an iterable of LogEntry (and, with ``follow``, JobEvent and Failure). Raises UserError
        for a job that does not exist or a replica it does not have, before any log is read.
    """
    from vertex_trainer.local import runlog
    from vertex_trainer.vertex.job_logs import LogsClient, parse_since

    settings = settings or settings_from_env()
    start = parse_since(since)
    if isinstance(job, str) and (record := runlog.find_run(job)):
        if replica is not None:
            check_replica(replica, runlog.replicas(record), f"local run {job}")
        return runlog.entries(
            record, follow=follow, replica=replica, since_ns=start, interval=min(0.5, settings.poll.initial)
        )
    found = job if isinstance(job, Job) else status(job, project=project, region=region, settings=settings)
    if replica is not None:
        check_replica(replica, job_replicas(found.data), f"job {found.name}")
    client = LogsClient(found.client.project, settings=settings, log=log)
    if follow:
        return client.follow(found, lines=lines, replica=replica, since=start)
    return client.entries(found.id, replica=replica, since=start)


def job_replicas(job: Mapping[str, Any]) -> list[str]:
    """The replicas of a CustomJob (REST JSON), as Cloud Logging names them: workerpool<i>-<j>
    for each of pool i's replicaCount (an empty pool, e.g. an unused pool 1 before a Reduction
    Server's pool 2, has none).

    Args:
        job: the CustomJob.

    Returns:
        the replica names, pool by pool.
    """
    pools = (job.get("jobSpec") or {}).get("workerPoolSpecs") or []
    names = []
    for i, pool in enumerate(pools):
        count = int(pool.get("replicaCount") or (1 if pool else 0))
        names += [f"workerpool{i}-{j}" for j in range(count)]
    return names


def check_replica(replica: str, replicas: list[str], what: str) -> None:
    """`--replica NAME` must name one of `replicas` (exit 2 naming them).

    Args:
        replica: the name asked for.
        replicas: the replicas there are.
        what: the job or run, for the message.

    Returns:
        None; raises UserError when `replica` is not among them.
    """
    if replica in replicas or not replicas:
        return
    from vertex_trainer.errors import UserError

    raise UserError(
        f"--replica {replica}: {what} has no such replica; its replicas: {', '.join(replicas)}",
        hint=f"pass one of them, e.g. --replica {replicas[0]}; without --replica, every replica's lines",
    )
