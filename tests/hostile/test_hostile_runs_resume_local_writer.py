"""A careless user resumes on Vertex AI a run a local run is still writing (H1, item 4): one
terminal runs `submit --local` with `output_dir: gs://...`, another `submit SPEC --resume RUN`.

--resume looked only for Vertex AI jobs in the folder; the local run was invisible, so a job was
created into the folder it was still writing: two trainers over each other's checkpoints and
model. A local run of a gs:// folder holds a flock on this machine (local/layout.gs_run_lock); now
--resume probes it and refuses, exit 2 before anything is built or created, while it is held.
"""

from __future__ import annotations

import fcntl
import json
import os

import pytest

from tests.hostile.resume_support import BASE, JOB, buckets, cli
from tests.shared import spec_yaml, write_spec
from vertex_trainer.local import layout


@pytest.fixture
def run(fake, tmp_path):
    with buckets() as url:
        yield cli(fake, tmp_path, url)


def test_resuming_a_folder_a_local_run_writes_is_refused(fake, run, tmp_path):
    spec = write_spec(tmp_path, spec_yaml(None, **JOB))
    lock = layout.gs_run_lock(f"{BASE}/digits-ci-1")
    assert lock is not None
    os.makedirs(lock, exist_ok=True)
    fd = os.open(os.path.join(lock, layout.LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as the local run's runner holds it
        refused = run("submit", spec, "--resume", "digits-ci-1")
        assert refused.returncode == 2, refused.stderr
        assert f"--resume: {BASE}/digits-ci-1 is still being written by a local run" in refused.stderr
        assert not fake.jobs  # nothing created
    finally:
        os.close(fd)
    resumed = run("submit", spec, "--resume", "digits-ci-1", "--output", "json")  # it ended
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["output_dir"] == f"{BASE}/digits-ci-1" and len(fake.jobs) == 1
