"""Storage events in the sandbox (`dev sandbox --function DIR`): every object finalized in the
function's bucket is delivered as an Eventarc CloudEvent (binary mode) to a function served by the
real functions-framework; a non-2xx answer is delivered again with backoff; and the seed's rule
holds with the real rendered function: shards start nothing, the marker starts exactly one run
that succeeds (three deliveries each), a new generation of the marker one more.

The seed's flow itself, README.md's and docs/sandbox.md's block (`<!-- docs-test: checked-by
tests/sandbox/test_sandbox_events.py -->`: `trigger render` the digits-seed spec, then `dev sandbox
--function` running examples/sandbox/seed-demo.sh), runs here as the docs harness would: its one
marker starts one pipeline run that trains, registers and deploys, and the endpoint answers. That
is the one run the function starts that trains; the exactly-once test below holds its jobs queued
(the fake Vertex AI's script: no replica starts) and cancels them, so that the digits are not
trained two more times to count runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests.cli_support import invoke
from tests.docs import harness
from tests.process_support import processes_with_env
from vertex_trainer.automation.storage_events import TriggerConfig
from vertex_trainer.gcp import storage
from vertex_trainer.sandbox import Sandbox
from vertex_trainer.sandbox.events import FINALIZED, FunctionHost
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import JobsClient

from .conftest import BUCKET, PROJECT, REGION, ROOT

HERE = "tests/sandbox/test_sandbox_events.py"
SEED_DEMO = "bash examples/sandbox/seed-demo.sh"  # what picks the pages' block

# A function that fails its first two calls (Eventarc must deliver again) and records each event.
FLAKY = textwrap.dedent("""\
    import json, pathlib
    import functions_framework

    HERE = pathlib.Path(__file__).resolve().parent

    @functions_framework.cloud_event
    def on_object_finalized(event):
        with open(HERE / "events.jsonl", "a") as f:
            f.write(json.dumps({"id": event["id"], "type": event["type"], "source": event["source"],
                                "subject": event["subject"], "data": event.data}) + "\\n")
        if len((HERE / "events.jsonl").read_text().splitlines()) <= 2:
            raise RuntimeError("transient: try again")
    """)


def _seed_demo() -> harness.Block:
    """The pages' block (README.md and docs/sandbox.md show it word for word: it runs here once)."""
    found = [b for b in harness.blocks() if b.checked_by == HERE and SEED_DEMO in b.body]
    assert [b.page for b in found] == ["README.md", "docs/sandbox.md"], [b.id for b in found]
    assert found[0].body == found[1].body
    return found[0]


def test_this_file_runs_every_block_of_the_docs_that_names_it():
    named = {b.id for b in harness.blocks() if b.checked_by == HERE}
    assert named == {b.id for b in harness.blocks() if b.body == _seed_demo().body}


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_seed_demo_trains_registers_deploys_and_the_endpoint_answers(tmp_path, tmp_path_factory):
    """The pages' block: the shards start nothing, the one marker one pipeline run, every task of it
    SUCCEEDED (`digits.py await-runs`), and the deployed model gets the held-out digits right."""
    work = harness.workdir(tmp_path / "work", harness.quickstart_data(tmp_path_factory))
    shown, _ = harness.run_block(_seed_demo(), work)
    assert "fires on gs://sandbox-demo/incoming/<folder>/_SUCCESS: a PipelineJob" in shown, shown
    uploaded = re.findall(r"^gs://sandbox-demo/incoming/digits-1/(\S+): (\d+) digits$", shown, re.M)
    assert [int(n) for _, n in uploaded] == [500, 500, 500, 297], shown
    assert re.search(r"^gs://sandbox-demo/incoming/digits-1/_SUCCESS: generation \d+$", shown, re.M)
    runs = re.findall(r"^run (\S+): (\S+)$", shown, re.M)
    assert [state for _, state in runs] == ["PIPELINE_STATE_SUCCEEDED"], shown  # one marker, one run
    tasks = dict(re.findall(r"^  (\S+)\s+(\S+)$", shown, re.M))
    assert {"train", "upload-model", "deploy-model"} <= set(tasks) and set(tasks.values()) == {"SUCCEEDED"}
    asked = re.search(
        r"^endpoint projects/sandbox/\S+/endpoints/\S+: (\d+)/(\d+) held-out digits right", shown, re.M
    )
    assert asked and int(asked[2]) == 100 and int(asked[1]) >= 90, shown  # 5 epochs: about 0.98


@pytest.mark.wire
def test_a_non_2xx_answer_is_delivered_again_with_backoff(sandbox, settings, tmp_path):
    (tmp_path / "main.py").write_text(FLAKY)
    (tmp_path / "trigger.json").write_text(TriggerConfig(bucket=BUCKET).to_json())
    host = FunctionHost(
        tmp_path, environ={**sandbox.environ, **sandbox.env()}, storage=sandbox.gcs.endpoint, backoff_s=0.05
    ).start()
    try:
        blob = storage.client(settings).bucket(BUCKET).blob("incoming/d1/train-00000-of-00001")
        blob.upload_from_string(b"0123456789", content_type="application/octet-stream")
        attempts = host.wait_deliveries(3, timeout=60)
    finally:
        host.stop()
    assert [(d.attempt, d.status) for d in attempts] == [(1, 500), (2, 500), (3, 200)]
    assert len({d.event_id for d in attempts}) == 1  # a redelivery is the same message
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert len(events) == 3 and all(e == events[0] for e in events)
    event, data = events[0], events[0]["data"]
    assert event["type"] == FINALIZED
    assert event["source"] == f"//storage.googleapis.com/projects/_/buckets/{BUCKET}"
    assert event["subject"] == "objects/incoming/d1/train-00000-of-00001"
    assert data["bucket"] == BUCKET and data["name"] == "incoming/d1/train-00000-of-00001"
    assert data["generation"] == str(blob.generation) and data["size"] == "10"  # int64 as strings
    assert data["id"] == f"{BUCKET}/incoming/d1/train-00000-of-00001/{blob.generation}"
    assert data["contentType"] == "application/octet-stream" and data["md5Hash"] and data["timeCreated"]


