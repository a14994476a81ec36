"""`vertex-trainer trigger ...` and `pipeline submit --dry-run` as a user runs them: exit codes,
output, and no connection of any kind for a dry run; the local end-to-end example."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import no_socket_hook
from tests.trigger.conftest import BUCKET, DEPLOY, SPEC, write_spec

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "vertex-trainer")


@pytest.fixture
def env(tmp_path) -> dict:
    """No gcloud configuration, and an audit hook that kills the process on any socket use."""
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("VERTEX_TRAINER_", "CLOUDSDK_", "GOOGLE_"))
    }
    hook = no_socket_hook(tmp_path / "hook")
    return {**clean, "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "PYTHONPATH": hook, "COLUMNS": "200"}


def run(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, *map(str, args)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


def test_trigger_deploy_dry_run_prints_the_script_and_opens_no_connection(tmp_path, env):
    spec = write_spec(tmp_path / "spec", SPEC + DEPLOY)
    done = run(env, "trigger", "deploy", spec, "--bucket", BUCKET, "--prefix", "datasets/", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("#!/usr/bin/env bash")
    assert "gcloud functions deploy vt-digits " in done.stdout and "--retry" in done.stdout


def test_trigger_render_writes_the_directory_and_json_says_what(tmp_path, env):
    spec = write_spec(tmp_path / "spec", SPEC)
    done = run(env, "trigger", "render", spec, "--bucket", BUCKET, "-o", tmp_path / "fn", "--output", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["pipeline"] is False and (tmp_path / "fn" / "main.py").is_file()


def test_bad_trigger_input_is_exit_2_with_one_message(tmp_path, env):
    spec = write_spec(tmp_path / "spec", SPEC)
    done = run(env, "trigger", "render", spec, "--bucket", f"gs://{BUCKET}", "-o", tmp_path / "fn")
    assert done.returncode == 2 and done.stderr.startswith("error: --bucket")
    assert "Traceback" not in done.stderr and not (tmp_path / "fn").exists()


def test_pipeline_submit_dry_run_opens_no_connection(tmp_path, env):
    spec = write_spec(
        tmp_path / "spec",
        SPEC.replace('"{{ trigger.folder }}/train-*"', "gs://data-bucket/x/train-*").replace(
            "{{ trigger.folder_name }}-{{ trigger.generation }}", "x"
        )
        + DEPLOY,
    )
    done = run(env, "pipeline", "submit", spec, "--dry-run", "--idempotency-key", "k-1")
    assert done.returncode == 0, done.stderr
    assert (
        "POST https://us-central1-aiplatform.googleapis.com/v1/projects/test-project/locations/"
        "us-central1/pipelineJobs?pipelineJobId=k-1" in done.stdout
    )


@pytest.mark.slow
@pytest.mark.wire
def test_the_local_end_to_end_example_starts_one_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERTEX_TRAINER_", "STORAGE_EMULATOR"))}
    done = subprocess.run(
        [sys.executable, "examples/events/local_e2e.py", "--keep", str(tmp_path / "fn")],
        capture_output=True,
        text=True,
        env={**env, "CLOUDSDK_CONFIG": str(tmp_path)},
        cwd=ROOT,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.count("-> HTTP 200: started") == 1 and "-> HTTP 200: adopted" in done.stdout
