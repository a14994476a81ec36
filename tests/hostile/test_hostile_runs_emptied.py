"""A careless user empties a local run's folder and submits again with its key (H1, item 4):
`rm -rf runs/digits-ci-7/*` (to train it afresh), then `submit --local --idempotency-key ci-7`.

The retry adopted the run from its records, "already SUCCEEDED here, nothing ran again", with
no model and no metrics left in the folder: exit 0 and nothing to deploy. A gs:// folder that
holds nothing is not adopted (test_hostile_careless_retry_gs.py); now an empty local folder is
not either: the key runs again into it.
"""

from __future__ import annotations

from tests.shared import JOB_ID_TASK, retry_after_emptying, script_job


def test_a_retry_after_the_runs_folder_was_emptied_runs_again(tmp_path):
    spec = script_job(tmp_path, JOB_ID_TASK, tmp_path / "runs")
    folder = tmp_path / "runs" / "digits-ci-7"
    first, done, said = retry_after_emptying(tmp_path, spec, folder)
    assert done["adopted"] is False and "already SUCCEEDED" not in said
    assert done["metrics"]["job"] != first["metrics"]["job"]
    assert (folder / "model" / "saved_model.pb").read_text() == done["metrics"]["job"]
