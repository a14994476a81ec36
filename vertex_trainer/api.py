"""The Python API, used by the CLI, notebooks and CI: load a spec, submit it, follow the job.

    import vertex_trainer as vt
    spec = vt.load_spec("job_specs/resnet50.yaml", set=["trainer.epochs=1"])
    job = vt.submit(spec)                # -> Job (name, state, console_url, refresh/wait/cancel)
    job.wait()

submit() is the one orchestration: package (when the spec asks for a build) -> render -> create
(idempotent) | run locally | describe the request (dry run). Everything it sends or runs is made
from the same rendered CustomJob dict.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from vertex_trainer.submit import (
    KEY_LABEL, SPEC_LABEL, Job, JobState, VertexClient, check_key, create_idempotent,
    new_key, short_state,
)

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.spec import JobSpec

__all__ = ["load_spec", "submit", "status", "cancel", "list_jobs", "Job", "DryRun", "LocalJob"]


def load_spec(path, set: Iterable[str] = (), vars: Mapping[str, str] | None = None,
              project: str | None = None, region: str | None = None) -> "JobSpec":
    """Load, template, override (``set=["a.b=c"]``) and validate a job spec. Raises UserError."""
    from vertex_trainer import spec as _spec

    return _spec.load_spec(path, sets=tuple(set), vars=dict(vars or {}), project=project,
                           region=region)


@dataclass
class DryRun:
    """What submit would do, without doing it: the exact requests, and the CustomJob body."""

    job: dict
    requests: list[dict]
    image: str | None
    idempotency_key: str
    local: bool = False
    package: dict | None = None  # the build or upload submit would do first (when the spec builds)

    def to_dict(self) -> dict:
        return {"name": None, "state": None, "console_url": None, "image": self.image,
                "idempotency_key": self.idempotency_key, "adopted": False, "dry_run": True,
                "local": self.local, "package": self.package, "requests": self.requests}


@dataclass
class LocalJob(JobState):
    """A job run on this machine by ``submit(spec, local=True)`` (see vertex_trainer.local)."""

    result: Any
    job: dict
    image: str | None
    idempotency_key: str
    adopted: bool = False
    console_url: None = None

    @property
    def name(self) -> str:
        return self.result.name

    @property
    def state(self) -> str:
        return self.result.state

    def failure_message(self) -> str:
        r = self.result
        text = f"local job {r.name} ended {short_state(r.state)}"
        if getattr(r, "failed_replica", None):
            text += f" ({r.failed_replica} exited with {r.exit_code})"
        tail = getattr(r, "log_tail", None)
        if tail:
            text += "\n" + (tail if isinstance(tail, str) else "\n".join(tail))
        return text

    def to_dict(self) -> dict:
        return {"name": self.name, "state": self.state, "console_url": None, "image": self.image,
                "idempotency_key": self.idempotency_key, "adopted": False,
                "output_dir": _str_or_none(self.result.output_dir), "metrics": self.result.metrics}

    def __repr__(self) -> str:
        return f"LocalJob(name={self.name!r}, state={short_state(self.state)}, " \
               f"output_dir={_str_or_none(self.result.output_dir)!r})"


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def submit(spec: "JobSpec", wait: bool = False, idempotency_key: str | None = None, *,
           local: bool = False, dry_run: bool = False, timeout: float | None = None,
           on_state: Callable[[Job], None] | None = None, builder: str | None = None,
           log: Callable[[str], None] | None = None, console: Any = None,
           client: VertexClient | None = None) -> Job | LocalJob | DryRun:
    """Submit a resolved spec as a Vertex AI CustomJob, at most once per idempotency key.

    - ``idempotency_key``: reuse it when retrying (CI: the run id) and no second job is created;
      a random key is used when it is None.
    - ``wait=True`` follows the job to its end (raises JobFailed unless it SUCCEEDED).
    - ``local=True`` runs the same rendered job on this machine instead (vertex_trainer.local).
    - ``dry_run=True`` returns a :class:`DryRun` describing the requests; nothing is sent, built
      or run.
    """
    from vertex_trainer import render

    key = check_key(idempotency_key) if idempotency_key is not None else new_key()
    if not local:
        from vertex_trainer.spec import cloud_problems

        cloud_problems(spec)  # local paths, missing project: exit 2 before anything is built or sent
    elif not spec.runs_bundled_trainer:
        from vertex_trainer.spec import check_trainer_flags

        check_trainer_flags(spec)  # a local run always runs the bundled trainer
    if not (local or dry_run):
        from vertex_trainer.preflight import check_buckets

        client = client or VertexClient(spec.project, spec.region, log=log)
        # Missing buckets stop here, before an image is built or a job created.
        check_buckets(spec, log=log or _stderr, vertex_endpoint=client.endpoint)
    artifact, image, plan = _artifact(spec, dry_run=dry_run, local=local, builder=builder, log=log)
    body = render.custom_job(spec, artifact=artifact, idempotency_key=key)

    if dry_run:
        if local:
            return DryRun(body, [{"local": True, "body": body}], image, key, local=True)
        preview = client or VertexClient(spec.project, spec.region, session=_NoNetwork())
        lookup = {"method": "GET", "url": preview.url(f"{preview.parent}/customJobs"),
                  "params": {"filter": f'labels.{KEY_LABEL}="{key}"'}}
        return DryRun(body, [lookup, preview.create_request(body)], image, key,
                      package=_package_step(plan))

    if local:
        from vertex_trainer.local import run_local

        result = run_local(body, spec, wait=wait, console=console)
        return LocalJob(result, body, image, key)

    client = client or VertexClient(spec.project, spec.region, log=log)
    data, adopted = create_idempotent(client, body, key)
    job = Job(data, client, image=image, idempotency_key=key, adopted=adopted)
    if wait:
        job.wait(timeout=timeout, on_state=on_state)
    return job


def _artifact(spec: "JobSpec", *, dry_run: bool, local: bool, builder: str | None,
              log) -> tuple[Any, str | None, Any]:
    """(render.Artifact or None, image, build plan or None) for the spec.

    A plain image uri needs no packaging; a dry run plans the build once (as a real submit would,
    so a missing staging bucket shows); a local run only needs the tag."""
    if not spec.image.builds:
        return None, spec.image.uri, None
    from vertex_trainer import package

    if local:  # the installed trainer runs; the image only needs a name (no staging, no builder)
        artifact = package.plan_artifact(spec)
        return artifact, artifact.image_uri, None
    result = package.ensure_artifact(spec, builder=builder, dry_run=dry_run, log=log)
    return result.artifact, result.image, result.plan


def _package_step(plan) -> dict | None:
    """What packaging a dry run skipped: the build (or upload) submit does first, if needed."""
    if plan is None:
        return None
    return {"kind": plan.kind, "target": plan.target, "builder": plan.builder,
            "context_hash": plan.context_hash, "files": len(plan.entries), "bytes": plan.size}


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _NoNetwork:
    """A session that refuses to be used: dry runs must not open connections."""

    def request(self, *args, **kwargs):  # pragma: no cover - a bug if reached
        raise RuntimeError("dry run tried to send a request")


# -- jobs by name --------------------------------------------------------------------------------

def status(job: str, *, project: str | None = None, region: str | None = None,
           client: VertexClient | None = None) -> Job:
    """The job `job` (a resource name, or an id with project and region), freshly fetched."""
    return Job.get(job, project=project, region=region, client=client)


def cancel(job: str, *, project: str | None = None, region: str | None = None,
           client: VertexClient | None = None) -> Job:
    """Request cancellation (no-op for a job that already ended); returns the refreshed job."""
    return status(job, project=project, region=region, client=client).cancel()


def list_jobs(project: str, region: str, *, labels: Mapping[str, str] | None = None,
              all_jobs: bool = False, limit: int | None = 50,
              client: VertexClient | None = None) -> list[Job]:
    """Jobs in project/region, newest first: by default only those created by vertex-trainer
    (they carry the spec label); ``labels`` narrows further."""
    terms = [] if all_jobs else [f"labels.{SPEC_LABEL}:*"]
    terms += [f'labels.{k}="{v}"' for k, v in (labels or {}).items()]
    client = client or VertexClient(project, region)
    found = client.list(" AND ".join(terms) or None, limit=limit)
    return [Job(data, client) for data in found]

