"""ensure_artifact: make the artifact a spec asks for exist, building only what is missing.

plan (pure) -> does the tag (or staged package) exist? -> build/upload -> PackageResult.
The tag is `<repository>:<content hash>`: when the registry already has it nothing is built or
pushed. Builders: cloud-build (upload the context to the staging bucket, build through the Cloud
Build REST API) and docker (local daemon). python_package uploads an sdist instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertex_trainer.contract import Artifact
from vertex_trainer.errors import SpecError
from vertex_trainer.gcp import storage
from vertex_trainer.log import Log
from vertex_trainer.packaging.build_plan import (
    BuildFailed,
    BuildPlan,
    archive_bytes,
    artifact_of,
    plan_build,
    staging_location,
)
from vertex_trainer.packaging.cloudbuild import cloud_build_request, run_cloud_build
from vertex_trainer.packaging.docker import run_docker_build
from vertex_trainer.packaging.registry import registry_tag_exists
from vertex_trainer.redact import shown_name
from vertex_trainer.settings import Settings
from vertex_trainer.sizes import human_size
from vertex_trainer.spec import JobSpec


@dataclass(frozen=True)
class PackageResult:
    """What ensure_artifact did. `action` is one of: given (image.uri), planned (dry run),
    reused (the tag or package already existed), built (built and pushed/uploaded now)."""

    artifact: Artifact
    action: str
    image: str
    context_hash: str | None = None
    built: bool = False
    pushed: bool = False
    builder: str | None = None
    log_url: str | None = None
    plan: BuildPlan | None = None
    source_uri: str | None = None  # the uploaded build context, for cloud-build

    @property
    def reused(self) -> bool:
        return self.action == "reused"

    def to_json(self) -> dict[str, Any]:
        """The `package --output json` object (docs/contract.md section 2), plus a few extra keys."""
        out = {
            "image": self.image,
            "built": self.built,
            "pushed": self.pushed,
            "context_hash": self.context_hash,
            "action": self.action,
            "builder": self.builder,
            "log_url": self.log_url,
        }
        if self.artifact.package_uris:
            out["package_uris"] = list(self.artifact.package_uris)
        if self.action == "planned" and self.plan is not None:
            out["dry_run"] = True
            out["files"] = [{"path": e.name, "size": e.size} for e in self.plan.entries]
            out["size"] = self.plan.size
            out["left_out"] = [s.to_json() for s in self.plan.screened]
            if self.plan.dependencies_from:  # image.code's own package (setup.py, pyproject.toml)
                out["dependencies"] = {
                    "from": self.plan.dependencies_from,
                    "requirements": list(self.plan.dependencies),
                }
        return out

    def summary(self) -> str:
        """One line for people: which artifact the job runs, and how it came to exist."""
        what = {
            "given": "using image.uri as given",
            "planned": "dry run: nothing built, pushed or uploaded",
            "reused": "reused: already in the registry, nothing built or pushed",
            "built": "built and pushed" + (f" with {self.builder}" if self.builder else ""),
        }
        if self.plan is not None and self.plan.kind == "python-package":
            what["reused"] = "reused: package already staged, nothing uploaded"
            what["built"] = "packaged and uploaded"
            return f"{self.plan.target} on {self.image} ({what[self.action]})"
        return f"{self.image} ({what[self.action]})"


def credential_line(plan: BuildPlan, *, most: int = 8) -> str | None:
    """One line naming what was left out of your folders as a credential (None when nothing was),
    so a build says why a key file is not in the image."""
    found = sorted((s for s in plan.screened if s.credential and not s.kept), key=lambda s: s.path)
    if not found:
        return None
    fields = ", ".join(dict.fromkeys(s.field for s in found))
    names = ", ".join(shown_name(s.path) for s in found[:most]) + (
        f" and {len(found) - most} more" if len(found) > most else ""
    )
    return (
        f"package: left out of {fields} as credentials: {names} (image.include_secrets names one to "
        "package anyway; `package --dry-run` lists what was left out and why)"
    )


def ensure_artifact(
    spec: JobSpec,
    *,
    settings: Settings,
    builder: str | None = None,
    dry_run: bool = False,
    log: Log | None = None,
    trainer_dir: Path | None = None,
) -> PackageResult:
    """Make sure the artifact the spec asks for exists; build/upload only what is missing.

    With dry_run nothing is touched (no network, no subprocess): the result carries the plan.
    `settings` gives the endpoints and the retry policy; `builder` overrides image.builder;
    `trainer_dir` replaces the bundled trainer package."""
    log = log if log is not None else (lambda _msg: None)
    result = _ensure(spec, settings, builder, dry_run, log, trainer_dir)
    if result.action in ("built", "reused"):
        # submit relays this line: the user sees which tag runs and whether it was built or reused.
        log(f"package: {result.summary()}")
    return result


def _ensure(
    spec: JobSpec, settings: Settings, builder: str | None, dry_run: bool, log: Log, trainer_dir: Path | None
) -> PackageResult:
    plan = plan_build(spec, builder, trainer_dir=trainer_dir)
    artifact = artifact_of(spec, plan)
    if plan is None:
        return PackageResult(artifact, "given", artifact.image_uri)
    line = credential_line(plan)
    if line and not dry_run:  # the dry run lists them all, with the rest of what was left out
        log(line)
    if plan.kind == "python-package":
        return _ensure_package(spec, settings, plan, artifact, dry_run, log)

    if plan.builder == "cloud-build":
        # Validate what cloud-build needs before any network call, dry run included.
        bucket, prefix = staging_location(spec)
        project, region = spec.project, spec.region
        if not project or not region:
            raise SpecError(
                "project" if not project else "region",
                "is required to build with Cloud Build",
                value=None,
                has_value=False,
                hint="set it in the spec, or pass --project/--region",
            )
    if dry_run:
        return PackageResult(
            artifact, "planned", plan.target, plan.context_hash, builder=plan.builder, plan=plan
        )

    if registry_tag_exists(plan.target, settings=settings, log=log):
        log(f"registry: {plan.target} exists; nothing to build")
        return PackageResult(
            artifact, "reused", plan.target, plan.context_hash, builder=plan.builder, plan=plan
        )

    context = archive_bytes(plan, spec)
    if plan.builder == "docker":
        log(f"docker: building {plan.target} ({len(plan.entries)} files)")
        run_docker_build(plan.target, context, log=log)
        return _built(artifact, plan, "docker")

    assert project and region  # cloud-build: both checked before the dry run
    obj = "/".join(p for p in (prefix, "contexts", f"{plan.tag}.tar.gz") if p)
    source_uri = f"gs://{bucket}/{obj}"
    log(f"cloud-build: uploading the context to {source_uri} ({human_size(len(context))})")
    storage.upload_once(settings, bucket, obj, context, project=project)
    request = cloud_build_request(plan.target, bucket, obj, context_hash=plan.context_hash)
    build = run_cloud_build(project, region, request, settings=settings, log=log)
    log_url = build.get("logUrl")
    if build.get("status") != "SUCCESS":
        detail = (build.get("failureInfo") or {}).get("detail") or build.get("statusDetail") or ""
        raise BuildFailed(
            f"Cloud Build {build.get('id')} ended {build.get('status')}" + (f": {detail}" if detail else ""),
            hint=f"logs: {log_url}" if log_url else None,
        )
    return _built(artifact, plan, "cloud-build", log_url=log_url, source_uri=source_uri)


def _built(
    artifact: Artifact,
    plan: BuildPlan,
    builder: str,
    *,
    log_url: str | None = None,
    source_uri: str | None = None,
) -> PackageResult:
    """An image built and pushed now by `builder`."""
    return PackageResult(
        artifact,
        "built",
        plan.target,
        plan.context_hash,
        built=True,
        pushed=True,
        builder=builder,
        log_url=log_url,
        plan=plan,
        source_uri=source_uri,
    )


def _ensure_package(
    spec: JobSpec, settings: Settings, plan: BuildPlan, artifact: Artifact, dry_run: bool, log: Log
) -> PackageResult:
    """python_package: upload the sdist once per content hash."""
    if dry_run:
        return PackageResult(
            artifact, "planned", plan.executor_image or artifact.image_uri, plan.context_hash, plan=plan
        )
    bucket, obj = plan.target[len("gs://") :].split("/", 1)
    log(f"package: uploading {plan.target}")
    uploaded = storage.upload_once(settings, bucket, obj, archive_bytes(plan, spec), project=spec.project)
    if not uploaded:
        log(f"package: {plan.target} already staged")
    return PackageResult(
        artifact,
        "built" if uploaded else "reused",
        plan.executor_image or artifact.image_uri,
        plan.context_hash,
        built=uploaded,
        pushed=uploaded,
        plan=plan,
    )
