"""`validate` pays only for what it checks (issue 26 item 4, benchmarks/RESULTS-cli.md).

Beyond the heavy libraries (test_foundation_imports.py), validate loads no library it does not
use: no templating without a template in the spec, no HTTP or auth stack (nothing is sent without
--check-quota), no rich (it prints plain lines), no numerics. Each probe is a fresh interpreter
running the CLI's own entry point, so the modules counted are the ones a user's `vertex-trainer
validate` loads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

# Never needed by validate: nothing is sent, nothing is drawn with rich, no arrays, no images.
UNNEEDED = (
    "rich",
    "requests",
    "urllib3",
    "google.auth",
    "google.protobuf",
    "grpc",
    "httpx",
    "http.client",
    "numpy",
    "pandas",
    "PIL",
    "docker",
    "kfp",
    "apache_beam",
    "functions_framework",
    "tensorflow",
    "keras",
    "tf_keras",
    "google.cloud.aiplatform",
    "google.cloud.storage",
)
TEMPLATING = ("jinja2", "markupsafe")  # only for a spec with {{ }} or {% %} in it

PROBE = """
import json, sys
from vertex_trainer.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _validate(*args: str, cwd: Path = ROOT) -> tuple[int | None, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "validate", *args], capture_output=True, text=True, cwd=cwd
    )
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    return result["code"], set(result["modules"])


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The names of `names` that are loaded (a package, or any of its submodules)."""
    return [n for n in names if n in modules or any(m.startswith(n + ".") for m in modules)]


def test_validate_of_a_plain_spec_loads_no_templating_http_rich_or_numerics(tmp_path):
    # A spec that runs an image built elsewhere (image.uri): nothing to render or hash.
    spec = yaml.safe_load((ROOT / "job_specs" / "resnet50-a100x8.yaml").read_text())
    spec["image"] = {"uri": "us-docker.pkg.dev/my-project/training/trainer:v1"}
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, modules = _validate(str(path))
    assert code in (0, None)
    assert _loaded(modules, UNNEEDED + TEMPLATING) == []
    # It did load what it checks with: the spec models and the prices.
    assert {"vertex_trainer.spec.model", "vertex_trainer.pricing"} <= modules


def test_validate_of_a_spec_that_builds_renders_its_dockerfile_for_the_tag_and_nothing_else():
    # validate shows the exact tag submit runs: the content hash of the build context, whose
    # Dockerfile is rendered (jinja2); still no HTTP, rich or numerics.
    code, modules = _validate(str(ROOT / "job_specs" / "resnet50-a100x8.yaml"))
    assert code in (0, None)
    assert _loaded(modules, UNNEEDED) == []
    assert "jinja2" in modules
    # The bundled trainer's args were checked by its own flag parser.
    assert {"vertex_trainer.spec.model", "trainer.config", "vertex_trainer.pricing"} <= modules


def test_validate_local_of_a_templated_spec_loads_jinja2_and_still_nothing_it_does_not_use(tmp_path):
    # quickstart-local.yaml's name is a template ({{ env.USER | default('local') }}); --local
    # needs its data to exist, so two empty shards stand in for it.
    data = tmp_path / "data" / "quickstart"
    data.mkdir(parents=True)
    (data / "train-00000-of-00001").touch()
    (data / "validation-00000-of-00001").touch()
    code, modules = _validate(str(ROOT / "job_specs" / "quickstart-local.yaml"), "--local", cwd=tmp_path)
    assert code in (0, None)
    assert _loaded(modules, TEMPLATING) == ["jinja2", "markupsafe"]  # the probe sees what is loaded
    assert _loaded(modules, UNNEEDED) == []
