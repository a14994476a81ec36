"""What a project lets the caller do, asked of Google, not guessed (`check` and `setup`, issue 33).

One small client per API, each over the one `ApiClient`:

- Service Usage v1: `services.batchGet` (which APIs are enabled), `services.batchEnable`.
- Resource Manager v3: `projects.testIamPermissions`, `getIamPolicy`, `setIamPolicy`.
- IAM v1: `projects.serviceAccounts.testIamPermissions` (iam.serviceAccounts.actAs),
  `getIamPolicy`, `setIamPolicy`.
- Cloud Storage v1: `buckets.testIamPermissions`, `buckets.insert` (uniform bucket-level access).
- Artifact Registry v1: `repositories.get`, `repositories.create`, `repositories.testIamPermissions`.

Paths and bodies follow Google's discovery documents (tests/check/ holds every request the tool
sends against them). Long-running operations are followed by `gcp.lro.wait_operation`.
Nothing here decides what to check: readiness/project_check.py does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from vertex_trainer.gcp.http import ApiClient, default_hint
from vertex_trainer.gcp.lro import wait_operation
from vertex_trainer.log import Log
from vertex_trainer.settings import PollPolicy, RetryPolicy, Settings

BATCH = 20  # Service Usage's batchGet and batchEnable take at most 20 services a request


@dataclass(frozen=True)
class AccessApis:
    """The clients of one `check` or `setup` run, built once from Settings."""

    serviceusage: ApiClient
    resourcemanager: ApiClient
    iam: ApiClient
    storage: ApiClient
    artifactregistry: ApiClient

    @classmethod
    def of(
        cls, settings: Settings, *, log: Log | None = None, retry: RetryPolicy | None = None
    ) -> AccessApis:
        def client(url: str, service: str, api: str) -> ApiClient:
            return ApiClient.of(
                settings,
                url,
                retry=retry,
                log=log,
                service=service,
                hints=default_hint(service, api, settings.project),
            )

        return cls(
            serviceusage=client(settings.serviceusage_url(), "Service Usage", "serviceusage.googleapis.com"),
            resourcemanager=client(
                settings.iam_url("cloudresourcemanager"),
                "Resource Manager",
                "cloudresourcemanager.googleapis.com",
            ),
            iam=client(settings.iam_url("iam"), "IAM", "iam.googleapis.com"),
            storage=client(settings.storage_url(), "Cloud Storage", "storage.googleapis.com"),
            artifactregistry=client(
                settings.iam_url("artifactregistry"), "Artifact Registry", "artifactregistry.googleapis.com"
            ),
        )


# -- Service Usage ---------------------------------------------------------------------------
def enabled_services(api: ApiClient, project: str, services: list[str]) -> dict[str, bool]:
    """service -> enabled, for each of `services` ("aiplatform.googleapis.com"), in batches."""
    states: dict[str, bool] = {}
    for i in range(0, len(services), BATCH):
        batch = services[i : i + BATCH]
        answer = api.json(
            "read the enabled APIs",
            "GET",
            f"v1/projects/{project}/services:batchGet",
            params={"names": [f"projects/{project}/services/{s}" for s in batch]},
        )
        for service in answer.get("services") or []:
            name = str(
                (service.get("config") or {}).get("name") or service.get("name", "").rsplit("/", 1)[-1]
            )
            states[name] = service.get("state") == "ENABLED"
    return {s: states.get(s, False) for s in services}


def enable_services(api: ApiClient, project: str, services: list[str], *, poll: PollPolicy) -> None:
    """Enable `services` (batchEnable, in batches), waiting for each operation to end."""
    for i in range(0, len(services), BATCH):
        op = api.json(
            "enable APIs",
            "POST",
            f"v1/projects/{project}/services:batchEnable",
            json={"serviceIds": services[i : i + BATCH]},
        )
        if not op.get("done"):
            wait_operation(api, op, poll=poll, what="enabling APIs")


# -- testIamPermissions ----------------------------------------------------------------------
def _held(answer: dict[str, Any]) -> set[str]:
    return {str(p) for p in answer.get("permissions") or []}


def _tested(api: ApiClient, what: str, resource: str, permissions: list[str]) -> set[str]:
    """Those of `permissions` the caller holds on `resource` (POST RESOURCE:testIamPermissions)."""
    answer = api.json(
        f"test {what} permissions",
        "POST",
        f"{resource}:testIamPermissions",
        json={"permissions": permissions},
    )
    return _held(answer)


def project_permissions(api: ApiClient, project: str, permissions: list[str]) -> set[str]:
    """Those of `permissions` the caller holds on the project (Resource Manager v3)."""
    return _tested(api, "project", f"v3/projects/{project}", permissions)


def service_account_resource(project: str, email: str) -> str:
    return f"projects/{project}/serviceAccounts/{email}"


def service_account_permissions(api: ApiClient, project: str, email: str, permissions: list[str]) -> set[str]:
    """Those of `permissions` the caller holds on the service account `email` (IAM v1)."""
    return _tested(api, "service account", f"v1/{service_account_resource(project, email)}", permissions)


def bucket_permissions(api: ApiClient, bucket: str, permissions: list[str]) -> set[str] | None:
    """Those of `permissions` the caller holds on `bucket` (Cloud Storage v1); None: no bucket."""
    response = api.call(
        "test bucket permissions",
        "GET",
        f"storage/v1/b/{quote(bucket, safe='')}/iam/testPermissions",
        params={"permissions": permissions},
        allow=(404,),
    )
    if response.status_code == 404:
        return None
    return _held(response.json())


def repository_name(project: str, location: str, repository: str) -> str:
    return f"projects/{project}/locations/{location}/repositories/{repository}"


def repository_permissions(api: ApiClient, name: str, permissions: list[str]) -> set[str]:
    """Those of `permissions` the caller holds on the repository `name` (Artifact Registry v1)."""
    return _tested(api, "repository", f"v1/{name}", permissions)


# -- resources -------------------------------------------------------------------------------
def repository(api: ApiClient, name: str) -> dict[str, Any] | None:
    """The repository `name` (its format, mode), or None when it does not exist."""
    response = api.call("read the repository", "GET", f"v1/{name}", allow=(404,))
    return None if response.status_code == 404 else dict(response.json())


def create_repository(
    api: ApiClient, project: str, location: str, repository: str, *, poll: PollPolicy
) -> None:
    """A Docker repository in `location` (repositories.create), waiting for its operation."""
    op = api.json(
        "create the repository",
        "POST",
        f"v1/projects/{project}/locations/{location}/repositories",
        params={"repositoryId": repository},
        json={"format": "DOCKER", "description": "vertex-trainer images"},
    )
    if not op.get("done"):
        wait_operation(api, op, poll=poll, what="creating the repository")


def create_bucket(api: ApiClient, project: str, bucket: str, location: str) -> None:
    """A bucket in `location` with uniform bucket-level access (buckets.insert)."""
    api.json(
        "create the bucket",
        "POST",
        "storage/v1/b",
        params={"project": project},
        json={
            "name": bucket,
            "location": location.upper(),
            "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True}},
        },
    )


# -- IAM policies (setup --grant) ------------------------------------------------------------
def add_binding(api: ApiClient, resource: str, role: str, member: str, *, version: str) -> bool:
    """Add `member` to `role` on `resource` (read-modify-write with the policy's etag). `version`:
    "v3" (a project, Resource Manager) or "v1" (a service account, IAM). Returns False when the
    binding was there already (nothing written)."""
    policy = api.json("read the IAM policy", "POST", f"{version}/{resource}:getIamPolicy", json={})
    bindings = [dict(b) for b in policy.get("bindings") or []]
    for b in bindings:
        if b.get("role") == role and not b.get("condition"):
            if member in (b.get("members") or []):
                return False
            b["members"] = [*b.get("members", []), member]
            break
    else:
        bindings.append({"role": role, "members": [member]})
    body = {"policy": {"bindings": bindings, "etag": policy.get("etag"), "version": policy.get("version", 1)}}
    api.json("write the IAM policy", "POST", f"{version}/{resource}:setIamPolicy", json=body)
    return True
