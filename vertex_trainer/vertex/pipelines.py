"""Vertex AI PipelineJobs over the one HTTP layer: create (idempotent), get, list, cancel, and
`PipelineRun` to follow one (docs/contract.md section 6).

Idempotency is the service's own: pipelineJobs.create takes a client-chosen `pipelineJobId` and
answers ALREADY_EXISTS for a reused one. The id is derived from the idempotency key, so a retried
submit (or a redelivered storage event) finds the run instead of starting a second one; a create
whose answer was lost is simply sent again. The run also carries the key label, and an existing
run with that id but another key is refused rather than adopted.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any, Callable

from vertex_trainer.contract import KEY_LABEL
from vertex_trainer.errors import JobFailed, UserError
from vertex_trainer.gcp.http import Budget, Log, Transient, decode
from vertex_trainer.settings import PollPolicy, Settings
from vertex_trainer.vertex.models import vertex_api
from vertex_trainer.vertex.waiting import wait_until_done

SUCCEEDED = "PIPELINE_STATE_SUCCEEDED"
TERMINAL = frozenset({SUCCEEDED, "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED"})
_STATES = ("UNSPECIFIED", "QUEUED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING",
           "CANCELLED", "PAUSED")  # aiplatform_v1.PipelineState, by number
_NAME = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/pipelineJobs/(?P<id>[^/:]+)$")
_ID = re.compile(r"^[a-z][a-z0-9-]{0,126}[a-z0-9]$")
_RETRY_HINT = ("the Vertex AI API is unreachable or overloaded; run the same command again later "
               "(with the same --idempotency-key, no second pipeline is started)")


def pipeline_job_id(key: str) -> str:
    """The pipelineJobId for an idempotency key: the key itself when it is a valid id, else a
    readable form of it plus a hash of the exact key (so distinct keys never share an id)."""
    if _ID.match(key):
        return key
    slug = re.sub(r"[^a-z0-9-]+", "-", key.lower()).strip("-")
    if not slug[:1].isalpha():
        slug = f"vt-{slug}".rstrip("-")
    return f"{slug[:100]}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def state_name(value: Any) -> str:
    """A PipelineState name from a name or an enum number."""
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        number = int(value)
        return f"PIPELINE_STATE_{_STATES[number] if number < len(_STATES) else number}"
    return value or "PIPELINE_STATE_UNSPECIFIED"


def short_state(state: str) -> str:
    return state.removeprefix("PIPELINE_STATE_")


def console_url(name: str) -> str:
    m = _NAME.match(name)
    if not m:
        return ""
    return (f"https://console.cloud.google.com/vertex-ai/locations/{m['region']}/pipelines/runs/"
            f"{m['id']}?project={m['project']}")


def pipeline_name(run: str, project: str | None = None, region: str | None = None) -> str:
    """A full PipelineJob name from a name, or an id with project and region."""
    run = run.strip()
    if _NAME.match(run):
        return run
    if re.fullmatch(r"[a-z0-9][a-z0-9-]*", run) and project and region:
        return f"projects/{project}/locations/{region}/pipelineJobs/{run}"
    raise UserError(f"{run!r} is not a pipeline run: pass projects/P/locations/R/pipelineJobs/ID, or "
                    "an ID with --project and --region")


class PipelinesClient:
    """PipelineService over REST for one project and region."""

    def __init__(self, project: str | None, region: str | None, *, settings: Settings | None = None,
                 session: Any = None, log: Log | None = None):
        if not project or not region:
            raise UserError("a pipeline needs a project and a region: set them in the spec, or pass "
                            "--project and --region")
        self.project, self.region = project, region
        self.settings = settings or Settings()
        self.api = vertex_api(project, region, self.settings, log=log, session=session)
        self.api.retry_hint = _RETRY_HINT

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def name_of(self, job_id: str) -> str:
        return f"{self.parent}/pipelineJobs/{job_id}"

    def create_once(self, body: dict, job_id: str) -> dict | None:
        """POST one PipelineJob with its id; None when the id exists already. Raises Transient
        when the outcome is unknown (sending it again is safe: the id makes it atomic)."""
        response = self.api.send("create pipeline", "POST", f"v1/{self.parent}/pipelineJobs",
                                 params={"pipelineJobId": job_id}, json=body, allow=(409,))
        return None if response.status_code == 409 else decode(response)

    def get(self, name: str) -> dict:
        return self.api.json("get pipeline", "GET", f"v1/{name}")

    def find(self, job_id: str, budget: Budget | None = None) -> dict | None:
        response = self.api.call("get pipeline", "GET", f"v1/{self.name_of(job_id)}", allow=(404,),
                                 budget=budget)
        return None if response.status_code == 404 else decode(response)

    def cancel(self, name: str) -> None:
        self.api.json("cancel pipeline", "POST", f"v1/{name}:cancel", json={})

    def list(self, filter: str | None = None, *, limit: int | None = None) -> list[dict]:
        """PipelineJobs of the parent matching `filter`, newest first."""
        found: list[dict] = []
        token = ""
        while True:
            params: dict[str, Any] = {"pageSize": 100, "orderBy": "create_time desc"}
            if filter:
                params["filter"] = filter
            if token:
                params["pageToken"] = token
            page = self.api.json("list pipelines", "GET", f"v1/{self.parent}/pipelineJobs", params=params)
            found.extend(page.get("pipelineJobs", []))
            token = page.get("nextPageToken", "")
            if not token or (limit and len(found) >= limit):
                break
        found.sort(key=lambda j: j.get("createTime", ""), reverse=True)
        return found[:limit] if limit else found

    def requests_for(self, body: dict, job_id: str) -> list[dict]:
        """What an idempotent create sends, in order (for --dry-run); opens no connection."""
        base = self.api.url(f"v1/{self.parent}/pipelineJobs")
        return [{"method": "GET", "url": f"{base}/{job_id}"},
                {"method": "POST", "url": base, "params": {"pipelineJobId": job_id}, "body": body}]


def create_idempotent(client: PipelinesClient, body: "dict | Callable[[], dict]", job_id: str,
                      key: str) -> tuple[dict, bool]:
    """Create the PipelineJob `job_id` at most once. Returns (pipeline job, adopted).

    `body` may be a function: it is called only when no run has the id yet (an adopted run
    needs no image build and no compile)."""
    budget = client.api.budget()
    existing = client.find(job_id, budget)
    if existing is None:
        body = body() if callable(body) else body
        while True:
            try:
                created = client.create_once(body, job_id)
            except Transient as exc:  # committed or not: the same id again is safe
                budget.backoff("create pipeline", str(exc), retry_hint=_RETRY_HINT)
                continue
            if created is not None:
                return created, False
            existing = client.api.json("get pipeline", "GET", f"v1/{client.name_of(job_id)}", budget=budget)
            break
    theirs = (existing.get("labels") or {}).get(KEY_LABEL)
    if theirs != key:
        raise UserError(f"pipeline run {existing.get('name')} exists and was not started with "
                        f"idempotency key {key!r}", hint="use another --idempotency-key")
    return existing, True


class PipelineRun:
    """A Vertex AI PipelineJob: `name`, `state`, `console_url`, `refresh()`, `wait()`, `cancel()`."""

    def __init__(self, data: dict, client: PipelinesClient, *, idempotency_key: str | None = None,
                 adopted: bool = False):
        self.data = data
        self.client = client
        self.idempotency_key = idempotency_key or (data.get("labels") or {}).get(KEY_LABEL)
        self.adopted = adopted

    @classmethod
    def get(cls, run: str, *, project: str | None = None, region: str | None = None,
            settings: Settings | None = None) -> "PipelineRun":
        name = pipeline_name(run, project, region)
        m = _NAME.match(name)
        client = PipelinesClient(m["project"], m["region"], settings=settings)  # type: ignore[index]
        return cls(client.get(name), client)

    @property
    def name(self) -> str:
        return self.data.get("name", "")

    @property
    def id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def state(self) -> str:
        return state_name(self.data.get("state"))

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    @property
    def succeeded(self) -> bool:
        return self.state == SUCCEEDED

    @property
    def error(self) -> str | None:
        return (self.data.get("error") or {}).get("message") or None

    @property
    def console_url(self) -> str:
        return console_url(self.name)

    def refresh(self) -> "PipelineRun":
        self.data = self.client.get(self.name)
        return self

    def cancel(self) -> "PipelineRun":
        if not self.done:
            self.client.cancel(self.name)
        return self.refresh()

    def wait(self, timeout: float | None = None, *, on_state: Callable[["PipelineRun"], None] | None = None,
             poll: PollPolicy | None = None, check: bool = True,
             sleep: Callable[[float], None] = time.sleep) -> "PipelineRun":
        """Poll until the run ends; JobFailed (exit 1) unless it SUCCEEDED (with `check`),
        TimeoutError after `timeout` seconds. `on_state` sees every state change."""
        wait_until_done(self, poll=poll or self.client.settings.poll, timeout=timeout,
                        on_state=on_state, sleep=sleep)
        if check and not self.succeeded:
            raise JobFailed(self.failure_message())
        return self

    def failure_message(self) -> str:
        text = f"pipeline run {self.name} ended {short_state(self.state)}"
        return f"{text}: {self.error}" if self.error else text

    def to_dict(self) -> dict:
        """The docs/contract.md section 6 `pipeline submit --output json` object."""
        return {"name": self.name, "state": self.state, "console_url": self.console_url,
                "idempotency_key": self.idempotency_key, "adopted": self.adopted}

    def describe(self) -> dict:
        d = self.data
        return {**self.to_dict(), "display_name": d.get("displayName"), "create_time": d.get("createTime"),
                "start_time": d.get("startTime"), "end_time": d.get("endTime"), "error": self.error,
                "labels": dict(d.get("labels") or {})}

    def __repr__(self) -> str:
        return f"PipelineRun(id={self.id!r}, state={short_state(self.state)}, console_url={self.console_url!r})"
