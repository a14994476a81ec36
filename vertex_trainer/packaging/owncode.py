"""A script job's artifact: your own code (image.code) as an image or as a Python package.

The two ways gcloud and the SDK package a local script (docs/own-code.md):

- image (`image.repository`): a generated Dockerfile (templates/Dockerfile.code.j2) FROM the
  base image (`base_image: auto` = the prebuilt Vertex AI TensorFlow training image of the
  hardware variant, catalog/training_images.csv), the requirements, the code, and
  `ENTRYPOINT ["python", SCRIPT]` or `["python", "-m", MODULE]`; the tag is the context's content
  hash, so unchanged code is never rebuilt (what `gcloud ai custom-jobs create
  --local-package-path --script` builds, without its timestamped tag).
- python_package (`image.python_package: true`): an sdist of the code directory run by
  `pythonPackageSpec` on the prebuilt image. A module runs as itself; a script is wrapped in a
  generated module, `vertex_trainer_script.task`, which runs it as `python SCRIPT` would (its
  directory first on sys.path, `__main__`): the SDK's `CustomJob.from_local_script` wraps a
  script the same way (google/cloud/aiplatform/utils/source_utils.py, _TrainingScriptPythonPackager:
  the script copied into package `aiplatform_custom_trainer_script` as module `task`).

A folder that is a package of its own (a setup.py, or a pyproject.toml with a project: spec/
package_folder.py) is packaged as Google's samples submit it: the image pip-installs it after
copying it (its dependencies with it), and python_package stages the sdist pypa `build` makes of
it (`build_sdist`, from the screened copy of the folder, without build isolation) and runs
image.module; its name is the content hash of the screened folder, as for the generated sdist.

Pure, as plan.py: reads and hashes files, nothing else. The checks every later step relies on
(the directory, the entry point, the requirements) are `code_root`, `check_entry` and
`code_requirements`; `submit --local` runs them too (vertex_trainer.local.owncode).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from vertex_trainer import catalog
from vertex_trainer.errors import SpecError, UserError
from vertex_trainer.packaging.context import ContextEntry, entry_from_bytes
from vertex_trainer.packaging.screen import Screened, walk_screened
from vertex_trainer.packaging.templates import _template
from vertex_trainer.spec import JobSpec, validate_image_reference
from vertex_trainer.spec.images import (
    AUTO,
    PREBUILT_RE,
    check_entry,
    code_requirements,
    code_root,
    entry_argv,
    script_image,
)
from vertex_trainer.spec.package_folder import PackageFolder, package_file, read_package

CODE_DIR = "code/"  # the code inside the image's build context
REQUIREMENTS_ENTRY = "vertex-trainer/requirements.txt"
PACKAGE_DIST = "vertex-trainer-code"
PACKAGE_VERSION = "1.0"
SDIST_ROOT = f"{PACKAGE_DIST.replace('-', '_')}-{PACKAGE_VERSION}"
SCRIPT_PACKAGE = "vertex_trainer_script"  # the generated wrapper of a script (python_package)
SCRIPT_MODULE = f"{SCRIPT_PACKAGE}.task"


def code_entries(
    spec: JobSpec, root: Path | None = None, *, prefix: str = "", screened: list[Screened] | None = None
) -> list[ContextEntry]:
    """The files of image.code that are built or packaged: through the screen (packaging/screen.py:
    built-in rules, credentials, its .gcloudignore), then its own .dockerignore.

    Args:
        spec: a job spec with image.code.
        root: image.code, resolved (default: code_root(spec)).
        prefix: the folder's place in the context or sdist.
        screened: collects what the screen left out (or let in on purpose), for the dry run.
    Returns:
        The entries, named prefix + their path in image.code.
    Raises:
        SpecError: a bound is passed, an ignore file is unreadable, or an image.include_secrets
            entry names no credential (exit 2).
    """
    root = root or code_root(spec)
    include_secrets = tuple(script_image(spec).include_secrets)
    # The code's own .dockerignore speaks of paths inside image.code: match before the prefix.
    entries = walk_screened(root, field="image.code", include_secrets=include_secrets, screened=screened)
    return [dataclasses.replace(e, name=prefix + e.name) for e in entries]


# -- the base image --------------------------------------------------------------------------


def region_mirror(region: str | None) -> str:
    """The Artifact Registry mirror of a region's prebuilt images: us, europe or asia."""
    region = (region or "").lower()
    if region.startswith("europe"):
        return "europe"
    if region.startswith(("asia", "australia")):
        return "asia"
    return "us"


