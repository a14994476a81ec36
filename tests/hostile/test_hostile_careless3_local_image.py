"""A script job run here names an image 'None:<hash>' (HB, hunting: a record that says something false).

A script job without image.repository runs only here (`submit --local`; package, validate and a
cloud submit refuse it). Its run's JSON said `"image": "None:c6c8...d4a4"`, and so did the
CustomJob kept in its records (`containerSpec.imageUri`): a tag of a repository named None, which
no registry holds and nothing built. It is now `local/<name>:<hash>`, a local name as the bundled
trainer's `local/vertex-trainer-bundled-trainer:local` is.
"""

from __future__ import annotations

import json
import re

from tests.cli_support import edge_env
from tests.shared import cli_runner, script_job

TASK = "print('trained')\n"


def test_a_script_job_without_a_repository_names_a_local_image(tmp_path):
    spec = script_job(tmp_path, TASK, tmp_path / "runs")
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    planned = run("submit", spec, "--local", "--dry-run", "--output", "json")
    assert planned.returncode == 0, planned.stderr
    done = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert done.returncode == 0, done.stderr
    image = json.loads(done.stdout)["image"]
    assert re.fullmatch(r"local/digits:[0-9a-f]{24}", image), image
    assert json.loads(planned.stdout)["image"] == image
    kept = json.loads((tmp_path / "runs" / ".vertex-trainer" / "digits-ci-7" / "custom_job.json").read_text())
    (pool,) = kept["jobSpec"]["workerPoolSpecs"]
    assert pool["containerSpec"]["imageUri"] == image
