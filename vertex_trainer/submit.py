"""The only module that talks to the Vertex AI API: create (idempotent), get, list, cancel, wait.

Transport: the JobService REST wire (``/v1/projects/P/locations/L/customJobs``) through
google-auth's ``AuthorizedSession`` (requests). The generated ``aiplatform_v1`` client costs about
1 s to import and retries nothing on create; the REST body we send is the render output, which the
tests parse with ``aiplatform_v1.CustomJob``. See docs/submitter.md.

Idempotency (CONTRACT section 3): every job carries ``vertex-trainer-key=<key>``. Before creating,
and after any create whose outcome is unknown (timeout, connection reset, 429/5xx), we list jobs
with that label and adopt the one found instead of creating a second job.
"""

from __future__ import annotations

import os
import random
import re
import secrets
import sys
import time
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from vertex_trainer import auth
from vertex_trainer.errors import JobFailed, ServiceError, UserError

ENDPOINT_ENV = "VERTEX_TRAINER_API_ENDPOINT"
POLL_ENV = "VERTEX_TRAINER_POLL_INTERVAL"
RETRY_ENV = "VERTEX_TRAINER_RETRY"
KEY_LABEL = "vertex-trainer-key"
SPEC_LABEL = "vertex-trainer-spec"

TERMINAL_STATES = frozenset({
    "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED",
    "JOB_STATE_PARTIALLY_SUCCEEDED",
})
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
_STATE_NAMES = {  # the REST transport may answer with enum numbers
    0: "JOB_STATE_UNSPECIFIED", 1: "JOB_STATE_QUEUED", 2: "JOB_STATE_PENDING", 3: "JOB_STATE_RUNNING",
    4: "JOB_STATE_SUCCEEDED", 5: "JOB_STATE_FAILED", 6: "JOB_STATE_CANCELLING",
    7: "JOB_STATE_CANCELLED", 8: "JOB_STATE_PAUSED", 9: "JOB_STATE_EXPIRED",
    10: "JOB_STATE_UPDATING", 11: "JOB_STATE_PARTIALLY_SUCCEEDED",
}
_KEY_RE = re.compile(r"[a-z0-9_-]{1,63}")
_NAME_RE = re.compile(r"projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/customJobs/(?P<id>[^/:]+)")
_LABEL_KEY_RE = re.compile(r"[a-z][a-z0-9_-]{0,62}")

Log = Callable[[str], None]


def _silent(_: str) -> None:
    pass


# -- names, keys, endpoints ---------------------------------------------------------------------

def endpoint_for(region: str) -> str:
    """The API root: $VERTEX_TRAINER_API_ENDPOINT, else the regional endpoint."""
    override = os.environ.get(ENDPOINT_ENV, "").strip()
    if override:
        return override.rstrip("/")
    return f"https://{region}-aiplatform.googleapis.com"




def new_key() -> str:
    """A random, label-safe idempotency key for one invocation."""
    return "vt-" + secrets.token_hex(8)


def check_key(key: str) -> str:
    """Validate a user-given idempotency key; it becomes a Vertex label value."""
    if not _KEY_RE.fullmatch(key or ""):
        safe = re.sub(r"[^a-z0-9_-]+", "-", (key or "").lower()).strip("-")[:63]
        raise UserError(
            f"--idempotency-key {key!r} is not a valid label value: use 1-63 characters from "
            "lowercase letters, digits, '_' and '-'",
            hint=f"for example --idempotency-key {safe or 'ci-run-1'}")
    return key


check_idempotency_key = check_key  # the name cli.render uses


def parse_label(text: str) -> tuple[str, str]:
    """Parse a K=V label selector (list --label)."""
    key, sep, value = text.partition("=")
    if not sep or not _LABEL_KEY_RE.fullmatch(key) or not re.fullmatch(r"[a-z0-9_-]{0,63}", value):
        raise UserError(f"--label {text!r}: expected KEY=VALUE with lowercase letters, digits, "
                        "'_' or '-' (keys start with a letter)")
    return key, value


