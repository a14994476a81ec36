"""Storage events that arrive: `dev sandbox --function DIR` (docs/sandbox.md, "Storage events").

`FunctionHost` serves a `vertex-trainer trigger render` directory under the real
functions-framework (`python -m functions_framework --target on_object_finalized --signature-type
cloudevent`, the sandbox's variables in its environment, as Cloud Run gives the function its own)
and plays Eventarc for the bucket the function watches (its trigger.json): every object finalized
there, a new object or a new generation of one, is delivered as a CloudEvent in binary mode:

    POST /   ce-specversion: 1.0   ce-type: google.cloud.storage.object.v1.finalized
             ce-source: //storage.googleapis.com/projects/_/buckets/BUCKET
             ce-subject: objects/NAME   ce-id: <message id>   ce-time: <updated>
             Content-Type: application/json
             {"bucket", "name", "generation", "metageneration", "size", "id", "contentType",
              "md5Hash", "crc32c", "timeCreated", "updated", ...}   (StorageObjectData)

The function is served behind the sandbox's own checks (`_GUARDED`, a source file of the
sandbox's that loads main.py unchanged): an event must carry the sandbox's token as its Bearer
credential (as Eventarc sends its OIDC token to Cloud Run), a loopback Host and no foreign Origin,
as JSON; the events come from the sandbox itself, and nothing else can start a run through the
function's port.

Delivery is at least once, as Eventarc's (Pub/Sub underneath): `redeliver` sends each event that
many times (the same message id), to show the function's dedupe; a non-2xx answer or no answer is
delivered again after a backoff that doubles (`BACKOFF_S`, at most `MAX_ATTEMPTS` attempts, where
Eventarc keeps trying 10 s..600 s apart for a day). Objects are seen by listing the bucket
(`POLL_S`): what existed before the host started is not an event.
"""

from __future__ import annotations

import itertools
import json
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertex_trainer.errors import ServiceError
from vertex_trainer.gcp.auth import emulator_headers
from vertex_trainer.gcp.http import ApiClient
from vertex_trainer.log import Log
from vertex_trainer.settings import EMULATOR_TOKEN_ENV, RetryPolicy

FINALIZED = "google.cloud.storage.object.v1.finalized"
TARGET = "on_object_finalized"
POLL_S = 0.5
BACKOFF_S = 1.0
MAX_ATTEMPTS = 5
START_TIMEOUT_S = 120.0
DELIVERY_TIMEOUT_S = 300.0  # a function that submits (and builds nothing) answers in seconds
_ONE_TRY = RetryPolicy(attempts=1, read_timeout=30.0)
_LIST = {"maxResults": 1000}  # the JSON API's page size (pageSize is the pager's, for other APIs)
# The source functions-framework serves: main.py of DIRECTORY as it is, its function called only
# for an event that passes the sandbox's guard (emulators/_http.py), else answered 401/403/400.
_GUARDED = """\
import importlib.util, json, os, sys

import flask

from vertex_trainer.emulators._http import Guard, envelope

DIRECTORY = {directory!r}
sys.path.append(DIRECTORY)
_spec = importlib.util.spec_from_file_location(
    "main", os.path.join(DIRECTORY, "main.py"), submodule_search_locations=[DIRECTORY]
)
_main = importlib.util.module_from_spec(_spec)
sys.modules["main"] = _main
_spec.loader.exec_module(_main)
_GUARD = Guard(os.environ.get({token_env!r}) or None)


def {target}(cloud_event):
    refused = _GUARD.refusal(flask.request.method, flask.request.headers)
    if refused is not None:
        body = json.dumps(envelope(*refused))
        flask.abort(flask.Response(body, status=refused[0], content_type="application/json"))
    return _main.{target}(cloud_event)
"""


@dataclass(frozen=True)
class Delivery:
    """One attempt to deliver one event: what was sent and what the function answered."""

    event_id: str
    bucket: str
    name: str
    generation: str
    attempt: int
    status: int  # the HTTP status; 0 = no answer


