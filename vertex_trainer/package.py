"""Turn the trainer into something Vertex AI can run: an image in Artifact Registry, or a
Python package on a prebuilt TensorFlow training image.

The seam (docs/architecture.md):

* `plan_artifact(spec) -> render.Artifact`: what the job will run, with the exact image tag.
  Pure and fast: it assembles the build context in memory and hashes it, nothing else (no
  network, no subprocess). `render` and `submit --dry-run` use it.
* `ensure_artifact(spec, builder=None, dry_run=False, log=None) -> PackageResult`: make sure the
  artifact exists. The tag is `<repository>:<content hash>`; when the registry already has that
  tag nothing is built or pushed. Builders: `cloud-build` (upload the context to the staging
  bucket, create a build through the Cloud Build REST API, follow it) and `docker` (local
  `docker build` + `push`, or `docker buildx build --push`). `python_package` builds an sdist of
  the trainer and uploads it to the staging bucket instead.

The build context is deterministic: entries sorted, fixed mtimes/owners/modes, `.dockerignore`
applied with Docker's own rules, and the content hash covers only what Docker would send (the
resolved spec travels in the uploaded archive under `.vertex-trainer/`, which `.dockerignore`
excludes, so a spec change alone never changes the tag).

Every value that reaches a Dockerfile, a requirements file, a build argument or a command line is
validated here first (`validate_image_values`): a newline, a quote or a smuggled instruction is
refused with exit 2, never rendered.

Endpoints (for emulators and tests; `http://` means anonymous, plain HTTP):
  VERTEX_TRAINER_CLOUDBUILD_ENDPOINT  default https://cloudbuild.googleapis.com
  VERTEX_TRAINER_REGISTRY_ENDPOINT    default https://{registry host of the repository}
  STORAGE_EMULATOR_HOST               google-cloud-storage's own switch, for the staging bucket
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import importlib.util
import io
import json
import os
import random
import re
import shutil
import stat
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from vertex_trainer import auth
from vertex_trainer.errors import ServiceError, SpecError, UserError

if TYPE_CHECKING:  # render imports nothing heavy, but keep the import graph one-way at runtime
    from vertex_trainer.render import Artifact

Log = Callable[[str], None]

# --------------------------------------------------------------------------------------------
# Defaults. Every pin carries its reason.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """How the image is made for one kind of hardware."""

    name: str
    base_image: str
    # The framework layer, before the trainer's requirements: TensorFlow itself when the base
    # lacks it, then tf-keras matched to that TensorFlow. tf-keras goes in with --no-deps: it
    # names the `tensorflow` distribution, which would pull a second TensorFlow next to
    # tensorflow-tpu (the same reason the Makefile installs it that way).
    framework_requirements: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    keras_requirement: str = "tf-keras==2.21.0"
    # Prebuilt Vertex AI training image for image.python_package (without the region mirror),
    # and the tf-keras matching its TensorFlow.
    executor: str | None = None
    executor_keras: str | None = None


VARIANTS: dict[str, Variant] = {
    # Official TF image: TF 2.21.0 (the version the trainer is tested with, FACTS.md) with the CUDA
    # 12 / cuDNN libraries it was built against, Python 3.11.
    "gpu": Variant("gpu", "tensorflow/tensorflow:2.21.0-gpu",
                   executor="vertex-ai/training/tf-gpu.2-17.py310:latest",
                   executor_keras="tf-keras==2.17.0"),
    # Same TF release without CUDA: a much smaller image for CPU machines.
    "cpu": Variant("cpu", "tensorflow/tensorflow:2.21.0",
                   executor="vertex-ai/training/tf-cpu.2-17.py310:latest",
                   executor_keras="tf-keras==2.17.0"),
    # TPU VMs need the TPU build of TF and its matching libtpu, published on the libtpu-tf index;
    # tensorflow-tpu 2.20.0 is the newest on PyPI, so tf-keras follows it (2.20.1). Python 3.11
    # to match the GPU/CPU images. No executor: Vertex AI's newest prebuilt TF TPU training image
    # (tf-tpu.2-15) is past its end of availability; python_package on TPU needs
    # image.executor_image.
    "tpu": Variant("tpu", "python:3.11.13-slim-bookworm",
                   framework_requirements=("tensorflow-tpu==2.20.0",),
                   find_links=("https://storage.googleapis.com/libtpu-tf-releases/index.html",),
                   keras_requirement="tf-keras==2.20.1"),
}
# Requirement names the framework layer owns; lines naming them in the trainer's requirements
# are left to the image (or the executor image) so the variant's pins win.
FRAMEWORK_NAMES = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-tpu", "tf-nightly",
                   "tf-keras", "tf_keras")
_FRAMEWORK_NAMES = re.compile(r"^\s*(" + "|".join(map(re.escape, FRAMEWORK_NAMES)) + r")(?![A-Za-z0-9_.-])",
                              re.IGNORECASE)

BUILDERS = ("cloud-build", "docker")
DEFAULT_BUILDER = "cloud-build"
# Cloud Build's maintained Docker builder image.
CLOUD_BUILD_DOCKER_STEP = "gcr.io/cloud-builders/docker"
CLOUD_BUILD_TIMEOUT_S = 3600
# Vertex AI runs linux/amd64 machines; pin it so a build on an arm64 laptop still runs there.
PLATFORM = "linux/amd64"

TAG_HEX_CHARS = 24          # 96 bits of the sha256: collisions are not a concern for one repo
FIXED_MTIME = 315532800     # 1980-01-01: a fixed, plausible timestamp for every archive entry
SPEC_ENTRY = ".vertex-trainer/spec.yaml"
PACKAGE_DIST = "vertex-trainer-task"
PACKAGE_VERSION = "1.0"

TEMPLATES_DIR = Path(__file__).with_name("templates")

# --------------------------------------------------------------------------------------------
# Validation of everything that reaches a Dockerfile, a requirements file or a command line
# --------------------------------------------------------------------------------------------

_DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]{1,5})?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"sha256:[a-f0-9]{64}"
_IMAGE_RE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$")
_DIGEST_RE = re.compile(rf"^{_DIGEST}$")
_REQ_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_REQ_OP = r"(?:===|==|!=|~=|>=|<=|>|<)"
_REQ_VERSION = r"[A-Za-z0-9.*+!_-]+"
_REQUIREMENT_RE = re.compile(
    rf"^{_REQ_NAME}(?:\[{_REQ_NAME}(?:,{_REQ_NAME})*\])?"
    rf"(?:{_REQ_OP}{_REQ_VERSION}(?:,{_REQ_OP}{_REQ_VERSION})*)?$")
_BUCKET_RE = re.compile(r"^gs://(?P<bucket>[a-z0-9][a-z0-9._-]{1,220}[a-z0-9])(?:/(?P<prefix>[A-Za-z0-9._/-]*))?$")
# Characters that must never reach a Dockerfile or a shell, named in the error message.
_DANGEROUS = {"\n": "a newline", "\r": "a carriage return", '"': "a double quote",
              "'": "a single quote", "`": "a backtick", "$": "a dollar sign", "\\": "a backslash",
              ";": "a semicolon", "&": "an ampersand", "|": "a pipe", " ": "a space",
              "\t": "a tab", "\x00": "a NUL byte"}


def _danger(value: str) -> str | None:
    for ch, name in _DANGEROUS.items():
        if ch in value:
            return name
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "a control character"
    return None


def _refuse(field: str, value: object, what: str, hint: str) -> SpecError:
    return SpecError(field, f"{what}; refused before it could reach a Dockerfile or a shell",
                     value=value, hint=hint)


def validate_image_reference(field: str, value: str, *, allow_tag: bool = True,
                             require_pin: bool = False) -> re.Match:
    """Check a Docker image reference (registry/path[:tag][@sha256:...]); return the match."""
    if not isinstance(value, str) or not value:
        raise SpecError(field, "must be a non-empty image reference", value=value)
    bad = _danger(value)
    if bad:
        raise _refuse(field, value, f"contains {bad}",
                      "an image reference looks like REGISTRY/PATH:TAG[@sha256:DIGEST]")
    m = _IMAGE_RE.match(value)
    if not m:
        raise _refuse(field, value, "is not a valid image reference",
                      "lowercase path components, e.g. us-central1-docker.pkg.dev/PROJECT/REPO/IMAGE")
    if not allow_tag and (m.group("tag") or m.group("digest")):
        raise SpecError(field, "must name a repository without a tag or digest: the packager "
                        "tags images with their content hash", value=value,
                        hint=f"use {m.group('domain') + '/' if m.group('domain') else ''}{m.group('path')}")
    if require_pin and not m.group("digest") and m.group("tag") in (None, "latest"):
        raise SpecError(field, "must be pinned to a version tag (or a digest), not latest",
                        value=value, hint="e.g. tensorflow/tensorflow:2.21.0-gpu, or set "
                        "image.base_image_digest")
    return m


def validate_requirement(field: str, value: str) -> str:
    """Check one pip requirement string (name[extras] plus optional version specifiers)."""
    if not isinstance(value, str) or not value.strip():
        raise SpecError(field, "must be a non-empty pip requirement", value=value)
    bad = _danger(value.strip())
    if bad:
        raise _refuse(field, value, f"contains {bad}",
                      "one requirement per entry: NAME[EXTRAS]SPECIFIERS, e.g. 'pandas==2.2.3' "
                      "(no options, URLs, markers or quotes)")
    if not _REQUIREMENT_RE.match(value.strip()) or len(value) > 200:
        raise _refuse(field, value, "is not a plain pip requirement",
                      "NAME[EXTRAS]SPECIFIERS, e.g. 'pandas==2.2.3' or 'scipy>=1.13,<2' "
                      "(no options, URLs, markers or spaces)")
    return value.strip()


def parse_staging(field: str, value: str) -> tuple[str, str]:
    """'gs://bucket/prefix' -> (bucket, prefix) with the prefix stripped of slashes."""
    m = _BUCKET_RE.match(value or "")
    if not m or _danger(value):
        raise SpecError(field, "must be gs://BUCKET[/PREFIX] (letters, digits, . _ - / only)",
                        value=value, hint="e.g. gs://my-bucket/vertex-trainer-staging")
    return m.group("bucket"), (m.group("prefix") or "").strip("/")


def validate_image_values(spec: Any) -> None:
    """Refuse (exit 2) any image-block value that could smuggle text into a Dockerfile, a build
    argument or a shell. Called by plan_artifact and ensure_artifact before anything else."""
    image = _image(spec)
    if image is None:
        return
    if _get(image, "uri"):
        validate_image_reference("image.uri", image.uri)
    if _get(image, "repository"):
        validate_image_reference("image.repository", image.repository, allow_tag=False)
    if _get(image, "base_image"):
        validate_image_reference("image.base_image", image.base_image,
                                 require_pin=not _get(image, "base_image_digest"))
    digest = _get(image, "base_image_digest")
    if digest:
        if not isinstance(digest, str) or not _DIGEST_RE.match(digest):
            bad = _danger(str(digest))
            raise _refuse("image.base_image_digest", digest,
                          f"contains {bad}" if bad else "is not sha256:<64 hex digits>",
                          "copy the digest from `docker buildx imagetools inspect IMAGE`")
        base = _get(image, "base_image")
        if base and "@" in base:
            raise SpecError("image.base_image_digest", "image.base_image already has a digest",
                            value=digest, hint="set the digest in one place only")
    for i, req in enumerate(_get(image, "pip_packages") or ()):
        validate_requirement(f"image.pip_packages[{i}]", req)
    if _get(image, "executor_image"):
        validate_image_reference("image.executor_image", image.executor_image)
    if _get(image, "staging_bucket"):
        parse_staging("image.staging_bucket", image.staging_bucket)
    builder = _get(image, "builder")
    if builder and builder not in BUILDERS:
        raise SpecError("image.builder", f"must be one of {', '.join(BUILDERS)}", value=builder)
    variant = _get(image, "variant")
    if variant and variant not in ("auto", *VARIANTS):
        raise SpecError("image.variant", f"must be one of auto, {', '.join(VARIANTS)}",
                        value=variant)
    context = _get(image, "context")
    if context is not None:
        if "\n" in str(context) or "\x00" in str(context):
            raise _refuse("image.context", context, "contains a control character",
                          "a directory path that holds a Dockerfile")
        custom_only = [k for k in ("base_image", "base_image_digest", "pip_packages")
                       if _get(image, k)]
        if custom_only or (variant and variant != "auto"):
            names = ", ".join(f"image.{k}" for k in custom_only or ["variant"])
            raise SpecError("image.context", f"{names} only apply to the bundled trainer's "
                            "Dockerfile; with image.context your own Dockerfile decides",
                            value=context, hint=f"remove {names}, or drop image.context")


# --------------------------------------------------------------------------------------------
# Spec accessors (the packager reads only the image block, the hardware and a few names)
# --------------------------------------------------------------------------------------------


def _get(obj: Any, name: str, default: Any = None) -> Any:
    return getattr(obj, name, default) if obj is not None else default


def _image(spec: Any) -> Any:
    return _get(spec, "image")


def resolve_variant(spec: Any) -> str:
    """image.variant, or for "auto": TPU machine -> tpu, accelerator -> gpu, else cpu."""
    variant = _get(_image(spec), "variant") or "auto"
    if variant != "auto":
        return variant
    from vertex_trainer.hardware import accelerator_kind

    hw = _get(spec, "hardware")
    return accelerator_kind(_get(hw, "machine_type") or "", _get(hw, "accelerator_type"))


def _region_mirror(region: str | None) -> str:
    region = (region or "").lower()
    if region.startswith("europe"):
        return "europe"
    if region.startswith(("asia", "australia")):
        return "asia"
    return "us"


def executor_image(spec: Any) -> str:
    """The prebuilt Vertex AI training image that runs a python_package job."""
    explicit = _get(_image(spec), "executor_image")
    if explicit:
        return explicit
    variant = VARIANTS[resolve_variant(spec)]
    if not variant.executor:
        raise SpecError("image.executor_image", f"is required for python_package on the "
                        f"{variant.name} variant: Vertex AI has no current prebuilt TensorFlow "
                        "training image for it", value=None, has_value=False,
                        hint="set image.executor_image, or build an image with image.repository")
    # Vertex AI only serves these images under :latest; the region mirror keeps the pull local.
    return f"{_region_mirror(_get(spec, 'region'))}-docker.pkg.dev/{variant.executor}"


def staging_location(spec: Any) -> tuple[str, str]:
    """(bucket, prefix) for uploads: image.staging_bucket, else <output_dir>/staging when the
    output directory is on Cloud Storage (the run's package then sits beside its outputs)."""
    explicit = _get(_image(spec), "staging_bucket")
    if explicit:
        return parse_staging("image.staging_bucket", explicit)
    output_dir = str(_get(spec, "output_dir") or "")
    if output_dir.startswith("gs://"):
        bucket, prefix = parse_staging("output_dir", output_dir.rstrip("/"))
        return bucket, "/".join(p for p in (prefix, "staging") if p)
    raise SpecError("image.staging_bucket", "is required to stage uploads when output_dir is not "
                    "a gs:// path", value=None, has_value=False,
                    hint="set image.staging_bucket: gs://BUCKET/PREFIX (same region as the job)")


def _spec_yaml(spec: Any) -> str:
    to_yaml = getattr(spec, "to_yaml", None)
    if callable(to_yaml):
        return to_yaml()
    return json.dumps(dataclasses.asdict(spec) if dataclasses.is_dataclass(spec) else str(spec),
                      indent=2, sort_keys=True, default=str) + "\n"


# --------------------------------------------------------------------------------------------
# .dockerignore, with Docker's semantics (moby/patternmatcher)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pattern:
    text: str
    regex: re.Pattern
    exclusion: bool  # True for "!pattern" (re-include)
    static_prefix: str


def _pattern_regex(pattern: str) -> re.Pattern:
    out, i, n = ["^"], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if i + 1 < n and pattern[i + 1] == "*":
                i += 1
                if i + 1 < n and pattern[i + 1] == "/":
                    i += 1
                    out.append("(?:.*/)?")      # "**/" also matches zero directories
                else:
                    out.append(".*")
            else:
                out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j]
                negate = body[:1] in ("!", "^")
                body = body[1:] if negate else body
                out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    out.append("$")
    return re.compile("".join(out), re.DOTALL)