def job_name(job: str, project: str | None = None, region: str | None = None) -> str:
    """A full resource name from a resource name, or a job id plus project and region."""
    job = job.strip()
    if _NAME_RE.fullmatch(job):
        return job
    if re.fullmatch(r"[0-9]+", job):
        if not project or not region:
            missing = " and ".join(n for n, v in (("--project", project), ("--region", region)) if not v)
            raise UserError(f"job id {job} needs {missing} (or pass the full name "
                            "projects/P/locations/R/customJobs/ID)")
        return f"projects/{project}/locations/{region}/customJobs/{job}"
    raise UserError(f"{job!r} is not a job: pass projects/P/locations/R/customJobs/ID, "
                    "or a numeric job id with --project and --region")


def split_name(name: str) -> tuple[str, str, str]:
    """(project, region, id) of a CustomJob resource name."""
    m = _NAME_RE.fullmatch(name)
    if not m:
        raise ValueError(f"not a CustomJob name: {name!r}")
    return m["project"], m["region"], m["id"]


def console_url(name: str) -> str:
    project, region, job_id = split_name(name)
    return (f"https://console.cloud.google.com/vertex-ai/locations/{region}/training/"
            f"{job_id}/cpu?project={project}")


def state_name(value: Any) -> str:
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return _STATE_NAMES.get(int(value), f"JOB_STATE_{value}")
    return value or "JOB_STATE_UNSPECIFIED"


def short_state(state: str) -> str:
    return state.removeprefix("JOB_STATE_")


# -- retries ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded in attempts and in total time."""

    attempts: int = 6
    initial: float = 1.0
    maximum: float = 20.0
    multiplier: float = 2.0
    deadline: float = 120.0
    connect_timeout: float = 10.0
    read_timeout: float = 60.0

    @classmethod
    def from_env(cls) -> "RetryPolicy":
        """Defaults, tuned by $VERTEX_TRAINER_RETRY="attempts=4,initial=0.01,deadline=5,..."."""
        text = os.environ.get(RETRY_ENV, "").strip()
        if not text:
            return cls()
        fields: dict[str, Any] = {}
        for item in text.split(","):
            key, _, value = item.partition("=")
            key = key.strip().replace("-", "_")
            if key not in cls.__dataclass_fields__:
                raise UserError(f"${RETRY_ENV}: unknown setting {key!r} (known: "
                                f"{', '.join(cls.__dataclass_fields__)})")
            try:
                fields[key] = int(value) if key == "attempts" else float(value)
            except ValueError:
                raise UserError(f"${RETRY_ENV}: {key}={value!r} is not a number") from None
        return cls(**fields)


class _Budget:
    """One retry budget, shared by every call that serves one logical operation."""

    def __init__(self, policy: RetryPolicy, log: Log):
        self.policy, self.log = policy, log
        self.started = time.monotonic()
        self.failures = 0
        self._delay = policy.initial

    def backoff(self, what: str, failure: str) -> None:
        """Sleep before the next attempt, or raise ServiceError when the budget is spent."""
        self.failures += 1
        policy = self.policy
        delay = random.uniform(0, self._delay)  # full jitter
        self._delay = min(self._delay * policy.multiplier, policy.maximum)
        elapsed = time.monotonic() - self.started
        if self.failures >= policy.attempts or elapsed + delay > policy.deadline:
            raise ServiceError(
                f"{what} failed after {self.failures} attempt{'s' * (self.failures > 1)} "
                f"({elapsed:.1f}s): {failure}",
                hint="the Vertex AI API is unreachable or overloaded; run the same command again "
                     "later (with the same --idempotency-key, no second job is created)")
        self.log(f"{what}: {failure}; retrying in {delay:.1f}s")
        time.sleep(delay)


class _Transient(Exception):
    """A failure worth retrying (connection error, timeout, 429, 5xx)."""


# -- the client ---------------------------------------------------------------------------------

