"""What would be built, and under which name: the BuildPlan and the Artifact a job runs.

Pure: it reads and hashes files, renders templates, and nothing else (no network, no
subprocess). `plan_artifact(spec)` is what `render`, `submit --dry-run` and `--local` use;
`ensure.ensure_artifact` starts from the same `plan_build`.

- Bundled trainer: the context mirrors the repository root (Dockerfile, .dockerignore,
  trainer_image/requirements*.txt, trainer_image/trainer/**), so the root Dockerfile builds the
  same image with `docker build .`. Tag: `<repository>:<first 24 hex of the content hash>`.
- `image.context`: the user's directory, through the screen (packaging/screen.py: no credential,
  VCS data or virtual environment; its .gcloudignore), then its own .dockerignore.
- `image.python_package`: an sdist of the trainer, staged at
  `<staging>/packages/<hash>/vertex_trainer_task-1.0.tar.gz`, run on a prebuilt executor image.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from vertex_trainer.contract import Artifact
from vertex_trainer.errors import ServiceError, SpecError, UserError
from vertex_trainer.hardware import accelerator_kind
from vertex_trainer.packaging import factory, owncode
from vertex_trainer.packaging.context import (
    ContextEntry,
    DockerIgnore,
    entry_from_bytes,
    entry_from_file,
    hash_entries,
    write_archive,
)
from vertex_trainer.packaging.screen import Screened, walk_screened
from vertex_trainer.packaging.templates import (
    VARIANTS,
    bundled_trainer_dir,
    is_framework_requirement,
    render_dockerfile,
    render_dockerignore,
    requirement_lines,
    trainer_requirements,
)
from vertex_trainer.redact import redact_yaml, shown_name
from vertex_trainer.sizes import human_size
from vertex_trainer.spec import ImageSpec, JobSpec, parse_staging, validate_image_values, validate_requirement
from vertex_trainer.spec.images import code_root

BUILDERS = ("cloud-build", "docker")
DEFAULT_BUILDER = "cloud-build"
# Vertex AI runs linux/amd64 machines; pin it so a build on an arm64 laptop still runs there.
PLATFORM = "linux/amd64"
TAG_HEX_CHARS = 24  # 96 bits of the sha256: collisions are not a concern for one repo
SPEC_ENTRY = ".vertex-trainer/spec.yaml"
PACKAGE_DIST = "vertex-trainer-task"
PACKAGE_VERSION = "1.0"
SDIST_ROOT = f"{PACKAGE_DIST.replace('-', '_')}-{PACKAGE_VERSION}"


class BuildFailed(ServiceError):
    """The image build ran and did not succeed (exit 3); the message carries the log URL."""


# -- what the packager reads of the spec: the image block, the hardware and a few names --------


def resolve_variant(spec: JobSpec) -> str:
    """image.variant, or for "auto": TPU machine -> tpu, accelerator -> gpu, else cpu."""
    variant = (spec.image.variant if spec.image is not None else None) or "auto"
    if variant != "auto":
        return variant
    return accelerator_kind(spec.hardware.machine_type or "", spec.hardware.accelerator_type)


def executor_image(spec: JobSpec) -> str:
    """The prebuilt Vertex AI training image that runs a python_package job."""
    explicit = spec.image.executor_image if spec.image is not None else None
    if explicit:
        return str(explicit)
    variant = VARIANTS[resolve_variant(spec)]
    if not variant.executor:
        raise SpecError(
            "image.executor_image",
            f"is required for python_package on the "
            f"{variant.name} variant: Vertex AI has no current prebuilt TensorFlow "
            "training image for it",
            value=None,
            has_value=False,
            hint="set image.executor_image, or build an image with image.repository",
        )
    # Vertex AI only serves these images under :latest; the region mirror keeps the pull local.
    return f"{owncode.region_mirror(spec.region)}-docker.pkg.dev/{variant.executor}"


def staging_location(spec: JobSpec) -> tuple[str, str]:
    """(bucket, prefix) for uploads: image.staging_bucket, else <output_dir>/staging when the
    output directory is on Cloud Storage (the run's package then sits beside its outputs)."""
    explicit = spec.image.staging_bucket if spec.image is not None else None
    if explicit:
        return parse_staging("image.staging_bucket", explicit)
    output_dir = str(spec.output_dir or "")
    if output_dir.startswith("gs://"):
        bucket, prefix = parse_staging("output_dir", output_dir.rstrip("/"))
        return bucket, "/".join(p for p in (prefix, "staging") if p)
    raise SpecError(
        "image.staging_bucket",
        "is required to stage uploads when output_dir is not a gs:// path",
        value=None,
        has_value=False,
        hint="set image.staging_bucket: gs://BUCKET/PREFIX (same region as the job)",
    )


def spec_yaml(spec: JobSpec) -> str:
    """The resolved spec as saved in the archive (`.vertex-trainer/spec.yaml`)."""
    return spec.to_yaml()


# -- the plan ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildPlan:
    """What would be built, and under which name. Made without any I/O beyond reading files."""

    kind: str  # "image" | "python-package"
    entries: tuple[ContextEntry, ...]  # hashed, in archive order
    context_hash: str  # "sha256:<64 hex>"
    target: str  # repository:tag, or gs://.../package.tar.gz
    source: str  # where the files came from (for display only)
    variant: str | None = None
    base_image: str | None = None
    builder: str | None = None
    executor_image: str | None = None
    python_module: str | None = None  # a python package's module (default: the bundled trainer's)
    archive_root: str | None = None  # the sdist's top directory (default: SDIST_ROOT)
    screened: tuple[Screened, ...] = ()  # what was left out of your folders, and why
    # image.code is a package of its own (spec/package_folder.py): where its dependencies were
    # declared, and them; built_sdist: the staged sdist is pypa build's of the entries
    dependencies_from: str | None = None
    dependencies: tuple[str, ...] = ()
    built_sdist: bool = False

    @property
    def tag(self) -> str:
        return self.context_hash.split(":", 1)[1][:TAG_HEX_CHARS]

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)

    def describe(self) -> list[str]:
        lines = [
            f"{self.kind}: {self.target}",
            f"context: {self.source} ({len(self.entries)} files, {human_size(self.size)})",
            f"context hash: {self.context_hash}",
        ]
        if self.variant:
            lines.append(f"variant: {self.variant} (base {self.base_image})")
        if self.builder:
            lines.append(f"builder: {self.builder}")
        if self.executor_image:
            lines.append(f"executor image: {self.executor_image}")
        if self.dependencies_from:
            lines.append(f"dependencies ({self.dependencies_from}): {', '.join(self.dependencies) or 'none'}")
        lines += [f"  {e.size:>9}  {shown_name(e.name)}" for e in self.entries]
        return lines + self.screened_lines()

    def screened_lines(self) -> list[str]:
        """What was left out of each folder of yours, and why; what was let in on purpose."""
        lines: list[str] = []
        for field in dict.fromkeys(s.field for s in self.screened):
            mine = [s for s in self.screened if s.field == field]
            for kept, head in ((False, "left out of"), (True, "packaged on purpose from")):
                shown = sorted((s for s in mine if s.kept == kept), key=lambda s: s.path)
                if not shown:
                    continue
                names = [shown_name(s.path) for s in shown]  # names from your folders, one line each
                width = min(40, max(map(len, names)))
                lines.append(f"{head} {field} ({len(shown)}):")
                lines += [f"  {n:<{width}}  {s.reason}" for n, s in zip(names, shown, strict=True)]
            if any(s.credential and not s.kept for s in mine):
                lines.append(
                    "  (a credential the job needs: name it in image.include_secrets; better, Secret Manager)"
                )
        return lines


