"""`check` and `setup` for the spec's TensorBoard (issue 43 item 4; docs/check.md).

Two looks, each an `Item` as check.py's (api/project.py adds them to its items):

- `tensorboard: auto`: the tool's instance in the job's region (vertex/tensorboards.py: the
  label `vertex-trainer-managed=true`). None yet is a WARN, not a FAIL: the first submit makes
  it; `setup` makes it now (the make `{"kind": "tensorboard"}`).
- any `tensorboard:` with a `service_account:`: the account uploads the job's logs, so it needs
  Vertex AI's user role and writes to the output bucket
  (https://cloud.google.com/vertex-ai/docs/experiments/tensorboard-setup). Read from the
  project's IAM policy (getIamPolicy): roles/aiplatform.user missing is a FAIL whose binding
  setup grants with --grant; writes not granted on the project are a WARN with the bucket's
  gcloud line (the bucket's own policy is not read, and setup leaves a bucket's binding to its
  gcloud line, as for the caller's).

`looks` is the same for a dry run, with nothing read.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vertex_trainer.errors import VertexTrainerError
from vertex_trainer.gcp import access
from vertex_trainer.preflight import short_retry
from vertex_trainer.readiness import permissions
from vertex_trainer.readiness.project_check import FAIL, OK, WARN, Item, stand_in_missing
from vertex_trainer.settings import Settings
from vertex_trainer.spec import JobSpec
from vertex_trainer.vertex.tensorboards import DISPLAY_NAME, MANAGED_LABEL, MANAGED_VALUE, TensorboardsClient

__all__ = ["create_step", "instance_missing", "items", "looks", "make_instance", "uploader_missing"]

# The project roles that carry what the uploads need (editor and owner carry everything).
UPLOADS = {"roles/aiplatform.user", "roles/aiplatform.admin", "roles/editor", "roles/owner"}
WRITES = {"roles/storage.objectUser", "roles/storage.objectAdmin", "roles/storage.admin"}
WRITES |= {"roles/editor", "roles/owner"}


def instance_missing(project: str, region: str | None, setup: str | None) -> Item:
    """`tensorboard: auto` with no instance of the tool's in `region` yet (a WARN setup acts on)."""
    create = (
        f"gcloud ai tensorboards create --display-name={DISPLAY_NAME} "
        f"--labels={MANAGED_LABEL}={MANAGED_VALUE} --region={region} --project={project}"
    )
    return Item(
        "resource",
        f"tensorboard auto in {region}",
        WARN,
        "no instance of vertex-trainer's yet: the first submit creates it",
        f"{setup} (or {create})" if setup else create,
        {"kind": "tensorboard", "project": project, "region": region},
    )


def uploader_missing(email: str, project: str, bucket: str | None, roles: set[str] | None) -> list[Item]:
    """What the job's service account `email` lacks to upload the job's TensorBoard logs, from the
    roles it holds on the project (None: not read, a dry run)."""
    member, write = f"serviceAccount:{email}", permissions.OBJECTS[0].role
    out = []
    if roles is None or not roles & UPLOADS:
        out.append(
            Item(
                "permission",
                f"{permissions.VERTEX} for {email} (TensorBoard uploads)",
                FAIL,
                f"not granted on projects/{project}: the job's TensorBoard logs are uploaded as it",
                f"gcloud projects add-iam-policy-binding {project} --member={member} "
                f"--role={permissions.VERTEX}",
                {
                    "kind": "binding",
                    "resource": f"projects/{project}",
                    "api": "v3",
                    "role": permissions.VERTEX,
                    "member": member,
                },
            )
        )
    if bucket and (roles is None or not roles & WRITES):
        out.append(
            Item(
                "permission",
                f"{write} on gs://{bucket} for {email} (TensorBoard logs)",
                WARN,
                f"not granted on projects/{project} (the bucket's own policy is not read)",
                f"gcloud storage buckets add-iam-policy-binding gs://{bucket} --member={member} "
                f"--role={write}",
                {
                    "kind": "binding",
                    "resource": f"b/{bucket}",
                    "api": "storage",
                    "role": write,
                    "member": member,
                },
            )
        )
    return out