def prebuilt_image(variant: str, region: str | None, *, field: str) -> str:
    """The prebuilt Vertex AI TensorFlow training image for a hardware variant, on the region's
    mirror (catalog/training_images.csv).

    Args:
        variant: gpu, cpu or tpu (build_plan.resolve_variant).
        region: the job's region (picks us-, europe- or asia-docker.pkg.dev).
        field: the spec field to name when there is none (image.base_image or image.executor_image).
    Returns:
        The image reference.
    Raises:
        SpecError: no prebuilt image for the variant (TPU), exit 2.
    """
    rows = {r["variant"]: r for r in catalog.table("training_images")}
    row = rows.get(variant)
    if row is None:
        raise SpecError(
            field,
            f"has no prebuilt Vertex AI TensorFlow training image for {variant} machines "
            f"(catalog/training_images.csv lists {', '.join(sorted(rows))})",
            has_value=False,
            hint=f"set {field} to an image with TensorFlow for {variant}, e.g. a TPU build of your own",
        )
    return f"{region_mirror(region)}-docker.pkg.dev/{row['image']}"


def base_image(spec: JobSpec, variant: str) -> str:
    """The FROM of a script job's image: image.base_image (with its digest), or for auto (the
    default) the prebuilt training image of the variant."""
    image = script_image(spec)
    given = image.base_image
    if not given or given == AUTO:
        base = prebuilt_image(variant, spec.region, field="image.base_image")
    else:
        base = given
        validate_image_reference("image.base_image", base, require_pin=not image.base_image_digest)
    if image.base_image_digest:
        base = f"{base.split('@', 1)[0]}@{image.base_image_digest}"
    return base


def render_code_dockerfile(spec: JobSpec, *, base: str, requirements: bool, package: bool = False) -> str:
    """The generated Dockerfile of a script job (validated values only); `package`: image.code is
    a package folder, pip-installed after it is copied."""
    validate_image_reference("image.base_image", base)
    text: str = _template("Dockerfile.code.j2").render(
        base_image=base,
        prebuilt=bool(PREBUILT_RE.fullmatch(base.split("@", 1)[0])),
        unpinned=base.endswith(":latest"),
        requirements=requirements,
        package=package,
        argv=["python3", *entry_argv(spec)],
    )
    return text


def dependencies_of(spec: JobSpec) -> tuple[str, tuple[str, ...]] | None:
    """Where image.code's own package declares its dependencies, and them, for the dry run of an
    image (whose pip reads the package itself); None for a folder that is not a package, or one
    whose build backend is not installed here (`--local` names it then)."""
    try:
        own = read_package(code_root(spec))
    except SpecError:
        return None
    return (own.declared_in, own.requirements) if own is not None else None


def image_context(
    spec: JobSpec, variant: str, *, screened: list[Screened] | None = None
) -> tuple[list[ContextEntry], str, str]:
    """The build context of a script job's image: Dockerfile, requirements, code/**.
    `screened` collects what was left out of image.code.

    Returns:
        (entries sorted by name, the code directory, the base image).
    """
    root = code_root(spec)
    check_entry(spec, root)
    reqs = code_requirements(spec, root)
    base = base_image(spec, variant)
    # The image's pip reads the package (with network and build isolation): nothing runs here.
    package = package_file(root) is not None
    dockerfile = render_code_dockerfile(spec, base=base, requirements=bool(reqs), package=package)
    entries = [entry_from_bytes("Dockerfile", dockerfile.encode())]
    if reqs:
        entries.append(entry_from_bytes(REQUIREMENTS_ENTRY, ("\n".join(reqs) + "\n").encode()))
    entries += code_entries(spec, root, prefix=CODE_DIR, screened=screened)
    return sorted(entries, key=lambda e: e.name), str(root), base


# -- the Python package ------------------------------------------------------------------------

