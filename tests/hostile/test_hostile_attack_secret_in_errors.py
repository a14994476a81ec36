"""A dry run shows env values and flags named like secrets as `***` (redact.py), but a spec with a
mistake in such a value was refused (exit 2) with the value quoted: a broken template in
`env.API_KEY`, a list where `env.DB_PASSWORD` wants text, `--api-key={{ x }` in args. The message
goes to a terminal and from there to CI logs: the value is masked there as a dry run masks it;
the field is still named, and values not named like secrets are still quoted."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import cli_runner
from vertex_trainer.spec.messages import shown_at


def _spec(tmp_path: Path, **changes: object) -> Path:
    data = {
        "name": "leak",
        "hardware": "cpu",
        "project": "my-project-1",
        "region": "us-central1",
        "output_dir": "gs://out-bucket/runs",
        "image": {"uri": "us-docker.pkg.dev/my-project-1/t/d:v1"},
        **changes,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("changes", "field", "shown"),
    [
        ({"env": {"API_KEY": "s3cr3t-1 {{ oops"}}, "env.API_KEY: template ***:", None),
        ({"env": {"MY_TOKEN": "s3cr3t-1{{ 'x' * 100000000 }}"}}, "env.MY_TOKEN: template ***:", None),
        (
            {"env": {"DB_PASSWORD": ["s3cr3t-1"], "KEYBOARD": ["qwerty"]}},
            "env.DB_PASSWORD: Input should be a valid string (got ***)",
            "env.KEYBOARD: Input should be a valid string (got ['qwerty'])",
        ),
        ({"args": ["--api-key={{ s3cr3t_1 }"]}, "args[0]: template '--api-key=***':", None),
    ],
)
@pytest.mark.parametrize("command", [("validate",), ("submit", "--dry-run")])
def test_a_refused_secret_value_is_not_quoted(tmp_path, changes, field, shown, command):
    spec = _spec(tmp_path, **changes)
    result = cli_runner(edge_env(tmp_path), cwd=tmp_path)(command[0], spec, *command[1:])
    assert result.returncode == 2, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert "s3cr3t" not in out, out
    assert field in out and (shown is None or shown in out), out


def test_only_secret_named_env_values_and_secret_flags_are_masked():
    assert shown_at("env.WANDB_API_KEY", "abc") == "***"
    assert shown_at("pools[0].env.HF_TOKEN", ["x"]) == "***"
    assert shown_at("env.KEYBOARD", "qwerty") == "'qwerty'"
    assert shown_at("idempotency_key", "run-7") == "'run-7'"  # a field, not an env variable
    assert shown_at("args[1]", "--db-password=hunter2") == "'--db-password=***'"
    assert shown_at("args[1]", "--epochs=3") == "'--epochs=3'"
