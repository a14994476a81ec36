"""The plan `validate` and `submit --dry-run` show names your code's directory (image.code) for a
model factory job as for a script job: validate's `code` line, the dry run's image line."""

from __future__ import annotations

import pytest
import yaml

from tests.cli_support import edge_env
from tests.owncode.conftest import factory_data, script_data
from tests.shared import cli_runner


@pytest.mark.parametrize("kind", ["factory", "script"])
def test_validate_and_the_dry_run_name_image_code(tmp_path, code_dir, kind):
    if kind == "factory":
        code, data = tmp_path / "factory-code", factory_data(tmp_path / "factory-code")
    else:
        code, data = code_dir, script_data(code_dir)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)  # nothing is sent

    shown = run("validate", path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    image = next(line for line in lines if line.startswith("  image     "))
    assert image.split()[1].startswith(data["image"]["repository"] + ":")  # the tag submit runs
    assert sum(line.startswith(f"  code      {code}") for line in lines) == 1

    planned = run("submit", path, "--dry-run")
    assert planned.returncode == 0, planned.stderr
    (image,) = [line for line in planned.stdout.splitlines() if line.startswith("#    image: ")]
    assert image.endswith(f" (with image.code {code})")
