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

from dataclasses import dataclass, field
from typing import Any

from vertex_trainer.errors import UserError
from vertex_trainer.gcp import access
from vertex_trainer.settings import Settings
from vertex_trainer.workflows.check import FAIL, Identity, Item

GRANTABLE = ("v3", "v1")  # project bindings (Resource Manager), a service account's (IAM)


@dataclass(frozen=True)
class Step:
    """One change: `what` for people, the request (`method`, `url`, `body`), the `gcloud` line that
    does the same, and whether it is a binding only printed (`grant` False: someone grants it)."""

    what: str
    method: str
    url: str
    body: dict[str, Any] | None
    gcloud: str
    binding: bool = False
    done: bool = False

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
        done = False
        if step.binding:
            if grant and step.url:
                api, version = (apis.resourcemanager, "v3") if "/v3/" in step.url else (apis.iam, "v1")
                resource = step.url.split(f"/{version}/", 1)[1].rsplit(":", 1)[0]
                role = step.body["policy"]["bindings"][0]["role"] if step.body else ""
                access.add_binding(api, resource, role, member, version=version)
                done = True
        elif step.url.endswith(":batchEnable"):
            access.enable_services(
                apis.serviceusage, project, list((step.body or {})["serviceIds"]), poll=settings.poll
            )
            done = True
        elif "/storage/v1/b" in step.url:
            body = step.body or {}
            access.create_bucket(apis.storage, project, body["name"], body["location"])
            done = True
        elif "/repositories?repositoryId=" in step.url:
            parent, _, repo = step.url.partition("/v1/")[2].partition("/repositories?repositoryId=")
            _, proj, _, location = parent.split("/")
            access.create_repository(apis.artifactregistry, proj, location, repo, poll=settings.poll)
            done = True
        out.append(Step(**{**step.to_dict(), "done": done}))
    return out


def member_of(who: Identity, member: str | None) -> str:
    """The member to grant: `member` (--member), else the credentials' identity, else "MEMBER"."""
    return member or who.member