class VertexClient:
    """JobService over REST for one project and region."""

    def __init__(self, project: str, region: str, *, endpoint: str | None = None,
                 session: Any = None, retry: RetryPolicy | None = None, log: Log | None = None):
        if not project:
            raise UserError("no Google Cloud project: set `project:` in the spec, pass --project, "
                            "or set $GOOGLE_CLOUD_PROJECT")
        if not region:
            raise UserError("no region: set `region:` in the spec or pass --region")
        self.project, self.region = project, region
        self.endpoint = (endpoint or endpoint_for(region)).rstrip("/")
        self.retry = retry or RetryPolicy.from_env()
        self.log = log or _silent
        self._session = session

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def url(self, path: str) -> str:
        return f"{self.endpoint}/v1/{path}"

    # -- transport -----------------------------------------------------------------------
    @property
    def session(self):
        if self._session is None:
            self._session = auth.session(self.endpoint)
        return self._session

    def _send(self, op: str, method: str, path: str, *, params: dict | None = None,
              body: dict | None = None) -> dict:
        """One HTTP exchange. Raises _Transient, or ServiceError/UserError for permanent errors."""
        import requests

        try:
            response = self.session.request(
                method, self.url(path), params=params, json=body,
                timeout=(self.retry.connect_timeout, self.retry.read_timeout))
        except requests.Timeout as exc:
            raise _Transient(f"timed out ({type(exc).__name__})") from exc
        except requests.ConnectionError as exc:
            raise _Transient(f"connection failed: {_short(exc)}") from exc
        except Exception as exc:  # google-auth refresh problems
            _raise_auth(exc)
            raise
        if response.status_code < 400:
            try:
                return response.json() if response.content else {}
            except ValueError:
                raise _Transient(f"HTTP {response.status_code} with a body that is not JSON") from None
        code, status, message = _error_parts(response)
        if response.status_code in TRANSIENT_STATUS:
            raise _Transient(f"HTTP {code} {status}: {message}")
        raise _permanent(op, code, status, message, self, path)

    def _call(self, op: str, method: str, path: str, *, params: dict | None = None,
              body: dict | None = None, budget: _Budget | None = None) -> dict:
        budget = budget or _Budget(self.retry, self.log)
        while True:
            try:
                return self._send(op, method, path, params=params, body=body)
            except _Transient as exc:
                budget.backoff(op, str(exc))

    # -- JobService ----------------------------------------------------------------------
    def create_once(self, job: dict) -> dict:
        """POST one CustomJob. Raises _Transient when the outcome is unknown. Not retried here."""
        return self._send("create", "POST", f"{self.parent}/customJobs", body=job)

    def get(self, name: str) -> dict:
        return self._call("get", "GET", name)

    def cancel(self, name: str) -> None:
        self._call("cancel", "POST", f"{name}:cancel", body={})

    def list(self, filter: str | None = None, *, limit: int | None = None,
             budget: _Budget | None = None, page_size: int = 100) -> list[dict]:
        """CustomJobs of the parent matching `filter` (Vertex filter syntax), newest first."""
        jobs: list[dict] = []
        token = ""
        while True:
            params: dict[str, Any] = {"pageSize": page_size}
            if filter:
                params["filter"] = filter
            if token:
                params["pageToken"] = token
            page = self._call("list", "GET", f"{self.parent}/customJobs", params=params, budget=budget)
            jobs.extend(page.get("customJobs", []))
            token = page.get("nextPageToken", "")
            if not token or (limit and len(jobs) >= limit):
                break
        jobs.sort(key=lambda j: j.get("createTime", ""), reverse=True)
        return jobs[:limit] if limit else jobs

    def find_by_key(self, key: str, budget: _Budget | None = None) -> dict | None:
        """The job created with this idempotency key (the oldest, should there be several)."""
        found = self.list(f'labels.{KEY_LABEL}="{key}"', budget=budget)
        if len(found) > 1:
            self.log(f"warning: {len(found)} jobs carry {KEY_LABEL}={key}; adopting the oldest")
        return min(found, key=lambda j: j.get("createTime", "")) if found else None

    def create_request(self, job: dict) -> dict:
        """What create would send (for --dry-run); opens no connection."""
        return {"method": "POST", "url": self.url(f"{self.parent}/customJobs"), "body": job}


def create_idempotent(client: VertexClient, job: dict, key: str) -> tuple[dict, bool]:
    """Create `job` (which carries the key label) at most once. Returns (job, adopted)."""
    labels = job.get("labels") or {}
    if labels.get(KEY_LABEL) != key:
        raise ValueError(f"the job body must carry the label {KEY_LABEL}={key}")
    budget = _Budget(client.retry, client.log)
    existing = client.find_by_key(key, budget)
    if existing is not None:
        _warn_if_other_spec(client, existing, job)
        return existing, True
    while True:
        try:
            return client.create_once(job), False
        except _Transient as exc:
            # The service may have committed the job before the answer was lost: look first.
            client.log(f"create: {exc}; checking whether the job was created")
            existing = client.find_by_key(key, budget)
            if existing is not None:
                return existing, True
            budget.backoff("create", str(exc))


