"""A local retry with the same key after the spec changed adopts the old run without a word (HB,
hunting: a record that says something false).

A cloud retry whose key's job was made from another spec says so ("warning: adopting ..., created
with the same idempotency key from a different spec"). `submit --local --idempotency-key ci-7`
after editing the spec (more epochs, another variable) said only 'this submission already SUCCEEDED
here ... adopted, nothing ran again', exit 0: the user took the old run's model and metrics for
the changed spec's. Now a local retry names the two spec hashes the same way, for a local and a
gs:// folder (whose result.json now keeps the spec's hash).
"""

from __future__ import annotations

import json

import yaml

from tests.cli_support import edge_env
from tests.hostile.resume_support import GS_TASK
from tests.shared import JOB_ID_TASK as TASK
from tests.shared import cli_runner, script_job


def _retry_after_a_change(run, spec) -> tuple[dict, str]:
    first = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr
    same = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert same.returncode == 0 and json.loads(same.stdout)["adopted"] is True
    assert "different spec" not in same.stderr  # the same spec: nothing to say
    changed = yaml.safe_load(spec.read_text())
    changed["env"] = {"EPOCHS": "10"}
    spec.write_text(yaml.safe_dump(changed))
    again = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert again.returncode == 0, again.stderr
    return json.loads(again.stdout), again.stderr


def test_a_local_retry_of_a_changed_spec_says_it_adopts_the_old_run(tmp_path):
    spec = script_job(tmp_path, TASK, tmp_path / "runs")
    done, said = _retry_after_a_change(cli_runner(edge_env(tmp_path), cwd=tmp_path), spec)
    assert done["adopted"] is True
    assert "warning: adopting digits-ci-7, made with the same idempotency key from a different spec" in said
    assert "use a new --idempotency-key" in said


def test_a_gs_retry_of_a_changed_spec_says_so_too(tmp_path, emulator, bucket):
    spec = script_job(tmp_path, GS_TASK, f"gs://{bucket}/runs")
    done, said = _retry_after_a_change(cli_runner(edge_env(tmp_path, **emulator.env()), cwd=tmp_path), spec)
    assert done["adopted"] is True
    assert "warning: adopting digits-ci-7, made with the same idempotency key from a different spec" in said
