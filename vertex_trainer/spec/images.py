"""Checks of the values that reach a Dockerfile, a requirements file, a build argument or a shell.

A newline, a quote or a smuggled instruction in an image reference, a pip requirement or a
staging bucket is refused with exit 2 at validate time, never rendered. The packager calls these
too (vertex_trainer.packaging imports them from here), so both sides agree on what is safe.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from vertex_trainer.errors import SpecError
from vertex_trainer.redact import userinfo_masked
from vertex_trainer.sizes import human_size

if TYPE_CHECKING:  # model.py imports this module: the models are named for the type checker only
    from vertex_trainer.spec.model import ImageSpec, JobSpec

Builder = Literal["cloud-build", "docker"]
VariantName = Literal["gpu", "cpu", "tpu"]  # the Dockerfile templates (image.variant, besides auto)
BUILDERS: tuple[str, ...] = get_args(Builder)
VARIANTS: tuple[str, ...] = get_args(VariantName)
AUTO = "auto"  # image.base_image: the prebuilt Vertex AI training image of the variant (script jobs)

_DOMAIN = (
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]{1,5})?"
)
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"sha256:[a-f0-9]{64}"
_IMAGE_RE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$"
)
_DIGEST_RE = re.compile(rf"^{_DIGEST}$")
# Vertex AI's prebuilt training images, as gcloud recognises them (googlecloudsdk/command_lib/ai/
# docker/build.py, _IsVertexTrainingPrebuiltImage). Google tags them `:latest` only (and moves the
# tag to new builds of the same framework version), so a pin cannot be asked of them.
PREBUILT_RE = re.compile(
    r"^(us|europe|asia)-docker\.pkg\.dev/vertex-ai/training/(tf|scikit-learn|pytorch|xgboost)-.+$"
)
# The TensorFlow of a prebuilt image (tf-cpu.2-17.py310, tf-gpu.2-9) or of TensorFlow's own
# (tensorflow/tensorflow:2.21.0-gpu): major.minor.
_PREBUILT_TF = re.compile(r"/vertex-ai/training/tf-(?:cpu|gpu)\.(?P<major>\d+)-(?P<minor>\d+)")
_TENSORFLOW_TF = re.compile(r"^(?:docker\.io/)?tensorflow/tensorflow:(?P<major>\d+)\.(?P<minor>\d+)")


def is_prebuilt(image: str) -> bool:
    """A Vertex AI prebuilt training image as Google tags it (:latest, or no tag)."""
    ref = (image or "").split("@", 1)[0]
    name, colon, tag = ref.rpartition(":")
    if not colon or "/" in tag:  # no tag (a registry's port is followed by a path)
        name, tag = ref, ""
    return bool(PREBUILT_RE.fullmatch(name)) and tag in ("", "latest")


def image_tensorflow(image: str) -> str | None:
    """The TensorFlow major.minor a base image holds, read from its name (None: not known)."""
    m = _PREBUILT_TF.search(image or "") or _TENSORFLOW_TF.match(image or "")
    return f"{m.group('major')}.{m.group('minor')}" if m else None


def latest_warning(image: ImageSpec) -> str | None:
    """The warning for a base image given as Google's prebuilt training image at :latest."""
    base = image.base_image
    if not base or base == AUTO or image.base_image_digest or not is_prebuilt(base):
        return None
    return (
        f"warning: image.base_image {base} is Google's prebuilt training image, which Google "
        "tags :latest only and moves to each new build: an image built from it later may hold "
        "other library versions (set image.base_image_digest to freeze the one you tested)"
    )


_REQ_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_REQ_OP = r"(?:===|==|!=|~=|>=|<=|>|<)"
_REQ_VERSION = r"[A-Za-z0-9.*+!_-]+"
_REQUIREMENT_RE = re.compile(
    rf"^{_REQ_NAME}(?:\[{_REQ_NAME}(?:,{_REQ_NAME})*\])?"
    rf"(?:{_REQ_OP}{_REQ_VERSION}(?:,{_REQ_OP}{_REQ_VERSION})*)?$"
)
_BUCKET_RE = re.compile(
    r"^gs://(?P<bucket>[a-z0-9][a-z0-9._-]{1,220}[a-z0-9])(?:/(?P<prefix>[A-Za-z0-9._/-]*))?$"
)
# Characters that must never reach a Dockerfile or a shell, named in the error message.
_DANGEROUS = {
    "\n": "a newline",
    "\r": "a carriage return",
    '"': "a double quote",
    "'": "a single quote",
    "`": "a backtick",
    "$": "a dollar sign",
    "\\": "a backslash",
    ";": "a semicolon",
    "&": "an ampersand",
    "|": "a pipe",
    " ": "a space",
    "\t": "a tab",
    "\x00": "a NUL byte",
}


