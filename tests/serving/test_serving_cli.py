"""`vertex-trainer serve MODEL_DIR`: the local command behind the same contract as the endpoint."""

from __future__ import annotations

import base64
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from .conftest import call, tf_env, wait_healthy

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.trainer
def test_cli_serve_answers_the_prediction_contract(digits_run):
    proc = subprocess.Popen(
        [sys.executable, "-m", "vertex_trainer", "serve", str(digits_run.model_dir), "--port", "0"],
        env=tf_env(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)], daemon=True
    ).start()
    try:
        url = None
        while url is None:
            line = lines.get(timeout=90)
            assert line is not None, "vertex-trainer serve exited before serving"
            if line.startswith("serving ") and " on http://" in line:
                url = line.split(" on ", 1)[1].split()[0]
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
        proc.wait(timeout=20)


def test_cli_serve_refuses_a_missing_model(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "vertex_trainer", "serve", str(tmp_path / "nothing"), "--port", "0"],
        env=tf_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: no exported model in ") and "saved_model.pb" in proc.stderr


@pytest.mark.trainer
def test_the_first_request_after_start_gets_a_prediction_and_no_banner_shows(digits_run):
    """issue 24 items 7 and 8: a request sent as soon as `serve` listens is answered (not 503
    "still loading"), and TensorFlow's start-up banner is not on the screen."""
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
    finally:
        proc.terminate()
        rest, _ = proc.communicate(timeout=20)
    shown = seen + rest.splitlines(keepends=True)
    assert not [line for line in shown if is_banner(line)], "".join(shown)
    assert any(" serving http://" in line or line.startswith("serving ") for line in shown), "".join(shown)
