"""Two specs with one output_dir whose names and keys make one folder name (HB, hunting).

A run's folder is `<name>-<key>`: the spec `digits-v2` with the key `ci-7` and the spec `digits`
with the key `v2-ci-7` both run in `<output_dir>/digits-v2-ci-7/`. With one output_dir for both
(a shared `runs/`), the second, a different job, found the first one's records under its run's
name and adopted them: 'already SUCCEEDED here, nothing ran again', exit 0, the other spec's
model and metrics as its own. Now a record of another job in the folder is exit 2, neither
adopted nor written over.
"""

from __future__ import annotations

import json

import yaml

from tests.cli_support import edge_env
from tests.shared import JOB_ID_TASK as TASK
from tests.shared import cli_runner, script_job


def test_a_folder_of_another_specs_run_is_neither_adopted_nor_written_over(tmp_path):
    spec = script_job(tmp_path, TASK, tmp_path / "runs")
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({**yaml.safe_load(spec.read_text()), "name": "digits-v2"}))
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    first = run("submit", other, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "runs" / "digits-v2-ci-7"
    assert json.loads(first.stdout)["output_dir"] == str(folder)

    second = run("submit", spec, "--local", "--idempotency-key", "v2-ci-7", "--output", "json")
    assert second.returncode == 2, second.stdout + second.stderr
    assert "holds a run of the job 'digits-v2', not of 'digits'" in second.stderr
    assert "already SUCCEEDED" not in second.stderr and "Running digits locally" not in second.stderr
    model = (folder / "model" / "saved_model.pb").read_text()
    assert model == json.loads(first.stdout)["metrics"]["job"]  # the first spec's, untouched