def archive_bytes(plan: BuildPlan, spec: JobSpec | None = None) -> bytes:
    """The build context as uploaded (image) or the sdist (python package); with `spec`, the
    resolved spec rides along under .vertex-trainer/ (outside the hash). A package folder's sdist
    is pypa build's of its files, as the SDK and gcloud stage it (no spec inside)."""
    if plan.built_sdist:
        return owncode.build_sdist(plan.entries, plan.archive_root or "")
    buf = io.BytesIO()
    extra = [entry_from_bytes(SPEC_ENTRY, redact_yaml(spec_yaml(spec)).encode())] if spec is not None else []
    root = (plan.archive_root or SDIST_ROOT) if plan.kind == "python-package" else ""
    write_archive(plan.entries, buf, root=root, extra=extra)
    return buf.getvalue()


def plan_bundled_context(
    *,
    variant: str = "gpu",
    base_image: str | None = None,
    base_image_digest: str | None = None,
    pip_packages: Iterable[str] = (),
    trainer_dir: Path | None = None,
    user_code: Iterable[ContextEntry] = (),
    screened: list[Screened] | None = None,
) -> tuple[list[ContextEntry], str]:
    """The bundled trainer's build context, laid out like the repository root (so the root
    Dockerfile builds the very same image with `docker build .`). Returns (entries, source).
    `user_code`: a model factory's image.code under code/ (packaging/factory.py); `screened`
    collects what was left out (a file of user_code the bundled .dockerignore leaves out)."""
    trainer_dir = Path(trainer_dir) if trainer_dir else bundled_trainer_dir()
    pip_packages, user_code = list(pip_packages), list(user_code)
    dockerignore = render_dockerignore(user_code=bool(user_code))
    ignore = DockerIgnore(dockerignore)
    entries = [
        entry_from_bytes(
            "Dockerfile",
            render_dockerfile(
                variant,
                base_image=base_image,
                base_image_digest=base_image_digest,
                pip_packages=pip_packages,
                user_code=bool(user_code),
            ).encode(),
        ),
        entry_from_bytes(".dockerignore", dockerignore.encode()),
        entry_from_bytes("trainer_image/requirements.txt", trainer_requirements(trainer_dir)),
    ]
    if pip_packages:
        entries.append(
            entry_from_bytes(
                "trainer_image/requirements-extra.txt", ("\n".join(pip_packages) + "\n").encode()
            )
        )
    entries += _trainer_files(trainer_dir, ignore, "trainer_image/trainer/", screened) + user_code
    if screened is not None:
        screened.extend(
            Screened(
                "image.code",
                e.name[len(factory.CODE_PREFIX) :],
                f"the bundled trainer's .dockerignore: {why}",
            )
            for e in user_code
            if (why := ignore.deciding(e.name)) is not None
        )
    entries = [e for e in entries if e.name in ("Dockerfile", ".dockerignore") or not ignore.excluded(e.name)]
    return sorted(entries, key=lambda e: e.name), str(trainer_dir)


