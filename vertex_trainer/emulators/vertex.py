"""A fake Vertex AI (REST, v1) on loopback, for tests and `vertex-trainer dev fake-vertex`.

It speaks the wire the real service speaks, for CustomJobs here, for models, endpoints and
operations in vertex_models.py (`FakeVertex.models`) and for pipelineJobs in vertex_pipelines.py
(`FakeVertex.pipelines`), and persistentResources in vertex_resources.py (`FakeVertex.resources`; jobs
that name one must fit it), and TensorBoard instances in vertex_tensorboards.py (`FakeVertex.tensorboards`;
jobs that name one must name one of their region):

- ``POST   /v1/projects/P/locations/L/customJobs``            create (body: CustomJob JSON)
- ``GET    /v1/projects/P/locations/L/customJobs``            list (``filter``, ``pageSize``, ``pageToken``)
- ``GET    /v1/projects/P/locations/L/customJobs/ID``         get
- ``POST   /v1/projects/P/locations/L/customJobs/ID:cancel``  cancel

Bodies are parsed strictly with ``aiplatform_v1.CustomJob`` (unknown fields are a 400, as on the
real service), enums are accepted as names or numbers, and answers use enum names unless the
request asks for ``$alt=json;enum-encoding=int`` (what the generated REST transport sends).
Errors use Google's envelope ``{"error": {"code", "message", "status"}}``.

Jobs advance along a script of states, one step per GET (default QUEUED -> PENDING -> RUNNING ->
SUCCEEDED). Faults are injected on demand with :meth:`FakeVertex.fail`, e.g. "the next create is
committed but answered 503" or "drop the connection without an answer". Capacity and quota
refusals per scheduling strategy and region come from vertex_capacity.py (`no_capacity`, `no_quota`).
A running job with `enableWebAccess` carries `webAccessUris` (one shell URI per replica).

Two hooks make the fake do what it only pretends to otherwise (`vertex-trainer dev sandbox` plugs
in here, from outside the emulators): a `runner` is handed every created job (``start(job)``) and
every cancel (``cancel(name)``) and moves the job through its states with :meth:`report`; a
`predictor` answers ``endpoints/ID:predict`` for the deployed models (vertex_models.py).

Importing this module is cheap; ``aiplatform_v1`` (about 1 s) is imported when the first request
needs it.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from vertex_trainer.emulators._http import Guard, JsonHandler, envelope, query_of, serve_until_interrupted
from vertex_trainer.emulators.vertex_capacity import CapacityScripts, Outcome, region_of
from vertex_trainer.emulators.vertex_models import ModelService, ServiceError, labels_filter, list_page
from vertex_trainer.emulators.vertex_models import _parse as parse_resource
from vertex_trainer.emulators.vertex_pipelines import PipelineService
from vertex_trainer.emulators.vertex_resources import ResourceService
from vertex_trainer.emulators.vertex_tensorboards import TensorboardService
from vertex_trainer.emulators.vertex_tuning import TuningService

TERMINAL_STATES = frozenset(
    {
        "JOB_STATE_SUCCEEDED",
        "JOB_STATE_FAILED",
        "JOB_STATE_CANCELLED",
        "JOB_STATE_EXPIRED",
        "JOB_STATE_PARTIALLY_SUCCEEDED",
    }
)
DEFAULT_SCRIPT = ("JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED")
DEFAULT_ERROR = "The replica workerpool0-0 exited with a non-zero status of 1."

_DEFAULT_MESSAGES = {
    403: "Permission '{permission}' denied on resource '//aiplatform.googleapis.com/{parent}' "
    "(or it may not exist).",
    429: "Quota exceeded for aiplatform.googleapis.com/custom_job_requests.",
    500: "Internal error encountered.",
    502: "Bad gateway.",
    503: "The service is currently unavailable.",
    504: "Deadline exceeded.",
}
_PERMISSIONS = {
    "create": "aiplatform.customJobs.create",
    "get": "aiplatform.customJobs.get",
    "list": "aiplatform.customJobs.list",
    "cancel": "aiplatform.customJobs.cancel",
}

_COLLECTION = re.compile(r"^/v1/(projects/[^/]+/locations/[^/]+)/customJobs$")
_JOB = re.compile(r"^/v1/(projects/[^/]+/locations/[^/]+/customJobs/[^/:]+)(:cancel)?$")


@dataclass
class Fault:
    """An injected failure for the next `times` calls of `op` (create, get, list, cancel or any)."""

    op: str
    status: int = 503  # HTTP status to answer with; 0 = close the connection, no answer
    commit: bool = False  # create only: store the job first, then answer with the fault
    times: int = 1
    delay: float = 0.0  # seconds to sleep before answering (after committing, if commit)
    message: str | None = None
    late: bool = False  # with commit: the delay comes before the commit (a slow service
    # still working on a create the client has given up on)


@dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str]
    op: str = ""
    at: float = field(default_factory=time.monotonic)  # when it arrived (time.monotonic)


@dataclass
class _Job:
    data: dict[str, Any]  # CustomJob as proto JSON with enum names
    script: list[str]
    error: str
    pos: int = 0
    code: int = 3  # error.code when it ends FAILED


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class FakeVertex(CapacityScripts):
    """The fake server. Use as a context manager, or call start()/stop().

    Attributes tests read: ``url``, ``jobs`` (name -> CustomJob dict), ``requests`` (every
    request, in order), ``connections`` (TCP connections accepted).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        script: tuple[str, ...] | list[str] = DEFAULT_SCRIPT,
        error_message: str = DEFAULT_ERROR,
        validate: bool = True,
        page_size: int = 50,
        runner: Any = None,
        predictor: Any = None,
    ):
        self.script = list(script)
        self.error_message = error_message
        self.validate = validate
        self.default_page_size = page_size
        self.jobs: dict[str, dict[str, Any]] = {}
        self.requests: list[Recorded] = []
        self.connections = 0
        self._jobs: dict[str, _Job] = {}
        self._faults: list[Fault] = []
        self.outcomes: dict[tuple[str, str], Outcome] = {}  # (strategy, region) (on_strategy)
        self._lock = threading.RLock()
        self._ids = itertools.count(1_000_000_000_000_000_001)
        self.models = ModelService(self._lock)  # models, endpoints, operations (vertex_models.py)
        self.pipelines = PipelineService(self._lock)  # pipelineJobs (vertex_pipelines.py)
        self.tuning = TuningService(self._lock)  # hyperparameterTuningJobs (vertex_tuning.py)
        self.resources = ResourceService(self._lock, self.models)  # persistentResources (vertex_resources.py)
        self.tensorboards = TensorboardService(self._lock, self.models)  # (vertex_tensorboards.py)
        # Hooks (the sandbox's, vertex_trainer/sandbox): `runner.start(job)` after each create
        # and `runner.cancel(name)` after each cancel; the runner reports states with report().
        # `predictor` serves `endpoints/ID:predict` (vertex_models.py). None: scripted, as ever.
        self.runner = runner
        self._run_by_runner: set[str] = set()
        self.models.predictor = predictor
        self._server = _Server((host, port), _Handler)
        self._server.fake = self
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self._server.socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def require(self, token: str | None) -> FakeVertex:
        """Refuse (401) every request without `Authorization: Bearer <token>` (the sandbox's);
        Host, Origin and JSON bodies are checked whatever it is (emulators/_http.py `Guard`)."""
        self._server.guard = Guard(token)
        return self

    def start(self) -> FakeVertex:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-vertex", kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeVertex:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test controls ---------------------------------------------------------------------
    def fail(
        self,
        op: str,
        status: int = 503,
        *,
        commit: bool = False,
        times: int = 1,
        delay: float = 0.0,
        message: str | None = None,
        late: bool = False,
    ) -> Fault:
        """Make the next `times` calls of `op` fail (see :class:`Fault`)."""
        fault = Fault(op, status, commit, times, delay, message, late)
        with self._lock:
            self._faults.append(fault)
        return fault

    def set_script(self, states: list[str] | tuple[str, ...], error_message: str | None = None) -> None:
        """The state sequence for jobs created from now on (the first one is the create answer)."""
        with self._lock:
            self.script = list(states)
            if error_message is not None:
                self.error_message = error_message

    def set_state(self, name: str, state: str, error_message: str | None = None) -> None:
        """Put an existing job in `state` now (and keep it there)."""
        with self._lock:
            job = self._jobs[name]
            job.script, job.pos = [state], 0
            if error_message is not None:
                job.error = error_message
            self._apply_state(job)

    def report(self, name: str, state: str, error_message: str | None = None) -> bool:
        """For a runner: job `name` is now in `state`. An ended job stays as it is, and a
        cancelling one only moves on to an end (a cancel wins over a late RUNNING); False when
        the report was ignored."""
        with self._lock:
            job = self._jobs.get(name)
            current = job.data.get("state") if job is not None else None
            if (
                job is None
                or current in TERMINAL_STATES
                or (current == "JOB_STATE_CANCELLING" and state not in TERMINAL_STATES)
            ):
                return False
            self.set_state(name, state, error_message)
            return True

    def add_job(
        self,
        job: dict[str, Any],
        *,
        project: str = "test-project",
        location: str = "us-central1",
        state: str | None = None,
    ) -> dict[str, Any]:
        """Store a job directly (as if created earlier, e.g. by a previous CI attempt)."""
        with self._lock:
            stored = self._create(f"projects/{project}/locations/{location}", job)
            if state:
                self.set_state(stored["name"], state)
            return self.jobs[stored["name"]]

    def calls(self, op: str) -> list[Recorded]:
        """The recorded requests of one kind: create, get, list or cancel."""
        return [r for r in self.requests if r.op == op]

    # -- the service -----------------------------------------------------------------------
    def _take_fault(self, op: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.op in (op, "any") and fault.times > 0:
                    fault.times -= 1
                    return fault
        return None

    def _parse(self, body: Any) -> dict[str, Any]:
        """Validate a CustomJob body like the service does and return it as proto JSON (names)."""
        if not isinstance(body, dict):
            raise ServiceError(400, "Invalid JSON payload received. Expected an object.")
        if not self.validate:
            copied: dict[str, Any] = json.loads(json.dumps(body))
            return copied
        parsed = parse_resource("CustomJob", body)
        if not parsed.get("displayName"):
            raise ServiceError(
                400,
                "List of found errors:\t1.Field: custom_job.display_name; "
                "Message: Required field is not set.\t",
            )
        pools = parsed.get("jobSpec", {}).get("workerPoolSpecs", [])
        if not pools:
            raise ServiceError(
                400,
                "List of found errors:\t1.Field: custom_job.job_spec."
                "worker_pool_specs; Message: Required field is not set.\t",
            )
        for key, value in parsed.get("labels", {}).items():
            if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key) or not re.fullmatch(
                r"[a-z0-9_-]{0,63}", value
            ):
                raise ServiceError(
                    400,
                    f"Label '{key}={value}' is invalid: keys and values must be "
                    "<= 63 lowercase letters, digits, '_' or '-'.",
                )
        return parsed

    def _create(self, parent: str, body: Any) -> dict[str, Any]:
        data = self._parse(body)
        for output_only in ("name", "state", "createTime", "startTime", "endTime", "updateTime", "error"):
            data.pop(output_only, None)
        with self._lock:
            self.resources.check_job(parent, data)  # on a persistent resource: it must fit
            self.tensorboards.check_job(parent, data)  # its TensorBoard instance: in its region
            outcome = self.outcome_of(data, parent.rsplit("/", 1)[-1])  # on_strategy() (vertex_capacity.py)
            if outcome.refuse:
                raise ServiceError(outcome.refuse, outcome.message or "")  # outcome_of fills it in
            name = f"{parent}/customJobs/{next(self._ids)}"
            now = _now()
            data.update(name=name, createTime=now, updateTime=now)
            region = parent.rsplit("/", 1)[-1]
            job = _Job(
                data,
                list(outcome.script or self.script) or ["JOB_STATE_PENDING"],
                (outcome.error_message or self.error_message).replace("{region}", region),
                code=outcome.error_code,
            )
            self._jobs[name] = job
            self._apply_state(job)
            return data

    def _apply_state(self, job: _Job) -> None:
        state = job.script[job.pos]
        data = job.data
        if data.get("state") != state:
            data["state"] = state
            data["updateTime"] = _now()
            if state in ("JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"):
                data.setdefault("startTime", data["updateTime"])
            if state in TERMINAL_STATES:
                data["endTime"] = data["updateTime"]
            # An interactive shell per replica while the job runs (jobSpec.enableWebAccess).
            if state == "JOB_STATE_RUNNING" and (data.get("jobSpec") or {}).get("enableWebAccess"):
                data["webAccessUris"] = web_access_uris(data)
            elif state != "JOB_STATE_RUNNING":
                data.pop("webAccessUris", None)
            if state == "JOB_STATE_FAILED":
                data["error"] = {"code": job.code, "message": job.error}
            elif state == "JOB_STATE_CANCELLED":
                data["error"] = {"code": 1, "message": "CANCELED"}
            elif state == "JOB_STATE_EXPIRED":
                data["error"] = {"code": 4, "message": "The job did not start within max_wait_duration."}
        self.jobs[data["name"]] = data

    def _get(self, name: str, advance: bool = True) -> dict[str, Any]:
        with self._lock:
            job = self._jobs.get(name)
            if job is None:
                raise ServiceError(404, f'The CustomJob "{name}" does not exist.')
            if advance and job.pos < len(job.script) - 1:
                job.pos += 1
                self._apply_state(job)
            return dict(job.data)

    def _cancel(self, name: str) -> dict[str, Any]:
        with self._lock:
            job = self._jobs.get(name)
            if job is None:
                raise ServiceError(404, f'The CustomJob "{name}" does not exist.')
            state = job.data["state"]
            if state in TERMINAL_STATES:
                raise ServiceError(
                    400, f"Cannot cancel CustomJob {name} because it is already in state {state}."
                )
            job.script, job.pos = ["JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED"], 0
            run_by_runner = name in self._run_by_runner
            if run_by_runner:  # CANCELLED once the runner has stopped the job
                job.script = ["JOB_STATE_CANCELLING"]
            self._apply_state(job)
        if run_by_runner:
            self.runner.cancel(name)
        return {}

    def _list(self, parent: str, query: dict[str, str]) -> dict[str, Any]:
        keep = labels_filter(query.get("filter", ""))
        with self._lock:
            found = [
                dict(j.data) for n, j in self._jobs.items() if n.startswith(parent + "/") and keep(j.data)
            ]
        return list_page(found, query, "customJobs", size=self.default_page_size)

    def handle(self, method: str, raw_path: str, body: Any) -> tuple[int, Any, str, bool]:
        """Route one request. Returns (status, payload, op, drop_connection)."""
        query, path = query_of(raw_path), urlsplit(raw_path).path
        op, target, call = "", "", None
        if (m := _COLLECTION.match(path)) and method in ("POST", "GET"):
            op, target = ("create" if method == "POST" else "list"), m[1]
        elif m := _JOB.match(path):
            if m[2] and method == "POST":
                op, target = "cancel", m[1]
            elif not m[2] and method == "GET":
                op, target = "get", m[1]
        for service in (self.models, self.pipelines, self.tuning, self.resources, self.tensorboards):
            if not op and (routed := service.route(method, path)):
                (op, call), target = routed, path
        if not op:
            return 404, envelope(404, f"Method {method} {path} not found."), "", False
        self.requests[-1].op = op
        fault = self._take_fault(op)
        if fault and fault.delay and (not fault.commit or fault.late):
            time.sleep(fault.delay)
        if fault and not fault.commit:  # refused before anything happened
            if not fault.status:
                return 0, None, op, True
            message = fault.message or _DEFAULT_MESSAGES.get(fault.status, "Fault injected.").format(
                permission=_PERMISSIONS.get(op, "aiplatform.*"), parent=target
            )
            return fault.status, envelope(fault.status, message), op, False
        try:
            if call is not None:
                result = call(query, body)
            elif op == "create":
                result = self._create(target, body)
                # The job runs for real (the sandbox), unless its strategy's outcome is scripted.
                if self.runner is not None and not self.outcome_of(result).script:
                    result = json.loads(json.dumps(result))  # answered as created (PENDING)
                    with self._lock:
                        self._run_by_runner.add(result["name"])
                    self.runner.start(json.loads(json.dumps(result)))
            elif op == "list":
                result = self._list(target, query)
            elif op == "get":
                result = self._get(target)
            else:
                result = self._cancel(target)
        except ServiceError as exc:
            return exc.code, envelope(exc.code, exc.message), op, False
        if fault and fault.delay and not fault.late:  # committed, then slow to answer
            time.sleep(fault.delay)
        if fault and not fault.status:
            return 0, None, op, True
        if fault:  # committed, then answered with an error: the outcome is unknown to the client
            message = fault.message or _DEFAULT_MESSAGES.get(fault.status, "Fault injected.")
            return fault.status, envelope(fault.status, message), op, False
        if call is None and query.get("$alt", "").replace(" ", "") == "json;enum-encoding=int":
            result = self._ints(result)
        return 200, result, op, False

    def _ints(self, result: dict[str, Any]) -> dict[str, Any]:
        """Re-encode enums as numbers, as the service does for `enum-encoding=int`."""
        if not self.validate:
            return result
        from google.cloud.aiplatform_v1 import CustomJob
        from google.protobuf import json_format

        def one(job: dict[str, Any]) -> dict[str, Any]:
            message = json_format.ParseDict(job, CustomJob.pb(CustomJob()))
            numbered: dict[str, Any] = json_format.MessageToDict(message, use_integers_for_enums=True)
            return numbered

        if "customJobs" in result:
            return {**result, "customJobs": [one(j) for j in result["customJobs"]]}
        return one(result) if result else result


