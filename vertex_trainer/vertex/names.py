"""Vertex AI resource names, idempotency keys and label selectors (pure; no network)."""

from __future__ import annotations

import re
import secrets
import time

from vertex_trainer import regions
from vertex_trainer.contract import RANDOM_KEY_BODY, RANDOM_KEY_PREFIX
from vertex_trainer.errors import UserError

_KEY_RE = re.compile(r"[a-z0-9_-]{1,63}")
_NAME = r"projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/{collection}/(?P<id>[^/:]+)"
_LABEL_KEY_RE = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_LABEL_VALUE_RE = re.compile(r"[a-z0-9_-]{0,63}")


def new_key() -> str:
    """A random, label-safe idempotency key for one invocation: vt-<UTC yyyymmdd-hhmmss>-<6 hex>
    (the run's folder is named after it: contract.run_name), so runs sort by time."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{RANDOM_KEY_PREFIX}{stamp}-{secrets.token_hex(3)}"


def keys_of_run(suffix: str) -> tuple[str, ...]:
    """The idempotency keys whose submissions are named `<name>-<suffix>` (contract.run_name):
    the suffix itself and vt-<suffix>, a key the tool made when the suffix has that form (and,
    whatever its form, a key of the user's that started `vt-` before such keys named folders of
    their own: its job may still write the folder)."""
    return (suffix, f"{RANDOM_KEY_PREFIX}{suffix}")


def check_key(key: str) -> str:
    """Validate a user-given idempotency key; it becomes a Vertex label value."""
    if key is not None and not isinstance(key, str):  # a notebook's idempotency_key=42
        raise UserError(
            f"--idempotency-key {key!r} is {type(key).__name__}, not text",
            hint=f"pass it as text: idempotency_key={str(key)!r}",
        )
    if not _KEY_RE.fullmatch(key or ""):
        safe = re.sub(r"[^a-z0-9_-]+", "-", (key or "").lower()).strip("-")[:63]
        unexpanded = "$" in (key or "") or "{" in (key or "")
        raise UserError(
            f"--idempotency-key {key!r} is not a valid label value: use 1-63 characters from "
            "lowercase letters, digits, '_' and '-'"
            + (" (it looks like a variable the shell or CI did not expand)" if unexpanded else ""),
            hint=f"for example --idempotency-key {safe or 'ci-run-1'}",
        )
    if key.endswith(("-", "_")):
        # `cb-${COMMIT_SHA}` in a build without a commit: every such run would share one key and
        # adopt the first job instead of training.
        raise UserError(
            f"--idempotency-key {key!r} ends in {key[-1]!r}: it looks like a prefix whose "
            "variable was empty, and every run with it would adopt the first job",
            hint="make sure the variable is set, or fall back to another id, e.g. "
            "cb-${COMMIT_SHA} -> cb-build-${BUILD_ID}",
        )
    # A run's folder is <name>-<key>, less the prefix of a key the tool made (contract.run_name):
    # a key that names the folder of the tool's key would be a second submission writing the same
    # model.
    if RANDOM_KEY_BODY.fullmatch(key):  # copied from a folder's name: the tool's key is vt-<it>
        raise UserError(
            f"--idempotency-key {key!r} is the end of a run's folder name, not its key: the tool "
            f"made the key {RANDOM_KEY_PREFIX}{key} for that submission, and any other key would "
            "write a second run into the same folder",
            hint=f"to retry that submission: --idempotency-key {RANDOM_KEY_PREFIX}{key}; a new run: "
            "a key of your own, or none",
        )
    return key


def check_region(region: str, flag: str = "--region") -> str:
    """A region a command is pointed at (api/inputs.check_region): one of the Vertex AI regions
    of the table (regions.py), else UserError naming the nearest ones; nothing is sent."""
    if regions.known(region):
        return region
    raise UserError(
        f"{flag} {region!r} is not a Vertex AI training region (the table of {regions.READ}); "
        "nothing was sent",
        hint=regions.unknown_hint(region),
    )


def parse_label(text: str) -> tuple[str, str]:
    """Parse a K=V label selector (list --label)."""
    key, sep, value = text.partition("=")
    if not sep or not _LABEL_KEY_RE.fullmatch(key) or not _LABEL_VALUE_RE.fullmatch(value):
        raise UserError(
            f"--label {text!r}: expected KEY=VALUE with lowercase letters, digits, "
            "'_' or '-' (keys start with a letter)"
        )
    return key, value


def job_name(
    job: str,
    project: str | None = None,
    region: str | None = None,
    *,
    collection: str = "customJobs",
    what: str = "job",
    id_pattern: str = r"[0-9]+",
) -> str:
    """A full resource name from a resource name, or an id plus project and region.

    Args: job: the name or id; project, region: where an id is; collection: customJobs,
    hyperparameterTuningJobs, pipelineJobs, ...; what: the resource in messages; id_pattern: the
    ids of the collection (numbers, unless the client chooses them).
    Returns: projects/P/locations/R/COLLECTION/ID. Raises UserError for anything else."""
    job = job.strip()
    full = f"projects/P/locations/R/{collection}/ID"
    an_id = f"a numeric {what} id" if id_pattern == r"[0-9]+" else f"a {what} id"
    if re.fullmatch(_NAME.format(collection=collection), job):
        return job
    if re.fullmatch(id_pattern, job):
        if not project or not region:
            missing = " and ".join(n for n, v in (("--project", project), ("--region", region)) if not v)
            raise UserError(f"{what} id {job} needs {missing} (or pass the full name {full})")
        check_region(region)  # (a typo would be a host that does not exist, retried to exit 3)
        return f"projects/{project}/locations/{region}/{collection}/{job}"
    local = ("/" in job and not job.startswith("projects/")) or job.startswith((".", "~"))
    raise UserError(
        f"{job!r} is not a {what}: pass {full}, or {an_id} with --project and --region",
        # a local run's folder (submit --local) is no Vertex AI job: what reads it, what stops it
        hint="a local run is read by `vertex-trainer logs RUN` and `vertex-trainer report RUN`; "
        "it stops with Ctrl-C where it runs"
        if local
        else None,
    )


def split_name(name: str, collection: str = "customJobs") -> tuple[str, str, str]:
    """(project, region, id) of a resource name in `collection`."""
    m = re.fullmatch(_NAME.format(collection=collection), name)
    if not m:
        raise ValueError(f"not a {collection} name: {name!r}")
    return m["project"], m["region"], m["id"]


def console_url(name: str) -> str:
    project, region, job_id = split_name(name)
    return (
        f"https://console.cloud.google.com/vertex-ai/locations/{region}/training/"
        f"{job_id}/cpu?project={project}"
    )
