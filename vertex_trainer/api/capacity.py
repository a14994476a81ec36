"""Capacity in the Python API (docs/contract.md section 11): the plan, persistent resources, a
shell on a replica. The CLI's `resources` and `shell` commands call these.

    import vertex_trainer as vt
    spec = vt.load_spec("job_specs/h100.yaml")
    vt.plan(spec)                            # the attempts: region, strategy, hardware, reservation
    vt.create_resource(spec, "team-h100")    # a persistent resource from the spec's hardware
    vt.web_access(job, replica="workerpool0-0")   # waits for RUNNING, returns the shell's URI
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vertex_trainer.api.core import settings_from_env
from vertex_trainer.contract import Artifact
from vertex_trainer.errors import JobFailed, UserError
from vertex_trainer.log import Log
from vertex_trainer.regions import region_of
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.resources import ResourcesClient, check_id, resource_body

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.spec import JobSpec
    from vertex_trainer.spec.attempts import PlannedAttempt
    from vertex_trainer.vertex.custom_jobs import Job


def _settings(settings: Settings | None) -> Settings:
    return settings or settings_from_env()


def plan(spec: JobSpec) -> tuple[PlannedAttempt, ...]:
    """The attempts of the spec's capacity plan, in order (no network).

    Args:
        spec: the JobSpec.

    Returns:
        PlannedAttempt records (n, region, strategy, hardware, reservation).
    """
    from vertex_trainer.spec.attempts import attempts  # the spec's models: `resources list` loads none

    return attempts(spec)


def resource_request(spec: JobSpec) -> dict:
    """The PersistentResource body `create_resource` sends for `spec` (no network).

    Args:
        spec: the JobSpec whose hardware, boot disk and replicas the resource holds.

    Returns:
        the REST body.
    """
    from vertex_trainer import render  # the spec's models: `resources list` and `shell` load none

    return resource_body(spec, render.worker_pools(spec, Artifact("(the machines only)")))


def create_resource(
    spec: JobSpec,
    resource_id: str | None = None,
    *,
    dry_run: bool = False,
    timeout: float | None = None,
    settings: Settings | None = None,
    log: Log | None = None,
) -> dict:
    """Create a persistent resource from the spec's hardware, at most once per id, and follow
    the operation until it is RUNNING.

    Args:
        spec: the JobSpec (project, region, hardware, boot disk, replicas).
        resource_id: its id (default: spec.persistent_resource, else the spec's name).
        dry_run: return the request without sending it.
        timeout: seconds to wait for the operation (None: until it ends).
        settings: endpoints and policies (default: from the environment).
        log: where the client's notes (retries) go.

    Returns:
        {"name", "state", "adopted", "resource", "hourly"} ("hourly": the list price of its
        machines per hour, billed while it exists; None when unknown) (dry run: {"dry_run",
        "url", "params", "body"})."""
    from vertex_trainer.spec import cloud_problems  # the spec's models: `resources list` loads none

    if not spec.project or not spec.region:
        cloud_problems(spec)
    resource_id = check_id(resource_id or (spec.persistent_resource or spec.name).rsplit("/", 1)[-1])
    client = ResourcesClient(spec.project, spec.region, settings=_settings(settings), log=log)
    body = resource_request(spec)
    if dry_run:
        return {
            "dry_run": True,
            "method": "POST",
            "url": client.url(f"{client.parent}/persistentResources"),
            "params": {"persistentResourceId": resource_id},
            "body": body,
        }
    resource, adopted = client.create(body, resource_id, timeout=timeout)
    return {
        "name": resource.name,
        "state": resource.state,
        "adopted": adopted,
        "resource": dict(resource.data),
        "hourly": resource_hourly(resource.data),  # what it bills while it exists, used or not
    }


def resource_hourly(resource: Mapping[str, Any]) -> float | None:
    """The hourly list price (USD, the shipped snapshot's on-demand price in its region) of the
    machines a persistent resource holds now, every pool's replicas: what it bills while it exists,
    used by a job or not.

    Args:
        resource: a PersistentResource (REST JSON, as list_resources returns it).

    Returns:
        USD per hour, or None when the book lacks a pool's price (or the name its region).
    """
    from vertex_trainer import pricing
    from vertex_trainer.api.cost import prices
    from vertex_trainer.regions import region_or_none
    from vertex_trainer.vertex.resources import ResourcePool

    region = region_or_none(str(resource.get("name") or ""))
    pools = [ResourcePool.of(p) for p in resource.get("resourcePools") or []]
    if region is None or not pools:
        return None
    book = prices()
    total = pricing.Price(0.0)
    for pool in pools:
        one = pricing.machine_price(
            book,
            machine_type=pool.machine_type,
            accelerator_type=pool.accelerator_type or None,
            accelerator_count=pool.accelerator_count,
            tpu_topology=pool.tpu_topology or None,
            region=region,
            strategy="standard",
        )
        total = total.plus(one.times(pool.replica_count))
    return total.hourly


def list_resources(project: str, region: str, *, settings: Settings | None = None) -> list[dict]:
    """The persistent resources of project/region, newest first (REST JSON).

    Args:
        project: the Google Cloud project.
        region: the Vertex AI region.
        settings: endpoints and policies (default: from the environment).

    Returns:
        the resources, as REST JSON dicts.
    """
    return ResourcesClient(project, region, settings=_settings(settings)).list()


def delete_resource(
    resource: str,
    *,
    project: str | None = None,
    region: str | None = None,
    timeout: float | None = None,
    settings: Settings | None = None,
) -> bool:
    """Delete a persistent resource (an id with project and region, or its full name) and follow
    the operation.

    Args:
        resource: the id or the full name.
        project: the project of an id.
        region: the region of an id.
        timeout: seconds to wait for the operation (None: until it ends).
        settings: endpoints and policies (default: from the environment).

    Returns:
        True when it was deleted, False when there was no such resource.
    """
    if resource.startswith("projects/"):
        try:
            project, region = resource.split("/")[1], region_of(resource)
        except ValueError as exc:
            raise UserError(
                str(exc), hint="projects/P/locations/R/persistentResources/ID, or the id"
            ) from None
    return ResourcesClient(project, region, settings=_settings(settings)).delete(resource, timeout=timeout)


def web_access(
    job: str | Job,
    replica: str = "workerpool0-0",
    *,
    project: str | None = None,
    region: str | None = None,
    timeout: float | None = None,
    settings: Settings | None = None,
) -> str:
    """Wait until the job is RUNNING and return the URI of `replica`'s interactive shell.

    Args:
        job: a Job, its resource name, or an id with project and region.
        replica: the node, e.g. workerpool0-0 (the chief) or workerpool1-0.
        project: the project of a job id.
        region: the region of a job id.
        timeout: seconds to wait for RUNNING (None: until the job ends).
        settings: endpoints and policies.

    Returns:
        the URI.

    Raises: UserError (exit 2) when the job has no web access, or no such replica; JobFailed
    (exit 1) when it ended before it ran."""
    from vertex_trainer.api.jobs import status  # the job handles and their report: `resources` needs none

    found = (
        job
        if not isinstance(job, str)
        else status(job, project=project, region=region, settings=_settings(settings))
    )
    if not ((found.data.get("jobSpec") or {}).get("enableWebAccess")):
        raise UserError(
            f"{found.name} was created without web access: no shell to open",
            hint="set enable_web_access: true in the spec and submit it again",
        )
    deadline = None if timeout is None else time.monotonic() + timeout
    intervals = found.client.settings.poll.intervals()
    while found.state != "JOB_STATE_RUNNING" or not found.web_access_uris:
        if found.done:
            raise JobFailed(
                f"{found.name} ended {found.state.removeprefix('JOB_STATE_')} before a shell could be opened"
            )
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(
                f"{found.name} is not RUNNING after {timeout:.0f}s ({found.state.removeprefix('JOB_STATE_')})"
            )
        time.sleep(next(intervals))
        found.refresh()
    uris = found.web_access_uris
    if replica not in uris:
        raise UserError(
            f"{found.name} has no replica {replica!r}",
            hint="replicas of this job: " + ", ".join(sorted(uris)),
        )
    return uris[replica]