_WRAPPER = '''"""Runs {script} as `python {script}` would (generated by vertex-trainer: python_package)."""

import os
import runpy
import sys

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "code", {script!r})


def main() -> None:
    sys.path.insert(0, os.path.dirname(_SCRIPT))
    sys.argv[0] = _SCRIPT
    runpy.run_path(_SCRIPT, run_name="__main__")


if __name__ == "__main__":
    main()
'''


@dataclass(frozen=True)
class Sdist:
    """A script job's sdist: its files (hashed, in archive order), where they came from, the
    pythonModule it runs, its top directory (the file's name without .tar.gz), and `package`,
    image.code's own package when the sdist is built from it with pypa build (build_sdist)."""

    entries: list[ContextEntry]
    source: str
    module: str
    root: str = SDIST_ROOT
    package: PackageFolder | None = None


def package_entries(spec: JobSpec, *, screened: list[Screened] | None = None) -> Sdist:
    """The files of a script job's sdist (pyproject.toml, PKG-INFO, the code); `screened`
    collects what was left out of image.code.

    A module job's code sits at the sdist's top, so `python -m MODULE` finds it once installed;
    a script job's code goes under vertex_trainer_script/code/ beside the generated wrapper. A
    package folder's sdist is its own (own_package).
    """
    image = script_image(spec)
    root = code_root(spec)
    check_entry(spec, root)
    own = read_package(root)
    if own is not None:
        return own_package(spec, root, own, screened)
    reqs = code_requirements(spec, root)
    if image.script:
        code = code_entries(spec, root, prefix=f"{SCRIPT_PACKAGE}/code/", screened=screened)
        generated = [
            entry_from_bytes(f"{SCRIPT_PACKAGE}/__init__.py", b""),
            entry_from_bytes(f"{SCRIPT_PACKAGE}/task.py", _WRAPPER.format(script=image.script).encode()),
        ]
        find = (
            f'packages = ["{SCRIPT_PACKAGE}"]\n\n'
            f'[tool.setuptools.package-data]\n{SCRIPT_PACKAGE} = ["code/**/*"]\n'
        )
        module = SCRIPT_MODULE
    else:
        code = code_entries(spec, root, screened=screened)
        generated = []
        modules = sorted(
            e.name[:-3] for e in code if "/" not in e.name and e.name.endswith(".py") and e.name != "setup.py"
        )
        find = (
            f"py-modules = {json.dumps(modules)}\ninclude-package-data = true\n\n"
            '[tool.setuptools.packages.find]\nwhere = ["."]\n\n'
            '[tool.setuptools.package-data]\n"*" = ["*"]\n'
        )
        module = str(image.module)
    pyproject = (
        "[build-system]\n"
        'requires = ["setuptools>=64"]\n'
        'build-backend = "setuptools.build_meta"\n\n'
        "[project]\n"
        f'name = "{PACKAGE_DIST}"\n'
        f'version = "{PACKAGE_VERSION}"\n'
        'description = "Your training code (image.code), packaged by vertex-trainer"\n'
        f"dependencies = {json.dumps(reqs)}\n\n"
        "[tool.setuptools]\n" + find
    )
    pkg_info = f"Metadata-Version: 2.1\nName: {PACKAGE_DIST}\nVersion: {PACKAGE_VERSION}\n" + "".join(
        f"Requires-Dist: {d}\n" for d in reqs
    )
    names = {e.name for e in code}
    for clash in ("pyproject.toml", "PKG-INFO", "setup.cfg"):
        if clash in names:
            raise SpecError(
                "image.code",
                f"holds a {clash} that declares no package (no [project] or [build-system], and no "
                "setup.py): python_package would write its own in its place",
                value=image.code,
                hint=f"make it a package (a setup.py, or [project] in pyproject.toml: docs/own-code.md "
                f'"Your own package"), drop image.python_package to build an image, or exclude {clash} '
                "in image.code/.dockerignore",
            )
    entries = [
        entry_from_bytes("pyproject.toml", pyproject.encode()),
        entry_from_bytes("PKG-INFO", pkg_info.encode()),
        *generated,
        *code,
    ]
    return Sdist(sorted(entries, key=lambda e: e.name), str(root), module)


