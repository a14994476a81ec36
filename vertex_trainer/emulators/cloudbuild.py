"""A fake Cloud Build REST API (v1) on loopback, for tests and offline demos.

Point the packager at it with `VERTEX_TRAINER_CLOUDBUILD_ENDPOINT=http://127.0.0.1:PORT` (an
http:// endpoint means anonymous credentials). It serves:

  POST /v1/projects/{p}/locations/{l}/builds          -> Operation (metadata.build)
  GET  /v1/projects/{p}/locations/{l}/builds/{id}     -> Build
  GET  /v1/projects/{p}/locations/{l}/operations/{id} -> Operation (done when the build ended)
  POST /v1/projects/{p}/locations/{l}/builds/{id}:cancel

Every create request is recorded (`requests`). A build "runs" as the client polls it:
QUEUED -> WORKING -> SUCCESS (or FAILURE). When `storage_host` is given (the gcp-storage-emulator
URL), the build fetches its source object from there and fails, as the real service would, when
the object is missing or is not a tar.gz with a Dockerfile at its root. When `registry` is given
(emulators.registry.FakeRegistry), a successful build pushes its `images` there.

`inject(408, method="GET")` makes the next matching request fail with that status (fault
injection, to prove the client retries what is safe to retry, and only that).
"""

from __future__ import annotations

import datetime
import gzip
import io
import json
import re
import tarfile
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from vertex_trainer.emulators._http import JsonHandler, LoopbackServer

