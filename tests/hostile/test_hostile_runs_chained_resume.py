"""A careless user resumes a run twice: the first resume's job looks stuck, so `submit SPEC
--resume digits-ci-1` again.

--resume looked only for the run's own job (the key in the folder's name), which had ended: the
second resume's job was created into the same folder while the first resume's still ran, two
trainers writing checkpoints and the model over each other. Now a resumed job carries a label
naming its folder (vertex-trainer-resumes, a digest of the folder), and --resume refuses, exit 2
before anything is built or created, while any job resumed into that folder has not ended.
"""

from __future__ import annotations

import json

import pytest

from tests.hostile.resume_support import BASE, JOB, buckets, cli
from tests.shared import spec_yaml, write_spec
from vertex_trainer.contract import RESUMES_LABEL, folder_digest


@pytest.fixture
def run(fake, tmp_path):
    with buckets() as url:
        yield cli(fake, tmp_path, url)


@pytest.mark.parametrize("state", ["JOB_STATE_PENDING", "JOB_STATE_RUNNING"])
def test_a_second_resume_while_the_first_one_runs_is_refused(fake, run, tmp_path, state):
    spec = write_spec(tmp_path, spec_yaml(None, **JOB))
    first = run("submit", spec, "--idempotency-key", "ci-1", "--no-wait", "--output", "json")
    assert first.returncode == 0, first.stderr
    original = json.loads(first.stdout)["name"]
    fake.set_state(original, "JOB_STATE_FAILED")  # the run's own job ended: the resume may go ahead

    resumed = run("submit", spec, "--resume", "digits-ci-1", "--no-wait", "--output", "json")
    assert resumed.returncode == 0, resumed.stderr
    name = json.loads(resumed.stdout)["name"]
    assert fake.jobs[name]["labels"][RESUMES_LABEL] == folder_digest(f"{BASE}/digits-ci-1")
    fake.set_state(name, state)

    again = run("submit", spec, "--resume", "digits-ci-1")
    assert again.returncode == 2, again.stderr
    assert (
        f"--resume: {BASE}/digits-ci-1 is still being written by {name} ({state.removeprefix('JOB_STATE_')})"
        in again.stderr
    )
    assert sorted(fake.jobs) == sorted([original, name])  # nothing created

    fake.set_state(name, "JOB_STATE_SUCCEEDED")  # it ended: a further resume goes ahead
    later = run("submit", spec, "--resume", "digits-ci-1", "--output", "json")
    assert later.returncode == 0, later.stderr
    assert json.loads(later.stdout)["output_dir"] == f"{BASE}/digits-ci-1" and len(fake.jobs) == 3


def test_a_new_run_carries_no_resume_label_and_users_may_not_set_it(fake, run, tmp_path):
    spec = write_spec(tmp_path, spec_yaml(None, **JOB))
    first = run("submit", spec, "--idempotency-key", "ci-2", "--no-wait", "--output", "json")
    assert first.returncode == 0, first.stderr
    assert RESUMES_LABEL not in fake.jobs[json.loads(first.stdout)["name"]]["labels"]

    spoofed = write_spec(
        tmp_path, spec_yaml(None, **{**JOB, "labels": {RESUMES_LABEL: "x"}}), name="spoof.yaml"
    )
    refused = run("submit", spoofed, "--dry-run")
    assert (
        refused.returncode == 2
        and f"labels.{RESUMES_LABEL}" in refused.stderr
        and "reserved" in refused.stderr
    )


def test_a_resume_with_every_label_slot_taken_is_refused_before_anything_is_sent(fake, run, tmp_path):
    labels = {f"l{i}": "x" for i in range(62)}  # as many as a new job may carry
    spec = write_spec(tmp_path, spec_yaml(None, **{**JOB, "labels": labels}))
    refused = run("submit", spec, "--resume", "digits-ci-1")
    assert refused.returncode == 2, refused.stderr
    assert "--resume: the spec has 62 labels; a resumed job may carry at most 61" in refused.stderr
    assert fake.jobs == {}