def _warn_if_other_spec(client: VertexClient, existing: dict, job: dict) -> None:
    theirs = (existing.get("labels") or {}).get(SPEC_LABEL)
    ours = (job.get("labels") or {}).get(SPEC_LABEL)
    if theirs and ours and theirs != ours:
        client.log(f"warning: adopting {existing.get('name')}, created with the same idempotency "
                   f"key from a different spec ({SPEC_LABEL} {theirs} != {ours}); use a new "
                   "--idempotency-key to submit the changed spec")


# -- sessions and errors ------------------------------------------------------------------------

def _raise_auth(exc: Exception) -> None:
    """Turn google-auth refresh failures into a clear message; nothing reached Vertex."""
    try:
        from google.auth import exceptions as auth_exceptions
    except ImportError:  # pragma: no cover
        return
    if isinstance(exc, auth_exceptions.RefreshError):
        raise UserError(f"could not get an access token: {exc}",
                        hint="run `gcloud auth application-default login` again (the stored "
                             "credentials expired or were revoked)") from exc
    if isinstance(exc, auth_exceptions.TransportError):
        raise _Transient(f"could not reach the token endpoint: {exc}") from exc


def _short(exc: Exception) -> str:
    text = str(exc)
    m = re.search(r"\[Errno -?\d+\] [^'\")]+|Connection refused|RemoteDisconnected\([^)]*\)|"
                  r"Connection reset by peer|Connection aborted", text)
    return m.group(0) if m else text[:200]


def _error_parts(response) -> tuple[int, str, str]:
    try:
        error = response.json().get("error", {})
        if not isinstance(error, dict):
            raise ValueError
    except ValueError:
        text = (response.text or "").strip().replace("\n", " ")
        return response.status_code, response.reason or "", text[:300]
    return (int(error.get("code") or response.status_code), error.get("status") or response.reason or "",
            error.get("message") or "")


_PERMISSIONS = {"create": "aiplatform.customJobs.create", "get": "aiplatform.customJobs.get",
                "list": "aiplatform.customJobs.list", "cancel": "aiplatform.customJobs.cancel"}


def _permanent(op: str, code: int, status: str, message: str, client: VertexClient, path: str):
    text = f"{op} {path}: HTTP {code} {status}: {message}".rstrip(": ")
    hint = None
    if code == 403:
        if "has not been used" in message or "SERVICE_DISABLED" in message or "is disabled" in message:
            hint = (f"enable the Vertex AI API: gcloud services enable aiplatform.googleapis.com "
                    f"--project {client.project}")
        else:
            hint = (f"the caller needs {_PERMISSIONS.get(op, 'aiplatform.customJobs.*')} on project "
                    f"{client.project} (role roles/aiplatform.user); check the account with "
                    "`gcloud auth list`, and that the Vertex AI API is enabled "
                    "(gcloud services enable aiplatform.googleapis.com)")
    elif code == 401:
        hint = "the credentials were refused: run `gcloud auth application-default login` again"
    elif code == 404:
        if op in ("get", "cancel"):
            hint = (f"no such job in project {client.project}, region {client.region}: check the "
                    "job name (`vertex-trainer list`) and --project/--region")
        else:
            hint = (f"project {client.project!r} or region {client.region!r} was not found: check "
                    "the spec's project/region (Vertex AI regions look like us-central1)")
    elif code == 400:
        hint = "the service rejected the request; `vertex-trainer render SPEC` shows the body sent"
    return ServiceError(text, hint=hint)


# -- jobs ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PollPolicy:
    """Adaptive polling: start fast, slow down while nothing changes, speed up on a change."""

    initial: float = 5.0
    maximum: float = 60.0
    multiplier: float = 1.5

    @classmethod
    def from_env(cls) -> "PollPolicy":
        text = os.environ.get(POLL_ENV, "").strip()
        if not text:
            return cls()
        try:
            initial = float(text)
        except ValueError:
            raise UserError(f"${POLL_ENV}={text!r} is not a number of seconds") from None
        return cls(initial=initial, maximum=max(initial, min(60.0, initial * 12)))

    def intervals(self) -> Iterator[float]:
        delay = self.initial
        while True:
            yield delay
            delay = min(delay * self.multiplier, self.maximum)


