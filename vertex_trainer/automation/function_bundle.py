"""The deployable Cloud Run function directory `trigger render` writes.

    main.py            the CloudEvent function `on_object_finalized` (templates/trigger_main.py.j2)
    requirements.txt   what Cloud Build installs: functions-framework and vertex-trainer's own
                       dependencies, pinned to the versions installed here
    spec.yaml          the resolved spec, image pinned, `{{ trigger.* }}` kept for the event
    trigger.json       bucket, prefix, marker, template variables, image
    deploy.sh          the gcloud commands of `trigger deploy` (service accounts, IAM, deploy)
    .vertex-trainer-render.json   what this render wrote, each file's digest (manifest.py): a
                       render again replaces only those, and never writes into a directory
                       that holds anything else without one
    vertex_trainer/    vendored: vertex-trainer is not on a public index, so its source travels
    trainer/           with the function (the trainer's flag table: the spec's trainer: block)

The vendored copy is this installation's source, without the CLI and the local emulators; the
function imports it ahead of anything installed (main.py puts its directory first on sys.path).
Rendering is deterministic: the same spec and flags write the same bytes. main.py holds the
configuration as Python literals (the template's `py` filter; any `{{ }}` without it is an
error), so no prefix or marker can be code there.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any

import yaml

from vertex_trainer import lazy
from vertex_trainer.automation.render_manifest import Files, write_files
from vertex_trainer.automation.storage_events import CONFIG_FILE, TriggerConfig
from vertex_trainer.errors import UserError

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
PACKAGE = Path(__file__).resolve().parent.parent
SKIP_DIRS = {"__pycache__", "cli", "emulators"}  # the function needs neither

# Distributions the function imports at run time (vertex_trainer's event path), pinned to the
# versions installed here: the code was tested with them.
REQUIREMENTS = ("functions-framework", "pydantic", "PyYAML", "Jinja2", "google-auth", "requests")
PIPELINE_REQUIREMENTS = ("kfp", "google-cloud-pipeline-components")  # compiled per event (deploy:)


def requirements(pipeline: bool) -> str:
    lines = [
        "# Installed by Cloud Build when the function is deployed. vertex_trainer/ and trainer/",
        "# are vendored beside main.py (vertex-trainer is not on a public index); these are",
        "# their dependencies, pinned to the versions `vertex-trainer trigger render` ran with.",
    ]
    names = REQUIREMENTS + (PIPELINE_REQUIREMENTS if pipeline else ())
    for name in names:  # (its version is pinned in the function's requirements.txt)
        lines.append(f"{name}=={lazy.version(name)}")  # a missing extra: lazy's one message
    return "\n".join(lines) + "\n"


class PyLiteral(str):
    """Text the template's `py` filter made: a Python literal of the value."""


def py_literal(value: Any) -> PyLiteral:
    """`value` (str, int, bool or None) as a Python literal: `ascii()` of a string (quotes,
    backslashes, line breaks and every non-ASCII character escaped), so the rendered file holds
    data, never code; checked by reading it back with `ast.literal_eval`."""
    if value is not None and not isinstance(value, (str, int, bool)):
        raise TypeError(f"trigger_main.py.j2: {type(value).__name__} has no literal here")
    text = ascii(value) if isinstance(value, str) else repr(value)
    back = ast.literal_eval(text)
    if back != value or type(back) is not type(value):
        raise ValueError(f"trigger_main.py.j2: {text} does not read back as {value!r}")
    return PyLiteral(text)


def _only_literals(value: Any) -> Any:
    """Jinja's `finalize`: every `{{ ... }}` of the template goes through `| py`."""
    if isinstance(value, PyLiteral):
        return value
    raise TypeError(f"trigger_main.py.j2: {value!r} is written without `| py` (a Python literal)")


def main_py(config: TriggerConfig) -> str:
    import jinja2

    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        finalize=_only_literals,
    )
    env.filters["py"] = py_literal
    template = env.from_string((TEMPLATES / "trigger_main.py.j2").read_text())
    return template.render(
        version=config.version,
        bucket=config.bucket,
        prefix=config.prefix,
        marker=config.marker,
        max_runs_per_folder=config.max_runs_per_folder,
        folder_window=config.folder_window,
        what="a Vertex AI PipelineJob (train, register, deploy)"
        if config.pipeline
        else "a Vertex AI CustomJob",
    )


def spec_yaml(data: dict[str, Any], *, source: str) -> str:
    header = (
        f"# Resolved from {source} by `vertex-trainer trigger render`: overrides applied, the\n"
        "# image pinned; templates that use trigger.* are rendered when an event starts a run.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def write(out_dir: Path, *, config: TriggerConfig, spec_text: str, deploy_script: str) -> list[str]:
    """Write the function directory; returns the files written (relative, sorted). Into a new or
    empty directory, or over a previous render only (manifest.py): never over what it did not
    write."""
    files: Files = {
        "main.py": main_py(config).encode(),
        "requirements.txt": requirements(config.pipeline).encode(),
        config.spec_file: spec_text.encode(),
        CONFIG_FILE: config.to_json().encode(),
        "deploy.sh": deploy_script.encode(),
        ".gcloudignore": b"# uploaded with the function: everything but caches and the deploy script\n"
        b"__pycache__/\n*.pyc\ndeploy.sh\n",
    }
    files.update(_tree(PACKAGE, "vertex_trainer"))
    files.update(_tree(_trainer_dir(), "trainer"))
    written = write_files(Path(out_dir), files, executable=("deploy.sh",))
    return sorted(written)


def _trainer_dir() -> Path:
    # Found, not imported: only the spec layer imports the trainer (docs/architecture.md).
    found = importlib.util.find_spec("trainer")
    if found is None or not found.submodule_search_locations:
        raise UserError(
            "the trainer package (trainer_image/trainer) is not installed here",
            hint="pip install -e . in the vertex-trainer checkout",
        )
    return Path(next(iter(found.submodule_search_locations)))


def _tree(source: Path, target: str) -> Files:
    """The vendored copy of `source` as `target/...`: its files but caches, the CLI and emulators."""
    out: Files = {}
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if (
            path.is_dir()
            or path.is_symlink()
            or SKIP_DIRS & set(rel.parts[:-1])
            or (rel.parts[0] in SKIP_DIRS)
            or path.suffix in (".pyc", ".pyo")
        ):
            continue
        out[f"{target}/{rel.as_posix()}"] = path.read_bytes()
    return out