class DockerIgnore:
    """Docker's .dockerignore rules: last matching pattern wins, a pattern that matches a parent
    directory matches everything inside it, `!` re-includes, `**` spans directories."""

    def __init__(self, text: str = ""):
        self.patterns: list[_Pattern] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            exclusion = line.startswith("!")
            if exclusion:
                line = line[1:].strip()
            line = os.path.normpath(line).replace(os.sep, "/").lstrip("/")
            if line in ("", "."):
                continue
            static = re.split(r"[*?\[\\]", line, maxsplit=1)[0]
            self.patterns.append(_Pattern(line, _pattern_regex(line), exclusion, static))
        self.has_exclusions = any(p.exclusion for p in self.patterns)

    def excluded(self, path: str) -> bool:
        """Is this context-relative posix path left out of the build context?"""
        parts = path.split("/")
        parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
        matched = False
        for p in self.patterns:
            if p.exclusion != matched:   # only a pattern that could flip the result is evaluated
                continue
            if p.regex.match(path) or any(p.regex.match(d) for d in parents):
                matched = not p.exclusion
        return matched

    def may_prune(self, directory: str) -> bool:
        """Can the walk skip this directory whole (excluded, and no `!` pattern reaches inside)?"""
        if not self.excluded(directory):
            return False
        prefix = directory + "/"
        for p in self.patterns:
            if p.exclusion and (p.static_prefix.startswith(prefix) or prefix.startswith(p.static_prefix)
                                or p.text == directory):
                return False
        return True


