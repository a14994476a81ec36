"""Two idempotency keys, one with the tool's `vt-` prefix, named one run folder (HB, item 1).

A run's folder is `<name>-<key>`, less the `vt-` of a key the tool made (contract.run_name). Every
`vt-` was dropped, so a key of the user's such as `vt-ci-7` (a CI's `vt-` for vertex-trainer)
named `digits-ci-7`, the folder of the key `ci-7`: the second submission, a different run, adopted
the first one's model locally ("already SUCCEEDED here, nothing ran again"), or on Vertex AI wrote
a second job over it. Now only a key of the tool's own form (`vt-<yyyymmdd>-<hhmmss>-<6 hex>`)
loses its prefix: every other key names its own folder, and runs made before keep theirs.
"""

from __future__ import annotations

import json

import pytest

from tests.cli_support import edge_env
from tests.shared import JOB_ID_TASK, cli_runner, script_job
from vertex_trainer.contract import run_name
from vertex_trainer.vertex.names import keys_of_run, new_key


def test_a_vt_key_of_the_users_is_a_run_of_its_own_not_the_keys_without_it(tmp_path):
    spec = script_job(tmp_path, JOB_ID_TASK, tmp_path / "runs")
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    first = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr

    other = run("submit", spec, "--local", "--idempotency-key", "vt-ci-7", "--output", "json")
    assert other.returncode == 0, other.stderr
    done, made = json.loads(other.stdout), json.loads(first.stdout)
    assert done["adopted"] is False and "already SUCCEEDED" not in other.stderr
    assert done["output_dir"] == str(tmp_path / "runs" / "digits-vt-ci-7") != made["output_dir"]
    assert done["metrics"]["job"] != made["metrics"]["job"]
    first_model = tmp_path / "runs" / "digits-ci-7" / "model" / "saved_model.pb"
    assert first_model.read_text() == made["metrics"]["job"]  # the first run's model is its own

    again = run("submit", spec, "--local", "--idempotency-key", "vt-ci-7", "--output", "json")
    assert again.returncode == 0 and json.loads(again.stdout)["adopted"] is True  # the same key: its run


@pytest.mark.parametrize("key", ["ci-7", "vt-ci-7", "vt-20261204-13150-abc123", "vt-", "vt-vt-1"])
def test_different_keys_name_different_folders_and_the_tools_keep_theirs(key):
    made = new_key()
    assert run_name("digits", made) == f"digits-{made.removeprefix('vt-')}"  # as every run made so far
    assert run_name("digits", key) == f"digits-{key}" != run_name("digits", made)
    assert key in keys_of_run(run_name("digits", key).removeprefix("digits-"))
    # a folder a user's vt- key named before (its key less vt-): --resume still asks for its job
    assert f"vt-{key}" in keys_of_run(key)
