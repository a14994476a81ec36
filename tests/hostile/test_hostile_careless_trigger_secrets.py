"""A careless user renders a trigger from a spec holding a secret (issue 42, H2 round 2): an
`env: {API_KEY: ...}`, a `--db-password=...` flag, or `--var db_token=...` on the command line.

The dry runs, `validate`, the saved records and the report show such values as *** (round 1),
but the function `trigger render` writes holds them in clear (its spec.yaml and trigger.json:
it submits the jobs), and `trigger deploy` uploads that source to Google Cloud, where whoever
may view the function (a project Viewer) reads it, without a word. The values must stay (the
function needs them), so the render now says which values that look secret go there, naming
them, never showing them, and where real secrets belong.
"""

from __future__ import annotations

import yaml

from tests.cli_support import edge_env
from tests.shared import T4_JOB, cli_runner

SECRET = "sekrit-0123456789"


def _render(tmp_path, spec: dict, *extra: str):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    return run("trigger", "render", path, "--bucket", "test-bucket", "-o", tmp_path / "fn", *extra)


def test_render_names_the_secret_values_its_source_holds_in_clear(tmp_path):
    spec = {
        **T4_JOB,
        "env": {"API_KEY": SECRET, "LOG_LEVEL": "info"},
        "trainer": {**T4_JOB["trainer"], "extra_args": [f"--db-password={SECRET}"]},
    }
    done = _render(tmp_path, spec, "--var", f"db_token={SECRET}", "--var", "team=vision")
    assert done.returncode == 0, done.stderr
    (line,) = [s for s in done.stderr.splitlines() if "look secret" in s]
    assert line.startswith(
        "warning: values that look secret (API_KEY, --db-password, --var db_token) go in clear"
    )
    assert "into the function's source (spec.yaml, trigger.json)" in line and "Secret Manager" in line
    assert SECRET not in done.stdout + done.stderr  # named, never shown
    assert "LOG_LEVEL" not in line and "team" not in line
    assert (
        SECRET in (tmp_path / "fn" / "spec.yaml").read_text()
    )  # what the line says: the function needs them


def test_a_spec_without_secrets_gets_no_such_line(tmp_path):
    done = _render(tmp_path, {**T4_JOB, "env": {"LOG_LEVEL": "info"}}, "--var", "team=vision")
    assert done.returncode == 0, done.stderr
    assert "look secret" not in done.stderr