# --------------------------------------------------------------------------------------------
# The build context: entries, hash, archive
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContextEntry:
    """One file of a build context. `name` is the posix path inside the context."""

    name: str
    size: int
    digest: str            # sha256 hex of the content
    mode: int              # normalized: 0o755 if executable else 0o644
    data: bytes | None = None      # generated content, or None to read `source`
    source: str | None = None
    link: str | None = None        # symlink target (kept as a link, like Docker does)

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.source is not None
        return Path(self.source).read_bytes()


def _entry_from_bytes(name: str, data: bytes, mode: int = 0o644) -> ContextEntry:
    return ContextEntry(name, len(data), hashlib.sha256(data).hexdigest(), mode, data=data)


def _entry_from_file(name: str, path: Path) -> ContextEntry:
    if "\n" in name or "\r" in name or "\\" in name:
        raise UserError(f"build context file name {name!r} contains a newline or backslash",
                        hint="rename the file or exclude it in .dockerignore")
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        return ContextEntry(name, 0, hashlib.sha256(target.encode()).hexdigest(), 0o777,
                            source=str(path), link=target)
    data = path.read_bytes()
    mode = 0o755 if st.st_mode & 0o111 else 0o644
    return ContextEntry(name, len(data), hashlib.sha256(data).hexdigest(), mode, source=str(path))


def hash_entries(entries: Iterable[ContextEntry]) -> str:
    """The content hash: names, normalized modes and content digests, in sorted order. No
    timestamps, owners or absolute paths, so it is the same on every machine."""
    h = hashlib.sha256(b"vertex-trainer context v1\n")
    for e in sorted(entries, key=lambda e: e.name):
        kind = "l" if e.link is not None else "f"
        h.update(f"{kind}\0{e.name}\0{e.mode:o}\0{e.size}\0{e.digest}\n".encode())
    return "sha256:" + h.hexdigest()