def web_access_uris(job: dict[str, Any]) -> dict[str, str]:
    """workerpoolI-J -> the replica's shell URI, in the service's form
    (https://<hash>-dot-<region>.aiplatform-training.googleusercontent.com)."""
    import hashlib

    region = region_of(job["name"])
    out = {}
    for i, pool in enumerate((job.get("jobSpec") or {}).get("workerPoolSpecs") or []):
        for j in range(int(pool.get("replicaCount") or 1)):
            replica = f"workerpool{i}-{j}"
            digest = hashlib.sha256(f"{job['name']}/{replica}".encode()).hexdigest()[:16]
            out[replica] = f"https://{digest}-dot-{region}.aiplatform-training.googleusercontent.com"
    return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeVertex
    guard: Guard | None = None  # who may send requests (require(); None: Host, Origin, JSON only)

    def get_request(self) -> tuple[socket.socket, Any]:
        request = super().get_request()
        with self.fake._lock:
            self.fake.connections += 1
        return request

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up before its answer (a read timeout, then a retry) is the client's
        # business, as on the real service: no traceback on the sandbox's stderr.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(JsonHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def _serve(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = _BAD_JSON
        with fake._lock:
            fake.requests.append(
                Recorded(self.command, self.path, query_of(self.path), body, dict(self.headers.items()))
            )
        if body is _BAD_JSON:
            status, payload, drop = 400, envelope(400, "Invalid JSON payload received."), False
        else:
            status, payload, _, drop = fake.handle(self.command, self.path, body)
        if drop:
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass
            return
        self.send_json(status, payload)

    do_GET = do_POST = do_DELETE = do_PATCH = _serve


_BAD_JSON = object()


def serve(
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    script: list[str] | None = None,
    echo: Callable[[str], None] | None = None,
) -> None:
    """Run the fake until interrupted (for `vertex-trainer dev fake-vertex`)."""
    fake = FakeVertex(host, port, script=script or DEFAULT_SCRIPT)
    fake.start()
    serve_until_interrupted(
        fake,
        [
            f"fake Vertex AI JobService listening on {fake.url}",
            f"  export VERTEX_TRAINER_API_ENDPOINT={fake.url}",
        ],
        echo,
    )