class JobState:
    """`done` and `succeeded`, for anything with a Vertex `state` (a cloud Job or a local run)."""

    state: str

    @property
    def done(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self) -> bool:
        return self.state == "JOB_STATE_SUCCEEDED"


class Job(JobState):
    """A Vertex AI CustomJob: ``name``, ``state``, ``console_url``, ``refresh()``, ``wait()``,
    ``cancel()``. Returned by :func:`vertex_trainer.submit`; ``Job.get(name)`` attaches to any job.
    """

    def __init__(self, data: dict, client: VertexClient | None = None, *, image: str | None = None,
                 idempotency_key: str | None = None, adopted: bool = False):
        self.data = data
        self.client = client
        self.image = image
        self.idempotency_key = idempotency_key or (data.get("labels") or {}).get(KEY_LABEL)
        self.adopted = adopted

    @classmethod
    def get(cls, job: str, *, project: str | None = None, region: str | None = None,
            client: VertexClient | None = None) -> "Job":
        """Fetch a job by resource name, or by id with project and region."""
        name = job_name(job, project, region)
        if client is None:
            p, r, _ = split_name(name)
            client = VertexClient(p, r)
        return cls(client.get(name), client)

    # -- fields ----------------------------------------------------------------------------
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

    # -- actions ---------------------------------------------------------------------------
    def _client(self) -> VertexClient:
        if self.client is None:
            project, region, _ = split_name(self.name)
            self.client = VertexClient(project, region)
        return self.client

    def refresh(self) -> "Job":
        """Fetch the current state from Vertex AI."""
        self.data = self._client().get(self.name)
        return self

    def cancel(self) -> "Job":
        """Ask Vertex AI to cancel the job (it passes through CANCELLING), then refresh."""
        if not self.done:
            self._client().cancel(self.name)
        return self.refresh()

    def wait(self, timeout: float | None = None, *, on_state: Callable[["Job"], None] | None = None,
             poll: PollPolicy | None = None, check: bool = True) -> "Job":
        """Poll until the job ends. Raises JobFailed (exit 1) if it did not succeed (unless
        ``check=False``) and TimeoutError after ``timeout`` seconds. ``on_state`` is called with
        the job at every state change (and once at the start)."""
        poll = poll or PollPolicy.from_env()
        deadline = None if timeout is None else time.monotonic() + timeout
        last = self.state
        if on_state:
            on_state(self)
        intervals = poll.intervals()
        while not self.done:
            delay = next(intervals)
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self.name} is still {short_state(self.state)} after {timeout}s")
                delay = min(delay, remaining)
            time.sleep(delay)
            self.refresh()
            if self.state != last:
                last = self.state
                intervals = poll.intervals()  # something is happening: look again soon
                if on_state:
                    on_state(self)
        if check and not self.succeeded:
            raise JobFailed(self.failure_message())
        return self

    def failure_message(self) -> str:
        text = f"job {self.name} ended {short_state(self.state)}"
        return f"{text}: {self.error}" if self.error else text

    # -- output ----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The CONTRACT section 2 submit object."""
        return {"name": self.name, "state": self.state, "console_url": self.console_url,
                "image": self.image, "idempotency_key": self.idempotency_key,
                "adopted": self.adopted}

    def describe(self) -> dict:
        """The status object: the job's identity, state, times and error."""
        d = self.data
        return {"name": self.name, "display_name": self.display_name, "state": self.state,
                "console_url": self.console_url, "create_time": d.get("createTime"),
                "start_time": d.get("startTime"), "end_time": d.get("endTime"),
                "error": self.error, "labels": self.labels}

    def __repr__(self) -> str:
        return (f"Job(display_name={self.display_name!r}, id={self.id!r}, "
                f"state={short_state(self.state)}, console_url={self.console_url!r})")

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


class _CallableModule(types.ModuleType):
    """`vertex_trainer.submit` names both this module and the API's submit() function (the
    import system binds the submodule over any function of that name on the package), so the
    module itself is callable: ``vertex_trainer.submit(spec, wait=True)`` is api.submit."""

    def __call__(self, spec: Any, wait: bool = False, idempotency_key: str | None = None,
                 **kwargs: Any) -> Any:
        from vertex_trainer.api import submit

        return submit(spec, wait=wait, idempotency_key=idempotency_key, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