def walk_context(root: Path, ignore: DockerIgnore, *, prefix: str = "") -> list[ContextEntry]:
    """Files under `root` that the .dockerignore rules keep, named `prefix + relative path`."""
    entries: list[ContextEntry] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for d in sorted(dirnames):
            full = Path(dirpath, d)
            if full.is_symlink():   # a link to a directory is sent as a link, not walked
                filenames.append(d)
            elif not ignore.may_prune(prefix + rel_dir + d):
                keep.append(d)
        dirnames[:] = keep
        for f in sorted(filenames):
            name = prefix + rel_dir + f
            if not ignore.excluded(name):
                entries.append(_entry_from_file(name, Path(dirpath, f)))
    return sorted(entries, key=lambda e: e.name)


@dataclass(frozen=True)
class BuildPlan:
    """What would be built, and under which name. Made without any I/O beyond reading files."""

    kind: str                         # "image" | "python-package"
    entries: tuple[ContextEntry, ...]  # hashed, in archive order
    context_hash: str                 # "sha256:<64 hex>"
    target: str                       # repository:tag, or gs://.../package.tar.gz
    source: str                       # where the files came from (for display only)
    variant: str | None = None
    base_image: str | None = None
    builder: str | None = None
    executor_image: str | None = None

    @property
    def tag(self) -> str:
        return self.context_hash.split(":", 1)[1][:TAG_HEX_CHARS]

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)

    def describe(self) -> list[str]:
        lines = [f"{self.kind}: {self.target}",
                 f"context: {self.source} ({len(self.entries)} files, {_human(self.size)})",
                 f"context hash: {self.context_hash}"]
        if self.variant:
            lines.append(f"variant: {self.variant} (base {self.base_image})")
        if self.builder:
            lines.append(f"builder: {self.builder}")
        if self.executor_image:
            lines.append(f"executor image: {self.executor_image}")
        lines += [f"  {e.size:>9}  {e.name}" for e in self.entries]
        return lines


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def write_archive(entries: Iterable[ContextEntry], fileobj, *, root: str = "",
                  extra: Iterable[ContextEntry] = ()) -> None:
    """Write a reproducible tar.gz: sorted, fixed mtime/owner, normalized modes, gzip without a
    timestamp or file name. `root` prefixes every name (an sdist's top directory)."""
    all_entries = sorted([*entries, *extra], key=lambda e: e.name)
    with gzip.GzipFile(fileobj=fileobj, mode="wb", mtime=0, filename="", compresslevel=6) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            seen_dirs: set[str] = set()
            for e in all_entries:
                name = f"{root}/{e.name}" if root else e.name
                parts = name.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i])
                    if d not in seen_dirs:
                        seen_dirs.add(d)
                        tar.addfile(_tarinfo(d, tarfile.DIRTYPE, 0o755))
                if e.link is not None:
                    info = _tarinfo(name, tarfile.SYMTYPE, 0o777)
                    info.linkname = e.link
                    tar.addfile(info)
                    continue
                data = e.read()
                if hashlib.sha256(data).hexdigest() != e.digest:
                    raise UserError(f"{e.name} changed while the context was being packaged",
                                    hint="run the command again")
                info = _tarinfo(name, tarfile.REGTYPE, e.mode)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def _tarinfo(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = kind, mode, FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def archive_bytes(plan: BuildPlan, spec: Any = None) -> bytes:
    """The build context as uploaded (image) or the sdist (python package)."""
    buf = io.BytesIO()
    extra = [_entry_from_bytes(SPEC_ENTRY, _spec_yaml(spec).encode())] if spec is not None else []
    root = f"{PACKAGE_DIST.replace('-', '_')}-{PACKAGE_VERSION}" if plan.kind == "python-package" else ""
    write_archive(plan.entries, buf, root=root, extra=extra)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------------------------


def _finalize(value: Any) -> Any:
    # Defence in depth: validation runs before rendering, but no value that could start a new
    # Dockerfile instruction is ever written, whatever the caller forgot.
    if isinstance(value, str) and ("\n" in value or "\r" in value):
        raise UserError(f"refusing to render a value with a line break into a Dockerfile: {value!r}")
    return value


@functools.lru_cache(maxsize=None)
def _template(name: str):
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
                             undefined=jinja2.StrictUndefined, autoescape=False,
                             keep_trailing_newline=True, finalize=_finalize)
    return env.get_template(name)


def render_dockerfile(variant: str = "gpu", *, base_image: str | None = None,
                      base_image_digest: str | None = None,
                      pip_packages: Iterable[str] = ()) -> str:
    """The bundled trainer's Dockerfile for a variant (validated values only)."""
    v = VARIANTS[variant]
    base = base_image or v.base_image
    validate_image_reference("image.base_image", base, require_pin=not base_image_digest)
    if base_image_digest:
        if not _DIGEST_RE.match(base_image_digest):
            raise _refuse("image.base_image_digest", base_image_digest, "is not sha256:<64 hex>",
                          "sha256:<64 hex digits>")
        base = f"{base}@{base_image_digest}"
    reqs = [validate_requirement(f"image.pip_packages[{i}]", r) for i, r in enumerate(pip_packages)]
    return _template("Dockerfile.j2").render(
        variant=v.name, base_image=base, framework_requirements=list(v.framework_requirements),
        find_links=list(v.find_links), keras_requirement=v.keras_requirement,
        framework_names=list(FRAMEWORK_NAMES),
        extra_requirements=bool(reqs))


def render_dockerignore() -> str:
    return _template("dockerignore.j2").render()


# --------------------------------------------------------------------------------------------
# Planning (pure: reads files, hashes; no network, no subprocess)
# --------------------------------------------------------------------------------------------


def bundled_trainer_dir() -> Path:
    """The `trainer` package shipped with vertex-trainer (trainer_image/trainer in the repo)."""
    spec = importlib.util.find_spec("trainer")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        if Path(loc, "task.py").is_file() or Path(loc, "__init__.py").is_file():
            return Path(loc)
    raise UserError("the bundled trainer package (`trainer`) is not installed",
                    hint="reinstall vertex-trainer, or set image.context to a directory with a Dockerfile")


def trainer_requirements(trainer_dir: Path) -> bytes:
    """The trainer's pip requirements (besides TensorFlow): trainer_image/requirements.txt in a
    source checkout; from an installed wheel, where that file does not travel, the `trainer` extra
    of the vertex-trainer distribution minus the TensorFlow family (the image brings its own)."""
    for candidate in (trainer_dir.parent / "requirements.txt", trainer_dir / "requirements.txt"):
        if candidate.is_file():
            return candidate.read_bytes()
    import importlib.metadata

    try:
        declared = importlib.metadata.requires("vertex-trainer") or []
    except importlib.metadata.PackageNotFoundError:
        declared = []
    lines = []
    for item in declared:
        req, _, marker = item.partition(";")
        req = req.replace(" ", "")
        if re.search(r"""extra\s*==\s*['"]trainer['"]""", marker) and not _FRAMEWORK_NAMES.match(req):
            lines.append(validate_requirement("vertex-trainer[trainer]", req))
    if not lines:
        raise UserError(f"the trainer's requirements.txt was not found next to {trainer_dir}",
                        hint="install vertex-trainer from a source checkout (pip install -e .)")
    return ("# generated from the vertex-trainer[trainer] extra (no requirements.txt found)\n"
            + "".join(f"{line}\n" for line in lines)).encode()