def _trainer_files(
    trainer_dir: Path, ignore: DockerIgnore, prefix: str, screened: list[Screened] | None
) -> list[ContextEntry]:
    """The bundled trainer's files its .dockerignore template keeps, credentials screened out
    (none in the trainer shipped: a fork's would be named)."""
    return walk_screened(
        trainer_dir,
        field="the bundled trainer",
        ignore=ignore,
        prefix=prefix,
        own_rules=False,
        screened=screened,
    )


def plan_custom_context(
    context: str | Path, *, include_secrets: tuple[str, ...] = (), screened: list[Screened] | None = None
) -> tuple[list[ContextEntry], str]:
    """A user's directory with its own Dockerfile, through the screen (packaging/screen.py), then
    its own .dockerignore. `include_secrets`: image.include_secrets; `screened` collects what was
    left out."""
    root = Path(context).expanduser().resolve()
    if not root.is_dir():
        raise SpecError("image.context", "is not a directory", value=str(context))
    if not (root / "Dockerfile").is_file():
        raise SpecError(
            "image.context",
            "has no Dockerfile",
            value=str(context),
            hint="add a Dockerfile at the top of the directory, or drop image.context "
            "to build the bundled trainer",
        )
    # The saved spec rides along in the archive under .vertex-trainer/: the screen's built-in
    # rules keep it from the image and the hash.
    entries = walk_screened(root, field="image.context", include_secrets=include_secrets, screened=screened)
    # Docker always reads the Dockerfile and .dockerignore, whatever the patterns say.
    names = {e.name for e in entries}
    for special in ("Dockerfile", ".dockerignore"):
        if special not in names and (root / special).is_file():
            entries.append(entry_from_file(special, root / special))
    return sorted(entries, key=lambda e: e.name), str(root)


