"""`vertex-trainer setup SPEC`: make what `check` found missing and the tool may create (issue 33).

From the check's FAIL items that carry a `make`: the APIs are enabled (one Service Usage
batchEnable), the buckets created in the job's region with uniform bucket-level access, the
Docker repository created; the IAM bindings are printed for someone with the right to grant them,
and granted only with `grant=True` (project bindings through Resource Manager, actAs on the
service account through IAM; a bucket's or a repository's binding is left to its gcloud line).
With `tensorboard: auto` the region's instance is made too, and the job's service account is
granted what its TensorBoard uploads need (readiness/tensorboard_check.py; a WARN of check's).
`dry_run` sends nothing and returns every request with its gcloud equivalent. What `check` finds
in order is left alone, so a second run changes nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from vertex_trainer.errors import UserError
from vertex_trainer.gcp import access
from vertex_trainer.preflight import buckets_of
from vertex_trainer.readiness import permissions
from vertex_trainer.readiness import project_check as check
from vertex_trainer.readiness import tensorboard_check as check_tensorboard
from vertex_trainer.readiness.project_check import OK, Identity, Item
from vertex_trainer.settings import Settings
from vertex_trainer.spec import JobSpec

DRY, PLAN, APPLY = "dry-run", "plan", "apply"
NOT_READ = Identity("not read in a dry run", None, "a dry run loads no credentials")


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
    """What setup did or would do: the `steps`, the `mode` (dry-run, plan, apply) and `reads`:
    the reads made (plan, apply) or, in a dry run, the reads it would make (none was sent)."""

    project: str
    steps: list[Step] = field(default_factory=list)
    mode: str = APPLY
    reads: list[str] = field(default_factory=list)

    @property
    def dry_run(self) -> bool:
        return self.mode == DRY

    @property
    def sent(self) -> bool:
        """Whether any request was sent (a read included)."""
        return self.mode != DRY

    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "dry_run": self.dry_run,
            "mode": self.mode,
            "sent": self.sent,
            "reads": list(self.reads),
            "steps": [{**s.to_dict(), "if_missing": self.dry_run} for s in self.steps],
        }


Look = tuple[str, list[Item]]  # one read, in words, and what setup acts on when it finds it missing


def looks(
    spec: JobSpec | None, *, project: str, settings: Settings, spec_path: str | None = None
) -> list[Look]:
    """The reads `check` makes for `spec` (None: the project alone), each in words (what a plan or
    an apply sends before it changes anything) with the FAIL items setup could act on were that
    read to find everything missing (what a dry run plans from, with nothing read: check.py's
    constructors, so the steps are the same). Opens no connection."""
    setup = f"vertex-trainer setup {spec_path}" if spec_path else None
    who, parts = NOT_READ, permissions.parts(spec)
    out: list[Look] = []

    def look(read: str, *missing: Item) -> None:
        out.append((read, list(missing)))

    look("the credentials (Application Default Credentials; on Google Cloud, the metadata server)")
    if not check.stand_in_missing(settings, settings.serviceusage_endpoint):
        apis = permissions.apis(parts)
        look(
            f"GET {settings.serviceusage_url()}/v1/projects/{project}/services:batchGet ({', '.join(apis)})",
            *(check.api_missing(a, project, setup) for a in apis),
        )
    iam = not check.stand_in_missing(settings, settings.iam_endpoint)
    wanted = permissions.needs(parts, "project")
    if iam and wanted:
        look(
            f"POST {settings.iam_url('cloudresourcemanager')}/v3/projects/{project}:testIamPermissions "
            f"({len(wanted)} permissions)",
            *(check.permission_missing(n, project, who) for n in wanted),
        )
    if spec is None:
        return out
    if iam and spec.service_account:
        resource = access.service_account_resource(project, spec.service_account)
        look(
            f"POST {settings.iam_url('iam')}/v1/{resource}:testIamPermissions (actAs)",
            check.act_as_missing(spec.service_account, project, who),
        )
    if not (settings.offline and not settings.storage_emulator):
        objects = [n.permission for n in permissions.OBJECTS]
        for bucket, field_name in buckets_of(spec).items():
            url = f"{settings.storage_url()}/storage/v1/b/{bucket}"
            look(f"GET {url} (exists, where)", check.bucket_missing(bucket, field_name, spec, project, setup))
            look(f"GET {url}/iam/testPermissions", check.objects_missing(bucket, objects, who))
    found = check.repository_of(spec)
    if iam and found:
        rproject, location, repo = found
        url = f"{settings.iam_url('artifactregistry')}/v1/{access.repository_name(*found)}"
        look(f"GET {url}", check.repository_missing(rproject, location, repo, setup))
        look(
            f"POST {url}:testIamPermissions",
            *(
                check.repository_permission_missing(n, rproject, location, repo, who)
                for n in permissions.needs(parts, "repository")
            ),
        )
    if spec.persistent_resource:
        look(f"GET Vertex AI {spec.persistent_resource}")
    if spec.tensorboard and spec.tensorboard != "auto":
        look(f"GET Vertex AI {spec.tensorboard}")
    out += check_tensorboard.looks(spec, project=project, settings=settings, spec_path=spec_path)
    if spec.hardware.accelerator is not None:
        look(f"GET {settings.quotas_url()}: the accelerator quota of each region of the plan")
    return out


def plan(items: list[Item], *, project: str, settings: Settings, member: str) -> list[Step]:
    """The steps that fix the FAIL items of a check (those `setup` knows how to make), and the
    WARNs it can act on (`tensorboard: auto`'s instance, check_tensorboard.py)."""
    makes = [(i, i.make) for i in items if i.status != OK and i.make]
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
        elif m["kind"] == "tensorboard":
            what, method, url, body, gcloud = check_tensorboard.create_step(m, settings)
            steps.append(Step(what, method, url, body, gcloud, make=m))
    bindings: dict[tuple[str, str, str], Step] = {}
    for item, m in makes:
        if m["kind"] != "binding":
            continue
        whom = m.get("member") or member  # (the job's service account names its own)
        key = (m["resource"], m["role"], whom)
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
            f"grant {m['role']} to {whom} on {m['resource']}",
            "POST" if url else "",
            url,
            {"policy": {"bindings": [{"role": m["role"], "members": [whom]}]}} if url else None,
            (item.fix or "").replace("--member=MEMBER", f"--member={whom}"),
            binding=True,
            make=m if url else {},
        )
    return steps + list(bindings.values())


def apply(steps: list[Step], *, project: str, settings: Settings, member: str, grant: bool) -> list[Step]:
    """Send the steps (bindings only with `grant`, and only those with a request); returns them
    with `done` set on what was sent."""
    if grant and member == "MEMBER" and any(s.binding and s.url and not s.make.get("member") for s in steps):
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
    elif m["kind"] == "tensorboard":
        check_tensorboard.make_instance(m, settings)
    elif m["kind"] == "binding":
        api, version = (apis.resourcemanager, "v3") if m["api"] == "v3" else (apis.iam, "v1")
        access.add_binding(api, m["resource"], m["role"], m.get("member") or member, version=version)


def member_of(who: Identity, member: str | None) -> str:
    """The member to grant: `member` (--member), else the credentials' identity, else "MEMBER"."""
    return member or who.member
