"""Vertex AI CustomJobs: create (idempotent), get, list, cancel, and `Job` to follow one.

Transport: the JobService REST wire (`/v1/projects/P/locations/L/customJobs`) through the shared
`gcp.http.ApiClient`. The generated `aiplatform_v1` client costs about 1 s to import and retries
nothing on create; the body we send is the render output, which the tests parse with
`aiplatform_v1.CustomJob`. See docs/submitter.md.

Idempotency (docs/contract.md section 3): every job carries `vertex-trainer-key=<key>`. Before creating,
and after any create whose outcome is unknown (timeout, connection reset, 429/5xx), we list jobs
with that label and adopt the one found instead of creating a second job.

A create refused with 429 RESOURCE_EXHAUSTED naming a custom-training quota metric (the
project's quota for the accelerator, not a rate limit) is final: `Refused` at once, never
retried (capacity fallback, docs/contract.md section 8, moves on to the next strategy).
"""

from __future__ import annotations

from typing import Any, Callable

from vertex_trainer.contract import KEY_LABEL, SPEC_LABEL, JobState, short_state, state_name
from vertex_trainer.errors import JobFailed, UserError
from vertex_trainer.gcp.http import (
    ApiClient, ApiError, Budget, Log, Transient, decode, default_hint, quota_metrics,
)
from vertex_trainer.settings import PollPolicy, Settings
from vertex_trainer.vertex.names import (
    check_key, console_url, job_name, new_key, parse_label, split_name,
)
from vertex_trainer.vertex.waiting import wait_until_done

__all__ = ["JobsClient", "Job", "create_idempotent", "check_key", "console_url", "job_name",
           "new_key", "parse_label", "split_name"]

_PERMISSIONS = {"create": "aiplatform.customJobs.create", "get": "aiplatform.customJobs.get",
                "list": "aiplatform.customJobs.list", "cancel": "aiplatform.customJobs.cancel"}
_RETRY_HINT = ("the Vertex AI API is unreachable or overloaded; run the same command again later "
               "(with the same --idempotency-key, no second job is created)")