class FunctionHost:
    """A rendered function under functions-framework, and the events of its bucket.

    `directory`: the `trigger render` output; `environ`: the function's environment (the
    sandbox's variables); `storage`: the Cloud Storage emulator's http://host:port; `redeliver`:
    how many times each event is sent. The sandbox's token, which the bucket's listing and every
    event carry (and the function requires), is the one `environ` holds."""

    def __init__(
        self,
        directory: str | Path,
        *,
        environ: Mapping[str, str],
        storage: str,
        redeliver: int = 1,
        echo: Log | None = None,
        backoff_s: float = BACKOFF_S,
        max_attempts: int = MAX_ATTEMPTS,
    ):
        from vertex_trainer.automation.storage_events import TriggerConfig

        self.directory = Path(directory).resolve()
        if not (self.directory / "main.py").is_file():
            raise FileNotFoundError(
                f"{self.directory}/main.py: not a `vertex-trainer trigger render` directory"
            )
        self.config = TriggerConfig.load(self.directory)
        self.environ = dict(environ)
        token = self.environ.get(EMULATOR_TOKEN_ENV) or None
        self.storage = storage.rstrip("/")
        # One attempt per listing: a failed poll is repeated by the next one, POLL_S later.
        self._api = ApiClient(self.storage, retry=_ONE_TRY, service="the Cloud Storage emulator", token=token)
        self.token = token
        self._guarded = tempfile.TemporaryDirectory(prefix="vertex-trainer-function-")
        self.redeliver = max(1, int(redeliver))
        self.echo = echo if echo is not None else (lambda text: None)
        self.backoff_s, self.max_attempts = backoff_s, max_attempts
        self.deliveries: list[Delivery] = []
        self.url = ""
        self._supervisor: Any = None
        self._stop = threading.Event()
        self._seen: set[tuple[str, str]] = set()
        self._ids = itertools.count(int(time.time() * 1000) % 10**12 * 1000)
        self._lock = threading.Lock()
        self._delivered = threading.Condition(self._lock)
        self._threads: list[threading.Thread] = []

    @property
    def bucket(self) -> str:
        return self.config.bucket

    def start(self) -> FunctionHost:
        """Start the function (returns once it answers) and the bucket's watcher."""
        from vertex_trainer.local.cluster import free_ports

        self._seen = {(o["name"], str(o["generation"])) for o in self._objects()}
        port = free_ports(1)[0]
        self.url = f"http://127.0.0.1:{port}/"
        argv = (
            sys.executable,
            "-m",
            "functions_framework",
            "--target",
            TARGET,
            "--source",
            self._guarded_source(),
            "--signature-type",
            "cloudevent",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        )
        env = {
            **self.environ,
            EMULATOR_TOKEN_ENV: self.token or "",
            "PORT": str(port),
            "K_SERVICE": self.directory.name,
            "K_REVISION": f"{self.directory.name}-00001",
            "PYTHONUNBUFFERED": "1",
        }
        self._spawn(self._serve, argv, env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(port):
            if self._supervisor is not None and self._supervisor.all_ended():
                raise RuntimeError(
                    f"the function in {self.directory} exited at start: "
                    + " | ".join(self._supervisor.processes[0].tail)
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"the function did not listen on {port} in {START_TIMEOUT_S:.0f} s")
            time.sleep(0.1)
        self.echo(
            f"[function {self.directory.name}] serving {TARGET} on {self.url}; events of "
            f"gs://{self.bucket} (each delivered {self.redeliver}x)"
        )
        self._spawn(self._watch)
        return self

    def stop(self) -> None:
        """Stop watching, then the function (and wait for both)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        self._guarded.cleanup()

    def _guarded_source(self) -> str:
        """The source functions-framework serves: main.py behind the sandbox's guard."""
        path = Path(self._guarded.name) / "sandbox_function.py"
        path.write_text(
            _GUARDED.format(directory=str(self.directory), token_env=EMULATOR_TOKEN_ENV, target=TARGET),
            encoding="utf-8",
        )
        return str(path)

    def wait_deliveries(self, count: int, timeout: float) -> list[Delivery]:
        """Block until `count` attempts were made (or `timeout`); every attempt so far."""
        with self._delivered:
            self._delivered.wait_for(lambda: len(self.deliveries) >= count, timeout)
            return list(self.deliveries)

    # -- the function -----------------------------------------------------------------------
    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        started = threading.Event()
        thread = threading.Thread(
            target=target, args=(*args, started), daemon=True, name=f"function-{target.__name__.strip('_')}"
        )
        self._threads.append(thread)
        thread.start()
        started.wait(30)

    def _serve(self, argv: tuple[str, ...], env: dict[str, str], started: threading.Event) -> None:
        # The process is started by the thread that watches it for as long as it runs (its
        # PR_SET_PDEATHSIG follows the thread that forked it), as the model servers are.
        from vertex_trainer.local import Replica, Supervisor

        self._supervisor = Supervisor(
            [Replica(pool=0, index=0, address="", argv=argv, env=env)], cwd=str(self.directory)
        )
        try:
            self._supervisor.start()
        finally:
            started.set()
        while not self._stop.is_set() and not self._supervisor.all_ended():
            for _, line in self._supervisor.lines(timeout=0.2):
                self.echo(f"[function {self.directory.name}] {line}")
        self._supervisor.stop()
        for _, line in self._supervisor.lines(timeout=0):
            self.echo(f"[function {self.directory.name}] {line}")

    # -- Eventarc ---------------------------------------------------------------------------
    def _watch(self, started: threading.Event) -> None:
        started.set()
        while not self._stop.wait(POLL_S):
            try:
                found = self._objects()
            except (OSError, ServiceError):  # the emulator busy or restarting: the next poll sees it
                continue
            for obj in sorted(found, key=lambda o: (o.get("updated", ""), o["name"])):
                key = (obj["name"], str(obj["generation"]))
                if key in self._seen:
                    continue
                self._seen.add(key)
                event_id = str(next(self._ids))
                for _ in range(self.redeliver):
                    self._deliver(event_id, obj)

    def _deliver(self, event_id: str, obj: dict[str, Any]) -> None:
        data = storage_object_data(obj)
        headers = {
            "ce-specversion": "1.0",
            "ce-id": event_id,
            "ce-type": FINALIZED,
            "ce-source": f"//storage.googleapis.com/projects/_/buckets/{data['bucket']}",
            "ce-subject": f"objects/{data['name']}",
            "ce-time": data.get("updated", ""),
            "Content-Type": "application/json; charset=utf-8",
            **emulator_headers(self.token),
        }
        body = json.dumps(data).encode()
        delay = self.backoff_s
        for attempt in range(1, self.max_attempts + 1):
            status = _post(self.url, body, headers)
            with self._delivered:
                self.deliveries.append(
                    Delivery(event_id, data["bucket"], data["name"], data["generation"], attempt, status)
                )
                self._delivered.notify_all()
            if 200 <= status < 300 or self._stop.is_set():
                return
            self.echo(
                f"[eventarc] gs://{data['bucket']}/{data['name']}#{data['generation']}: the "
                f"function answered {status or 'nothing'}; again in {delay:.0f} s "
                f"(attempt {attempt}/{self.max_attempts})"
            )
            if self._stop.wait(delay):
                return
            delay *= 2
        self.echo(
            f"[eventarc] gs://{data['bucket']}/{data['name']}#{data['generation']}: gave up "
            f"after {self.max_attempts} attempts"
        )

    def _objects(self) -> list[dict[str, Any]]:
        """Every object of the bucket with its generation (the JSON API's objects.list), through
        the one pager (docs/architecture.md, "One HTTP layer")."""
        path = f"storage/v1/b/{urllib.parse.quote(self.bucket, safe='')}/o"
        return self._api.list("list the watched bucket", path, items="items", params=_LIST, max_pages=None)


def storage_object_data(obj: dict[str, Any]) -> dict[str, Any]:
    """StorageObjectData (the event's body) from a JSON API object: int64 fields as strings,
    `id` = bucket/name/generation, as Cloud Storage's events carry them."""
    data = {
        k: obj[k]
        for k in (
            "bucket",
            "name",
            "contentType",
            "md5Hash",
            "crc32c",
            "timeCreated",
            "updated",
            "storageClass",
            "etag",
            "metadata",
            "timeStorageClassUpdated",
        )
        if obj.get(k) not in (None, "")
    }
    for key in ("generation", "metageneration", "size"):
        data[key] = str(obj.get(key, "0" if key == "size" else "1"))
    data["id"] = f"{data['bucket']}/{data['name']}/{data['generation']}"
    data["kind"] = "storage#object"
    data["selfLink"] = (
        f"https://www.googleapis.com/storage/v1/b/{data['bucket']}/o/"
        f"{urllib.parse.quote(data['name'], safe='')}"
    )
    data["mediaLink"] = (
        f"https://storage.googleapis.com/download/storage/v1/b/{data['bucket']}/o/"
        f"{urllib.parse.quote(data['name'], safe='')}?generation={data['generation']}"
        "&alt=media"
    )
    return data


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with _opener().open(request, timeout=DELIVERY_TIMEOUT_S) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))
