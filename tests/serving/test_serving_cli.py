"""`vertex-trainer serve MODEL_DIR`: the local command behind the same contract as the endpoint.

The pages' own examples of it run here (`<!-- docs-test: checked-by tests/serving/test_serving_cli.py
-->`: README.md's "Deploying and serving" block, then docs/serving.md's, in the same scratch copy),
as the docs harness (tests/docs/test_docs_examples.py) would run them, on the quickstart's run that
README.md's first block trained (tests/local/test_local_trainer.py; harness.shared_run: once in the
suite, for both pages and for the checks on what they served). Both listen on port 8090, which only
this folder (one pytest-xdist unit, tests/conftest.py) uses."""

from __future__ import annotations

import ast
import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import invoke
from tests.docs import harness
from tests.shared import latest_run

from .conftest import call, tf_env, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
HERE = "tests/serving/test_serving_cli.py"
# README.md's first block, which trains the quickstart whose model the pages serve.
QUICKSTART = (
    "README.md",
    "submit   job_specs/quickstart-local.yaml --local",
    "tests/local/test_local_trainer.py",
)
# The command that picks each page's block this file runs.
README_BLOCK, PAGE_BLOCK = (
    "--port 8090 &   # GET /health",
    "curl -s --retry 20 --retry-connrefused localhost:8090/health",
)


def test_this_file_runs_every_block_of_the_docs_that_names_it():
    named = {b.id for b in harness.blocks() if b.checked_by == HERE}
    assert named == {
        harness.checked_block("README.md", README_BLOCK, HERE).id,
        harness.checked_block("docs/serving.md", PAGE_BLOCK, HERE).id,
    }


def _printed(output: str, start: str, parse) -> list:
    """Each object printed at `start` in `output`, read to the first `}` at which it parses (curl
    ends an answer with no newline, and the server's own lines may come right after it)."""
    found = []
    for at in [m.start() for m in re.finditer(re.escape(start), output)]:
        text = output[at:]
        ends = [i + 1 for i, c in enumerate(text) if c == "}"]
        for end in ends:
            try:
                found.append(parse(text[:end]))
                break
            except (ValueError, SyntaxError):
                continue
    return found


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_pages_serve_the_quickstarts_run(tmp_path, tmp_path_factory):
    """README.md's block serves the quickstart's run (the one its first block trained with
    `submit --local`, as a reader who ran it has) on port 8090 and asks it with curl; docs/serving.md's
    block then serves the same run and asks it with curl and urllib: the same answer (the same
    model, the same image), of the contract's shape, from both."""
    work = harness.workdir(tmp_path / "work", harness.quickstart_data(tmp_path_factory))
    trained, _, _ = harness.shared_run(harness.checked_block(*QUICKSTART), tmp_path_factory)
    # What that block left in runs/quickstart (the run, its `latest` link, the tool's records).
    shutil.copytree(trained / "runs" / "quickstart", work / "runs" / "quickstart", symlinks=True)
    readme, _ = harness.run_block(harness.checked_block("README.md", README_BLOCK, HERE), work)
    run = latest_run(work / "runs" / "quickstart")  # the run's own folder below the spec's output_dir
    assert (run / "model" / "saved_model.pb").is_file() and (run / "model" / "serving_config.json").is_file()
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["epochs"] == 3 and 0.0 <= metrics["eval_accuracy"] <= 1.0, metrics
    (answer,) = _printed(readme, '{"predictions"', json.loads)  # curl's answer
    assert answer["deployedModelId"] == "local" and len(answer["predictions"]) == 1, answer
    predicted = answer["predictions"][0]
    assert len(predicted["probabilities"]) == 10 and sum(predicted["probabilities"]) == pytest.approx(
        1, abs=1e-5
    )
    assert predicted["class"] == max(range(10), key=predicted["probabilities"].__getitem__)

    page, _ = harness.run_block(harness.checked_block("docs/serving.md", PAGE_BLOCK, HERE), work)
    # curl printed each 503 it retried while the model loaded, then the 200
    *loading, ready = [health["status"] for health in _printed(page, '{"status"', json.loads)]
    assert set(loading) <= {"loading"} and ready == "ready", page
    (again,) = _printed(page, "{'predictions'", ast.literal_eval)  # print() of the JSON: a dict
    assert again["deployedModelId"] == "local"
    assert again["predictions"][0]["class"] == predicted["class"]  # the README's run, the same image
    assert again["predictions"][0]["probabilities"] == pytest.approx(predicted["probabilities"], abs=1e-6)


def test_cli_serve_refuses_a_missing_model(tmp_path):
    proc = invoke(["serve", tmp_path / "nothing", "--port", "0"], env=tf_env(), cwd=ROOT)  # in-process
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: no exported model in ") and "saved_model.pb" in proc.stderr


@pytest.mark.trainer
def test_the_first_request_after_start_gets_a_prediction_and_no_banner_shows(digits_run):
    """issue 24 items 7 and 8: a request sent as soon as `serve` listens is answered (not 503
    "still loading"), and TensorFlow's start-up banner is not on the screen; then the contract on
    more digits (the same classes twice, 10 probabilities each) and a bad instance named."""
    from trainer.banner import is_banner

    proc = subprocess.Popen(
        [sys.executable, "-m", "vertex_trainer", "serve", str(digits_run.model_dir), "--port", "0"],
        env=tf_env(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: list[str] = []
    try:
        for line in proc.stdout:  # the first line: listening, before the model is loaded
            seen.append(line)
            if line.startswith("serve: listening on "):
                break
        assert seen and seen[-1].startswith("serve: listening on "), seen
        port = seen[-1].split("listening on ", 1)[1].split(";")[0].rsplit(":", 1)[1]
        image = base64.b64encode(digits_run.images[0]).decode()
        status, answer = call("POST", f"http://127.0.0.1:{port}/predict", {"instances": [{"b64": image}]})
        assert status == 200, answer
        assert len(answer["predictions"][0]["probabilities"]) == 10

        url = f"http://127.0.0.1:{port}"
        wait_healthy(url + "/health")
        instances = [{"b64": base64.b64encode(img).decode()} for img in digits_run.images[:8]]
        status, answer = call("POST", url + "/predict", {"instances": instances})
        assert status == 200 and answer["deployedModelId"] == "local"
        assert [p["class"] for p in answer["predictions"]] == [
            p["class"] for p in call("POST", url + "/predict", {"instances": instances})[1]["predictions"]
        ]
        assert len(answer["predictions"]) == 8 and len(answer["predictions"][0]["probabilities"]) == 10
        status, answer = call("POST", url + "/predict", {"instances": [{"b64": "not base64!"}]})
        assert status == 400 and "instance 0" in answer["error"]
    finally:
        proc.terminate()
        rest, _ = proc.communicate(timeout=20)
    shown = seen + rest.splitlines(keepends=True)
    assert not [line for line in shown if is_banner(line)], "".join(shown)
    assert any(" serving http://" in line or line.startswith("serving ") for line in shown), "".join(shown)