class JobsClient:
    """JobService over REST for one project and region (CustomJobs; a subclass names another
    collection of the same service, e.g. hptuning.TuningClient)."""

    collection = "customJobs"

    def __init__(self, project: str | None, region: str | None, *, settings: Settings | None = None,
                 session: Any = None, log: Log | None = None):
        if not project:
            raise UserError("no Google Cloud project: set `project:` in the spec, pass --project, "
                            "or set $GOOGLE_CLOUD_PROJECT")
        if not region:
            raise UserError("no region: set `region:` in the spec or pass --region")
        self.project, self.region = project, region
        self.settings = settings or Settings()
        shared = default_hint("Vertex AI", "aiplatform.googleapis.com", project)
        self.api = ApiClient(self.settings.vertex_url(region), retry=self.settings.retry,
                             log=log, session=session, service="Vertex AI",
                             hints=lambda op, err: shared(op, err) or self._hint(op, err),
                             retry_hint=_RETRY_HINT,
                             user_error=lambda op, err: err.code == 404 and op in ("get", "cancel"),
                             final=lambda op, err: op == "create" and bool(capacity_quota(err)))

    @property
    def log(self) -> Log:
        return self.api.log

    @log.setter
    def log(self, log: Log) -> None:
        self.api.log = log

    @property
    def endpoint(self) -> str:
        return self.api.endpoint

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def url(self, path: str) -> str:
        return self.api.url(f"v1/{path}")

    # -- JobService ----------------------------------------------------------------------------
    def create_once(self, job: dict) -> dict:
        """POST one CustomJob. Raises Transient when the outcome is unknown. Not retried here."""
        return decode(self.api.send("create", "POST", f"v1/{self.parent}/{self.collection}", json=job))

    def get(self, name: str) -> dict:
        return self.api.json("get", "GET", f"v1/{name}")

    def cancel(self, name: str) -> None:
        self.api.json("cancel", "POST", f"v1/{name}:cancel", json={})

    def list(self, filter: str | None = None, *, limit: int | None = None,
             budget: Budget | None = None, page_size: int = 100) -> list[dict]:
        """CustomJobs of the parent matching `filter` (Vertex filter syntax), newest first."""
        jobs: list[dict] = []
        token = ""
        while True:
            params: dict[str, Any] = {"pageSize": page_size}
            if filter:
                params["filter"] = filter
            if token:
                params["pageToken"] = token
            page = self.api.json("list", "GET", f"v1/{self.parent}/{self.collection}", params=params,
                                 budget=budget)
            jobs.extend(page.get(self.collection, []))
            token = page.get("nextPageToken", "")
            if not token or (limit and len(jobs) >= limit):
                break
        jobs.sort(key=lambda j: j.get("createTime", ""), reverse=True)
        return jobs[:limit] if limit else jobs

    def key_filter(self, key: str, also: dict[str, str] | None = None) -> str:
        terms = {KEY_LABEL: key, **(also or {})}
        return " AND ".join(f'labels.{k}="{v}"' for k, v in terms.items())

    def find_by_key(self, key: str, budget: Budget | None = None,
                    also: dict[str, str] | None = None) -> dict | None:
        """The job created with this idempotency key (and the labels `also`), the oldest should
        there be several."""
        found = self.list(self.key_filter(key, also), budget=budget)
        if len(found) > 1:
            self.log(f"warning: {len(found)} jobs carry {KEY_LABEL}={key}; adopting the oldest")
        return min(found, key=lambda j: j.get("createTime", "")) if found else None

    def requests_for(self, job: dict, key: str) -> list[dict]:
        """What an idempotent create sends, in order (for --dry-run); opens no connection."""
        return [{"method": "GET", "url": self.url(f"{self.parent}/{self.collection}"),
                 "params": {"filter": self.key_filter(key)}},
                {"method": "POST", "url": self.url(f"{self.parent}/{self.collection}"), "body": job}]

    # -- errors --------------------------------------------------------------------------------
    def _hint(self, op: str, err: ApiError) -> str | None:
        if err.code == 403:
            permission = f"aiplatform.{self.collection}.{op if op in _PERMISSIONS else '*'}"
            return (f"the caller needs {permission} on project "
                    f"{self.project} (role roles/aiplatform.user); check the account with "
                    "`gcloud auth list`, and that the Vertex AI API is enabled "
                    "(gcloud services enable aiplatform.googleapis.com)")
        if err.code == 404:
            if op in ("get", "cancel"):
                return (f"no such job in project {self.project}, region {self.region}: check the "
                        "job name (`vertex-trainer list`) and --project/--region")
            return (f"project {self.project!r} or region {self.region!r} was not found: check "
                    "the spec's project/region (Vertex AI regions look like us-central1)")
        if err.code == 400:
            return "the service rejected the request; `vertex-trainer render SPEC` shows the body sent"
        metric = capacity_quota(err)
        if metric:
            from vertex_trainer.vertex.quotas import console_url as quota_url

            return (f"the project's quota {metric.split('/')[-1]} in {self.region} is too small for "
                    f"this job: ask for more at {quota_url(self.project, metric)}, try another "
                    "region, or let scheduling.fallback try the next strategy")
        return None


def capacity_quota(err: ApiError) -> str | None:
    """The custom-training quota metric a 429 RESOURCE_EXHAUSTED names (the project's allocation
    quota for an accelerator), or None (a rate limit such as custom_job_requests: retry it)."""
    if err.code != 429 and err.status != "RESOURCE_EXHAUSTED":
        return None
    return next((m for m in quota_metrics(err) if "/custom_model_training_" in m), None)


def create_idempotent(client: JobsClient, job: dict, key: str, *,
                      match: tuple[str, ...] = ()) -> tuple[dict, bool]:
    """Create `job` (which carries the key label) at most once. Returns (job, adopted).

    `match`: more of the body's label keys a job must share to count as this one (the attempt
    label: the attempts of one key are different jobs). A create refused for quota raises
    `Refused` (gcp.http) at once."""
    labels = job.get("labels") or {}
    if labels.get(KEY_LABEL) != key:
        raise ValueError(f"the job body must carry the label {KEY_LABEL}={key}")
    also = {name: labels[name] for name in match}
    budget = client.api.budget()
    existing = client.find_by_key(key, budget, also)
    if existing is not None:
        _warn_if_other_spec(client, existing, job)
        return existing, True
    while True:
        try:
            return client.create_once(job), False
        except Transient as exc:
            # The service may have committed the job before the answer was lost: look first.
            client.log(f"create: {exc}; checking whether the job was created")
            existing = client.find_by_key(key, budget, also)
            if existing is not None:
                return existing, True
            budget.backoff("create", str(exc), retry_hint=_RETRY_HINT)


def _warn_if_other_spec(client: JobsClient, existing: dict, job: dict) -> None:
    theirs = (existing.get("labels") or {}).get(SPEC_LABEL)
    ours = (job.get("labels") or {}).get(SPEC_LABEL)
    if theirs and ours and theirs != ours:
        client.log(f"warning: adopting {existing.get('name')}, created with the same idempotency "
                   f"key from a different spec ({SPEC_LABEL} {theirs} != {ours}); use a new "
                   "--idempotency-key to submit the changed spec")


