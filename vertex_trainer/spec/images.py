"""Checks of the values that reach a Dockerfile, a requirements file, a build argument or a shell.

A newline, a quote or a smuggled instruction in an image reference, a pip requirement or a
staging bucket is refused with exit 2 at validate time, never rendered. The packager calls these
too (vertex_trainer.packaging imports them from here), so both sides agree on what is safe.
"""

from __future__ import annotations

import re
from typing import Any

from vertex_trainer.errors import SpecError

BUILDERS = ("cloud-build", "docker")
VARIANTS = ("gpu", "cpu", "tpu")  # the Dockerfile templates (image.variant, besides auto)

_DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]{1,5})?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"sha256:[a-f0-9]{64}"
_IMAGE_RE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$"
)
_DIGEST_RE = re.compile(rf"^{_DIGEST}$")
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
    return SpecError(
        field, f"{what}; refused before it could reach a Dockerfile or a shell", value=value, hint=hint
    )


def validate_image_reference(
    field: str, value: str, *, allow_tag: bool = True, require_pin: bool = False
) -> re.Match:
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
    if require_pin and not m.group("digest") and m.group("tag") in (None, "latest"):
        raise SpecError(
            field,
            "must be pinned to a version tag (or a digest), not latest",
            value=value,
            hint="e.g. tensorflow/tensorflow:2.21.0-gpu, or set image.base_image_digest",
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


def _get(obj: Any, name: str, default: Any = None) -> Any:
    return getattr(obj, name, default) if obj is not None else default


def validate_image_values(spec: Any) -> None:
    """Refuse (exit 2) any image-block value that could smuggle text into a Dockerfile, a build
    argument or a shell. Run by the spec's rules at validate time, and by the packager."""
    image = _get(spec, "image")
    if image is None:
        return
    if _get(image, "uri"):
        validate_image_reference("image.uri", image.uri)
    if _get(image, "repository"):
        validate_image_reference("image.repository", image.repository, allow_tag=False)
    if _get(image, "base_image"):
        validate_image_reference(
            "image.base_image", image.base_image, require_pin=not _get(image, "base_image_digest")
        )
    digest = _get(image, "base_image_digest")
    if digest:
        if not isinstance(digest, str) or not _DIGEST_RE.match(digest):
            bad = _danger(str(digest))
            raise _refuse(
                "image.base_image_digest",
                digest,
                f"contains {bad}" if bad else "is not sha256:<64 hex digits>",
                "copy the digest from `docker buildx imagetools inspect IMAGE`",
            )
        base = _get(image, "base_image")
        if base and "@" in base:
            raise SpecError(
                "image.base_image_digest",
                "image.base_image already has a digest",
                value=digest,
                hint="set the digest in one place only",
            )
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
        raise SpecError("image.variant", f"must be one of auto, {', '.join(VARIANTS)}", value=variant)
    context = _get(image, "context")
    if context is not None:
        if "\n" in str(context) or "\x00" in str(context):
            raise _refuse(
                "image.context",
                context,
                "contains a control character",
                "a directory path that holds a Dockerfile",
            )
        custom_only = [k for k in ("base_image", "base_image_digest", "pip_packages") if _get(image, k)]
        if custom_only or (variant and variant != "auto"):
            names = ", ".join(f"image.{k}" for k in custom_only or ["variant"])
            raise SpecError(
                "image.context",
                f"{names} only apply to the bundled trainer's "
                "Dockerfile; with image.context your own Dockerfile decides",
                value=context,
                hint=f"remove {names}, or drop image.context",
            )