def _bucket(spec: JobSpec) -> str | None:
    out = spec.output_dir or ""
    return out[len("gs://") :].split("/", 1)[0] if out.startswith("gs://") else None


def items(
    spec: JobSpec | None, *, project: str, settings: Settings, found: list[Item], spec_path: str | None = None
) -> list[Item]:
    """The TensorBoard items of `check` for `spec` in `project`, after check.py's `found` (none
    when those could not start: no credentials, no project); `spec_path` as typed, for the
    `vertex-trainer setup SPEC` fix. Each look has check's short retry budget."""
    if (
        spec is None
        or not spec.tensorboard
        or any(i.status == FAIL and i.area in ("credentials", "project") for i in found)
    ):
        return []
    out: list[Item] = []
    short = dataclasses.replace(settings, retry=short_retry(settings))
    if spec.tensorboard == "auto":
        name = f"tensorboard auto in {spec.region}"
        setup = f"vertex-trainer setup {spec_path}" if spec_path else None
        try:
            board = TensorboardsClient(project, spec.region, settings=short).find()
            out.append(
                Item("resource", name, OK, board["name"])
                if board
                else instance_missing(project, spec.region, setup)
            )
        except VertexTrainerError as exc:
            out.append(Item("resource", name, WARN, f"not checked: {exc.message}"))
    email = spec.service_account
    if email and not stand_in_missing(settings, settings.iam_endpoint):
        api = access.AccessApis.of(settings, retry=short.retry).resourcemanager
        try:
            policy = api.json("read the IAM policy", "POST", f"v3/projects/{project}:getIamPolicy", json={})
        except VertexTrainerError as exc:
            return [
                *out,
                Item("permission", f"{email} (TensorBoard uploads)", WARN, f"not checked: {exc.message}"),
            ]
        member = f"serviceAccount:{email}"
        roles = {
            str(b.get("role")) for b in policy.get("bindings") or [] if member in (b.get("members") or [])
        }
        for role, held in (
            (permissions.VERTEX, roles & UPLOADS),
            (permissions.OBJECTS[0].role, roles & WRITES),
        ):
            if held:  # (what it lacks is below)
                name = f"{role} for {email} (TensorBoard uploads)"
                out.append(Item("permission", name, OK, f"{', '.join(sorted(held))} on projects/{project}"))
        out += uploader_missing(email, project, _bucket(spec), roles)
    return out


def looks(
    spec: JobSpec | None, *, project: str, settings: Settings, spec_path: str | None
) -> list[tuple[str, list[Item]]]:
    """The reads `items` makes, in words, each with what setup acts on were it to find everything
    missing (a dry run's steps). Opens no connection."""
    if spec is None or not spec.tensorboard:
        return []
    out: list[tuple[str, list[Item]]] = []
    setup = f"vertex-trainer setup {spec_path}" if spec_path else None
    if spec.tensorboard == "auto":
        find = TensorboardsClient(project, spec.region, settings=settings).plan().requests[0]
        out.append(
            (
                f"GET {find['url']} ({find['params']['filter']})",
                [instance_missing(project, spec.region, setup)],
            )
        )
    if spec.service_account and not stand_in_missing(settings, settings.iam_endpoint):
        url = f"{settings.iam_url('cloudresourcemanager')}/v3/projects/{project}:getIamPolicy"
        out.append(
            (
                f"POST {url} (the roles of {spec.service_account})",
                uploader_missing(spec.service_account, project, _bucket(spec), None),
            )
        )
    return out


def create_step(m: dict[str, Any], settings: Settings) -> tuple[str, str, str, dict[str, Any], str]:
    """(what, method, url, body, gcloud) of the step that makes the instance `m` describes."""
    client = TensorboardsClient(m["project"], m["region"], settings=settings)
    create = client.plan().requests[1]
    gcloud = instance_missing(m["project"], m["region"], None).fix or ""
    return (
        f"create the TensorBoard instance in {m['region']} (tensorboard: auto)",
        "POST",
        create["url"],
        create["body"],
        gcloud,
    )


def make_instance(m: dict[str, Any], settings: Settings) -> str:
    """Find or make the instance `m` describes (idempotent); returns its name."""
    return TensorboardsClient(m["project"], m["region"], settings=settings).ensure().name
