"""`vertex-trainer check [SPEC]`: is this project ready for the job, asked of Google (issue 33).

One `Item` per thing looked at, each OK, WARN or FAIL, and for a FAIL the one command that fixes
it: the credentials and the project (and how each was found), the APIs the job's commands call
(Service Usage), the permissions they use (testIamPermissions on the project, on the job's
service account for iam.serviceAccounts.actAs, on each bucket, on the image repository; the
table is readiness/permissions.py), the resources the spec names (buckets and where they are,
the repository and its format) and the accelerator quota of each region of the plan (the
pre-flight's own reading, capacity/availability.py). A look that cannot be made (the API refuses,
the network) is a WARN saying why, never a guess.

With Vertex AI a stand-in (an http:// endpoint), an API whose stand-in is not set is not
checked (a WARN), as the pre-flight skips what an offline run cannot reach.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from vertex_trainer import capacity
from vertex_trainer.errors import UserError, VertexTrainerError
from vertex_trainer.gcp import access, auth, storage
from vertex_trainer.log import silent
from vertex_trainer.preflight import buckets_of, location_mismatch, registry_far
from vertex_trainer.preflight import short_retry as short_retry  # (api/project reads it here too)
from vertex_trainer.readiness import permissions
from vertex_trainer.regions import region_of
from vertex_trainer.settings import Settings, is_emulator
from vertex_trainer.spec import JobSpec
from vertex_trainer.spec.attempts import PlannedAttempt, attempts
from vertex_trainer.vertex.service import vertex_api

OK, WARN, FAIL = "OK", "WARN", "FAIL"


@dataclass(frozen=True)
class Item:
    """One line of the check: `area` (credentials, project, api, permission, resource, quota),
    `name` (what was looked at), `status` (OK, WARN, FAIL), `detail`, and `fix` for a FAIL."""

    area: str
    name: str
    status: str
    detail: str
    fix: str | None = None
    # What `setup` can do about a FAIL: {"kind": "enable" | "bucket" | "repository" | "binding", ...}.
    make: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Identity:
    """Who the requests go as: `kind` (user, service account, impersonated service account,
    external account, metadata server, anonymous), `who` (an email, when known) and `how` it was
    found."""

    kind: str
    who: str | None
    how: str

    @property
    def member(self) -> str:
        """The IAM member of this identity for a binding, or a placeholder."""
        if not self.who:
            return "MEMBER"
        prefix = "user" if self.kind == "user" else "serviceAccount"
        return f"{prefix}:{self.who}"


def identity(settings: Settings) -> Identity:
    """The identity the requests of `check` go as; UserError (exit 2) without credentials."""
    if settings.offline:
        return Identity("anonymous", None, "the endpoints are local stand-ins (http://)")
    creds = auth.credentials()
    kind = type(creds).__module__ + "." + type(creds).__name__
    email = getattr(creds, "service_account_email", None) or getattr(creds, "signer_email", None)
    how = (
        "GOOGLE_APPLICATION_CREDENTIALS"
        if settings.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        else "Application Default Credentials"
    )
    if "impersonated" in kind:
        env = settings.environ
        named = next(
            (
                f"${n}"
                for n in (
                    "VERTEX_TRAINER_IMPERSONATE_SERVICE_ACCOUNT",
                    "CLOUDSDK_AUTH_IMPERSONATE_SERVICE_ACCOUNT",
                )
                if env.get(n)
            ),
            "--impersonate-service-account or gcloud's auth/impersonate_service_account",
        )
        return Identity("impersonated service account", email, f"{named}, over {how}")
    if "external_account" in kind or "identity_pool" in kind or "aws" in kind or "pluggable" in kind:
        return Identity("external account (Workload Identity Federation)", email, how)
    if "compute_engine" in kind:
        return Identity(
            "metadata server's service account", email if email != "default" else None, "metadata server"
        )
    if "service_account" in kind:
        return Identity("service account", email, how)
    account = getattr(creds, "account", None) or None
    return Identity("user", account, how + " (gcloud auth application-default login)")


def _not_checked(area: str, name: str, exc: VertexTrainerError) -> Item:
    return Item(area, name, WARN, f"not checked: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))


def run(
    spec: JobSpec | None,
    *,
    project: str | None,
    project_source: str,
    settings: Settings,
    spec_path: str | None = None,
    who: Identity | None = None,
) -> list[Item]:
    """Every item of the check for `spec` (None: the project alone) in `project`.

    Args:
        spec: the loaded JobSpec, or None.
        project: the project to check (the spec's, or the default).
        project_source: how the project was found ("spec", "--project", "$GOOGLE_CLOUD_PROJECT", ...).
        settings: endpoints and retry policy.
        spec_path: the spec's path as the user typed it (for `vertex-trainer setup SPEC` fixes).
        who: the identity (default: read from the credentials).

    Returns: the items, in the order they were looked at."""
    items: list[Item] = []
    try:
        who = who or identity(settings)
    except UserError as exc:
        return [Item("credentials", "Application Default Credentials", FAIL, exc.message, exc.hint)]
    detail = f"{who.kind}, from {who.how}" if who.who else f"from {who.how}"
    items.append(Item("credentials", who.who or who.kind, OK, detail))
    if not project:
        items.append(
            Item(
                "project",
                "(none)",
                FAIL,
                "no project in the spec, the flags or the environment",
                "gcloud config set project PROJECT (or --project PROJECT)",
            )
        )
        return items
    items.append(Item("project", project, OK, f"from {project_source}"))
    part_names = permissions.parts(spec)
    apis = access.AccessApis.of(settings, retry=short_retry(settings))
    setup = f"vertex-trainer setup {spec_path}" if spec_path else None
    items += _apis(apis, settings, project, permissions.apis(part_names), setup)
    items += _project_permissions(apis, settings, project, part_names, who)
    if spec is not None:
        plan = attempts(spec)  # the capacity plan, planned once for the looks that read it
        items += _service_account(apis, settings, project, spec, who)
        items += _buckets(apis, settings, project, spec, who, setup)
        items += _repository(apis, settings, spec, plan, who, setup, part_names)
        items += _named_resources(spec, project, settings)
        items += _quota(spec, plan, settings)
    return items


def stand_in_missing(settings: Settings, endpoint: str | None) -> bool:
    """Vertex AI is a stand-in and this API's endpoint is not: an offline run does not ask it."""
    return settings.offline and not is_emulator(endpoint)


def _apis(
    apis: access.AccessApis, settings: Settings, project: str, wanted: list[str], setup: str | None
) -> list[Item]:
    if stand_in_missing(settings, settings.serviceusage_endpoint):
        return [
            Item(
                "api",
                ", ".join(wanted),
                WARN,
                "not checked: Vertex AI is a stand-in and Service Usage is not",
            )
        ]
    try:
        states = access.enabled_services(apis.serviceusage, project, wanted)
    except VertexTrainerError as exc:
        return [_not_checked("api", ", ".join(wanted), exc)]
    return [
        Item("api", service, OK, "enabled") if on else api_missing(service, project, setup)
        for service, on in states.items()
    ]


# -- the FAIL items setup acts on, one constructor each (setup's dry run makes them unread) -------
def api_missing(service: str, project: str, setup: str | None) -> Item:
    return Item(
        "api",
        service,
        FAIL,
        "not enabled in the project",
        f"gcloud services enable {service} --project {project}" + (f" (or {setup})" if setup else ""),
        {"kind": "enable", "service": service},
    )


def permission_missing(need: permissions.Need, project: str, who: Identity) -> Item:
    return Item(
        "permission",
        need.permission,
        FAIL,
        f"not held on projects/{project} ({need.role} carries it)",
        _binding_fix(project, who.member, need.role),
        {"kind": "binding", "resource": f"projects/{project}", "api": "v3", "role": need.role},
    )


def act_as_missing(email: str, project: str, who: Identity) -> Item:
    return Item(
        "permission",
        f"iam.serviceAccounts.actAs on {email}",
        FAIL,
        f"not held: a job that runs as {email} is refused ({permissions.ACT_AS.role} carries it)",
        f"gcloud iam service-accounts add-iam-policy-binding {email} --member={who.member} "
        f"--role={permissions.ACT_AS.role} --project {project}",
        {
            "kind": "binding",
            "resource": access.service_account_resource(project, email),
            "api": "v1",
            "role": permissions.ACT_AS.role,
        },
    )


def bucket_missing(bucket: str, field: str, spec: JobSpec, project: str, setup: str | None) -> Item:
    create = (
        f"gcloud storage buckets create gs://{bucket} --location={spec.region} "
        f"--uniform-bucket-level-access --project {project}"
    )
    fix = f"{setup} (or {create})" if setup else create
    make = {"kind": "bucket", "bucket": bucket, "location": spec.region}
    return Item("resource", f"gs://{bucket} ({field})", FAIL, "does not exist", fix, make)


def objects_missing(bucket: str, missing: list[str], who: Identity) -> Item:
    return Item(
        "permission",
        f"objects in gs://{bucket}",
        FAIL,
        f"not held: {', '.join(missing)}",
        f"gcloud storage buckets add-iam-policy-binding gs://{bucket} --member={who.member} "
        f"--role={permissions.OBJECTS[0].role}",
        {"kind": "binding", "resource": f"b/{bucket}", "api": "storage", "role": permissions.OBJECTS[0].role},
    )


def repository_missing(project: str, location: str, repo: str, setup: str | None) -> Item:
    create = (
        f"gcloud artifacts repositories create {repo} --repository-format=docker "
        f"--location={location} --project={project}"
    )
    fix = f"{setup} (or {create})" if setup else create
    make = {"kind": "repository", "project": project, "location": location, "repository": repo}
    return Item(
        "resource", access.repository_name(project, location, repo), FAIL, "does not exist", fix, make
    )


def repository_permission_missing(
    need: permissions.Need, project: str, location: str, repo: str, who: Identity
) -> Item:
    return Item(
        "permission",
        f"{need.permission} on {repo}",
        FAIL,
        f"not held ({need.role} carries it)",
        f"gcloud artifacts repositories add-iam-policy-binding {repo} --location={location} "
        f"--project={project} --member={who.member} --role={need.role}",
        {
            "kind": "binding",
            "resource": access.repository_name(project, location, repo),
            "api": "artifactregistry",
            "role": need.role,
        },
    )


def _binding_fix(project: str, member: str, role: str) -> str:
    return f"gcloud projects add-iam-policy-binding {project} --member={member} --role={role}"


def _project_permissions(
    apis: access.AccessApis, settings: Settings, project: str, part_names: tuple[str, ...], who: Identity
) -> list[Item]:
    wanted = permissions.needs(part_names, "project")
    if not wanted:
        return []
    if stand_in_missing(settings, settings.iam_endpoint):
        return [Item("permission", f"{len(wanted)} on the project", WARN, "not checked: no IAM stand-in")]
    try:
        held = access.project_permissions(apis.resourcemanager, project, [n.permission for n in wanted])
    except VertexTrainerError as exc:
        return [_not_checked("permission", f"{len(wanted)} on projects/{project}", exc)]
    missing = [n for n in wanted if n.permission not in held]
    items = []
    if len(missing) < len(wanted):
        ok = [n.permission for n in wanted if n.permission in held]
        items.append(Item("permission", f"projects/{project}", OK, f"{len(ok)} held: {', '.join(ok)}"))
    items += [permission_missing(n, project, who) for n in missing]
    return items


def _service_account(
    apis: access.AccessApis, settings: Settings, project: str, spec: JobSpec, who: Identity
) -> list[Item]:
    email = spec.service_account
    if not email:
        return [
            Item(
                "permission",
                "service account",
                OK,
                "no service_account: the job runs as Vertex AI's Custom Code Service Agent (no actAs needed)",
            )
        ]
    if stand_in_missing(settings, settings.iam_endpoint):
        return [
            Item("permission", f"iam.serviceAccounts.actAs on {email}", WARN, "not checked: no IAM stand-in")
        ]
    name = f"iam.serviceAccounts.actAs on {email}"
    try:
        held = access.service_account_permissions(apis.iam, project, email, [permissions.ACT_AS.permission])
    except VertexTrainerError as exc:
        return [_not_checked("permission", name, exc)]
    if permissions.ACT_AS.permission in held:
        return [Item("permission", name, OK, "held: the job may run as this service account")]
    return [act_as_missing(email, project, who)]


def _buckets(
    apis: access.AccessApis, settings: Settings, project: str, spec: JobSpec, who: Identity, setup: str | None
) -> list[Item]:
    if settings.offline and not settings.storage_emulator:
        return []
    wanted = [n.permission for n in permissions.OBJECTS]
    items = []
    for bucket, field in buckets_of(spec).items():
        name = f"gs://{bucket} ({field})"
        try:
            meta = storage.bucket_metadata(apis.storage, bucket)
        except VertexTrainerError as exc:
            items.append(_not_checked("resource", name, exc))
            continue
        if meta is None:
            items.append(bucket_missing(bucket, field, spec, project, setup))
            continue
        location = str(meta.get("location", ""))
        far = (
            location_mismatch(spec.region, meta.get("location", ""), meta.get("locationType"))
            if spec.region
            else None
        )
        items.append(
            Item("resource", name, WARN, f"{far}: reads cross regions")
            if far
            else Item("resource", name, OK, f"exists, in {location or 'an unknown location'}")
        )
        try:
            held = access.bucket_permissions(apis.storage, bucket, wanted) or set()
        except VertexTrainerError as exc:
            items.append(_not_checked("permission", f"objects in gs://{bucket}", exc))
            continue
        missing = [p for p in wanted if p not in held]
        items.append(
            Item("permission", f"objects in gs://{bucket}", OK, "create, get, list held")
            if not missing
            else objects_missing(bucket, missing, who)
        )
    return items


def repository_of(spec: JobSpec) -> tuple[str, str, str] | None:
    """(project, location, repository) of the Artifact Registry repository a spec builds into."""
    image = spec.image
    if image is None or not image.builds or image.python_package or not image.repository:
        return None
    host, _, path = image.repository.partition("/")
    if not host.endswith("-docker.pkg.dev"):
        return None
    parts = path.split("/")
    if len(parts) < 2:
        return None
    return parts[0], host[: -len("-docker.pkg.dev")], parts[1]


def _repository(
    apis: access.AccessApis,
    settings: Settings,
    spec: JobSpec,
    plan: tuple[PlannedAttempt, ...],
    who: Identity,
    setup: str | None,
    part_names: tuple[str, ...],
) -> list[Item]:
    found, image = repository_of(spec), spec.image
    if found is None or image is None or not image.repository:  # (repository_of: it has both)
        return []
    if stand_in_missing(settings, settings.iam_endpoint):
        return [Item("resource", image.repository, WARN, "not checked: no Artifact Registry stand-in")]
    project, location, repo = found
    name = access.repository_name(project, location, repo)
    try:
        meta = access.repository(apis.artifactregistry, name)
    except VertexTrainerError as exc:
        return [_not_checked("resource", name, exc)]
    if meta is None:
        return [repository_missing(project, location, repo, setup)]
    if meta.get("format") != "DOCKER":
        return [
            Item(
                "resource",
                name,
                FAIL,
                f"is a {meta.get('format')} repository, not DOCKER",
                "set image.repository to a Docker repository",
            )
        ]
    far = registry_far(spec, plan)
    items = [
        Item("resource", name, WARN, far.removeprefix("warning: "))
        if far
        else Item("resource", name, OK, "a Docker repository")
    ]
    wanted = permissions.needs(part_names, "repository")
    try:
        held = access.repository_permissions(apis.artifactregistry, name, [n.permission for n in wanted])
    except VertexTrainerError as exc:
        return [*items, _not_checked("permission", f"{len(wanted)} on {repo}", exc)]
    for need in wanted:
        items.append(
            Item("permission", f"{need.permission} on {repo}", OK, "held")
            if need.permission in held
            else repository_permission_missing(need, project, location, repo, who)
        )
    return items


def _named_resources(spec: JobSpec, project: str, settings: Settings) -> list[Item]:
    """The persistent resource (the pre-flight's own check: RUNNING, a pool that fits), the
    TensorBoard (it exists), and what this version does not look up (KMS key, network,
    reservation): a WARN each, so nothing named goes unmentioned."""
    items: list[Item] = []
    if spec.persistent_resource:
        name = f"persistent_resource {spec.persistent_resource}"
        try:
            resource = capacity.check_persistent_resource(spec, settings=settings, log=silent)
            items.append(
                Item("resource", name, OK, f"{resource.state if resource else 'found'}, a pool fits the job")
            )
        except UserError as exc:
            items.append(Item("resource", name, FAIL, exc.message, exc.hint))
        except VertexTrainerError as exc:
            items.append(_not_checked("resource", name, exc))
    if spec.tensorboard and spec.tensorboard != "auto":  # (auto: readiness/tensorboard_check.py)
        region = region_of(spec.tensorboard)
        api = vertex_api(
            spec.project or project, region, settings, user_error=lambda op, err: err.code == 404
        )
        try:
            api.json("read the TensorBoard", "GET", f"v1/{spec.tensorboard}")
            items.append(Item("resource", spec.tensorboard, OK, "exists"))
        except UserError:
            items.append(
                Item(
                    "resource",
                    spec.tensorboard,
                    FAIL,
                    "does not exist",
                    f"gcloud ai tensorboards create --display-name=NAME --region={region} "
                    f"--project={spec.project}",
                )
            )
        except VertexTrainerError as exc:
            items.append(_not_checked("resource", spec.tensorboard, exc))
    named = {
        "encryption_key": spec.encryption_key,
        "network": spec.network,
        "scheduling.reservation": spec.scheduling.reservation,
    }
    items += [
        Item("resource", f"{field} {value}", WARN, "not looked up by check: the service checks it at create")
        for field, value in named.items()
        if value and value != "any"
    ]
    return items


def _quota(spec: JobSpec, plan: tuple[PlannedAttempt, ...], settings: Settings) -> list[Item]:
    if spec.hardware.accelerator is None:
        return [Item("quota", "accelerators", OK, "a CPU job: no accelerator quota to check")]
    if capacity.offline(settings):
        return [
            Item(
                "quota", "accelerators", WARN, "not checked: Vertex AI is a stand-in and Cloud Quotas is not"
            )
        ]
    acc = capacity.accelerator(spec) or ""
    items = []
    for check in capacity.quota_checks(spec, plan, settings=settings):
        name = f"{check.metric.split('/')[-1]} in {check.region}"
        if not check.known:
            items.append(Item("quota", name, WARN, check.describe(acc)))
        elif check.short:
            items.append(
                Item("quota", name, FAIL, check.describe(acc), f"ask for more at {check.request_url}")
            )
        else:
            items.append(Item("quota", name, OK, check.describe(acc)))
    return items


def failed(items: list[Item]) -> bool:
    return any(i.status == FAIL for i in items)
