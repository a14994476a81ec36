"""What each command needs of a project: the APIs it calls and the IAM permissions it uses, with
the least-privilege predefined role that carries each, and where the names come from.

`check` tests these permissions (testIamPermissions), `setup` prints (and with --grant makes) the
bindings, and docs/ci.md's least-privilege table is this table (tests/check/ keeps them equal).

Sources (read 2026-12):
- Vertex AI: https://cloud.google.com/vertex-ai/docs/general/access-control and
  https://cloud.google.com/iam/docs/roles-permissions/aiplatform (aiplatform.* and roles/aiplatform.user)
- a job's own service account: https://cloud.google.com/vertex-ai/docs/general/custom-service-account
  (the caller needs iam.serviceAccounts.actAs on it: roles/iam.serviceAccountUser)
- Cloud Storage: https://cloud.google.com/storage/docs/access-control/iam-permissions
- Artifact Registry: https://cloud.google.com/artifact-registry/docs/access-control
- Cloud Build: https://cloud.google.com/build/docs/iam-roles-permissions
- Cloud Logging: https://cloud.google.com/logging/docs/access-control
- Cloud Quotas: https://cloud.google.com/docs/quotas/permissions
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the table itself loads no pydantic model)
    from vertex_trainer.spec import JobSpec


@dataclass(frozen=True)
class Need:
    """One permission a command uses: where it is tested (`on`: project, service_account, bucket,
    repository) and the least-privilege predefined role that carries it."""

    permission: str
    on: str
    role: str


def _project(role: str, *permissions: str) -> tuple[Need, ...]:
    return tuple(Need(p, "project", role) for p in permissions)


VERTEX = "roles/aiplatform.user"
ACT_AS = Need("iam.serviceAccounts.actAs", "service_account", "roles/iam.serviceAccountUser")
OBJECTS = tuple(
    Need(p, "bucket", "roles/storage.objectUser")
    for p in ("storage.objects.create", "storage.objects.get", "storage.objects.list")
)
# The content-hash tag check reads the repository; with builder: docker this machine pushes (with
# cloud-build, Cloud Build's own service account does: docs/ci.md).
READ_IMAGES = Need(
    "artifactregistry.repositories.downloadArtifacts", "repository", "roles/artifactregistry.reader"
)
UPLOAD = Need("artifactregistry.repositories.uploadArtifacts", "repository", "roles/artifactregistry.writer")
# Where each kind of need is tested, in words (docs/ci.md's "on" column).
ON = {
    "project": "the project",
    "service_account": "the job's `service_account:`",
    "bucket": "each bucket the spec names",
    "repository": "the image repository",
}

# command -> what it uses (a command of the CLI, or the part of one a spec turns on).
COMMANDS: dict[str, tuple[Need, ...]] = {
    "submit": _project(VERTEX, "aiplatform.customJobs.create", "aiplatform.customJobs.get") + OBJECTS,
    "submit (service_account)": (ACT_AS,),
    "submit (quota pre-flight)": _project("roles/cloudquotas.viewer", "cloudquotas.quotas.get"),
    "status": _project(VERTEX, "aiplatform.customJobs.get"),
    "cancel": _project(VERTEX, "aiplatform.customJobs.cancel"),
    "list": _project(VERTEX, "aiplatform.customJobs.list"),
    "logs": _project("roles/logging.viewer", "logging.logEntries.list"),
    "package (cloud-build)": _project(
        "roles/cloudbuild.builds.editor", "cloudbuild.builds.create", "cloudbuild.builds.get"
    ),
    "package (image.repository)": (READ_IMAGES,),
    "package (docker)": (UPLOAD,),
    "package (python_package)": OBJECTS,
    "submit (tune:)": _project(
        VERTEX, "aiplatform.hyperparameterTuningJobs.create", "aiplatform.hyperparameterTuningJobs.get"
    ),
    "deploy": _project(
        VERTEX,
        "aiplatform.models.upload",
        "aiplatform.models.get",
        "aiplatform.endpoints.create",
        "aiplatform.endpoints.get",
        "aiplatform.endpoints.deploy",
        "aiplatform.endpoints.undeploy",  # the versions left at 0% (docs/contract.md section 5)
    ),
    "endpoints": _project(
        VERTEX, "aiplatform.endpoints.list", "aiplatform.endpoints.get", "aiplatform.models.get"
    ),
    "undeploy": _project(VERTEX, "aiplatform.endpoints.get", "aiplatform.endpoints.undeploy"),
    "pipeline submit": _project(VERTEX, "aiplatform.pipelineJobs.create", "aiplatform.pipelineJobs.get"),
    # tensorboard: auto finds or makes the region's instance (vertex/tensorboards.py)
    "submit (tensorboard: auto)": _project(
        VERTEX, "aiplatform.tensorboards.list", "aiplatform.tensorboards.create"
    ),
}

# The APIs (Service Usage names) of each part; `check` without a spec asks for BASE.
BASE = ("aiplatform.googleapis.com", "storage.googleapis.com", "logging.googleapis.com")
APIS: dict[str, tuple[str, ...]] = {
    "submit": ("aiplatform.googleapis.com", "storage.googleapis.com"),
    "logs": ("logging.googleapis.com",),
    "submit (quota pre-flight)": ("cloudquotas.googleapis.com",),
    "package (image.repository)": ("artifactregistry.googleapis.com",),
    "package (cloud-build)": ("cloudbuild.googleapis.com",),
    "trigger deploy": ("run.googleapis.com", "eventarc.googleapis.com", "cloudfunctions.googleapis.com"),
    "data convert --runner dataflow": ("dataflow.googleapis.com",),
}


def parts(spec: JobSpec | None) -> tuple[str, ...]:
    """The rows of COMMANDS (and APIS) a submit of `spec` uses, or a project's basics without one."""
    if spec is None:
        return ("submit", "status", "list", "logs")
    found = ["submit", "status", "logs"]
    if spec.service_account:
        found.append("submit (service_account)")
    if spec.hardware.accelerator is not None:
        found.append("submit (quota pre-flight)")
    image = spec.image
    if image is not None and image.builds:
        if image.python_package:
            found.append("package (python_package)")
        else:
            found.append("package (image.repository)")
            found.append("package (cloud-build)" if image.builder == "cloud-build" else "package (docker)")
    if spec.tune is not None:
        found.append("submit (tune:)")
    if spec.tensorboard == "auto":
        found.append("submit (tensorboard: auto)")
    if spec.deploy is not None:
        found.append("deploy")
    return tuple(found)


def needs(part_names: tuple[str, ...], on: str) -> list[Need]:
    """The distinct needs of `part_names` tested on `on`, in table order."""
    out: dict[str, Need] = {}
    for name in part_names:
        for need in COMMANDS.get(name, ()):
            if need.on == on:
                out.setdefault(need.permission, need)
    return list(out.values())


def apis(part_names: tuple[str, ...]) -> list[str]:
    """The distinct APIs of `part_names`."""
    return list(dict.fromkeys(a for name in part_names for a in APIS.get(name, ())))


def roles() -> dict[tuple[str, str], list[str]]:
    """(role, where it is granted) -> the permissions of the table it is named for: docs/ci.md's
    least-privilege table, row for row (tests/check/ keeps them equal)."""
    out: dict[tuple[str, str], list[str]] = {}
    for needs_ in COMMANDS.values():
        for need in needs_:
            key = (need.role, ON[need.on])
            if need.permission not in out.setdefault(key, []):
                out[key].append(need.permission)
    return out
