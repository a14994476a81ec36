"""A tiny Docker Registry HTTP API v2 on loopback: just enough to ask "does this tag exist?".

`vertex-trainer package` checks `HEAD /v2/<path>/manifests/<tag>` before building; point it here
with `VERTEX_TRAINER_REGISTRY_ENDPOINT=http://127.0.0.1:PORT` (the registry host of the image
is dropped, the path is kept). The fake Cloud Build (emulators/cloudbuild.py) pushes here when a
build succeeds, so a second `package` finds the tag and builds nothing.

With `token="..."` the registry answers 401 with a Bearer challenge, like Artifact Registry, and
hands out that token at `/v2/token` to a client that shows HTTP basic credentials.

`inject(408, method="HEAD")` makes the next matching request fail with that status (fault
injection, to prove the client retries transient answers).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from vertex_trainer.emulators._http import GuardedHandler, LoopbackServer


@dataclass
class RegistryRequest:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class FakeRegistry(LoopbackServer):
    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    access_token: str | None = None  # the OAuth token /v2/token accepts (None: any)
    manifests: dict[str, str] = field(default_factory=dict)  # "path:tag" -> digest
    requests: list[RegistryRequest] = field(default_factory=list)
    faults: list[tuple[str | None, int]] = field(default_factory=list)  # (method or None, status)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    def add(self, image: str) -> str:
        """Record `[host/]path:tag` as pushed; returns the manifest digest."""
        ref = _strip_host(image)
        digest = "sha256:" + hashlib.sha256(ref.encode()).hexdigest()
        with self._lock:
            self.manifests[ref] = digest
        return digest

    def has(self, image: str) -> bool:
        with self._lock:
            return _strip_host(image) in self.manifests

    def start(self) -> FakeRegistry:
        registry = self

        class Handler(GuardedHandler):  # Host and Origin; its own tokens below
            def _record(self) -> None:
                registry.requests.append(RegistryRequest(self.command, self.path, dict(self.headers)))

            def _send(
                self, code: int, body: dict[str, Any] | None = None, headers: dict[str, Any] | None = None
            ) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Docker-Distribution-API-Version", "registry/2.0")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _authorized(self) -> bool:
                if not registry.token:
                    return True
                return self.headers.get("Authorization") == f"Bearer {registry.token}"

            def _fault(self) -> bool:
                status = registry._take_fault(self.command)
                if status is None:
                    return False
                self._send(
                    status, {"errors": [{"code": "UNAVAILABLE", "message": f"injected fault {status}"}]}
                )
                return True

            def do_GET(self) -> None:
                self._record()
                if self._fault():
                    return
                if self.path.startswith("/v2/token"):
                    auth = self.headers.get("Authorization", "")
                    if not auth.startswith("Basic "):
                        return self._send(401, {"errors": [{"code": "UNAUTHORIZED"}]})
                    user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
                    if user != "oauth2accesstoken" or (
                        registry.access_token is not None and password != registry.access_token
                    ):
                        return self._send(401, {"errors": [{"code": "UNAUTHORIZED"}]})
                    return self._send(200, {"token": registry.token})
                self._manifest()

            def do_HEAD(self) -> None:
                self._record()
                if not self._fault():
                    self._manifest()

            def _manifest(self) -> None:
                if self.path in ("/v2/", "/v2"):
                    return self._send(200, {})
                if not self._authorized():
                    challenge = f'Bearer realm="{registry.url}/v2/token",service="fake-registry"'
                    return self._send(
                        401,
                        {"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]},
                        {"WWW-Authenticate": challenge},
                    )
                path = self.path.split("?", 1)[0]
                if not path.startswith("/v2/") or "/manifests/" not in path:
                    return self._send(404, {"errors": [{"code": "NAME_UNKNOWN"}]})
                name, ref = path[4:].rsplit("/manifests/", 1)
                with registry._lock:
                    digest = registry.manifests.get(f"{name}:{ref}")
                if digest is None:
                    return self._send(
                        404, {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]}
                    )
                self._send(
                    200,
                    {"schemaVersion": 2},
                    {
                        "Docker-Content-Digest": digest,
                        "Content-Type": "application/vnd.docker.distribution.manifest.v2+json",
                    },
                )

        return self._serve(Handler)


def _strip_host(image: str) -> str:
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return rest
    return image
