"""The deployable Cloud Run function directory `trigger render` writes.

    main.py            the CloudEvent function `on_object_finalized` (templates/trigger_main.py.j2)
    requirements.txt   what Cloud Build installs: functions-framework and vertex-trainer's own
                       dependencies, pinned to the versions installed here
    spec.yaml          the resolved spec, image pinned, `{{ trigger.* }}` kept for the event
    trigger.json       bucket, prefix, marker, template variables, image
    deploy.sh          the gcloud commands of `trigger deploy` (service accounts, IAM, deploy)
    vertex_trainer/    vendored: vertex-trainer is not on a public index, so its source travels
    trainer/           with the function (the trainer's flag table: the spec's trainer: block)

The vendored copy is this installation's source, without the CLI and the local emulators; the
function imports it ahead of anything installed (main.py puts its directory first on sys.path).
Rendering is deterministic: the same spec and flags write the same bytes.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

import yaml

from vertex_trainer import lazy
from vertex_trainer.errors import UserError
from vertex_trainer.trigger.events import CONFIG_FILE, TriggerConfig

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


def main_py(config: TriggerConfig) -> str:
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    template = env.from_string((TEMPLATES / "trigger_main.py.j2").read_text())
    return template.render(
        version=config.version,
        bucket=config.bucket,
        prefix=config.prefix,
        marker=config.marker,
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
    """Write the function directory; returns the files written (relative, sorted)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / CONFIG_FILE).is_file():
        raise UserError(
            f"{out_dir} is not empty and holds no rendered function ({CONFIG_FILE})",
            hint="give -o a new or empty directory",
        )
    for vendored in ("vertex_trainer", "trainer"):  # a re-render replaces the vendored copies
        shutil.rmtree(out_dir / vendored, ignore_errors=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "main.py": main_py(config),
        "requirements.txt": requirements(config.pipeline),
        config.spec_file: spec_text,
        CONFIG_FILE: config.to_json(),
        "deploy.sh": deploy_script,
        ".gcloudignore": "# uploaded with the function: everything but caches and the deploy script\n"
        "__pycache__/\n*.pyc\ndeploy.sh\n",
    }
    for name, text in files.items():
        (out_dir / name).write_text(text)
    (out_dir / "deploy.sh").chmod(0o755)
    written = set(files)
    written |= _copy_tree(PACKAGE, out_dir / "vertex_trainer", out_dir)
    written |= _copy_tree(_trainer_dir(), out_dir / "trainer", out_dir)
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


def _copy_tree(source: Path, target: Path, root: Path) -> set[str]:
    written = set()
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if (
            path.is_dir()
            or SKIP_DIRS & set(rel.parts[:-1])
            or (rel.parts[0] in SKIP_DIRS)
            or path.suffix in (".pyc", ".pyo")
        ):
            continue
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        written.add(dest.relative_to(root).as_posix())
    return written
