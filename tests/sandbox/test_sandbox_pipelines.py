"""PipelineJobs that run in the sandbox, with stand-in replicas (`python -c`, no TensorFlow): the
compiled pipeline's GCPC custom-job task runs google_cloud_pipeline_components' own launcher as
a local process, which creates the CustomJob here through the gateway (gRPC, TLS, the metadata
server); the run's state and task details follow; a failing job fails the run with its error; a
cancel stops the task and its CustomJob. And the placeholder rules the backend follows."""

from __future__ import annotations

import itertools
import json
import uuid

import pytest

from tests.process_support import pid_alive
from vertex_trainer.automation import compile_ir, pipeline_job
from vertex_trainer.sandbox import placeholders
from vertex_trainer.vertex.pipelines import PipelinesClient

from .conftest import BUCKET, PROJECT, REGION, ROOT, python_job

LAUNCHER = "google_cloud_pipeline_components.container.v1.custom_job.launcher"
# One sandbox for the module (conftest.py): each test's CustomJob has a display name of its own.
SHARED_SANDBOX = True


def _submit(settings, script: str, *, job_name: str, strategy: str | None = None) -> dict:
    job = python_job(script, name=job_name)
    if strategy:
        job["jobSpec"]["scheduling"] = {"strategy": strategy, "maxWaitDuration": "3600s"}
    ir = compile_ir(job, name="stand-in", project=PROJECT, location=REGION, key=None)
    body = pipeline_job(display_name="stand-in", ir=ir, labels={}, root=f"gs://{BUCKET}/pipeline-root")
    client = PipelinesClient(PROJECT, REGION, settings=settings)
    created = client.create_once(body, f"stand-in-{uuid.uuid4().hex[:8]}")
    assert created["state"] == "PIPELINE_STATE_PENDING"  # as created: nothing ran before the answer
    return created


def _get(settings, name: str) -> dict:
    return PipelinesClient(PROJECT, REGION, settings=settings).get(name)


@pytest.mark.wire
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_pipeline_runs_its_custom_job_task_through_the_gcpc_launcher(sandbox, settings, echoed):
    # The job runs 3 s, so the launcher, which looks at it right after its create, looks again.
    created = _submit(
        settings,
        "import os, time; time.sleep(3); print('trained in', os.environ['AIP_MODEL_DIR'])",
        job_name="stand-in-runs",
        strategy="FLEX_START",
    )
    assert sandbox.pipelines.wait(created["name"], timeout=200)
    run = _get(settings, created["name"])
    assert run["state"] == "PIPELINE_STATE_SUCCEEDED", run.get("error")

    # The launcher created exactly one CustomJob, as compiled: FLEX_START with its max wait.
    jobs = [j for j in sandbox.vertex.jobs.values() if j["displayName"] == "stand-in-runs"]
    assert len(jobs) == 1 and jobs[0]["state"] == "JOB_STATE_SUCCEEDED"
    scheduling = jobs[0]["jobSpec"]["scheduling"]
    assert scheduling["strategy"] == "FLEX_START" and scheduling["maxWaitDuration"] == "3600s"
    create = [r for r in sandbox.vertex.calls("create") if r.body.get("displayName") == "stand-in-runs"]
    assert create[0].headers.get("Authorization") == f"Bearer {sandbox.token}"  # google-auth, metadata
    assert any(LAUNCHER in line for line in echoed), [x for x in echoed if "pipeline" in x]
    # GCPC's launcher polls at the sandbox's pace (sandbox/launcher.py), not its own 20 s.
    looks = [r.at for r in sandbox.vertex.calls("get") if r.path.endswith(jobs[0]["name"])]
    assert len(looks) >= 2 and max(b - a for a, b in itertools.pairwise(looks)) < 10, looks

    tasks = run["jobDetail"]["taskDetails"]
    root, train = tasks[0], tasks[1]
    assert root["taskName"] == "stand-in" and root["state"] == "SUCCEEDED"
    assert train["taskName"] == "train" and train["state"] == "SUCCEEDED"
    assert train["parentTaskId"] == root["taskId"]
    assert train["executorDetail"]["customJobDetail"]["job"] == jobs[0]["name"]
    resources = json.loads(train["execution"]["metadata"]["output:gcp_resources"])
    assert (
        resources["resources"][0]["resourceUri"]
        == f"https://{REGION}-aiplatform.googleapis.com/v1/{jobs[0]['name']}"
    )
    assert train["execution"]["metadata"]["input:strategy"] == "FLEX_START"
    assert train["startTime"] <= train["endTime"] <= run["endTime"]


@pytest.mark.wire
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_failing_training_task_fails_the_run_with_the_jobs_error(sandbox, settings):
    created = _submit(
        settings,
        "import sys; print('ValueError: no files match gs://x/train-*'); sys.exit(3)",
        job_name="stand-in-fails",
    )
    assert sandbox.pipelines.wait(created["name"], timeout=200)
    run = _get(settings, created["name"])
    assert run["state"] == "PIPELINE_STATE_FAILED"
    assert run["error"]["message"].startswith(
        "The DAG failed because some tasks failed. The failed tasks are: [train]."
    )
    assert "exited with a non-zero status of 3" in run["error"]["message"]
    assert "ValueError: no files match gs://x/train-*" in run["error"]["message"]
    train = run["jobDetail"]["taskDetails"][1]
    assert train["state"] == "FAILED" and "non-zero status of 3" in train["error"]["message"]