def _danger(value: str) -> str | None:
    for ch, name in _DANGEROUS.items():
        if ch in value:
            return name
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "a control character"
    return None


def _refuse(field: str, value: object, what: str, hint: str) -> SpecError:
    # The refused value is quoted; a credential in a URL (a requirements.txt index or git line,
    # `https://me:TOKEN@host`) is not: messages end up in CI logs.
    shown = userinfo_masked(value) if isinstance(value, str) else value
    return SpecError(
        field, f"{what}; refused before it could reach a Dockerfile or a shell", value=shown, hint=hint
    )


def validate_image_reference(
    field: str, value: str, *, allow_tag: bool = True, require_pin: bool = False
) -> re.Match[str]:
    """Check a Docker image reference (registry/path[:tag][@sha256:...]); return the match."""
    if not isinstance(value, str) or not value:
        raise SpecError(field, "must be a non-empty image reference", value=value)
    bad = _danger(value)
    if bad:
        raise _refuse(
            field, value, f"contains {bad}", "an image reference looks like REGISTRY/PATH:TAG[@sha256:DIGEST]"
        )
    m = _IMAGE_RE.match(value)
    if not m:
        raise _refuse(
            field,
            value,
            "is not a valid image reference",
            "lowercase path components, e.g. us-central1-docker.pkg.dev/PROJECT/REPO/IMAGE",
        )
    if not allow_tag and (m.group("tag") or m.group("digest")):
        raise SpecError(
            field,
            "must name a repository without a tag or digest: the packager "
            "tags images with their content hash",
            value=value,
            hint=f"use {m.group('domain') + '/' if m.group('domain') else ''}{m.group('path')}",
        )
    if (
        require_pin
        and not m.group("digest")
        and m.group("tag") in (None, "latest")
        and not is_prebuilt(value)
    ):
        raise SpecError(
            field,
            "must be pinned to a version tag (or a digest), not latest",
            value=value,
            hint="e.g. tensorflow/tensorflow:2.21.0-gpu, or set image.base_image_digest (Google's "
            "prebuilt training images, us-docker.pkg.dev/vertex-ai/training/..., may stay :latest)",
        )
    return m


def validate_requirement(field: str, value: str) -> str:
    """Check one pip requirement string (name[extras] plus optional version specifiers)."""
    if not isinstance(value, str) or not value.strip():
        raise SpecError(field, "must be a non-empty pip requirement", value=value)
    bad = _danger(value.strip())
    if bad:
        raise _refuse(
            field,
            value,
            f"contains {bad}",
            "one requirement per entry: NAME[EXTRAS]SPECIFIERS, e.g. 'pandas==2.2.3' "
            "(no options, URLs, markers or quotes)",
        )
    if not _REQUIREMENT_RE.match(value.strip()) or len(value) > 200:
        raise _refuse(
            field,
            value,
            "is not a plain pip requirement",
            "NAME[EXTRAS]SPECIFIERS, e.g. 'pandas==2.2.3' or 'scipy>=1.13,<2' "
            "(no options, URLs, markers or spaces)",
        )
    return value.strip()


def parse_staging(field: str, value: str) -> tuple[str, str]:
    """'gs://bucket/prefix' -> (bucket, prefix) with the prefix stripped of slashes."""
    m = _BUCKET_RE.match(value or "")
    if not m or _danger(value):
        raise SpecError(
            field,
            "must be gs://BUCKET[/PREFIX] (letters, digits, . _ - / only)",
            value=value,
            hint="e.g. gs://my-bucket/vertex-trainer-staging",
        )
    return m.group("bucket"), (m.group("prefix") or "").strip("/")