def _requirement_lines(text: str) -> list[str]:
    lines = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


def plan_bundled_context(*, variant: str = "gpu", base_image: str | None = None,
                         base_image_digest: str | None = None, pip_packages: Iterable[str] = (),
                         trainer_dir: Path | None = None) -> tuple[list[ContextEntry], str]:
    """The bundled trainer's build context, laid out like the repository root (so the root
    Dockerfile builds the very same image with `docker build .`). Returns (entries, source)."""
    trainer_dir = Path(trainer_dir) if trainer_dir else bundled_trainer_dir()
    pip_packages = list(pip_packages)
    dockerignore = render_dockerignore()
    ignore = DockerIgnore(dockerignore)
    entries = [
        _entry_from_bytes("Dockerfile", render_dockerfile(
            variant, base_image=base_image, base_image_digest=base_image_digest,
            pip_packages=pip_packages).encode()),
        _entry_from_bytes(".dockerignore", dockerignore.encode()),
        _entry_from_bytes("trainer_image/requirements.txt", trainer_requirements(trainer_dir)),
    ]
    if pip_packages:
        entries.append(_entry_from_bytes("trainer_image/requirements-extra.txt",
                                         ("\n".join(pip_packages) + "\n").encode()))
    entries += walk_context(trainer_dir, ignore, prefix="trainer_image/trainer/")
    entries = [e for e in entries if e.name in ("Dockerfile", ".dockerignore")
               or not ignore.excluded(e.name)]
    return sorted(entries, key=lambda e: e.name), str(trainer_dir)


def plan_custom_context(context: str | Path) -> tuple[list[ContextEntry], str]:
    """A user's directory with its own Dockerfile, filtered by its own .dockerignore."""
    root = Path(context).expanduser().resolve()
    if not root.is_dir():
        raise SpecError("image.context", "is not a directory", value=str(context))
    if not (root / "Dockerfile").is_file():
        raise SpecError("image.context", "has no Dockerfile", value=str(context),
                        hint="add a Dockerfile at the top of the directory, or drop image.context "
                        "to build the bundled trainer")
    ignore_file = root / ".dockerignore"
    ignore_text = ignore_file.read_text() if ignore_file.is_file() else ""
    # The saved spec rides along in the archive; it must never reach the image or the hash.
    ignore = DockerIgnore(ignore_text + "\n.vertex-trainer\n")
    entries = walk_context(root, ignore)
    # Docker always reads the Dockerfile and .dockerignore, whatever the patterns say.
    names = {e.name for e in entries}
    for special in ("Dockerfile", ".dockerignore"):
        if special not in names and (root / special).is_file():
            entries.append(_entry_from_file(special, root / special))
    return sorted(entries, key=lambda e: e.name), str(root)


def _sdist_entries(trainer_dir: Path, pip_packages: list[str],
                   executor_keras: str | None) -> list[ContextEntry]:
    ignore = DockerIgnore(render_dockerignore())
    code = walk_context(trainer_dir, ignore, prefix="trainer_image/trainer/")
    requirements = [r for r in _requirement_lines(trainer_requirements(trainer_dir).decode())
                    # The executor image brings TensorFlow itself; reinstalling it would replace
                    # the image's accelerator build with a generic wheel.
                    if not _FRAMEWORK_NAMES.match(r)]
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
        'include = ["trainer", "trainer.*"]\n')
    pkg_info = (f"Metadata-Version: 2.1\nName: {PACKAGE_DIST}\nVersion: {PACKAGE_VERSION}\n"
                + "".join(f"Requires-Dist: {d}\n" for d in deps))
    entries = [_entry_from_bytes("pyproject.toml", pyproject.encode()),
               _entry_from_bytes("PKG-INFO", pkg_info.encode())]
    for e in code:
        entries.append(dataclasses.replace(e, name=e.name[len("trainer_image/"):]))
    return sorted(entries, key=lambda e: e.name)


def plan_build(spec: Any, builder: str | None = None, *, trainer_dir: Path | None = None) -> BuildPlan | None:
    """The BuildPlan for the spec's image block, or None when image.uri is used as is."""
    validate_image_values(spec)
    image = _image(spec)
    if image is None:
        raise SpecError("image", "is required: set image.uri, image.repository or "
                        "image.python_package", value=None, has_value=False)
    if _get(image, "uri"):
        return None
    pip_packages = [validate_requirement(f"image.pip_packages[{i}]", r)
                    for i, r in enumerate(_get(image, "pip_packages") or ())]
    if _get(image, "python_package"):
        tdir = Path(trainer_dir) if trainer_dir else bundled_trainer_dir()
        variant = VARIANTS[resolve_variant(spec)]
        # tf-keras matched to the default executor's TensorFlow; with an image of your own,
        # bring tf-keras in it (or in image.pip_packages).
        keras = None if _get(image, "executor_image") else variant.executor_keras
        entries = _sdist_entries(tdir, pip_packages, keras)
        context_hash = hash_entries(entries)
        bucket, prefix = staging_location(spec)
        tag = context_hash.split(":", 1)[1][:TAG_HEX_CHARS]
        obj = "/".join(p for p in (prefix, "packages", tag,
                                   f"{PACKAGE_DIST.replace('-', '_')}-{PACKAGE_VERSION}.tar.gz") if p)
        return BuildPlan("python-package", tuple(entries), context_hash, f"gs://{bucket}/{obj}",
                         str(tdir), variant=resolve_variant(spec),
                         executor_image=executor_image(spec))
    repository = _get(image, "repository")
    if not repository:
        raise SpecError("image", "needs one of image.uri, image.repository or "
                        "image.python_package", value=None, has_value=False)
    builder = builder or _get(image, "builder") or DEFAULT_BUILDER
    if builder not in BUILDERS:
        raise UserError(f"--builder: must be one of {', '.join(BUILDERS)} (got {builder!r})")
    if _get(image, "context"):
        entries, source = plan_custom_context(image.context)
        variant = base = None
    else:
        variant = resolve_variant(spec)
        entries, source = plan_bundled_context(
            variant=variant, base_image=_get(image, "base_image"),
            base_image_digest=_get(image, "base_image_digest"), pip_packages=pip_packages,
            trainer_dir=trainer_dir)
        base = _get(image, "base_image") or VARIANTS[variant].base_image
        if _get(image, "base_image_digest"):
            base = f"{base}@{image.base_image_digest}"
    context_hash = hash_entries(entries)
    tag = context_hash.split(":", 1)[1][:TAG_HEX_CHARS]
    return BuildPlan("image", tuple(entries), context_hash, f"{repository}:{tag}", source,
                     variant=variant, base_image=base, builder=builder)