SPEC = textwrap.dedent("""\
    name: digits-on-upload
    region: us-central1
    hardware: cpu
    image: {uri: us-central1-docker.pkg.dev/sandbox/training/trainer:v1}
    output_dir: "gs://sandbox-out/runs/{{ trigger.folder_name }}-{{ trigger.generation }}"
    env: {TF_CPP_MIN_LOG_LEVEL: "2"}
    trainer:
      model: tiny-cnn
      train_data: "{{ trigger.folder }}/train-*"
      eval_data: "{{ trigger.folder }}/validation-*"
      num_classes: 10
      image_size: 16
      epochs: 2
      batch_size: 50
      base_batch_size: 50
      learning_rate: 0.1
      warmup_epochs: 1
      augment: none
      eval_crop_fraction: 1.0
      weight_decay: 0
      seed: 1
    """)


@pytest.mark.wire
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_the_marker_starts_one_run_per_generation_however_often_it_is_delivered(marker, tmp_path):
    """The rendered function's own rule, every event delivered three times: shards start nothing,
    the marker one CustomJob (its output directory the folder and the marker's generation), a new
    generation of the marker one more. The jobs are held queued and cancelled: that the run the
    marker starts trains to its end is the seed demo's test above."""
    spec = tmp_path / "digits-on-upload.yaml"
    spec.write_text(SPEC)
    function = tmp_path / "fn"
    render = invoke(  # the CLI in this process (tests/cli_support.py): the function is the subject
        [
            "trigger",
            "render",
            str(spec),
            "--bucket",
            BUCKET,
            "--prefix",
            "incoming/",
            "--project",
            PROJECT,
            "-o",
            str(function),
        ],
        cwd=ROOT,
    )
    assert render.returncode == 0, render.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERTEX_TRAINER_", "AIP_"))}
    env[marker] = "1"
    with Sandbox(
        env,
        buckets=[BUCKET, "sandbox-out"],
        project=PROJECT,
        region=REGION,
        function=str(function),
        redeliver=3,
    ) as box:
        host = box.function
        shell = {**env, **box.env()}
        # Every job the function creates waits in the queue (no replica starts) until cancelled.
        box.vertex.on_strategy(region=REGION, script=["JOB_STATE_QUEUED"])
        jobs = JobsClient(PROJECT, REGION, settings=Settings.from_environ(shell))

        def run(*args: str) -> None:
            done = subprocess.run(
                [sys.executable, "examples/sandbox/digits.py", *args],
                cwd=ROOT,
                env=shell,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr[-2000:]

        run("upload", f"gs://{BUCKET}/incoming/d1")
        shards = host.wait_deliveries(4 * 3, timeout=120)
        assert len(shards) == 12 and all(d.status == 200 for d in shards)
        assert box.vertex.jobs == {}  # shards start nothing

        run("marker", f"gs://{BUCKET}/incoming/d1")
        first = host.wait_deliveries(15, timeout=120)[12:]
        assert [d.name for d in first] == ["incoming/d1/_SUCCESS"] * 3
        assert all(d.status == 200 for d in first)
        assert len(box.vertex.jobs) == 1  # three deliveries, one run
        (job,) = box.vertex.jobs
        assert jobs.get(job)["state"] == "JOB_STATE_QUEUED"
        # the run's own folder below the templated output_dir, named after the event's key
        assert box.vertex.jobs[job]["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"].startswith(
            f"gs://sandbox-out/runs/d1-{first[0].generation}/"
        )
        jobs.cancel(job)
        assert jobs.get(job)["state"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")

        run("marker", f"gs://{BUCKET}/incoming/d1")  # uploaded again: a new generation
        second = host.wait_deliveries(18, timeout=120)[15:]
        assert {d.generation for d in second} != {first[0].generation}
        assert len(box.vertex.jobs) == 2
        (new,) = set(box.vertex.jobs) - {job}
        assert box.vertex.jobs[new]["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"].startswith(
            f"gs://sandbox-out/runs/d1-{second[0].generation}/"
        )
        jobs.cancel(new)
        for name in (job, new):
            assert jobs.get(name)["state"] == "JOB_STATE_CANCELLED"
        assert not box.jobs.wait(job, timeout=0) and not box.jobs.wait(new, timeout=0)  # never run here
    assert processes_with_env(marker) == []  # the function is gone


def test_a_function_directory_without_main_py_is_refused_before_anything_starts(tmp_path, base_env):
    done = invoke(["dev", "sandbox", "--function", str(tmp_path), "--", "true"], env=base_env)
    assert done.returncode == 2, done.stderr
    assert f"--function {tmp_path}: no main.py there" in done.stderr
    assert "vertex-trainer trigger render SPEC --bucket BUCKET -o DIR" in done.stderr
    assert "# sandbox ready" not in done.stderr
