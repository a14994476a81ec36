"""From a spec file and the trigger flags to what the function will run: `trigger render` and
`trigger deploy` share it.

The spec is resolved once, here: `--set`, `--project`/`--region` and every template that does not
use `trigger.*` take their values now; templates that do are kept for the event. It is checked
with a made-up marker (`<prefix>example/<marker>`), so a spec that cannot start a run fails now,
not at the first upload. The image is pinned: `image.repository` becomes the content-hash tag the
packager builds (the function never builds), so what runs is what was rendered.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from vertex_trainer import packaging
from vertex_trainer.automation.storage_events import (
    FOLDER_WINDOW,
    MAX_RUNS_PER_FOLDER,
    TriggerConfig,
    sample_vars,
)
from vertex_trainer.contract import Artifact
from vertex_trainer.errors import UserError
from vertex_trainer.redact import hidden, looks_secret
from vertex_trainer.settings import Settings
from vertex_trainer.spec import JobSpec, check_trainer_flags, cloud_problems
from vertex_trainer.spec.load import build_spec, read_yaml, resolve_data, template_variables


class PrepareOptions(TypedDict, total=False):
    """`prepare`'s options, as `function_deploy.plan` passes them on (their defaults: prepare's)."""

    prefix: str
    marker: str
    sets: Iterable[str]
    vars: Mapping[str, Any] | None
    project: str | None
    region: str | None
    max_runs_per_folder: int
    folder_window: str


@dataclass(frozen=True)
class Prepared:
    """The resolved spec data (trigger templates kept, image pinned) and what it means."""

    data: dict[str, Any]  # what spec.yaml holds
    spec: JobSpec  # the spec as given (image.repository, if it builds), sample trigger
    pinned: JobSpec  # the spec the function will load, with the sample trigger values
    artifact: Artifact
    config: TriggerConfig
    source: str
    warnings: tuple[str, ...] = field(default=())

    @property
    def builds(self) -> bool:
        """True when the function's image is built from the spec (image.repository)."""
        return self.spec.image is not None and self.spec.image.builds


def prepare(
    spec_path: str | Path,
    *,
    bucket: str,
    prefix: str = "",
    marker: str = "_SUCCESS",
    sets: Iterable[str] = (),
    vars: Mapping[str, Any] | None = None,
    project: str | None = None,
    region: str | None = None,
    max_runs_per_folder: int = MAX_RUNS_PER_FOLDER,
    folder_window: str = FOLDER_WINDOW,
    settings: Settings,
) -> Prepared:
    """The spec as the function will load it, and the trigger's configuration. The flags are
    checked before (function.check_flags, its one caller's first step) and again by TriggerConfig."""
    base = Path(spec_path).parent
    given = dict(vars or {})
    if "trigger" in given:
        raise UserError("--var trigger=...: `trigger` is the storage event's variable; pick another name")
    data = resolve_data(
        read_yaml(spec_path),
        sets=tuple(sets),
        vars=given,
        project=project,
        region=region,
        base_dir=base,
        environ=settings.environ,
        default_project=settings.project,
        default_region=settings.region,
        defer=("trigger",),
    )
    sample = {**given, "trigger": sample_vars(bucket, prefix, marker)}
    spec = build_spec(data, vars=sample, base_dir=base, environ=settings.environ)
    cloud_problems(spec)  # a project, gs:// paths: the function submits to Vertex AI
    if spec.runs_bundled_trainer:
        check_trainer_flags(spec)
    assert spec.image is not None  # cloud_problems refuses a spec without one
    if spec.image.python_package:
        raise UserError(
            "image.python_package: a triggered run needs a container image (the function "
            "never builds or uploads code)",
            hint="use image.repository (built once, tag = content hash) or image.uri",
        )
    uri = None if spec.image.builds else spec.image.uri  # image.uri, or one built from the spec
    artifact = Artifact(uri) if uri else packaging.plan_artifact(spec)
    data = {**data, "image": {"uri": artifact.image_uri}}
    pinned = build_spec(data, vars=sample, base_dir=base, environ=settings.environ)

    used = template_variables(data)
    stored = dict(given)
    if "git_sha" in used:  # the function has no git checkout: pin the commit rendered from
        stored["git_sha"] = resolve_data({"v": "{{ git_sha }}"}, base_dir=base)["v"]
    warnings = []
    # Each run has a folder of its own below output_dir (named after the event's key), unless
    # the spec fixes it: then every run writes to the one directory.
    if spec.fixed_output_dir and not _uses_trigger(data.get("output_dir")):
        warnings.append(
            "fixed_output_dir: true and output_dir does not use {{ trigger.* }}: every run writes "
            f"to the same directory ({spec.output_dir}); drop fixed_output_dir, or e.g. output_dir: "
            "gs://BUCKET/runs/{{ trigger.folder_name }}-{{ trigger.generation }}"
        )
    if spec.trainer is None:  # your own code (issue 32): its data comes in args: or env:
        own = [*(data.get("args") or []), *(data.get("env") or {}).values()]
        if not any(_uses_trigger(v) for v in own):
            warnings.append(
                "no args: or env: value uses {{ trigger.folder }}: every run reads the same data; "
                "e.g. args: [\"--data={{ trigger.folder }}\"]"
            )
    elif not any(_uses_trigger(v) for v in (data.get("trainer") or {}).values()):
        warnings.append(
            "no trainer: value uses {{ trigger.folder }}: every run reads the same data; "
            "e.g. train_data: \"{{ trigger.folder }}/train-*\""
        )
    # The function's source (spec.yaml, trigger.json) holds the spec and the --var values as they
    # are: whoever may view the function's source (a project Viewer) reads them in clear.
    secret = [*hidden(data), *(f"--var {k}" for k in given if looks_secret(k))]
    if secret:
        warnings.append(
            f"values that look secret ({', '.join(secret)}) go in clear into the function's source "
            "(spec.yaml, trigger.json), which whoever may view the function can read, and into "
            "every run's job; keep real secrets in Secret Manager"
        )
    config = TriggerConfig(
        bucket=bucket,
        prefix=prefix,
        marker=marker,
        vars=stored,
        image=artifact.image_uri,
        pipeline=pinned.deploy is not None,
        version=_version(),
        max_runs_per_folder=max_runs_per_folder,
        folder_window=folder_window,
    )
    return Prepared(data, spec, pinned, artifact, config, str(spec_path), tuple(warnings))


def _uses_trigger(value: Any) -> bool:
    return isinstance(value, str) and "trigger" in template_variables(value)


def _version() -> str:
    try:
        return importlib.metadata.version("vertex-trainer")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree
        return "dev"
