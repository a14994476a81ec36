"""`vertex-trainer setup SPEC`: make what `check` found missing and the tool may create (issue 33).

From the check's FAIL items that carry a `make`: the APIs are enabled (one Service Usage
batchEnable), the buckets created in the job's region with uniform bucket-level access, the
Docker repository created; the IAM bindings are printed for someone with the right to grant them,
and granted only with `grant=True` (project bindings through Resource Manager, actAs on the
service account through IAM; a bucket's or a repository's binding is left to its gcloud line).
`dry_run` sends nothing and returns every request with its gcloud equivalent. What `check` finds
in order is left alone, so a second run changes nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from vertex_trainer.errors import UserError
from vertex_trainer.gcp import access
from vertex_trainer.settings import Settings
from vertex_trainer.workflows.check import FAIL, Identity, Item


@dataclass(frozen=True)
class Step:
    """One change: `what` for people, the request (`method`, `url`, `body`; none for a binding
    setup cannot grant), the `gcloud` line that does the same, whether it is an IAM `binding`
    (sent only with --grant), whether it was `done`, and `make`: the check item's own description
    of it (what `apply` acts on)."""

    what: str
    method: str
    url: str
    body: dict[str, Any] | None
    gcloud: str
    binding: bool = False
    done: bool = False
    make: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("what", "method", "url", "body", "gcloud", "binding", "done")}


@dataclass
class SetupResult:
    project: str
    steps: list[Step] = field(default_factory=list)
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"project": self.project, "dry_run": self.dry_run, "steps": [s.to_dict() for s in self.steps]}


def plan(items: list[Item], *, project: str, settings: Settings, member: str) -> list[Step]:
    """The steps that fix the FAIL items of a check (those `setup` knows how to make)."""
    makes = [(i, i.make) for i in items if i.status == FAIL and i.make]
    steps: list[Step] = []
    services = [m["service"] for _, m in makes if m["kind"] == "enable"]
    if services:
        steps.append(
            Step(
                f"enable {', '.join(services)}",
                "POST",
                f"{settings.serviceusage_url()}/v1/projects/{project}/services:batchEnable",
                {"serviceIds": services},
                f"gcloud services enable {' '.join(services)} --project {project}",
                make={"kind": "enable", "services": services},
            )
        )
    for _item, m in makes:
        if m["kind"] == "bucket":
            steps.append(
                Step(
                    f"create gs://{m['bucket']} in {m['location']} (uniform bucket-level access)",
                    "POST",
                    f"{settings.storage_url()}/storage/v1/b?project={project}",
                    {
                        "name": m["bucket"],
                        "location": m["location"].upper(),
                        "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True}},
                    },
                    f"gcloud storage buckets create gs://{m['bucket']} --location={m['location']} "
                    f"--uniform-bucket-level-access --project {project}",
                    make=m,
                )
            )
        elif m["kind"] == "repository":
            parent = f"projects/{m['project']}/locations/{m['location']}"
            steps.append(
                Step(
                    f"create the Docker repository {m['repository']} in {m['location']}",
                    "POST",
                    f"{settings.iam_url('artifactregistry')}/v1/{parent}/repositories?repositoryId={m['repository']}",
                    {"format": "DOCKER", "description": "vertex-trainer images"},
                    f"gcloud artifacts repositories create {m['repository']} --repository-format=docker "
                    f"--location={m['location']} --project={m['project']}",
                    make=m,
                )
            )
    bindings: dict[tuple[str, str], Step] = {}
    for item, m in makes:
        if m["kind"] != "binding":
            continue
        key = (m["resource"], m["role"])
        if key in bindings:
            continue
        api = m["api"]
        url = (
            f"{settings.iam_url('cloudresourcemanager')}/v3/{m['resource']}:setIamPolicy"
            if api == "v3"
            else f"{settings.iam_url('iam')}/v1/{m['resource']}:setIamPolicy"
            if api == "v1" and "/serviceAccounts/" in m["resource"]
            else ""
        )
        bindings[key] = Step(
            f"grant {m['role']} to {member} on {m['resource']}",
            "POST" if url else "",
            url,
            {"policy": {"bindings": [{"role": m["role"], "members": [member]}]}} if url else None,
            (item.fix or "").replace("--member=MEMBER", f"--member={member}"),
            binding=True,
            make=m if url else {},
        )
    return steps + list(bindings.values())


def apply(steps: list[Step], *, project: str, settings: Settings, member: str, grant: bool) -> list[Step]:
    """Send the steps (bindings only with `grant`, and only those with a request); returns them
    with `done` set on what was sent."""
    if grant and member == "MEMBER" and any(s.binding and s.url for s in steps):
        raise UserError(
            "setup --grant: whom to grant is not known from the credentials; nothing was sent",
            hint="name the member: --member user:EMAIL (or serviceAccount:EMAIL)",
        )
    apis = access.AccessApis.of(settings)
    out = []
    for step in steps:
        kind = step.make.get("kind")
        done = kind is not None and (grant or kind != "binding")
        if done:
            _make(apis, step.make, project=project, member=member, settings=settings)
        out.append(dataclasses.replace(step, done=done))
    return out


def _make(
    apis: access.AccessApis, m: dict[str, Any], *, project: str, member: str, settings: Settings
) -> None:
    """Send the request(s) of one step, described by its `make`."""
    if m["kind"] == "enable":
        access.enable_services(apis.serviceusage, project, list(m["services"]), poll=settings.poll)
    elif m["kind"] == "bucket":
        access.create_bucket(apis.storage, project, m["bucket"], m["location"])
    elif m["kind"] == "repository":
        access.create_repository(
            apis.artifactregistry, m["project"], m["location"], m["repository"], poll=settings.poll
        )
    elif m["kind"] == "binding":
        api, version = (apis.resourcemanager, "v3") if m["api"] == "v3" else (apis.iam, "v1")
        access.add_binding(api, m["resource"], m["role"], member, version=version)


def member_of(who: Identity, member: str | None) -> str:
    """The member to grant: `member` (--member), else the credentials' identity, else "MEMBER"."""
    return member or who.member