_PARENT = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
_OPERATION_METADATA = "type.googleapis.com/google.devtools.cloudbuild.v1.BuildOperationMetadata"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeCloudBuild(LoopbackServer):
    host: str = "127.0.0.1"
    port: int = 0
    storage_host: str | None = None
    registry: Any = None  # FakeRegistry, or None
    polls_per_state: int = 1  # GETs a build spends in QUEUED and in WORKING
    fail_with: str | None = None  # force every build to fail with this detail
    requests: list[RecordedRequest] = field(default_factory=list)
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)
    faults: list[tuple[str | None, int]] = field(default_factory=list)  # (method or None, status)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()
        self._polls: dict[str, int] = {}
        self.sources: dict[str, bytes] = {}  # build id -> the context it fetched

    @property
    def creates(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST" and r.path.endswith("/builds")]

    # -- the simulated build -----------------------------------------------------------------
    def _create(self, project: str, location: str, body: dict[str, Any]) -> dict[str, Any]:
        build_id = str(uuid.uuid4())
        build: dict[str, Any] = json.loads(json.dumps(body))
        build.update(
            {
                "id": build_id,
                "name": f"projects/{project}/locations/{location}/builds/{build_id}",
                "projectId": project,
                "status": "QUEUED",
                "createTime": _now(),
                "logUrl": (
                    f"https://console.cloud.google.com/cloud-build/builds;region={location}/"
                    f"{build_id}?project={project}"
                ),
                "logsBucket": f"gs://{project}_cloudbuild/logs",
            }
        )
        for step in build.get("steps", []):
            step["status"] = "QUEUED"
        with self._lock:
            self.builds[build_id] = build
            self._polls[build_id] = 0
        return build

    def _advance(self, build_id: str) -> dict[str, Any]:
        with self._lock:
            build = self.builds[build_id]
            if build["status"] in ("SUCCESS", "FAILURE", "CANCELLED", "TIMEOUT", "INTERNAL_ERROR"):
                return build
            self._polls[build_id] += 1
            polls = self._polls[build_id]
            if polls <= self.polls_per_state:
                return build
            if build["status"] == "QUEUED":
                build["status"] = "WORKING"
                build["startTime"] = _now()
                for step in build.get("steps", [])[:1]:
                    step["status"] = "WORKING"
                return build
            if polls <= 2 * self.polls_per_state:
                return build
        problem = self.fail_with or self._check_source(build_id, build)
        with self._lock:
            build["finishTime"] = _now()
            if problem:
                build["status"] = "FAILURE"
                build["statusDetail"] = problem
                build["failureInfo"] = {"type": "USER_BUILD_STEP", "detail": problem}
                for step in build.get("steps", []):
                    step["status"] = "FAILURE" if step.get("status") == "WORKING" else step.get("status")
            else:
                build["status"] = "SUCCESS"
                for step in build.get("steps", []):
                    step["status"] = "SUCCESS"
                digests = []
                for image in build.get("images", []):
                    digest = self.registry.add(image) if self.registry is not None else "sha256:" + "0" * 64
                    digests.append({"name": image, "digest": digest})
                build["results"] = {"images": digests}
            return build

    def _check_source(self, build_id: str, build: dict[str, Any]) -> str | None:
        source = (build.get("source") or {}).get("storageSource")
        if not source:
            return "no source.storageSource in the build"
        if self.storage_host is None:
            return None
        url = (
            f"{self.storage_host.rstrip('/')}/storage/v1/b/{source['bucket']}/o/"
            f"{urllib.parse.quote(source['object'], safe='')}?alt=media"
        )
        # The sandbox's storage emulator takes the same token as this stand-in (services.py).
        headers = {"Authorization": f"Bearer {self.sandbox_token}"} if self.sandbox_token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as resp:
                data = resp.read()
        except urllib.error.HTTPError as exc:
            return f"source gs://{source['bucket']}/{source['object']}: HTTP {exc.code}"
        self.sources[build_id] = data
        try:
            with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data)), mode="r:") as tar:
                names = tar.getnames()
        except (OSError, tarfile.TarError) as exc:
            return f"source is not a tar.gz: {exc}"
        if "Dockerfile" not in names:
            return "unable to prepare context: Dockerfile not found at the root of the source"
        return None

    # -- HTTP --------------------------------------------------------------------------------
    def start(self) -> FakeCloudBuild:
        fake = self

        class Handler(JsonHandler):
            content_type = "application/json"

            def _error(self, code: int, status: str, message: str) -> None:
                self.send_json(code, {"error": {"code": code, "status": status, "message": message}})

            def _body(self) -> Any:  # the JSON, the text that is not JSON, or None
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode(errors="replace")

            def _received(self, body: Any) -> str | None:
                """Record the request; answer an injected fault (None) or return the path."""
                path, _, query = self.path.partition("?")
                fake.requests.append(RecordedRequest(self.command, path, query, dict(self.headers), body))
                fault = fake._take_fault(self.command)
                if fault is not None:
                    self._error(fault, "UNAVAILABLE", f"injected fault {fault}")
                    return None
                return path

            def do_POST(self) -> None:
                body = self._body()
                path = self._received(body)
                if path is None:
                    return
                m = re.fullmatch(_PARENT + r"/builds", path)
                if m:
                    if not isinstance(body, dict):
                        return self._error(400, "INVALID_ARGUMENT", "body must be a Build")
                    if not body.get("steps"):
                        return self._error(400, "INVALID_ARGUMENT", "invalid build: no steps")
                    build = fake._create(m["project"], m["location"], body)
                    op = f"projects/{m['project']}/locations/{m['location']}/operations/{build['id']}"
                    return self.send_json(
                        200,
                        {
                            "name": op,
                            "metadata": {
                                "@type": _OPERATION_METADATA,
                                "build": build,
                            },
                        },
                    )
                m = re.fullmatch(_PARENT + r"/builds/(?P<id>[^/:]+):cancel", path)
                if m and m["id"] in fake.builds:
                    with fake._lock:
                        fake.builds[m["id"]]["status"] = "CANCELLED"
                    return self.send_json(200, fake.builds[m["id"]])
                self._error(404, "NOT_FOUND", f"no such resource: {path}")

            def do_GET(self) -> None:
                path = self._received(None)
                if path is None:
                    return
                m = re.fullmatch(_PARENT + r"/builds/(?P<id>[^/]+)", path)
                if m:
                    if m["id"] not in fake.builds:
                        return self._error(404, "NOT_FOUND", f"build {m['id']} not found")
                    return self.send_json(200, fake._advance(m["id"]))
                m = re.fullmatch(_PARENT + r"/operations/(?P<id>[^/]+)", path)
                if m and m["id"] in fake.builds:
                    build = fake._advance(m["id"])
                    done = build["status"] not in ("QUEUED", "WORKING")
                    op = {
                        "name": path[4:],
                        "done": done,
                        "metadata": {
                            "@type": _OPERATION_METADATA,
                            "build": build,
                        },
                    }
                    if done:
                        op["response"] = {
                            "@type": "type.googleapis.com/google.devtools.cloudbuild.v1.Build",
                            **build,
                        }
                    return self.send_json(200, op)
                self._error(404, "NOT_FOUND", f"no such resource: {path}")

        return self._serve(Handler)
