"""A local study whose folder was emptied is adopted by its key (HB, hunting; as ee6b967 for a run).

`rm -rf runs/study-ci-7/*` (to tune afresh), then `submit --local --idempotency-key ci-7`: a single
run's retry runs again into its emptied folder (test_hostile_runs_emptied.py), but a study's
said 'already SUCCEEDED here: adopted, no trial ran again', exit 0, its best trial named with a
model folder that no longer exists and no metrics. Now a study's emptied folder runs again too.
"""

from __future__ import annotations

import yaml

from tests.hostile.test_hostile_careless_retry import TRIAL
from tests.shared import retry_after_emptying


def test_a_retry_after_the_studys_folder_was_emptied_runs_its_trials_again(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "task.py").write_text(TRIAL)
    tune = {"metric": "score", "goal": "maximize", "max_trials": 2, "parallel_trials": 1, "algorithm": "grid"}
    tune["parameters"] = {"lr": {"values": [0.1, 0.2]}}
    data = {"name": "study", "hardware": "cpu", "image": {"code": str(code), "script": "task.py"}}
    spec = tmp_path / "tune.yaml"
    spec.write_text(yaml.safe_dump({**data, "output_dir": str(tmp_path / "runs"), "tune": tune}))
    folder = tmp_path / "runs" / "study-ci-7"
    _, done, said = retry_after_emptying(tmp_path, spec, folder)
    assert done["adopted"] is False and "already SUCCEEDED" not in said
    assert done["metrics"] == {"lr": 0.2}
    assert (folder / "2" / "model" / "saved_model.pb").is_file()
