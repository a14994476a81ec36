"""A careless user continues on this machine a run whose Vertex AI job still runs (H1, item 4):
the cloud job looks stuck, so `submit SPEC --local --resume digits-ci-1` (its gs:// folder).

--resume's look for jobs still writing the folder was made only for a job created on Vertex AI:
a local resume ran into the folder while the job went on, two trainers over each other's
checkpoints and model. Now a local resume of a gs:// run, when the spec names a project and a
region, asks Vertex AI too and refuses, exit 2 before anything runs here, naming the job.
"""

from __future__ import annotations

import json

from tests.hostile.resume_support import BASE, JOB, buckets, cli, put
from tests.shared import spec_yaml, write_spec


def test_a_local_resume_of_a_run_whose_job_still_runs_is_refused(fake, tmp_path):
    with buckets(wrote=False) as url:
        run = cli(fake, tmp_path, url)
        spec = write_spec(tmp_path, spec_yaml(None, **JOB))
        first = run("submit", spec, "--idempotency-key", "ci-1", "--no-wait", "--output", "json")
        assert first.returncode == 0, first.stderr
        name = json.loads(first.stdout)["name"]
        put(url, "out-bucket", "runs/digits/digits-ci-1/checkpoints/ckpt-1.index")  # what it wrote
        fake.set_state(name, "JOB_STATE_RUNNING")

        here = run("submit", spec, "--local", "--resume", "digits-ci-1")
        assert here.returncode == 2, here.stderr
        assert f"--resume: {BASE}/digits-ci-1 is still being written by {name} (RUNNING)" in here.stderr
        assert f"vertex-trainer cancel {name}" in here.stderr and "Running digits locally" not in here.stderr
