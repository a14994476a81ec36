"""A careless user resumes a run whose job is still running (issue 42, H2 round 2): the job looks
stuck (queued for capacity, slow to log), so `submit SPEC --resume digits-ci-1`.

The second job was created into the same folder as the first, which went on: two trainers
writing checkpoints and the model over each other in `<output_dir>/digits-ci-1/`, both billed,
and the run's results a mix of the two. Now --resume looks up the run's own job (its key is the
folder's name after `<name>-`) and refuses, exit 2 before anything is built or created, while
that job has not ended, naming it and how to wait for it or cancel it; once it ended, the
resume goes ahead as before.
"""

from __future__ import annotations

import json

import pytest

from tests.hostile.resume_support import BASE, JOB, buckets, cli
from tests.shared import spec_yaml, write_spec


@pytest.fixture
def run(fake, tmp_path):
    with buckets() as url:
        yield cli(fake, tmp_path, url)


@pytest.mark.parametrize("state", ["JOB_STATE_QUEUED", "JOB_STATE_RUNNING"])
def test_resuming_a_run_whose_job_has_not_ended_is_refused(fake, run, tmp_path, state):
    spec = write_spec(tmp_path, spec_yaml(None, **JOB))
    first = run("submit", spec, "--idempotency-key", "ci-1", "--no-wait", "--output", "json")
    assert first.returncode == 0, first.stderr
    name = json.loads(first.stdout)["name"]
    fake.set_state(name, state)

    again = run("submit", spec, "--resume", "digits-ci-1")
    assert again.returncode == 2, again.stderr
    assert (
        f"--resume: {BASE}/digits-ci-1 is still being written by {name} ({state.removeprefix('JOB_STATE_')})"
        in (again.stderr)
    )
    assert (
        f"vertex-trainer status {name} --wait" in again.stderr
        and f"vertex-trainer cancel {name}" in again.stderr
    )
    assert list(fake.jobs) == [name]  # nothing created

    fake.set_state(name, "JOB_STATE_FAILED")  # it ended: the resume goes ahead, into its folder
    resumed = run("submit", spec, "--resume", "digits-ci-1", "--output", "json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["output_dir"] == f"{BASE}/digits-ci-1" and len(fake.jobs) == 2