class Job(JobState):
    """A Vertex AI CustomJob: `name`, `state`, `console_url`, `refresh()`, `wait()`, `cancel()`.

    Returned by `vertex_trainer.submit`; `Job.get(name)` attaches to any job."""

    client_class: type[JobsClient] = JobsClient   # a subclass names its collection's client
    kind = "job"                                   # what error messages call it

    def __init__(self, data: dict, client: JobsClient, *, image: str | None = None,
                 idempotency_key: str | None = None, adopted: bool = False):
        self.data = data
        self.client = client
        self.image = image
        self.idempotency_key = idempotency_key or (data.get("labels") or {}).get(KEY_LABEL)
        self.adopted = adopted
        # With scheduling.fallback: every attempt of the submit, in order (fallback.py).
        self.attempts: list[dict] | None = None

    @classmethod
    def get(cls, job: str, *, project: str | None = None, region: str | None = None,
            settings: Settings | None = None, client: JobsClient | None = None) -> "Job":
        """Fetch a job by resource name, or by id with project and region."""
        collection = cls.client_class.collection
        name = job_name(job, project, region, collection=collection, what=cls.kind)
        if client is None:
            p, r, _ = split_name(name, collection)
            client = cls.client_class(p, r, settings=settings)
        return cls(client.get(name), client)

    # -- fields --------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.data.get("name", "")

    @property
    def id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def display_name(self) -> str:
        return self.data.get("displayName", "")

    @property
    def state(self) -> str:
        return state_name(self.data.get("state"))

    @property
    def error(self) -> str | None:
        """The job's failure message, if it has one."""
        error = self.data.get("error") or {}
        return error.get("message") or None

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.data.get("labels") or {})

    @property
    def console_url(self) -> str:
        return console_url(self.name) if self.name else ""

    # -- actions -------------------------------------------------------------------------------
    def refresh(self) -> "Job":
        """Fetch the current state from Vertex AI."""
        self.data = self.client.get(self.name)
        return self

    def cancel(self) -> "Job":
        """Ask Vertex AI to cancel the job (it passes through CANCELLING), then refresh."""
        if not self.done:
            self.client.cancel(self.name)
        return self.refresh()

    def wait(self, timeout: float | None = None, *, on_state: Callable[["Job"], None] | None = None,
             poll: PollPolicy | None = None, check: bool = True) -> "Job":
        """Poll until the job ends. Raises JobFailed (exit 1) if it did not succeed (unless
        `check=False`) and TimeoutError after `timeout` seconds. `on_state` is called with the
        job at every state change (and once at the start)."""
        wait_until_done(self, poll=poll or self.client.settings.poll, timeout=timeout,
                        on_state=on_state)
        if check and not self.succeeded:
            raise JobFailed(self.failure_message())
        return self

    def failure_message(self) -> str:
        text = f"job {self.name} ended {short_state(self.state)}"
        return f"{text}: {self.error}" if self.error else text

    # -- output --------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The docs/contract.md section 2 submit object (with "attempts" when the spec has a fallback)."""
        out = {"name": self.name, "state": self.state, "console_url": self.console_url,
               "image": self.image, "idempotency_key": self.idempotency_key,
               "adopted": self.adopted}
        if self.attempts is not None:
            out["attempts"] = self.attempts
        return out

    def describe(self) -> dict:
        """The status object: the job's identity, state, times and error."""
        d = self.data
        return {"name": self.name, "display_name": self.display_name, "state": self.state,
                "console_url": self.console_url, "create_time": d.get("createTime"),
                "start_time": d.get("startTime"), "end_time": d.get("endTime"),
                "error": self.error, "labels": self.labels}

    def __repr__(self) -> str:
        # The same state vocabulary as `.state` and the JSON output (JOB_STATE_*).
        return (f"Job(display_name={self.display_name!r}, id={self.id!r}, "
                f"state={self.state!r}, console_url={self.console_url!r})")

    def _repr_html_(self) -> str:
        from html import escape

        rows = [("name", escape(self.name)), ("display name", escape(self.display_name)),
                ("state", f"<b>{escape(short_state(self.state))}</b>"),
                ("console", f'<a href="{escape(self.console_url)}" target="_blank">open in the '
                            "Google Cloud console</a>")]
        if self.error:
            rows.append(("error", escape(self.error)))
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in rows)
        return f"<table>{body}</table>"
