"""The issue's "done when" for pipelines and tuning, as a user does it with `vertex-trainer dev
sandbox`'s exports: `pipeline submit SPEC --wait` for the digits spec with `deploy:` ends SUCCEEDED
only after training (metrics.json, the model version of the job's model directory, predictions from
the endpoint, every task SUCCEEDED); a three-trial grid `tune:` spec returns three trials with
real, different metrics, each trial's metrics.json in the bucket, and the best one named."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request

import pytest

from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.models import RegistryClient
from vertex_trainer.vertex.pipelines import PipelinesClient

from .conftest import ROOT, SandboxProcess, cli

BUCKET = "sandbox-demo"   # the specs'


def _run(args: list[str], env: dict[str, str], timeout: float = 420) -> subprocess.CompletedProcess:
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done


@pytest.fixture
def box(base_env):
    sandbox = SandboxProcess("--quiet", "--bucket", BUCKET, env=base_env)
    try:
        env = sandbox.env(base_env)
        _run([sys.executable, "examples/sandbox/digits.py", "upload", f"gs://{BUCKET}/digits"], env)
        yield env
    finally:
        sandbox.kill()


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(480)
def test_pipeline_submit_trains_registers_deploys_and_the_endpoint_answers(box):
    env = box
    submitted = json.loads(_run([*cli(), "pipeline", "submit", "examples/sandbox/digits.yaml",
                                 "--wait", "--output", "json"], env).stdout)
    assert submitted["state"] == "PIPELINE_STATE_SUCCEEDED"
    settings = Settings.from_environ(env)
    run = PipelinesClient("sandbox", "us-central1", settings=settings).get(submitted["name"])
    tasks = {t["taskName"]: t for t in run["jobDetail"]["taskDetails"]}
    assert set(tasks) == {"sandbox-digits", "train", "import-model", "upload-model", "endpoint",
                          "deploy-model"}
    assert {t["state"] for t in tasks.values()} == {"SUCCEEDED"}

    # Trained for real: the CustomJob the train task created ran the trainer to its end first.
    job = tasks["train"]["executorDetail"]["customJobDetail"]["job"]
    status = json.loads(_run([*cli(), "status", job, "--output", "json"], env).stdout)
    assert status["state"] == "JOB_STATE_SUCCEEDED"
    metrics = storage.read_json(settings, f"gs://{BUCKET}/runs/digits/metrics.json")
    assert metrics["eval_accuracy"] >= 0.9, metrics
    assert tasks["train"]["endTime"] <= tasks["upload-model"]["startTime"]

    registry = RegistryClient("sandbox", "us-central1", settings=settings)
    model = registry.find_model("sandbox-digits")
    assert model["artifactUri"].rstrip("/") == f"gs://{BUCKET}/runs/digits/model"  # the job's model dir
    endpoint = registry.find_endpoint("digits")
    assert [d["model"].split("@")[0] for d in endpoint["deployedModels"]] == [model["name"].split("@")[0]]

    answer = _run([sys.executable, "examples/sandbox/digits.py", "ask-endpoint", "digits"], env).stdout
    right, total = map(int, re.search(r"(\d+)/(\d+) held-out digits right", answer).groups())
    assert total == 297 and abs(right / total - metrics["eval_accuracy"]) <= 0.03, answer


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(480)
def test_a_grid_tune_runs_three_real_trials_and_names_the_best(box):
    env = box
    result = json.loads(_run([*cli(), "submit", "examples/sandbox/digits-tune.yaml", "--wait",
                              "--output", "json"], env).stdout)
    assert result["state"] == "JOB_STATE_SUCCEEDED"
    trials = result["trials"]
    assert [t["state"] for t in trials] == ["SUCCEEDED"] * 3
    assert sorted(t["parameters"]["learning_rate"] for t in trials) == [0.005, 0.05, 0.2]
    values = [t["metric"] for t in trials]
    assert len(set(values)) == 3, values  # each trial trained with its own flags
    settings = Settings.from_environ(env)
    for trial in trials:  # each trial's own output directory, as Vertex AI lays trials out
        written = storage.read_json(settings, f"gs://{BUCKET}/runs/digits-tune/{trial['id']}/metrics.json")
        assert abs(written["eval_accuracy"] - trial["metric"]) < 1e-6
    best = max(trials, key=lambda t: t["metric"])
    assert result["best_trial"]["id"] == best["id"]

    # parallelTrialCount 2: trials 1 and 2 ran together, trial 3 only once one of them had ended.
    request = urllib.request.Request(f"{env['VERTEX_TRAINER_API_ENDPOINT']}/v1/{result['name']}")
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30) as resp:
        served = {t["id"]: t for t in json.loads(resp.read())["trials"]}
    assert served["2"]["startTime"] < served["1"]["endTime"]
    assert served["3"]["startTime"] >= min(served["1"]["endTime"], served["2"]["endTime"])
    assert all(t["finalMeasurement"]["metrics"][0]["metricId"] == "accuracy" for t in served.values())
