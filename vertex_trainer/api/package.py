"""Packaging (docs/contract.md section 4): the image built and pushed once per content hash, or the
Python package staged; planned without any network call, built only when a plan runs."""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING, Any

from vertex_trainer import catalog
from vertex_trainer.api.core import plan_artifact, settings_from_env
from vertex_trainer.contract import Artifact
from vertex_trainer.errors import SpecError
from vertex_trainer.log import Log
from vertex_trainer.preflight import check_stand_ins
from vertex_trainer.settings import Settings
from vertex_trainer.spec.images import AUTO, image_tensorflow

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.packaging import PackageResult
    from vertex_trainer.spec import JobSpec

__all__ = ["artifact_for", "package", "package_step"]


def package(
    spec: JobSpec,
    *,
    builder: str | None = None,
    dry_run: bool = False,
    log: Log | None = None,
    settings: Settings | None = None,
) -> PackageResult:
    """Build and push the image once per content hash, or stage the Python package
    (docs/contract.md section 4).

    Args:
        spec: a job spec with ``image:`` (``repository`` to build, or ``python_package``).
        builder: ``docker`` or ``cloud-build`` (default: the packager's choice).
        dry_run: plan only: the hash, tag and builder; nothing is touched.
        log: where progress lines go (default: stderr).
        settings: the process settings (default: read from the environment).

    Returns:
        a PackageResult: the artifact, the image, whether it was built, and the plan.
    """
    # the packager (its builders, screen, templates) loads here: `validate` and `submit --local`
    # of a spec that builds nothing do not load it (api.plan imports this module)
    from vertex_trainer import packaging

    if spec.image is None:
        raise SpecError(
            "image",
            "is required to package: the spec names no image",
            has_value=False,
            hint="image.repository: REGION-docker.pkg.dev/PROJECT/REPO/trainer builds the bundled trainer",
        )
    if spec.image.code and not spec.image.builds:  # (a local run needs no package: it runs the folder)
        raise SpecError(
            "image",
            "has image.code but no way to package it: no image.repository, no python_package",
            has_value=False,
            hint="add image.repository: REGION-docker.pkg.dev/PROJECT/REPO/NAME (an image of your "
            "code, tagged by its content hash) or image.python_package: true (no Docker)",
        )
    settings = settings or settings_from_env()
    if not dry_run:
        check_stand_ins(spec, settings, builder=builder)
    return packaging.ensure_artifact(spec, settings=settings, builder=builder, dry_run=dry_run, log=log)


def artifact_for(
    spec: JobSpec, *, dry_run: bool, local: bool, builder: str | None, log: Log, settings: Settings
) -> tuple[Artifact, str, Any]:
    """(artifact, image, build plan or None) for the spec.

    A plain image uri needs no packaging; a local run only needs the tag (the installed trainer
    runs); a cloud submit ensures the image exists (`dry_run`: plans that once, as a real submit
    would, so a missing staging location shows)."""
    if local or spec.image is None or not spec.image.builds:
        artifact = plan_artifact(spec)
        return artifact, artifact.image_uri, None
    result = package(spec, builder=builder, dry_run=dry_run, log=log, settings=settings)
    return result.artifact, result.image, result.plan


def package_step(plan: Any) -> dict | None:
    """What packaging a dry run skipped: the build (or upload) submit does first, if needed."""
    if plan is None:
        return None
    return {
        "kind": plan.kind,
        "target": plan.target,
        "builder": plan.builder,
        "context_hash": plan.context_hash,
        "files": len(plan.entries),
        "bytes": plan.size,
        # what was left out of your folders and why (packaging/screen.py; package --dry-run lists it)
        "left_out": [s.to_json() for s in plan.screened if not s.kept],
        # image.code's own package: its dependencies and where they are declared (setup.py ...)
        "dependencies": list(plan.dependencies),
        "dependencies_from": plan.dependencies_from,
    }


def local_tensorflow_note(spec: JobSpec) -> str | None:
    """`--local` runs your own code on this machine's TensorFlow, not its image's: one line
    naming both versions when they differ (None when they agree, or either is not known)."""
    from vertex_trainer.packaging.build_plan import resolve_variant  # the packager (see package)

    image = spec.image
    if image is None or not spec.is_script_job:
        return None
    base = image.executor_image if image.python_package else image.base_image
    theirs: str | None
    if not base or base == AUTO:
        row = {r["variant"]: r for r in catalog.table("training_images")}.get(resolve_variant(spec))
        if row is None:
            return None
        base, theirs = row["image"], row["tensorflow"]
    else:
        theirs = image_tensorflow(base)
    ours = None
    for distribution in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-tpu"):
        try:
            ours = importlib.metadata.version(distribution)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    if theirs is None or ours is None or ".".join(ours.split(".")[:2]) == theirs:
        return None
    return (
        f"note: --local runs your code on this machine's TensorFlow {ours}; on Vertex AI it runs "
        f"on its image's, TensorFlow {theirs} ({base.rsplit('/', 1)[-1]}): what differs between "
        "the two shows there only"
    )
