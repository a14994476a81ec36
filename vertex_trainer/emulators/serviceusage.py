"""A fake Service Usage API (v1) on loopback: which APIs a project has enabled, and enabling them.

    GET  /v1/projects/P/services:batchGet?names=projects/P/services/S&names=...
    GET  /v1/projects/P/services/S
    POST /v1/projects/P/services/S:enable            {}
    POST /v1/projects/P/services:batchEnable         {"serviceIds": [S, ...]}
    GET  /v1/operations/ID

Every service is ENABLED unless it was disabled (`disable("aiplatform.googleapis.com")`, or
`disabled=` at construction: `dev sandbox --disable-api NAME`). Enabling answers a long-running
operation that is already done, as the real API often does for a service that enables at once.
`on_change(service, enabled)` is called after each change (the sandbox tells the fake Vertex AI).
`requests` keeps (method, path, body) of every request, for the tests that hold them against
Google's discovery document. Point the tool here with
`VERTEX_TRAINER_SERVICEUSAGE_ENDPOINT=http://127.0.0.1:PORT`.

Errors use Google's envelope. It shares no code with the client it stands in for.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from vertex_trainer.emulators._http import JsonHandler, LoopbackServer

_BATCH_GET = re.compile(r"^/v1/projects/(?P<project>[^/]+)/services:batchGet$")
_ONE = re.compile(r"^/v1/projects/(?P<project>[^/]+)/services/(?P<service>[^/:]+)$")
_ENABLE = re.compile(r"^/v1/projects/(?P<project>[^/]+)/services/(?P<service>[^/:]+):enable$")
_BATCH_ENABLE = re.compile(r"^/v1/projects/(?P<project>[^/]+)/services:batchEnable$")
_OPERATION = re.compile(r"^/v1/(?P<name>operations/[^/]+)$")
_NAME = re.compile(r"^projects/(?P<project>[^/]+)/services/(?P<service>[^/]+)$")
_SERVICE_ID = re.compile(r"^[a-z0-9-]+(\.[a-z0-9-]+)+$")
BATCH_LIMIT = 20  # batchGet and batchEnable take at most 20 services a request


@dataclass
class FakeServiceUsage(LoopbackServer):
    host: str = "127.0.0.1"
    port: int = 0
    disabled: set[str] = field(default_factory=set)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    on_change: Callable[[str, bool], None] | None = None

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()
        self.faults = []
        self._operations: dict[str, dict[str, Any]] = {}

    def disable(self, service: str) -> None:
        """`service` (e.g. "aiplatform.googleapis.com") answers DISABLED until enabled."""
        with self._lock:
            self.disabled.add(service)
        if self.on_change:
            self.on_change(service, False)

    def enabled(self, service: str) -> bool:
        with self._lock:
            return service not in self.disabled

    def _service(self, project: str, service: str) -> dict[str, Any]:
        state = "ENABLED" if self.enabled(service) else "DISABLED"
        return {
            "name": f"projects/{project}/services/{service}",
            "parent": f"projects/{project}",
            "config": {"name": service, "title": service.split(".")[0]},
            "state": state,
        }

    def _enable(self, project: str, services: list[str], kind: str) -> dict[str, Any]:
        changed = []
        with self._lock:
            for service in services:
                if service in self.disabled:
                    self.disabled.discard(service)
                    changed.append(service)
        if self.on_change:
            for service in changed:
                self.on_change(service, True)
        name = f"operations/acat.p2-{uuid.uuid4().hex[:12]}"
        found = [self._service(project, s) for s in services]
        response: dict[str, Any] = {
            "@type": f"type.googleapis.com/google.api.serviceusage.v1.{kind}ServiceResponse"
            if kind == "Enable"
            else "type.googleapis.com/google.api.serviceusage.v1.BatchEnableServicesResponse"
        }
        if kind == "Enable":
            response["service"] = found[0]
        else:
            response["services"] = found
        operation = {"name": name, "done": True, "response": response}
        with self._lock:
            self._operations[name] = operation
        return operation

    def start(self) -> FakeServiceUsage:
        fake = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                fake.requests.append(("GET", self.path, None))
                if (status := fake._take_fault("GET")) is not None:
                    return self.send_envelope(status, "Fault injected.")
                if m := _BATCH_GET.match(parts.path):
                    names = parse_qs(parts.query).get("names", [])
                    if not names or len(names) > BATCH_LIMIT:
                        return self.send_envelope(400, f"names: between 1 and {BATCH_LIMIT} names")
                    services = []
                    for name in names:
                        n = _NAME.match(name)
                        if not n or n["project"] != m["project"]:
                            return self.send_envelope(400, f"Invalid service name {name!r}.")
                        services.append(fake._service(m["project"], n["service"]))
                    return self.send_json(200, {"services": services})
                if m := _ONE.match(parts.path):
                    return self.send_json(200, fake._service(m["project"], unquote(m["service"])))
                if m := _OPERATION.match(parts.path):
                    with fake._lock:
                        operation = fake._operations.get(m["name"])
                    if operation is None:
                        return self.send_envelope(404, f"Operation {m['name']} not found.")
                    return self.send_json(200, operation)
                self.send_envelope(404, f"Method GET {parts.path} not found.")

            def do_POST(self) -> None:
                parts = urlsplit(self.path)
                body = self.json_body()
                fake.requests.append(("POST", self.path, body))
                if (status := fake._take_fault("POST")) is not None:
                    return self.send_envelope(status, "Fault injected.")
                if body is ValueError:
                    return self.send_envelope(400, "Invalid JSON payload received.")
                if m := _ENABLE.match(parts.path):
                    return self.send_json(200, fake._enable(m["project"], [m["service"]], "Enable"))
                if m := _BATCH_ENABLE.match(parts.path):
                    ids = (body or {}).get("serviceIds") or []
                    if not ids or len(ids) > BATCH_LIMIT or not all(_SERVICE_ID.match(str(s)) for s in ids):
                        return self.send_envelope(
                            400,
                            f"serviceIds: between 1 and {BATCH_LIMIT} service names, e.g. x.googleapis.com",
                        )
                    return self.send_json(200, fake._enable(m["project"], list(ids), "BatchEnable"))
                self.send_envelope(404, f"Method POST {parts.path} not found.")

        return self._serve(Handler)
