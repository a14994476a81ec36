"""Vertex AI PipelineJobs over the one HTTP layer: create (idempotent), get, list, cancel, and
`PipelineRun` to follow one (docs/contract.md section 6).

Idempotency is the service's own: pipelineJobs.create takes a client-chosen `pipelineJobId` and
answers ALREADY_EXISTS for a reused one. The id is derived from the idempotency key, so a retried
submit (or a redelivered storage event) finds the run instead of starting a second one; a create
whose answer was lost is simply sent again. The run also carries the key label, and an existing
run with that id but another key is refused rather than adopted.
"""

from __future__ import annotations

import builtins
import hashlib
import re
from collections.abc import Callable
from typing import Any, ClassVar

from vertex_trainer.contract import KEY_LABEL, PIPELINE_STATES
from vertex_trainer.errors import UserError
from vertex_trainer.gcp.http import Budget, Transient, decode
from vertex_trainer.vertex.service import CollectionClient
from vertex_trainer.vertex.stateful import StatefulResource

_ID = re.compile(r"^[a-z][a-z0-9-]{0,126}[a-z0-9]$")
_RETRY_HINT = (
    "the Vertex AI API is unreachable or overloaded; run the same command again later "
    "(with the same --idempotency-key, no second pipeline is started)"
)


def pipeline_job_id(key: str) -> str:
    """The pipelineJobId for an idempotency key: the key itself when it is a valid id, else a
    readable form of it plus a hash of the exact key (so distinct keys never share an id)."""
    if _ID.match(key):
        return key
    slug = re.sub(r"[^a-z0-9-]+", "-", key.lower()).strip("-")
    if not slug[:1].isalpha():
        slug = f"vt-{slug}".rstrip("-")
    return f"{slug[:100]}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


class PipelinesClient(CollectionClient):
    """PipelineService over REST for one project and region (get, cancel and list come from
    `CollectionClient`)."""

    collection = "pipelineJobs"
    ops: ClassVar[dict[str, str]] = {
        "get": "get pipeline",
        "cancel": "cancel pipeline",
        "list": "list pipelines",
        "create": "create pipeline",
    }
    retry_hint = _RETRY_HINT

    def create_once(self, body: dict[str, Any], job_id: str) -> dict[str, Any] | None:
        """POST one PipelineJob with its id; None when the id exists already. Raises Transient
        when the outcome is unknown (sending it again is safe: the id makes it atomic)."""
        response = self.api.send(
            "create pipeline",
            "POST",
            f"v1/{self.parent}/pipelineJobs",
            params={"pipelineJobId": job_id},
            json=body,
            allow=(409,),
        )
        return None if response.status_code == 409 else decode(response)

    def find(self, job_id: str, budget: Budget | None = None) -> dict[str, Any] | None:
        response = self.api.call(
            "get pipeline", "GET", f"v1/{self.name_of(job_id)}", allow=(404,), budget=budget
        )
        return None if response.status_code == 404 else decode(response)

    def list(
        self, filter: str | None = None, *, limit: int | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """PipelineJobs of the parent matching `filter`, newest first (CollectionClient.list)."""
        return super().list(filter, limit=limit, order_by="create_time desc", **kwargs)

    def requests_for(
        self, body: dict[str, Any], job_id: str
    ) -> builtins.list[dict[str, Any]]:  # `list` is the method here
        """What an idempotent create sends, in order (for --dry-run); opens no connection."""
        base = self.api.url(f"v1/{self.parent}/pipelineJobs")
        return [
            {"method": "GET", "url": f"{base}/{job_id}"},
            {"method": "POST", "url": base, "params": {"pipelineJobId": job_id}, "body": body},
        ]


def create_idempotent(
    client: PipelinesClient, body: dict[str, Any] | Callable[[], dict[str, Any]], job_id: str, key: str
) -> tuple[dict[str, Any], bool]:
    """Create the PipelineJob `job_id` at most once. Returns (pipeline job, adopted).

    `body` may be a function: it is called only when no run has the id yet (an adopted run
    needs no image build and no compile)."""
    budget = client.api.budget()
    existing = client.find(job_id, budget)
    if existing is None:
        body = body() if callable(body) else body
        try:
            while True:
                try:
                    created = client.create_once(body, job_id)
                except Transient as exc:  # committed or not: the same id again is safe
                    budget.backoff("create pipeline", str(exc), retry_hint=_RETRY_HINT)
                    continue
                if created is not None:
                    return created, False
                existing = client.api.json(
                    "get pipeline", "GET", f"v1/{client.name_of(job_id)}", budget=budget
                )
                break
        except KeyboardInterrupt:  # the run may exist (and bill): the key finds it, or adopts it
            name = client.name_of(job_id)
            client.log(
                f"interrupted while creating the pipeline run: it may have been created ({name}). "
                f"Submit again with --idempotency-key {key} to adopt it (no second run is created); "
                f"look: vertex-trainer pipeline status {name}"
            )
            raise
    theirs = (existing.get("labels") or {}).get(KEY_LABEL)
    if theirs != key:
        raise UserError(
            f"pipeline run {existing.get('name')} exists and was not started with idempotency key {key!r}",
            hint="use another --idempotency-key",
        )
    return existing, True


class PipelineRun(StatefulResource):
    """A Vertex AI PipelineJob: `name`, `state`, `console_url`, `refresh()`, `wait()`, `cancel()`
    (`StatefulResource`, with the PipelineState family)."""

    client_class = PipelinesClient
    states = PIPELINE_STATES
    kind = "pipeline run"
    id_pattern = r"[a-z0-9][a-z0-9-]*"
    console_page = "pipelines/runs/{id}"
    sdk_class = "PipelineJob"

    @property
    def output_dir(self) -> str | None:
        """The run's pipeline root (runtimeConfig.gcsOutputDirectory: each step's artifacts below
        it), or None without one."""
        root = (self.data.get("runtimeConfig") or {}).get("gcsOutputDirectory")
        return str(root).rstrip("/") if root else None

    def describe(self) -> dict[str, Any]:
        """The status object (StatefulResource.describe) with the idempotency key and adoption."""
        return {**self.to_dict(), **super().describe()}