@pytest.mark.wire
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_cancel_stops_the_running_task_and_its_custom_job(sandbox, settings):
    created = _submit(
        settings,
        "import os, time; print('pid', os.getpid(), flush=True); time.sleep(600)",
        job_name="stand-in-cancelled",
    )

    def pid(fake) -> int | None:
        found = [
            int(e["jsonPayload"]["message"].split()[1])
            for e in fake.entries
            if e["jsonPayload"]["message"].startswith("pid ")
        ]
        return found[0] if found else None

    assert sandbox.logging.wait_until(lambda fake: pid(fake) is not None, timeout=120)
    replica = pid(sandbox.logging)
    job = next(j for j in sandbox.vertex.jobs.values() if j["displayName"] == "stand-in-cancelled")
    assert _get(settings, created["name"])["state"] == "PIPELINE_STATE_RUNNING"

    PipelinesClient(PROJECT, REGION, settings=settings).cancel(created["name"])
    assert sandbox.pipelines.wait(created["name"], timeout=120)
    run = _get(settings, created["name"])
    assert run["state"] == "PIPELINE_STATE_CANCELLED"
    assert run["jobDetail"]["taskDetails"][1]["state"] == "CANCELLED"
    assert sandbox.jobs.wait(job["name"], timeout=60)
    assert sandbox.vertex.jobs[job["name"]]["state"] == "JOB_STATE_CANCELLED"
    assert not pid_alive(replica)


def test_placeholders_are_filled_as_the_backend_fills_them():
    executor_input = {
        "inputs": {
            "parameterValues": {
                "count": 1.0,
                "ratio": 0.5,
                "name": "x",
                "flag": False,
                "pools": [{"disk_spec": {"boot_disk_size_gb": 100.0}, "replica_count": "1"}],
                "split": {"0": 100.0},
            },
            "artifacts": {
                "endpoint": {
                    "artifacts": [{"uri": "gs://b/e", "metadata": {"resourceName": "projects/p/e/1"}}]
                }
            },
        },
        "outputs": {
            "parameters": {"gcp_resources": {"outputFile": "/tmp/out/gcp_resources"}},
            "outputFile": "/tmp/out/executor_output.json",
        },
    }
    context = {"pipeline_job_uuid": "run-1", "pipeline_google_cloud_location": "us-central1"}
    args = [
        '{"n": {{$.inputs.parameters[\'count\']}}, "r": {{$.inputs.parameters[\'ratio\']}}, '
        '"pools": {{$.inputs.parameters[\'pools\']}}, "split": {{$.inputs.parameters[\'split\']}}, '
        '"f": {{$.inputs.parameters[\'flag\']}}}',
        "{{$.outputs.parameters['gcp_resources'].output_file}}",
        '{"Concat": ["jobs/", "{{$.pipeline_job_uuid}}", "/", '
        '"{{$.inputs.artifacts[\'endpoint\'].metadata[\'resourceName\']}}"]}',
        '{"IfPresent": {"InputName": "parent_model", "Then": ["--parent_model_name", "x"]}}',
        '{"IfPresent": {"InputName": "name", "Then": ["--name", "{{$.inputs.parameters[\'name\']}}"]}}',
        "{{$}}",
    ]
    out = placeholders.resolve_args(args, executor_input, context)
    # Whole numbers without a fraction everywhere (GCPC's launcher refuses 100.0 for an int64).
    assert json.loads(out[0]) == {
        "n": 1,
        "r": 0.5,
        "pools": [{"disk_spec": {"boot_disk_size_gb": 100}, "replica_count": "1"}],
        "split": {"0": 100},
        "f": False,
    }
    assert '"boot_disk_size_gb":100}' in out[0] and ".0" not in out[0].replace("0.5", "")
    assert out[1] == "/tmp/out/gcp_resources"
    assert out[2] == "jobs/run-1/projects/p/e/1"
    assert out[3:5] == ["--name", "x"]  # the absent parent_model adds nothing
    assert json.loads(out[5])["inputs"]["parameterValues"]["count"] == 1
    assert len(out) == 6


@pytest.mark.parametrize("algorithm", ["grid", "random"])
def test_the_sandbox_searches_a_study_as_the_local_tuner_searches_its_spec(tmp_path, algorithm):
    """A tuning job's trials get the parameters `submit --local` would give (seed 0)."""
    from vertex_trainer import api, render
    from vertex_trainer.sandbox.tuning import as_tune_spec
    from vertex_trainer.tuning.tuning_run import plan_trials, trial_args

    text = (ROOT / "examples/sandbox/digits-tune.yaml").read_text()
    text = text.replace("algorithm: grid", f"algorithm: {algorithm}").replace("seed: 1", "seed: 0")
    grid = "    learning_rate: {values: [0.05, 0.1, 0.2]}"
    assert grid in text  # the example's own grid, with two more parameters below
    more = "\n    warmup_epochs: {min: 0, max: 2, type: integer}\n    optimizer: {values: [sgd, lamb]}"
    text = text.replace(grid, grid + more)
    text = text.replace("max_trials: 3", "max_trials: 5")
    (tmp_path / "tune.yaml").write_text(text)
    spec = api.load_spec(tmp_path / "tune.yaml", project=PROJECT)
    search = as_tune_spec(render.study_spec(spec), spec.tune.max_trials)
    assert plan_trials(search) == plan_trials(spec)
    assert [trial_args(search, v) for v in plan_trials(search)] == [
        trial_args(spec, v) for v in plan_trials(spec)
    ]