def validate_image_values(spec: JobSpec) -> None:
    """Refuse (exit 2) any image-block value that could smuggle text into a Dockerfile, a build
    argument or a shell. Run by the spec's rules at validate time, and by the packager."""
    image = spec.image
    if image is None:
        return
    if image.uri:
        validate_image_reference("image.uri", image.uri)
    if image.repository:
        validate_image_reference("image.repository", image.repository, allow_tag=False)
    if image.base_image and image.base_image != AUTO:
        validate_image_reference(
            "image.base_image", image.base_image, require_pin=not image.base_image_digest
        )
    digest = image.base_image_digest
    if digest:
        if not isinstance(digest, str) or not _DIGEST_RE.match(digest):
            bad = _danger(str(digest))
            raise _refuse(
                "image.base_image_digest",
                digest,
                f"contains {bad}" if bad else "is not sha256:<64 hex digits>",
                "copy the digest from `docker buildx imagetools inspect IMAGE`",
            )
        base = image.base_image
        if base and "@" in base:
            raise SpecError(
                "image.base_image_digest",
                "image.base_image already has a digest",
                value=digest,
                hint="set the digest in one place only",
            )
    for i, req in enumerate(image.pip_packages or ()):
        validate_requirement(f"image.pip_packages[{i}]", req)
    validate_code_values(image)
    if image.executor_image:
        validate_image_reference("image.executor_image", image.executor_image)
    if image.staging_bucket:
        parse_staging("image.staging_bucket", image.staging_bucket)
    builder = image.builder
    if builder and builder not in BUILDERS:
        raise SpecError("image.builder", f"must be one of {', '.join(BUILDERS)}", value=builder)
    variant = image.variant
    if variant and variant not in ("auto", *VARIANTS):
        raise SpecError("image.variant", f"must be one of auto, {', '.join(VARIANTS)}", value=variant)
    context = image.context
    if context is not None:
        if "\n" in str(context) or "\x00" in str(context):
            raise _refuse(
                "image.context",
                context,
                "contains a control character",
                "a directory path that holds a Dockerfile",
            )
        custom_only = [
            k
            for k, v in (
                ("base_image", image.base_image),
                ("base_image_digest", image.base_image_digest),
                ("pip_packages", image.pip_packages),
            )
            if v
        ]
        if custom_only or (variant and variant != "auto"):
            names = ", ".join(f"image.{k}" for k in custom_only or ["variant"])
            raise SpecError(
                "image.context",
                f"{names} only apply to the bundled trainer's "
                "Dockerfile; with image.context your own Dockerfile decides",
                value=context,
                hint=f"remove {names}, or drop image.context",
            )


# A script job's entry point reaches the generated Dockerfile's ENTRYPOINT (and the sdist's
# wrapper): a relative path of plain name components ending in .py, or a dotted module name.
_SCRIPT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*\.py$")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")


def validate_script(field: str, value: str) -> str:
    """Check image.script: a relative .py path inside image.code (no '..', no shell characters)."""
    bad = _danger(value)
    if bad or not _SCRIPT_RE.match(value) or ".." in value.split("/"):
        raise _refuse(
            field,
            value,
            f"contains {bad}" if bad else "is not a relative path to a .py file inside image.code",
            "a path like task.py or trainer/task.py (letters, digits, . _ - and /), relative to image.code",
        )
    return value


def validate_module(field: str, value: str) -> str:
    """Check image.module: a dotted Python module name (trainer.task)."""
    if not _MODULE_RE.match(value or "") or len(value) > 200:
        bad = _danger(value or "")
        raise _refuse(
            field,
            value,
            f"contains {bad}" if bad else "is not a dotted Python module name",
            "e.g. trainer.task (run as `python -m trainer.task` from image.code)",
        )
    return value


def validate_code_values(image: ImageSpec) -> None:
    """The values of a script job's image block (image.code, script, module, requirements)."""
    code = image.code
    if code is not None and any(ord(c) < 32 or ord(c) == 127 for c in str(code)):
        raise _refuse("image.code", code, "contains a control character", "a directory path")
    if image.script:
        validate_script("image.script", image.script)
    if image.module:
        validate_module("image.module", image.module)
    for i, req in enumerate(image.requirements or ()):
        validate_requirement(f"image.requirements[{i}]", req)
    validate_include_secrets(image)


def validate_include_secrets(image: ImageSpec) -> None:
    """image.include_secrets: each entry names credential files of image.code or image.context by
    path or glob (packaging/screen.py); never a blanket pattern, never without such a folder."""
    entries = image.include_secrets or ()
    if entries and not (image.code or image.context):
        raise SpecError(
            "image.include_secrets",
            "only applies to a folder of yours: image.code or image.context",
            value=list(entries),
            hint="remove image.include_secrets: the bundled trainer holds no credential",
        )
    for i, entry in enumerate(entries):
        field = f"image.include_secrets[{i}]"
        parts = str(entry).split("/")
        if (
            not isinstance(entry, str)
            or not entry.strip()
            or any(ord(c) < 32 or ord(c) == 127 for c in entry)
            or entry.startswith(("/", "!"))
            or ".." in parts
        ):
            raise SpecError(
                field,
                "must be a path inside the folder, relative to it (no leading / or !, no ..)",
                value=entry,
                hint="e.g. certs/server.pem, as `vertex-trainer package SPEC --dry-run` lists it",
            )
        if not any(part.strip("*?.[]") for part in parts):
            raise SpecError(
                field,
                "matches anything: name the credential files to package, never all of them",
                value=entry,
                hint="e.g. certs/server.pem or certs/*.pem; keep other secrets in Secret Manager",
            )