def sdist_entries(
    trainer_dir: Path,
    pip_packages: list[str],
    executor_keras: str | None,
    user_code: Iterable[ContextEntry] = (),
    screened: list[Screened] | None = None,
) -> list[ContextEntry]:
    """The files of the trainer's sdist (pyproject.toml, PKG-INFO, trainer/**); `user_code`, a
    model factory's image.code at the sdist's top, is installed beside the trainer; `screened`
    collects what was left out."""
    user_code = list(user_code)
    packages, modules = factory.top_level(user_code)
    include = [f"{name}{tail}" for name in ("trainer", *packages) for tail in ("", ".*")]
    ignore = DockerIgnore(render_dockerignore())
    code = _trainer_files(trainer_dir, ignore, "trainer_image/trainer/", screened)
    requirements = [
        r
        for r in requirement_lines(trainer_requirements(trainer_dir).decode())
        # The executor image brings TensorFlow itself; reinstalling it would replace
        # the image's accelerator build with a generic wheel.
        if not is_framework_requirement(r)
    ]
    deps = ([executor_keras] if executor_keras else []) + requirements + pip_packages
    pyproject = (
        "[build-system]\n"
        'requires = ["setuptools>=61"]\n'
        'build-backend = "setuptools.build_meta"\n\n'
        "[project]\n"
        f'name = "{PACKAGE_DIST}"\n'
        f'version = "{PACKAGE_VERSION}"\n'
        'description = "The vertex-trainer trainer, packaged for a prebuilt Vertex AI image"\n'
        f"dependencies = {json.dumps(deps)}\n\n"
        "[tool.setuptools.packages.find]\n"
        f"include = {json.dumps(include)}\n"
        + (f"\n[tool.setuptools]\npy-modules = {json.dumps(modules)}\n" if modules else "")
    )
    pkg_info = f"Metadata-Version: 2.1\nName: {PACKAGE_DIST}\nVersion: {PACKAGE_VERSION}\n" + "".join(
        f"Requires-Dist: {d}\n" for d in deps
    )
    entries = [
        entry_from_bytes("pyproject.toml", pyproject.encode()),
        entry_from_bytes("PKG-INFO", pkg_info.encode()),
    ]
    for e in code:
        entries.append(dataclasses.replace(e, name=e.name[len("trainer_image/") :]))
    return sorted(entries + user_code, key=lambda e: e.name)


def plan_build(
    spec: JobSpec, builder: str | None = None, *, trainer_dir: Path | None = None
) -> BuildPlan | None:
    """The BuildPlan for the spec's image block, or None when image.uri is used as is.
    `builder` overrides image.builder; `trainer_dir` replaces the bundled trainer package."""
    validate_image_values(spec)
    image = spec.image
    if image is None:
        raise SpecError(
            "image",
            "is required: set image.uri, image.repository or image.python_package",
            value=None,
            has_value=False,
        )
    if image.uri:
        return None
    if image.code and (image.script or image.module):
        return _plan_code(spec, image, builder)  # your own code (issue 32): packaging/owncode.py
    pip_packages = [
        validate_requirement(f"image.pip_packages[{i}]", r) for i, r in enumerate(image.pip_packages or ())
    ]
    user_code: list[ContextEntry] = []
    screened: list[Screened] = []
    if image.code:  # a model factory (trainer.model: package.module:function)
        user_code, requirements = factory.factory_files(
            spec, package=bool(image.python_package), screened=screened
        )
        pip_packages += requirements
    if image.python_package:
        return _plan_python_package(spec, image, pip_packages, trainer_dir, user_code, screened)
    repository = image.repository
    if not repository:
        raise SpecError(
            "image",
            "needs one of image.uri, image.repository or image.python_package",
            value=None,
            has_value=False,
        )
    builder = _builder(image, builder)
    if image.context:
        entries, source = plan_custom_context(
            image.context, include_secrets=tuple(image.include_secrets or ()), screened=screened
        )
        variant = base = None
    else:
        variant = resolve_variant(spec)
        entries, source = plan_bundled_context(
            variant=variant,
            base_image=_given_base(image),
            base_image_digest=image.base_image_digest,
            pip_packages=pip_packages,
            trainer_dir=trainer_dir,
            user_code=user_code,
            screened=screened,
        )
        source += f" and image.code {code_root(spec)}" if user_code else ""
        base = _given_base(image) or VARIANTS[variant].base_image
        if image.base_image_digest:
            base = f"{base}@{image.base_image_digest}"
    return _image_plan(entries, source, repository, variant, base, builder, screened)


def _builder(image: ImageSpec, builder: str | None) -> str:
    """--builder, else image.builder, else cloud-build; exit 2 for another name."""
    builder = builder or image.builder or DEFAULT_BUILDER
    if builder not in BUILDERS:
        raise UserError(f"--builder: must be one of {', '.join(BUILDERS)} (got {builder!r})")
    return builder


def _tag(context_hash: str) -> str:
    return context_hash.split(":", 1)[1][:TAG_HEX_CHARS]


def _staged(spec: JobSpec, context_hash: str, root: str) -> str:
    """gs://<staging>/packages/<tag>/<root>.tar.gz: where a python package is staged."""
    bucket, prefix = staging_location(spec)
    obj = "/".join(p for p in (prefix, "packages", _tag(context_hash), f"{root}.tar.gz") if p)
    return f"gs://{bucket}/{obj}"