def _make_artifact(image_uri: str, package_uris: tuple[str, ...] = ()) -> "Artifact":
    from vertex_trainer.render import Artifact

    return Artifact(image_uri=image_uri, package_uris=package_uris)


def plan_artifact(spec: Any, *, trainer_dir: Path | None = None) -> "Artifact":
    """What the job will run, with the exact tag or package URI. No network, no subprocess.
    `trainer_dir` replaces the bundled trainer package (tests, forks)."""
    plan = plan_build(spec, trainer_dir=trainer_dir)
    if plan is None:
        return _make_artifact(_image(spec).uri)
    if plan.kind == "python-package":
        return _make_artifact(plan.executor_image, (plan.target,))
    return _make_artifact(plan.target)


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PackageResult:
    """What ensure_artifact did. `action` is one of: given (image.uri), planned (dry run),
    reused (the tag or package already existed), built (built and pushed/uploaded now)."""

    artifact: "Artifact"
    action: str
    image: str
    context_hash: str | None = None
    built: bool = False
    pushed: bool = False
    builder: str | None = None
    log_url: str | None = None
    plan: BuildPlan | None = None
    source_uri: str | None = None     # the uploaded build context, for cloud-build

    @property
    def reused(self) -> bool:
        return self.action == "reused"

    def to_json(self) -> dict:
        """The `package --output json` object (CONTRACT section 2), plus a few extra keys."""
        out = {"image": self.image, "built": self.built, "pushed": self.pushed,
               "context_hash": self.context_hash, "action": self.action,
               "builder": self.builder, "log_url": self.log_url}
        if self.artifact.package_uris:
            out["package_uris"] = list(self.artifact.package_uris)
        if self.action == "planned" and self.plan is not None:
            out["dry_run"] = True
            out["files"] = [{"path": e.name, "size": e.size} for e in self.plan.entries]
            out["size"] = self.plan.size
        return out

    def summary(self) -> str:
        """One line for people: which artifact the job runs, and how it came to exist."""
        what = {"given": "using image.uri as given",
                "planned": "dry run: nothing built, pushed or uploaded",
                "reused": "reused: already in the registry, nothing built or pushed",
                "built": "built and pushed" + (f" with {self.builder}" if self.builder else "")}
        if self.plan is not None and self.plan.kind == "python-package":
            what["reused"] = "reused: package already staged, nothing uploaded"
            what["built"] = "packaged and uploaded"
            return f"{self.plan.target} on {self.image} ({what[self.action]})"
        return f"{self.image} ({what[self.action]})"


# --------------------------------------------------------------------------------------------
# HTTP helpers (retries with backoff and jitter, bounded in count)
# --------------------------------------------------------------------------------------------

_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


def _request(session, method: str, url: str, *, what: str, attempts: int = 4,
             ok: tuple[int, ...] = (200,), **kwargs):
    import requests

    delay = 0.5
    last = ""
    for attempt in range(1, attempts + 1):
        try:
            resp = session.request(method, url, timeout=kwargs.pop("timeout", 60), **kwargs)
        except requests.RequestException as exc:
            last = f"{type(exc).__name__}: {exc}"
        else:
            if resp.status_code in ok or resp.status_code not in _RETRY_STATUS:
                return resp
            last = f"HTTP {resp.status_code}: {_error_text(resp)}"
        if attempt < attempts:
            time.sleep(delay + random.uniform(0, delay / 2))
            delay *= 2
    raise ServiceError(f"{what} failed after {attempts} attempts: {last}")


def _error_text(resp) -> str:
    try:
        body = resp.json()
        err = body.get("error", body)
        if isinstance(err, dict):
            return err.get("message") or json.dumps(err)[:300]
        if isinstance(body.get("errors"), list) and body["errors"]:
            return body["errors"][0].get("message", "")
        return str(err)[:300]
    except Exception:
        return (resp.text or "")[:300]


# --------------------------------------------------------------------------------------------
# Registry: does <repository>:<tag> exist? (Docker Registry HTTP API v2)
# --------------------------------------------------------------------------------------------

_MANIFEST_TYPES = ", ".join([
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])


def _split_image(image: str) -> tuple[str, str, str]:
    m = _IMAGE_RE.match(image)
    if not m or not m.group("tag"):
        raise UserError(f"not an image reference with a tag: {image!r}")
    domain = m.group("domain") or "registry-1.docker.io"
    path = m.group("path")
    if domain == "registry-1.docker.io" and "/" not in path:
        path = f"library/{path}"
    return domain, path, m.group("tag")


def _is_google_registry(host: str) -> bool:
    return host.endswith("docker.pkg.dev") or host == "gcr.io" or host.endswith(".gcr.io")


def registry_endpoint(host: str) -> str:
    return os.environ.get("VERTEX_TRAINER_REGISTRY_ENDPOINT", "").rstrip("/") or f"https://{host}"


def registry_tag_exists(image: str, *, token: str | None = None, log: Log | None = None) -> bool:
    """HEAD /v2/<path>/manifests/<tag>. True if the registry has the tag, False if it does not.

    Google registries get the caller's OAuth access token (Bearer; on a token challenge, the
    registry's token exchange with `oauth2accesstoken`). Other registries are asked anonymously;
    if they refuse, the tag is taken as absent (the push will tell)."""
    import requests

    host, path, tag = _split_image(image)
    endpoint = registry_endpoint(host)
    url = f"{endpoint}/v2/{path}/manifests/{tag}"
    session = requests.Session()
    headers = {"Accept": _MANIFEST_TYPES}
    google = _is_google_registry(host)
    if token is None and google and not endpoint.startswith("http://"):
        token = _access_token()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    resp = _request(session, "HEAD", url, what=f"checking {image} in the registry",
                    headers=headers, ok=(200, 404))
    if resp.status_code == 401 and token and "bearer" in resp.headers.get("WWW-Authenticate", "").lower():
        exchanged = _registry_token(session, resp.headers["WWW-Authenticate"], token, path)
        if exchanged:
            headers["Authorization"] = f"Bearer {exchanged}"
            resp = _request(session, "HEAD", url, what=f"checking {image} in the registry",
                            headers=headers, ok=(200, 404))
    if resp.status_code == 200:
        return True
    if resp.status_code == 404:
        return False
    if resp.status_code in (401, 403):
        if google or token:
            raise ServiceError(f"the registry refused to show {image} (HTTP {resp.status_code})",
                               hint="the account needs roles/artifactregistry.reader on the "
                               "repository; check `gcloud auth application-default login`")
        if log:
            log(f"registry: {host} refused an anonymous check (HTTP {resp.status_code}); "
                "assuming the tag is absent")
        return False
    raise ServiceError(f"checking {image} in the registry: HTTP {resp.status_code}: {_error_text(resp)}")


