"""A fake of the IAM side of Google Cloud on loopback, one server for three APIs:

    Resource Manager v3   POST /v3/projects/P:testIamPermissions   {"permissions": [...]}
                          POST /v3/projects/P:getIamPolicy         {}
                          POST /v3/projects/P:setIamPolicy         {"policy": {...}}
    IAM v1                POST /v1/projects/P/serviceAccounts/SA:testIamPermissions (getIamPolicy,
                          setIamPolicy the same)
    Artifact Registry v1  GET  /v1/projects/P/locations/L/repositories/R
                          POST /v1/projects/P/locations/L/repositories?repositoryId=R  {"format": ...}
                          POST /v1/projects/P/locations/L/repositories/R:testIamPermissions

Every permission is granted unless it was denied (`deny("iam.serviceAccounts.actAs")`, or `denied=`
at construction: `dev sandbox --deny PERMISSION`); a denial holds on every resource until a
setIamPolicy grants a role that carries the permission (this fake's own short table of roles,
`ROLES`, spelled from Google's "IAM roles and permissions" pages; an unknown role is refused as
Google refuses it). The fake does not know who calls: a grant to any member counts.
Repositories exist once created (or `add_repository`). Creating one answers a long-running
operation that is already done. `requests` keeps (method, path, body) of every request, and
`authorizations` the Authorization header of each (None: anonymous).

It also stands in for impersonation's token call, IAM Credentials'
`POST /v1/projects/-/serviceAccounts/SA:generateAccessToken`: it answers the token
"impersonated-SA" to a caller that shows a Bearer token of its own.

Point the tool here with `VERTEX_TRAINER_IAM_ENDPOINT=http://127.0.0.1:PORT`. Errors use
Google's envelope. It shares no code with the client it stands in for.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from vertex_trainer.emulators._http import JsonHandler, LoopbackServer

# role -> the permissions it carries (a name ending in "." stands for every permission under it).
ROLES: dict[str, tuple[str, ...]] = {
    "roles/owner": ("",),
    "roles/editor": ("",),
    "roles/aiplatform.user": ("aiplatform.",),
    "roles/aiplatform.admin": ("aiplatform.",),
    "roles/iam.serviceAccountUser": ("iam.serviceAccounts.actAs", "iam.serviceAccounts.get"),
    "roles/storage.objectAdmin": ("storage.objects.",),
    "roles/storage.objectUser": ("storage.objects.",),
    "roles/storage.admin": ("storage.",),
    "roles/artifactregistry.writer": (
        "artifactregistry.repositories.uploadArtifacts",
        "artifactregistry.repositories.downloadArtifacts",
        "artifactregistry.repositories.get",
    ),
    "roles/artifactregistry.admin": ("artifactregistry.",),
    "roles/cloudbuild.builds.editor": ("cloudbuild.builds.",),
    "roles/logging.viewer": ("logging.logEntries.list", "logging.logs.list"),
    "roles/cloudquotas.viewer": ("cloudquotas.quotas.get",),
    "roles/serviceusage.serviceUsageAdmin": ("serviceusage.services.",),
    "roles/serviceusage.serviceUsageConsumer": ("serviceusage.services.use",),
}

_V3 = re.compile(
    r"^/v3/(?P<resource>projects/[^/:]+):(?P<verb>testIamPermissions|getIamPolicy|setIamPolicy)$"
)
_SA = re.compile(
    r"^/v1/(?P<resource>projects/[^/]+/serviceAccounts/[^/:]+):"
    r"(?P<verb>testIamPermissions|getIamPolicy|setIamPolicy)$"
)
_REPOS = re.compile(r"^/v1/(?P<parent>projects/[^/]+/locations/[^/]+)/repositories$")
_REPO = re.compile(r"^/v1/(?P<name>projects/[^/]+/locations/[^/]+/repositories/[^/:]+)$")
_REPO_VERB = re.compile(
    r"^/v1/(?P<resource>projects/[^/]+/locations/[^/]+/repositories/[^/:]+):(?P<verb>testIamPermissions)$"
)
_TOKEN = re.compile(r"^/v1/projects/-/serviceAccounts/(?P<email>[^/:]+):generateAccessToken$")
_REPO_ID = re.compile(r"^[a-z]([a-z0-9-]*[a-z0-9])?$")
_MEMBER = re.compile(r"^(user|serviceAccount|group|domain|principal|principalSet):.+")


def carries(role: str, permission: str) -> bool:
    return any(
        permission == p or ((p.endswith(".") or not p) and permission.startswith(p)) for p in ROLES[role]
    )


@dataclass
class FakeIam(LoopbackServer):
    host: str = "127.0.0.1"
    port: int = 0
    denied: set[str] = field(default_factory=set)
    repositories: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> Repository
    policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # resource -> bindings
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()
        self.faults = []
        self._etag = 0

    def deny(self, permission: str) -> None:
        """Answer `permission` as not held, on every resource, until a role carrying it is granted."""
        with self._lock:
            self.denied.add(permission)

    def add_repository(self, name: str, fmt: str = "DOCKER") -> dict[str, Any]:
        """projects/P/locations/L/repositories/R exists from now on."""
        repo = {"name": name, "format": fmt, "mode": "STANDARD_REPOSITORY"}
        with self._lock:
            self.repositories[name] = repo
        return repo

    def _test(self, permissions: list[str]) -> dict[str, Any]:
        with self._lock:
            held = [p for p in permissions if p not in self.denied]
        return {"permissions": held} if held else {}  # an empty repeated field is left out

    def _policy(self, resource: str) -> dict[str, Any]:
        with self._lock:
            return {
                "version": 1,
                "etag": f"BwY{self._etag:05d}",
                "bindings": list(self.policies.get(resource, [])),
            }

    def _set_policy(self, resource: str, body: Any) -> tuple[int, dict[str, Any]]:
        policy = (body or {}).get("policy")
        if not isinstance(policy, dict):
            return 400, {"message": "policy: required"}
        bindings = policy.get("bindings") or []
        for b in bindings:
            role, members = b.get("role"), b.get("members") or []
            if role not in ROLES:
                return 400, {"message": f"Role ({role}) does not exist in the resource's hierarchy."}
            bad = [m for m in members if not _MEMBER.match(str(m))]
            if bad:
                return 400, {"message": f"Invalid member: {bad[0]}"}
        with self._lock:
            if policy.get("etag") and policy["etag"] != f"BwY{self._etag:05d}":
                return 409, {"message": "There were concurrent policy changes."}
            self._etag += 1
            self.policies[resource] = [dict(b) for b in bindings]
            for b in bindings:
                if b.get("members"):
                    self.denied = {p for p in self.denied if not carries(b["role"], p)}
        return 200, self._policy(resource)

    def _create_repository(
        self, parent: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, dict[str, Any]]:
        repo_id = (query.get("repositoryId") or [""])[-1]
        if not _REPO_ID.match(repo_id):
            return 400, {"message": f"repositoryId {repo_id!r}: lowercase letters, digits and hyphens"}
        fmt = (body or {}).get("format")
        if fmt not in ("DOCKER", "MAVEN", "NPM", "PYTHON", "APT", "YUM", "GO", "KFP", "GENERIC"):
            return 400, {"message": f"format {fmt!r} is not a repository format"}
        name = f"{parent}/repositories/{repo_id}"
        with self._lock:
            if name in self.repositories:
                return 409, {"message": f"the repository already exists: {name}"}
        repo = self.add_repository(name, fmt)
        op = f"{parent}/operations/{uuid.uuid4()}"
        return 200, {
            "name": op,
            "done": True,
            "response": {
                "@type": "type.googleapis.com/google.devtools.artifactregistry.v1.Repository",
                **repo,
            },
        }

    def start(self) -> FakeIam:
        fake = self

        class Handler(JsonHandler):
            def _answer(self, status: int, payload: dict[str, Any]) -> None:
                if status >= 400:
                    return self.send_envelope(status, payload["message"])
                self.send_json(status, payload)

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                fake.requests.append(("GET", self.path, None))
                fake.authorizations.append(self.headers.get("Authorization"))
                if (status := fake._take_fault("GET")) is not None:
                    return self.send_envelope(status, "Fault injected.")
                if m := _REPO.match(parts.path):
                    with fake._lock:
                        repo = fake.repositories.get(m["name"])
                    if repo is None:
                        return self.send_envelope(404, f"Requested entity was not found: {m['name']}")
                    return self.send_json(200, repo)
                self.send_envelope(404, f"Method GET {parts.path} not found.")

            def do_POST(self) -> None:
                parts = urlsplit(self.path)
                fake.authorizations.append(self.headers.get("Authorization"))
                body = self.json_body()
                fake.requests.append(("POST", self.path, body))
                if m := _TOKEN.match(parts.path):
                    if not (self.headers.get("Authorization") or "").startswith("Bearer "):
                        return self.send_envelope(
                            401, "Request is missing required authentication credential."
                        )
                    expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
                    return self.send_json(
                        200, {"accessToken": f"impersonated-{m['email']}", "expireTime": expiry}
                    )
                if (status := fake._take_fault("POST")) is not None:
                    return self.send_envelope(status, "Fault injected.")
                if body is ValueError:
                    return self.send_envelope(400, "Invalid JSON payload received.")
                m = _V3.match(parts.path) or _SA.match(parts.path) or _REPO_VERB.match(parts.path)
                if m:
                    verb = m["verb"]
                    if verb == "testIamPermissions":
                        wanted = (body or {}).get("permissions")
                        if not isinstance(wanted, list) or not wanted:
                            return self.send_envelope(400, "permissions: at least one permission")
                        return self.send_json(200, fake._test([str(p) for p in wanted]))
                    if verb == "getIamPolicy":
                        return self.send_json(200, fake._policy(m["resource"]))
                    return self._answer(*fake._set_policy(m["resource"], body))
                if m := _REPOS.match(parts.path):
                    return self._answer(*fake._create_repository(m["parent"], parse_qs(parts.query), body))
                self.send_envelope(404, f"Method POST {parts.path} not found.")

        return self._serve(Handler)