def _plan_python_package(
    spec: JobSpec,
    image: ImageSpec,
    pip_packages: list[str],
    trainer_dir: Path | None,
    user_code: list[ContextEntry] | None = None,
    screened: list[Screened] | None = None,
) -> BuildPlan:
    tdir = Path(trainer_dir) if trainer_dir else bundled_trainer_dir()
    variant = resolve_variant(spec)
    # tf-keras matched to the default executor's TensorFlow; with an image of your own,
    # bring tf-keras in it (or in image.pip_packages).
    keras = None if image.executor_image else VARIANTS[variant].executor_keras
    screened = screened if screened is not None else []
    entries = sdist_entries(tdir, pip_packages, keras, user_code or (), screened)
    context_hash = hash_entries(entries)
    return BuildPlan(
        "python-package",
        tuple(entries),
        context_hash,
        _staged(spec, context_hash, SDIST_ROOT),
        str(tdir) + (f" and image.code {code_root(spec)}" if user_code else ""),
        variant=variant,
        executor_image=executor_image(spec),
        screened=tuple(screened),
    )


def _given_base(image: ImageSpec) -> str | None:
    """image.base_image, with auto (the variant's own) as None."""
    base = image.base_image
    return None if base == "auto" else base


def _plan_code(spec: JobSpec, image: ImageSpec, builder: str | None) -> BuildPlan:
    """A script job (image.code): its image, or its sdist on the prebuilt executor image."""
    variant = resolve_variant(spec)
    screened: list[Screened] = []
    if image.python_package:
        sdist = owncode.package_entries(spec, screened=screened)
        entries, source, module, own = sdist.entries, sdist.source, sdist.module, sdist.package
        context_hash = hash_entries(entries)
        executor = image.executor_image or owncode.prebuilt_image(
            variant, spec.region, field="image.executor_image"
        )
        return BuildPlan(
            "python-package",
            tuple(entries),
            context_hash,
            _staged(spec, context_hash, sdist.root),
            source,
            variant=variant,
            executor_image=executor,
            python_module=module,
            archive_root=sdist.root,
            screened=tuple(screened),
            dependencies_from=own.declared_in if own else None,
            dependencies=own.requirements if own else (),
            built_sdist=own is not None,
        )
    builder = _builder(image, builder)
    entries, source, base = owncode.image_context(spec, variant, screened=screened)
    deps = owncode.dependencies_of(spec)  # a package folder's, for the dry run
    # Without image.repository the job runs only here (submit --local; package, validate and a
    # cloud submit refuse it): a local/ name, as contract.LOCAL_IMAGE is, never 'None:<tag>'.
    repository = image.repository or f"local/{spec.name}"
    return _image_plan(
        entries,
        source,
        repository,
        variant,
        base,
        builder,
        screened,
        dependencies_from=deps[0] if deps else None,
        dependencies=deps[1] if deps else (),
    )


def _image_plan(
    entries: Iterable[ContextEntry],
    source: str,
    repository: str,
    variant: str | None,
    base: str | None,
    builder: str,
    screened: list[Screened],
    *,
    dependencies_from: str | None = None,
    dependencies: tuple[str, ...] = (),
) -> BuildPlan:
    """The plan of an image build of `entries`: tagged `<repository>:<content hash>`."""
    entries = tuple(entries)
    context_hash = hash_entries(entries)
    return BuildPlan(
        "image",
        entries,
        context_hash,
        f"{repository}:{_tag(context_hash)}",
        source,
        variant=variant,
        base_image=base,
        builder=builder,
        screened=tuple(screened),
        dependencies_from=dependencies_from,
        dependencies=dependencies,
    )


def artifact_of(spec: JobSpec, plan: BuildPlan | None) -> Artifact:
    """The Artifact a job runs for this plan (None: image.uri as given)."""
    if plan is None:
        assert spec.image is not None and spec.image.uri  # plan_build plans every other image
        return Artifact(image_uri=spec.image.uri)
    if plan.kind == "python-package":
        assert plan.executor_image is not None  # every python-package plan names its executor image
        if plan.python_module:
            return Artifact(
                image_uri=plan.executor_image, package_uris=(plan.target,), python_module=plan.python_module
            )
        return Artifact(image_uri=plan.executor_image, package_uris=(plan.target,))
    return Artifact(image_uri=plan.target)


def plan_artifact(spec: JobSpec, *, trainer_dir: Path | None = None) -> Artifact:
    """What the job will run, with the exact tag or package URI. No network, no subprocess.
    `trainer_dir` replaces the bundled trainer package (tests, forks)."""
    return artifact_of(spec, plan_build(spec, trainer_dir=trainer_dir))
