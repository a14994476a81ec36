"""The issue's "done when" for pipelines and tuning, as a user does it with `vertex-trainer dev
sandbox`'s exports: `pipeline submit SPEC --wait` for the digits spec with `deploy:` ends SUCCEEDED
only after training (metrics.json, the model version of the job's model directory, predictions from
the endpoint, every task SUCCEEDED); a three-trial grid `tune:` spec returns three trials with
real, different metrics, each trial's metrics.json in the bucket, and the best one named.

Both run docs/sandbox.md's own blocks (`<!-- docs-test: checked-by tests/sandbox/test_sandbox_seed.py
-->`), as the docs harness (tests/docs/test_docs_examples.py) would, but inside a sandbox this file
started, so that it can look at what they left behind: the digits pipeline trains once in the suite
for the page and for these checks, not twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.cli_support import invoke
from tests.docs.harness import Block, blocks
from tests.docs.harness import script_of as _script
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.models import RegistryClient
from vertex_trainer.vertex.pipelines import PipelinesClient

from .conftest import ROOT, SandboxProcess, cli, cli_base_env

BUCKET = "sandbox-demo"  # the specs'
PAGE, HERE = "docs/sandbox.md", "tests/sandbox/test_sandbox_seed.py"
# The command that picks each block of PAGE this file runs.
PIPELINE_BLOCK = "vertex-trainer pipeline submit examples/sandbox/digits.yaml --wait"
TUNE_BLOCK = "vertex-trainer submit examples/sandbox/digits-tune.yaml --wait --output json"


def _run(args: list[str], env: dict[str, str], timeout: float = 420) -> subprocess.CompletedProcess:
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{args}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    return done


def _block(command: str) -> Block:
    """The one block of PAGE that names this file (`checked-by`) and runs `command`."""
    found = [b for b in blocks() if b.checked_by == HERE and command in b.body]
    assert [b.page for b in found] == [PAGE], f"{PAGE}: no single checked-by block runs {command!r}"
    assert found[0].buckets == [BUCKET]  # the sandbox below serves what the block names
    return found[0]


def _run_block(block: Block, env: dict[str, str], tmp_path, timeout: float = 420) -> str:
    """`block` as the docs harness runs it (bash -eo pipefail), in the sandbox of `env`; its stdout."""
    command, text = _script(block)
    script = tmp_path / "example.sh"
    script.write_text(text)
    # `python` and `vertex-trainer` are this environment's, as in the harness.
    path = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = _run([*command, str(script)], {**env, "PATH": path}, timeout)
    assert "Traceback (most recent call last)" not in done.stdout + done.stderr, done.stderr[-5000:]
    return done.stdout


def test_this_file_runs_every_block_of_the_docs_that_names_it():
    named = {b.id for b in blocks() if b.checked_by == HERE}
    assert named == {_block(PIPELINE_BLOCK).id, _block(TUNE_BLOCK).id}


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    """A sandbox serving BUCKET; the environment its exports give (each block uploads the digits).
    One for the module: the two tests leave disjoint things behind (a pipeline run, its model and
    endpoint; a tuning job), and the second submit finds the trainer image the first one built."""
    base_env = cli_base_env(f"VT_TEST_{uuid.uuid4().hex}", tmp_path_factory.mktemp("seed"))
    sandbox = SandboxProcess("--quiet", "--bucket", BUCKET, env=base_env)
    try:
        yield sandbox.env(base_env)
    finally:
        sandbox.kill()


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(480)
def test_pipeline_submit_trains_registers_deploys_and_the_endpoint_answers(box, tmp_path):
    env = box
    # The page's block: upload, `pipeline submit ... --wait`, `ask-endpoint digits --count 100`.
    shown = _run_block(_block(PIPELINE_BLOCK), env, tmp_path)
    asked = re.findall(r"(\d+)/(\d+) held-out digits right", shown)
    assert [int(total) for _, total in asked] == [100], shown[-3000:]  # the block's --count
    settings = Settings.from_environ(env)
    pipelines = PipelinesClient("sandbox", "us-central1", settings=settings)
    runs = pipelines.list()
    assert [r["state"] for r in runs] == ["PIPELINE_STATE_SUCCEEDED"], runs
    assert runs[0]["name"] in shown and re.search(r"^final\s+SUCCEEDED$", shown, re.M), shown[-3000:]
    run = pipelines.get(runs[0]["name"])
    tasks = {t["taskName"]: t for t in run["jobDetail"]["taskDetails"]}
    assert set(tasks) == {
        "sandbox-digits",
        "train",
        "import-model",
        "upload-model",
        "endpoint",
        "deploy-model",
    }
    assert {t["state"] for t in tasks.values()} == {"SUCCEEDED"}

    # Trained for real: the CustomJob the train task created ran the trainer to its end first.
    job = tasks["train"]["executorDetail"]["customJobDetail"]["job"]
    described = invoke(["status", job, "--output", "json"], env=env, cwd=ROOT)  # in this process
    assert described.returncode == 0, described.stderr[-3000:]
    status = json.loads(described.stdout)
    assert status["state"] == "JOB_STATE_SUCCEEDED"
    folder = status["output_dir"]  # the run's own folder below output_dir (docs/contract.md section 15)
    assert folder.startswith(f"gs://{BUCKET}/runs/digits/sandbox-digits-"), folder
    metrics = storage.read_json(settings, f"{folder}/metrics.json")
    assert metrics["eval_accuracy"] >= 0.9, metrics
    assert tasks["train"]["endTime"] <= tasks["upload-model"]["startTime"]

    registry = RegistryClient("sandbox", "us-central1", settings=settings)
    model = registry.find_model("sandbox-digits")
    assert model["artifactUri"].rstrip("/") == f"{folder}/model"  # the job's own model dir
    endpoint = registry.find_endpoint("digits")
    assert [d["model"].split("@")[0] for d in endpoint["deployedModels"]] == [model["name"].split("@")[0]]

    answer = _run([sys.executable, "examples/sandbox/digits.py", "ask-endpoint", "digits"], env).stdout
    right, total = map(int, re.search(r"(\d+)/(\d+) held-out digits right", answer).groups())
    assert total == 297 and abs(right / total - metrics["eval_accuracy"]) <= 0.03, answer


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(480)
def test_a_grid_tune_runs_three_real_trials_and_names_the_best(box, tmp_path):
    env = box
    # The page's block: upload, then `submit digits-tune.yaml --wait --output json` (the JSON last).
    shown = _run_block(_block(TUNE_BLOCK), env, tmp_path)
    assert "\n{" in shown, shown[-3000:]
    result = json.loads(shown[shown.index("\n{") :])
    assert result["state"] == "JOB_STATE_SUCCEEDED"
    trials = result["trials"]
    assert [t["state"] for t in trials] == ["SUCCEEDED"] * 3
    assert sorted(t["parameters"]["learning_rate"] for t in trials) == [0.05, 0.1, 0.2]
    settings = Settings.from_environ(env)
    assert result["output_dir"].startswith(f"gs://{BUCKET}/runs/digits-tune/"), result["output_dir"]
    for trial in trials:  # each trial's own output directory, as Vertex AI lays trials out
        base = f"{result['output_dir']}/{trial['id']}"  # below the tuning job's own folder
        written = storage.read_json(settings, f"{base}/metrics.json")
        assert abs(written["eval_accuracy"] - trial["metric"]) < 1e-6
        # Each trial trained with its own flag: the trainer's own record of what it ran (not
        # told apart by their accuracies, which two trials may well share on 250 digits).
        resolved = storage.read_json(settings, f"{base}/trainer_config.json")
        assert resolved["flags"]["learning_rate"] == trial["parameters"]["learning_rate"], resolved["flags"]
    best = [t["id"] for t in trials if t["metric"] == max(t["metric"] for t in trials)]
    assert result["best_trial"]["id"] in best, (result["best_trial"], trials)  # one of them on a tie

    # parallelTrialCount 2: trials 1 and 2 ran together, trial 3 only once one of them had ended.
    request = urllib.request.Request(
        f"{env['VERTEX_TRAINER_API_ENDPOINT']}/v1/{result['name']}",
        headers={"Authorization": f"Bearer {env['VERTEX_TRAINER_EMULATOR_TOKEN']}"},  # the sandbox's
    )
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30) as resp:
        served = {t["id"]: t for t in json.loads(resp.read())["trials"]}
    assert served["2"]["startTime"] < served["1"]["endTime"]
    assert served["3"]["startTime"] >= min(served["1"]["endTime"], served["2"]["endTime"])
    assert all(t["finalMeasurement"]["metrics"][0]["metricId"] == "accuracy" for t in served.values())

    # Issue 34: the tuning job's report, read from the sandbox's API and bucket (the best trial's
    # metrics.json, trainer_config.json and TensorBoard files on gs://), looked at in Chromium.
    from tests.report.browser import assert_not_blank, assert_numbers_equal_metrics, chromium, look

    page = tmp_path / "tune.html"
    _run([*cli(), "report", result["name"], "-o", str(page)], env)
    with chromium() as driver:
        seen = look(driver, page, tmp_path / "tune.png")
    assert seen.size == seen.viewport and seen.errors == [] and seen.fetched == []
    assert_not_blank(seen.screenshot)
    assert seen.figures.get("param-learning_rate", 0) >= 2 and seen.figures.get("loss", 0) >= 2, seen.figures
    # the best trial's curves, from its TensorBoard event files on gs:// (2 epochs: the spec's)
    assert 'data-epochs="2">2 epoch(s) from its TensorBoard event files' in page.read_text(), seen.text[:3000]
    winner = storage.read_json(settings, f"{result['output_dir']}/{result['best_trial']['id']}/metrics.json")
    assert assert_numbers_equal_metrics(seen.printed, winner) >= 12