def own_package(spec: JobSpec, root: Path, own: PackageFolder, screened: list[Screened] | None) -> Sdist:
    """The sdist of a package folder: its screened files, built by build_sdist when staged.

    Raises:
        SpecError: image.script (pythonPackageSpec runs a module of the package), image.requirements,
            or a requirements.txt line the package does not declare (Vertex AI installs only the
            package and what it declares): exit 2.
    """
    image = script_image(spec)
    if image.script:
        raise SpecError(
            "image.script",
            f"cannot run in python_package mode from a package folder ({own.name} {own.version}, "
            "image.code): pythonPackageSpec installs the package and runs one of its modules",
            value=image.script,
            hint=f"set image.module to the script's module instead (e.g. {_module_of(image.script)}), "
            "or drop image.python_package to build an image that runs the script",
        )
    if image.requirements:
        raise SpecError(
            "image.requirements",
            f"is not installed in python_package mode from a package folder ({own.name}): Vertex AI "
            f"installs the package and its dependencies ({own.declared_in}) only",
            value=list(image.requirements),
            hint=f"declare them in {own.declared_in}, or drop image.python_package to build an image",
        )
    declared = {canonicalize_name(Requirement(r).name) for r in own.requirements}
    extra = [
        r for r in code_requirements(spec, root) if canonicalize_name(Requirement(r).name) not in declared
    ]
    if extra:
        raise SpecError(
            "image.code",
            f"requirements.txt lists {', '.join(extra)}, which the package {own.name} does not "
            f"declare ({own.declared_in}): python_package installs only the package and what it declares",
            value=image.code,
            hint=f"add {'it' if len(extra) == 1 else 'them'} to {own.declared_in}, or drop "
            "image.python_package to build an image (which installs requirements.txt too)",
        )
    code = code_entries(spec, root, screened=screened)
    return Sdist(sorted(code, key=lambda e: e.name), str(root), str(image.module), own.sdist_root, own)


def _module_of(script: str) -> str:
    return script[: -len(".py")].replace("/", ".")


def build_sdist(entries: list[ContextEntry] | tuple[ContextEntry, ...], root: str) -> bytes:
    """The sdist pypa `build` makes of a package folder's screened files, written to a scratch
    folder first (so nothing the screen left out, and nothing of the build, touches the folder),
    without build isolation: the backend (setuptools, usually) must be installed here.

    Args:
        entries: the screened files of the folder (Sdist.entries).
        root: the sdist's expected top directory (named in an error).
    Returns:
        The .tar.gz's bytes.
    Raises:
        UserError: the backend is missing here or the build failed (exit 2, its last line).
    """
    # pypa build (and its hook runner): ~0.1 s to import, for a package folder's sdist only
    import build
    import pyproject_hooks

    with tempfile.TemporaryDirectory(prefix="vertex-trainer-sdist-") as tmp:
        src, out = Path(tmp) / "src", Path(tmp) / "dist"
        for e in entries:
            path = src / e.name
            path.parent.mkdir(parents=True, exist_ok=True)
            if e.link is not None:
                # A link stays a link, as in an image's context; one out of the folder is not made
                # (the backend would read what it points to into the sdist).
                if not (path.parent / e.link).resolve().is_relative_to(src.resolve()):
                    continue
                path.symlink_to(e.link)
                continue
            path.write_bytes(e.read())
            path.chmod(e.mode)
        try:
            builder = build.ProjectBuilder(src, runner=pyproject_hooks.quiet_subprocess_runner)
            built = Path(builder.build("sdist", out))
        except (build.BuildBackendException, build.BuildException) as exc:
            cause = getattr(exc, "exception", exc)
            output = getattr(cause, "output", None) or b""
            text = output.decode("utf-8", "replace") if isinstance(output, bytes) else str(output)
            last = [line.strip() for line in text.splitlines() if line.strip()] or [str(cause)]
            raise UserError(
                f"image.code: building the sdist {root} with pypa build failed: {last[-1][:300]}",
                hint="run `python -m build --sdist --no-isolation IMAGE_CODE` to see the whole error",
            ) from None
        return built.read_bytes()