def _access_token() -> str:
    from google.auth.transport.requests import Request

    creds = auth.credentials()
    try:
        creds.refresh(Request())
    except Exception as exc:  # RefreshError, TransportError
        raise ServiceError(f"could not get an access token: {exc}",
                           hint="run `gcloud auth application-default login`") from None
    return creds.token


def _registry_token(session, challenge: str, access_token: str, path: str) -> str | None:
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", None)
    if not realm:
        return None
    params.setdefault("scope", f"repository:{path}:pull")
    resp = _request(session, "GET", realm, what="registry token exchange", params=params,
                    auth=("oauth2accesstoken", access_token))
    if resp.status_code != 200:
        return None
    body = resp.json()
    return body.get("token") or body.get("access_token")


# --------------------------------------------------------------------------------------------
# Staging uploads (google-cloud-storage; honours STORAGE_EMULATOR_HOST)
# --------------------------------------------------------------------------------------------


def _storage_client(project: str | None):
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project=project or "vertex-trainer", credentials=AnonymousCredentials())
    return storage.Client(project=project, credentials=auth.credentials())


def upload_once(bucket: str, name: str, data: bytes, *, project: str | None,
                content_type: str = "application/gzip") -> bool:
    """Upload unless the (content-addressed) object exists. Returns True if it uploaded."""
    from google.api_core import exceptions as gexc
    from google.cloud.storage.retry import DEFAULT_RETRY

    client = _storage_client(project)
    blob = client.bucket(bucket).blob(name)
    try:
        if blob.exists(retry=DEFAULT_RETRY):
            return False
        # The name is a content hash, so a retried upload is idempotent.
        blob.upload_from_string(data, content_type=content_type, retry=DEFAULT_RETRY)
    except gexc.NotFound:
        raise ServiceError(f"staging bucket gs://{bucket} does not exist",
                           hint="create it in the job's region, or set image.staging_bucket") from None
    except gexc.Forbidden as exc:
        raise ServiceError(f"no permission to write gs://{bucket}/{name}: {exc.message}",
                           hint="the account needs roles/storage.objectCreator on the bucket") from None
    except gexc.GoogleAPIError as exc:
        raise ServiceError(f"uploading gs://{bucket}/{name} failed: {exc}") from None
    return True


# --------------------------------------------------------------------------------------------
# Cloud Build (REST v1)
# --------------------------------------------------------------------------------------------

BUILD_TERMINAL = {"SUCCESS", "FAILURE", "INTERNAL_ERROR", "TIMEOUT", "CANCELLED", "EXPIRED"}


class BuildFailed(ServiceError):
    """The image build ran and did not succeed (exit 3); the message carries the log URL."""


def cloudbuild_endpoint() -> str:
    return (os.environ.get("VERTEX_TRAINER_CLOUDBUILD_ENDPOINT", "").rstrip("/")
            or "https://cloudbuild.googleapis.com")


def cloud_build_request(image: str, bucket: str, obj: str, *, context_hash: str,
                        timeout_s: int = CLOUD_BUILD_TIMEOUT_S) -> dict:
    """The Build resource sent to projects.locations.builds.create (REST JSON, camelCase)."""
    validate_image_reference("image", image)
    return {
        "source": {"storageSource": {"bucket": bucket, "object": obj}},
        "steps": [{"name": CLOUD_BUILD_DOCKER_STEP,
                   "args": ["build", "--platform", PLATFORM, "--tag", image, "."]}],
        "images": [image],
        "timeout": f"{timeout_s}s",
        "tags": ["vertex-trainer", f"ctx-{context_hash.split(':', 1)[1][:TAG_HEX_CHARS]}"],
    }


def run_cloud_build(project: str, region: str, request: dict, *, log: Log,
                    poll_max_s: float = 5.0) -> dict:
    """Create the build, follow it to the end (showing progress), return the final Build."""
    endpoint = cloudbuild_endpoint()
    session = auth.session(endpoint)
    parent = f"projects/{project}/locations/{region}"
    resp = _request(session, "POST", f"{endpoint}/v1/{parent}/builds", what="creating the build",
                    json=request, attempts=1)
    # Create is not retried blindly: a second POST would start a second build. A lost answer
    # only costs a duplicate build of the same content, and the tag check skips it next time.
    if resp.status_code != 200:
        raise ServiceError(f"Cloud Build refused the build (HTTP {resp.status_code}): "
                           f"{_error_text(resp)}", hint="enable the Cloud Build API and grant "
                           "roles/cloudbuild.builds.editor" if resp.status_code in (403, 404) else None)
    build = (resp.json().get("metadata") or {}).get("build") or {}
    build_id = build.get("id")
    if not build_id:
        raise ServiceError(f"Cloud Build answered without a build id: {resp.text[:300]}")
    log_url = build.get("logUrl")
    log(f"cloud-build: build {build_id} created" + (f"; logs: {log_url}" if log_url else ""))
    url = f"{endpoint}/v1/{parent}/builds/{build_id}"
    deadline = time.monotonic() + _duration_s(request.get("timeout", "3600s")) + 600
    delay, last_state = 0.1, None
    while True:
        status = build.get("status", "STATUS_UNKNOWN")
        steps = build.get("steps") or []
        running = [i for i, s in enumerate(steps) if s.get("status") == "WORKING"]
        state = (status, tuple(running))
        if state != last_state:
            detail = ""
            if running:
                i = running[0]
                detail = f" (step {i + 1}/{len(steps)}: {steps[i].get('name', '')})"
            log(f"cloud-build: {status}{detail}")
            last_state = state
        if status in BUILD_TERMINAL:
            return build
        if time.monotonic() > deadline:
            raise ServiceError(f"build {build_id} still {status} after its timeout",
                               hint=f"see {log_url}" if log_url else None)
        time.sleep(delay)
        delay = min(delay * 1.6, poll_max_s)
        r = _request(session, "GET", url, what=f"following build {build_id}")
        if r.status_code != 200:
            raise ServiceError(f"following build {build_id}: HTTP {r.status_code}: {_error_text(r)}")
        build = r.json()


def _duration_s(value: str) -> float:
    try:
        return float(str(value).rstrip("s"))
    except ValueError:
        return CLOUD_BUILD_TIMEOUT_S


# --------------------------------------------------------------------------------------------
# Docker (local daemon)
# --------------------------------------------------------------------------------------------


