"""Is the project ready for the job, and make it so: `project_check` and `project_setup` (issue 33;
docs/check.md). Named apart from `check` (the spec's own pre-submit checks, api/core.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vertex_trainer.api.core import settings_from_env
from vertex_trainer.errors import UserError, VertexTrainerError
from vertex_trainer.gcp import access, names
from vertex_trainer.gcp.http import Denied
from vertex_trainer.settings import Settings

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.readiness.project_check import Item
    from vertex_trainer.readiness.project_setup import SetupResult

# `submit` loads this module (api.execute: after_denial); the readiness package (the checks, the
# setup steps and their IAM tables) is imported inside the functions, so that a submit loads it
# only when it meets a 403.


@dataclass(frozen=True)
class ProjectCheck:
    """What `project_check` found: the `project`, every `item` (OK, WARN, FAIL with its fix) and
    `ok` (no FAIL: exit 0)."""

    project: str | None
    items: tuple[Item, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not any(i.status == "FAIL" for i in self.items)

    def to_dict(self) -> dict[str, Any]:
        return {"project": self.project, "ok": self.ok, "items": [i.to_dict() for i in self.items]}


def project_source(settings: Settings, spec=None, flag: str | None = None) -> tuple[str | None, str]:
    """The project and where it came from: --project, the spec, $GOOGLE_CLOUD_PROJECT,
    $CLOUDSDK_CORE_PROJECT or gcloud's configuration (core/project)."""
    if flag:
        return flag, "--project"
    project = spec.project if spec is not None else settings.project
    env = settings.environ
    if spec is not None and project and project != settings.project:
        return project, "the spec"
    for name in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"):
        if project and env.get(name, "").strip() == project:
            return project, f"${name}"
    return project, "gcloud's configuration (core/project)" if project else "nowhere"


def project_check(
    spec=None,
    *,
    project: str | None = None,
    spec_path: str | None = None,
    settings: Settings | None = None,
) -> ProjectCheck:
    """Check the project for a job (or alone): credentials, APIs, permissions, resources, quota.

    Args:
        spec: a JobSpec from :func:`load_spec` (None: the project alone).
        project: --project (wins; with a spec, load_spec has applied it already).
        spec_path: the spec's path as typed, for the `vertex-trainer setup SPEC` fixes.
        settings: the process settings (default: read from the environment).

    Returns:
        a ProjectCheck; `.ok` is False when an item FAILs (the CLI exits 2).
    """
    from vertex_trainer.readiness import project_check as _check  # (note at the top)

    settings = settings or settings_from_env()
    name, source = project_source(settings, spec, project)
    items = _check.run(spec, project=name, project_source=source, settings=settings, spec_path=spec_path)
    items += _tensorboard_items(spec, name, settings, items, spec_path)
    return ProjectCheck(name, tuple(items))


def _tensorboard_items(
    spec, project: str | None, settings: Settings, found: list[Item], spec_path: str | None
) -> list[Item]:
    """The spec's TensorBoard items (readiness/tensorboard_check.py), after check.py's."""
    from vertex_trainer.readiness import tensorboard_check as check_tensorboard  # (note at the top)

    return check_tensorboard.items(
        spec, project=project or "", settings=settings, found=found, spec_path=spec_path
    )


