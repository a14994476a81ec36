"""A careless user packages a script job whose spec names no place for the package (found by H3):
`image: {code: code, script: task.py}`, enough for `submit --local`, then `package SPEC --dry-run`
to see what a cloud submit would build.

It printed `image: None:<hash>`, a tag of no repository, with exit 0 (validate and submit refuse
the spec, `package` did not look). Now `package` is exit 2 naming image.repository and
image.python_package, as submit is; `submit --local` of the same spec still runs its folder."""

from __future__ import annotations

from tests.cli_support import edge_env
from tests.shared import cli_runner

SPEC = """\
name: pk
hardware: cpu
project: my-project-1
region: us-central1
output_dir: gs://my-bucket/runs
image: {code: code, script: task.py}
"""


def test_package_of_a_script_job_with_nowhere_to_go_is_refused(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "task.py").write_text("print('trained')\n")
    (tmp_path / "spec.yaml").write_text(SPEC)
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    for args in (["--dry-run"], []):
        refused = run("package", "spec.yaml", *args)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "image: has image.code but no way to package it" in refused.stderr
        assert "image.repository" in refused.stderr and "image.python_package: true" in refused.stderr
        assert "None:" not in refused.stdout + refused.stderr
    local = run("submit", "spec.yaml", "--local", "--dry-run")
    assert local.returncode == 0, local.stderr