def docker_commands(image: str, *, buildx: bool, platform: str = PLATFORM) -> list[list[str]]:
    """The commands the docker builder runs; the context tar.gz is fed on stdin to the build
    (`-`), so Docker builds exactly the hashed context. Pure: tested without a daemon."""
    validate_image_reference("image", image)
    if buildx:
        return [["docker", "buildx", "build", "--platform", platform, "--tag", image, "--push",
                 "-"]]
    return [["docker", "build", "--platform", platform, "--tag", image, "-"],
            ["docker", "push", image]]


def docker_available(run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> tuple[bool, bool]:
    """(daemon reachable, buildx present). Raises UserError with the fix when docker is unusable."""
    if shutil.which("docker") is None:
        raise UserError("the docker builder needs the docker CLI, which is not on PATH",
                        hint="install Docker, or use --builder cloud-build")
    probe = run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                text=True, timeout=30)
    if probe.returncode != 0:
        reason = (probe.stderr or probe.stdout or "").strip().splitlines()
        raise UserError("the docker builder needs a running Docker daemon: "
                        + (reason[-1] if reason else "docker info failed"),
                        hint="start Docker, or use --builder cloud-build (no local Docker needed)")
    buildx = run(["docker", "buildx", "version"], capture_output=True, text=True, timeout=30)
    return True, buildx.returncode == 0


def run_docker_build(image: str, context: bytes, *, log: Log) -> None:
    _, buildx = docker_available()
    for cmd in docker_commands(image, buildx=buildx):
        log("docker: " + " ".join(cmd))
        proc = subprocess.run(cmd, input=context if cmd[-1] == "-" else None)
        if proc.returncode != 0:
            hint = None
            if "push" in cmd:
                host = image.split("/", 1)[0]
                hint = f"authenticate Docker to the registry: gcloud auth configure-docker {host}"
            raise BuildFailed(f"`{' '.join(cmd[:3])} ...` exited {proc.returncode}", hint=hint)


# --------------------------------------------------------------------------------------------
# ensure_artifact
# --------------------------------------------------------------------------------------------


def ensure_artifact(spec: Any, builder: str | None = None, dry_run: bool = False,
                    log: Log | None = None, *, trainer_dir: Path | None = None) -> PackageResult:
    """Make sure the artifact the spec asks for exists; build/upload only what is missing.

    With dry_run nothing is touched (no network, no subprocess): the result carries the plan.
    `builder` overrides image.builder; `trainer_dir` replaces the bundled trainer package."""
    log = log if log is not None else (lambda _msg: None)
    result = _ensure(spec, builder, dry_run, log, trainer_dir)
    if result.action in ("built", "reused"):
        # submit relays this line: the user sees which tag runs and whether it was built or reused.
        log(f"package: {result.summary()}")
    return result


def _ensure(spec: Any, builder: str | None, dry_run: bool, log: Log,
            trainer_dir: Path | None) -> PackageResult:
    plan = plan_build(spec, builder, trainer_dir=trainer_dir)
    if plan is None:
        artifact = _make_artifact(_image(spec).uri)
        return PackageResult(artifact, "given", artifact.image_uri)

    if plan.kind == "python-package":
        artifact = _make_artifact(plan.executor_image, (plan.target,))
        if dry_run:
            return PackageResult(artifact, "planned", plan.executor_image, plan.context_hash,
                                 plan=plan)
        bucket, obj = plan.target[5:].split("/", 1)
        log(f"package: uploading {plan.target}")
        uploaded = upload_once(bucket, obj, archive_bytes(plan, spec),
                               project=_get(spec, "project"))
        if not uploaded:
            log(f"package: {plan.target} already staged")
        return PackageResult(artifact, "built" if uploaded else "reused", plan.executor_image,
                             plan.context_hash, built=uploaded, pushed=uploaded, plan=plan)

    artifact = _make_artifact(plan.target)
    if plan.builder == "cloud-build":
        # Validate what cloud-build needs before any network call, dry run included.
        bucket, prefix = staging_location(spec)
        project, region = _get(spec, "project"), _get(spec, "region")
        if not project or not region:
            raise SpecError("project" if not project else "region",
                            "is required to build with Cloud Build", value=None, has_value=False,
                            hint="set it in the spec, or pass --project/--region")
    if dry_run:
        return PackageResult(artifact, "planned", plan.target, plan.context_hash,
                             builder=plan.builder, plan=plan)

    if registry_tag_exists(plan.target, log=log):
        log(f"registry: {plan.target} exists; nothing to build")
        return PackageResult(artifact, "reused", plan.target, plan.context_hash,
                             builder=plan.builder, plan=plan)

    context = archive_bytes(plan, spec)
    if plan.builder == "docker":
        log(f"docker: building {plan.target} ({len(plan.entries)} files)")
        run_docker_build(plan.target, context, log=log)
        return PackageResult(artifact, "built", plan.target, plan.context_hash, built=True,
                             pushed=True, builder="docker", plan=plan)

    obj = "/".join(p for p in (prefix, "contexts", f"{plan.tag}.tar.gz") if p)
    source_uri = f"gs://{bucket}/{obj}"
    log(f"cloud-build: uploading the context to {source_uri} ({_human(len(context))})")
    upload_once(bucket, obj, context, project=project)
    request = cloud_build_request(plan.target, bucket, obj, context_hash=plan.context_hash)
    build = run_cloud_build(project, region, request, log=log)
    log_url = build.get("logUrl")
    if build.get("status") != "SUCCESS":
        detail = (build.get("failureInfo") or {}).get("detail") or build.get("statusDetail") or ""
        raise BuildFailed(f"Cloud Build {build.get('id')} ended {build.get('status')}"
                          + (f": {detail}" if detail else ""),
                          hint=f"logs: {log_url}" if log_url else None)
    return PackageResult(artifact, "built", plan.target, plan.context_hash, built=True,
                         pushed=True, builder="cloud-build", log_url=log_url, plan=plan,
                         source_uri=source_uri)


# --------------------------------------------------------------------------------------------
# Maintenance entry point: regenerate the root Dockerfile/.dockerignore from the templates
# --------------------------------------------------------------------------------------------


def write_root_files(repo_root: Path) -> None:
    """The repository's Dockerfile and .dockerignore are the GPU rendering of the templates."""
    (repo_root / "Dockerfile").write_text(render_dockerfile("gpu"))
    (repo_root / ".dockerignore").write_text(render_dockerignore())


if __name__ == "__main__":  # python -m vertex_trainer.package --write-root-files
    import sys

    if sys.argv[1:] != ["--write-root-files"]:
        sys.exit("usage: python -m vertex_trainer.package --write-root-files")
    write_root_files(Path(__file__).resolve().parent.parent)
