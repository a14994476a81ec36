"""A careless user resumes a run submitted without --idempotency-key while its job still runs
(H1, item 4): `submit SPEC --resume digits-20261204-131500-abc123`, the folder name the submit
printed.

--resume looks for the run's own job by its key, read from the folder's name after `<name>-`.
A submission without a key gets one the tool makes, `vt-<UTC time>-<hex>`, and its folder drops
the `vt-` (contract.run_name), so the look-up asked for a key no job carries, found nothing, and
created a second job into the folder the first one was still writing: two trainers over each
other's checkpoints and model. Now the look-up asks for the tool's key too and refuses, exit 2,
before anything is built or created (test_hostile_careless_resume_running.py does the same for a
run with a key of the user's).
"""

from __future__ import annotations

import json

import pytest

from tests.hostile.resume_support import JOB, buckets, cli, put
from tests.shared import spec_yaml, write_spec


@pytest.fixture
def storage():
    with buckets(wrote=False) as url:
        yield url


def test_resuming_a_run_without_a_key_while_its_job_runs_is_refused(fake, storage, tmp_path):
    run = cli(fake, tmp_path, storage)
    spec = write_spec(tmp_path, spec_yaml(None, **JOB))
    first = run("submit", spec, "--no-wait", "--output", "json")  # no key: the tool makes one
    assert first.returncode == 0, first.stderr
    made = json.loads(first.stdout)
    name, folder = made["name"], made["output_dir"]
    folder_name = folder.rsplit("/", 1)[-1]
    assert folder_name.startswith("digits-") and not folder_name.startswith("digits-vt-")
    put(storage, "out-bucket", f"{folder.removeprefix('gs://out-bucket/')}/checkpoints/ckpt-1.index")
    fake.set_state(name, "JOB_STATE_RUNNING")

    again = run("submit", spec, "--resume", folder_name)
    assert again.returncode == 2, again.stderr
    assert f"--resume: {folder} is still being written by {name} (RUNNING)" in again.stderr
    assert list(fake.jobs) == [name]  # nothing created

    fake.set_state(name, "JOB_STATE_SUCCEEDED")  # it ended: the resume goes ahead, into its folder
    resumed = run("submit", spec, "--resume", folder_name, "--output", "json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["output_dir"] == folder and len(fake.jobs) == 2