# -- a script job's directory: what packaging and a local run both check first --------------------


def requirement_lines(text: str) -> list[str]:
    """The requirements of a requirements.txt, without comments and blank lines."""
    lines = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


def script_image(spec: JobSpec) -> ImageSpec:
    """The image block of a script job (ValueError for any other spec)."""
    image = spec.image
    if image is None or not image.code:
        raise ValueError("not a script job: the spec has no image.code")
    return image


def code_root(spec: JobSpec) -> Path:
    """image.code as an absolute directory (relative paths are from the current directory).

    Args:
        spec: a script job's JobSpec.
    Returns:
        The resolved directory.
    Raises:
        SpecError: it does not exist or is not a directory (exit 2).
    """
    image = script_image(spec)
    root = Path(image.code or "").expanduser().resolve()
    if not root.is_dir():
        raise SpecError(
            "image.code",
            "is not a directory" + ("" if root.exists() else " (nothing is there)"),
            value=image.code,
            hint="the directory of your training code; relative paths are from the current "
            f"directory ({Path.cwd()})",
        )
    return root


def entry_argv(spec: JobSpec) -> list[str]:
    """What runs after `python`: [SCRIPT] or ["-m", MODULE]."""
    image = script_image(spec)
    return [image.script] if image.script else ["-m", str(image.module)]


def check_entry(spec: JobSpec, root: Path | None = None) -> None:
    """The script (or module) must be inside image.code.

    Args:
        spec: a script job's JobSpec.
        root: image.code, resolved (default: code_root(spec)).
    Raises:
        SpecError: image.script / image.module names nothing there (exit 2).
    """
    image = script_image(spec)
    root = root or code_root(spec)
    if image.script:
        if not (root / image.script).is_file():
            raise SpecError(
                "image.script",
                f"is not a file in image.code ({root})",
                value=image.script,
                hint="give the script's path relative to image.code, e.g. task.py",
            )
        return
    parts = str(image.module).split(".")
    base = root.joinpath(*parts)
    found = (
        base.with_suffix(".py").is_file()
        or (base / "__init__.py").is_file()
        or (base / "__main__.py").is_file()
    )
    if not found:
        raise SpecError(
            "image.module",
            f"is not a module in image.code ({root}): neither {'/'.join(parts)}.py nor "
            f"{'/'.join(parts)}/__init__.py is there",
            value=image.module,
            hint="the dotted path of a .py file under image.code, e.g. trainer.task for trainer/task.py",
        )


REQUIREMENTS_BYTES = 1024 * 1024  # image.code/requirements.txt: pip requirements, not data


def code_requirements(spec: JobSpec, root: Path | None = None) -> list[str]:
    """image.requirements, then the lines of image.code/requirements.txt, each a plain pip
    requirement (checked as every value that reaches a Dockerfile or a shell).

    Args:
        spec: a script job's JobSpec.
        root: image.code, resolved (default: code_root(spec)).
    Returns:
        The requirement strings, in that order, without duplicates.
    Raises:
        SpecError: a requirement is not a plain NAME[EXTRAS]SPECIFIERS (exit 2).
    """
    image = script_image(spec)
    root = root or code_root(spec)
    out = [validate_requirement(f"image.requirements[{i}]", r) for i, r in enumerate(image.requirements)]
    path = root / "requirements.txt"
    if path.is_file():
        size = path.stat().st_size
        if size > REQUIREMENTS_BYTES:  # never read a huge file whole
            raise SpecError(
                "image.code",
                f"holds a requirements.txt of {size} bytes, "
                f"over the {human_size(REQUIREMENTS_BYTES)} one may be",
                value=str(root),
                hint="image.code/requirements.txt lists pip requirements, one per line (NAME==VERSION)",
            )
        for n, line in enumerate(requirement_lines(_utf8(path)), 1):
            out.append(validate_requirement(f"image.code: requirements.txt line {n}", line))
    return list(dict.fromkeys(out))


def _utf8(path: Path) -> str:
    """A requirements file's text: UTF-8 (a byte-order mark allowed, as pip allows one); other
    bytes are exit 2 naming the file, the first bad byte and its offset."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        quoted, bad = shlex.quote(str(path)), raw[e.start : e.start + 1]
        raise SpecError(
            "image.code",
            f"requirements.txt: not UTF-8 text ({e.reason} at byte {e.start}: {bad!r})",
            has_value=False,
            hint=f"save it as UTF-8, e.g. from Latin-1: iconv -f latin1 -t utf-8 {quoted} -o {quoted}.utf8 "
            f"&& mv {quoted}.utf8 {quoted}",
        ) from None
