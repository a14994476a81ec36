"""`tensorboard: auto` in the sandbox (`dev sandbox` in this process): two submits of a script job
(one `python -c` replica, no training) make one TensorBoard instance, each job runs with its
name and succeeds, and the job's page is linked."""

from __future__ import annotations

import dataclasses
import os

import pytest

from tests.shared import FAST_RETRY, write_spec
from vertex_trainer import api
from vertex_trainer.sandbox import Sandbox
from vertex_trainer.settings import PollPolicy, Settings

pytestmark = pytest.mark.wire

PROJECT, REGION, BUCKET = "sandbox", "us-central1", "tb-bucket"
SPEC = f"""\
name: tb-sandbox
project: {PROJECT}
region: {REGION}
hardware: cpu
image: {{uri: us-docker.pkg.dev/{PROJECT}/r/t:v1}}
command: [python, -c, "import os; print('logs', os.environ['AIP_TENSORBOARD_LOG_DIR'])"]
output_dir: gs://{BUCKET}/runs
service_account: trainer@{PROJECT}.iam.gserviceaccount.com
tensorboard: auto
"""


def test_two_submits_in_the_sandbox_share_one_instance(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERTEX_TRAINER_", "AIP_"))}
    with Sandbox(env, buckets=[BUCKET], project=PROJECT, region=REGION, echo=lambda _: None) as box:
        settings = dataclasses.replace(
            Settings.from_environ(box.env()),
            retry=dataclasses.replace(FAST_RETRY, read_timeout=30),
            poll=PollPolicy(initial=0.05, maximum=0.2),
            project=PROJECT,
            region=REGION,
        )
        spec = api.load_spec(write_spec(tmp_path, SPEC), settings=settings)
        said: list[str] = []
        jobs = [
            api.submit(spec, settings=settings, idempotency_key=key, wait=True, log=said.append)
            for key in ("sb-1", "sb-2")
        ]
        (board,) = box.vertex.tensorboards.tensorboards
        assert [j.state for j in jobs] == ["JOB_STATE_SUCCEEDED"] * 2
        assert [j.tensorboard for j in jobs] == [board, board]
        assert [line.split(" ", 1)[1] for line in said if line.startswith("tensorboard:")] == [
            f"created {board}",
            f"using {board}",
        ]
        assert jobs[0].tensorboard_url and jobs[0].tensorboard_url.endswith(f"+experiments+{jobs[0].id}")
        lines = [e.message for e in api.logs(jobs[1], settings=settings)]
        assert f"logs gs://{BUCKET}/runs/tb-sandbox-sb-2/logs/" in lines