def project_setup(
    spec,
    *,
    dry_run: bool = False,
    plan: bool = False,
    grant: bool = False,
    member: str | None = None,
    spec_path: str | None = None,
    settings: Settings | None = None,
) -> SetupResult:
    """Make what `project_check` finds missing: enable the APIs, create the buckets and the
    Docker repository; the IAM bindings are printed, and granted only with `grant`.

    Args:
        spec: a JobSpec from :func:`load_spec`.
        dry_run: send nothing at all, not even a read (nor load the credentials): return the
            reads setup would make and every step it could take, each if missing.
        plan: read what `project_check` reads, change nothing, return the steps for what is
            missing.
        grant: also grant the bindings (project roles, actAs on the job's service account).
        member: whom to grant (user:, serviceAccount:, group: EMAIL; domain:DOMAIN; principal://
            or principalSet://); default: the credentials' identity. A public principal
            (allUsers, allAuthenticatedUsers) is refused.
        spec_path: the spec's path as typed.
        settings: the process settings (default: read from the environment).

    Returns:
        a SetupResult: the steps, each `done` when it was sent, and the reads. A second run has
        no steps.

    Raises:
        UserError: no project, a member that is not a named principal, dry_run with plan, or
            --grant without a known member (exit 2, nothing sent).
    """
    from vertex_trainer.readiness import project_check as _check  # (note at the top)
    from vertex_trainer.readiness import project_setup as _setup  # (note at the top)

    if member is not None:
        names.check_member(member, "--member")
    if dry_run and plan:
        raise UserError(
            "setup: --dry-run sends nothing and --plan reads the project; give one; nothing was sent"
        )
    settings = settings or settings_from_env()
    name, source = project_source(settings, spec)
    if not name:
        raise UserError("setup: no project; nothing was sent", hint="pass --project or set it in the spec")
    looks = _setup.looks(spec, project=name, settings=settings, spec_path=spec_path)
    reads = [read for read, _ in looks]
    if dry_run:  # no request, no credentials: every step it could take, if missing
        items = [item for _, missing in looks for item in missing]
        steps = _setup.plan(items, project=name, settings=settings, member=member or "MEMBER")
        return _setup.SetupResult(name, steps, mode=_setup.DRY, reads=reads)
    who = _check.identity(settings)
    items = _check.run(
        spec, project=name, project_source=source, settings=settings, spec_path=spec_path, who=who
    )
    items += _tensorboard_items(spec, name, settings, items, spec_path)
    whom = _setup.member_of(who, member)
    steps = _setup.plan(items, project=name, settings=settings, member=whom)
    if plan:
        return _setup.SetupResult(name, steps, mode=_setup.PLAN, reads=reads)
    return _setup.SetupResult(
        name, _setup.apply(steps, project=name, settings=settings, member=whom, grant=grant), reads=reads
    )


def after_denial(spec, error, *, settings: Settings):
    """A submit met a 403 naming a disabled API or a denied permission (`gcp.http.Denied`): the
    cheap part of `check` (one Service Usage batchGet, one testIamPermissions) names the others
    the job would meet next, on the same line. Returns the error to raise (the same one when
    there is nothing more to say or the look itself fails)."""
    from vertex_trainer.readiness import permissions  # (note at the top)
    from vertex_trainer.readiness import project_check as _check  # (note at the top)

    project = spec.project
    endpoint = settings.serviceusage_endpoint if error.api else settings.iam_endpoint
    if not project or _check.stand_in_missing(settings, endpoint):  # offline, and no stand-in
        return error
    parts = permissions.parts(spec)
    apis = access.AccessApis.of(settings, retry=_check.short_retry(settings))
    try:
        if error.api:
            states = access.enabled_services(apis.serviceusage, project, permissions.apis(parts))
            others = [a for a, on in states.items() if not on and a != error.api]
            what, fix = (
                "not enabled",
                f"gcloud services enable {' '.join([error.api, *others])} --project {project}",
            )
        else:
            wanted = [n.permission for n in permissions.needs(parts, "project")]
            held = access.project_permissions(apis.resourcemanager, project, wanted)
            others = [p for p in wanted if p not in held and p != error.permission]
            what, fix = "denied", error.hint or ""
    except VertexTrainerError:
        return error
    if not others:
        return error
    return Denied(
        error.message.replace(
            "; `vertex-trainer check`", f"; also {what}: {', '.join(others)}; `vertex-trainer check`"
        ),
        api=error.api,
        permission=error.permission,
        hint=fix or error.hint,
    )
