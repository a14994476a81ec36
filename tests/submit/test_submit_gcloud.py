"""Parity with the Google Cloud CLI: gcloud accepts `render --format gcloud` and sends our jobSpec.

gcloud is pointed at the fake Vertex server through a private configuration directory
(api_endpoint_overrides/aiplatform, auth/disable_credentials), so nothing leaves the machine.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

import pytest

from tests.cli_support import gcloud_config

pytestmark = [
    pytest.mark.gcloud,
    pytest.mark.wire,
    pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed"),
]


@pytest.fixture
def gcloud_env(fake, cli_env, tmp_path):
    return {**cli_env, "CLOUDSDK_CONFIG": str(gcloud_config(tmp_path / "gcloud", fake.url))}


def _normalised_job_spec(job_spec: dict) -> dict:
    """Through the aiplatform_v1 types: enum numbers/names, int64 strings/ints all compare equal."""
    from google.cloud.aiplatform_v1 import CustomJobSpec
    from google.protobuf import json_format

    message = json_format.ParseDict(job_spec, CustomJobSpec.pb(CustomJobSpec()))
    return json_format.MessageToDict(message)


@pytest.mark.parametrize(
    "sets", [(), ("replicas=3", "scheduling.strategy=standard", "hardware=a100x8", "trainer.batch_size=768")]
)
def test_gcloud_accepts_render_gcloud_and_sends_our_job_spec(
    fake, run_cli, gcloud_env, spec_file, tmp_path, sets
):
    # one key for both renders: it names the run's folder (docs/contract.md section 15)
    set_args = [a for s in sets for a in ("--set", s)] + ["--idempotency-key", "k1"]
    config = run_cli("render", spec_file, "--format", "gcloud", *set_args)
    assert config.returncode == 0, config.stderr
    config_file = tmp_path / "gcloud-config.yaml"
    config_file.write_text(config.stdout)
    ours = json.loads(run_cli("render", spec_file, "--format", "json", *set_args).stdout)

    created = subprocess.run(
        [
            "gcloud",
            "ai",
            "custom-jobs",
            "create",
            f"--config={config_file}",
            "--region=us-central1",
            "--display-name=tiny-cnn-test",
            "--format=json",
        ],
        env=gcloud_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["name"] in fake.jobs

    (request,) = fake.calls("create")
    sent = request.body
    assert sent["displayName"] == "tiny-cnn-test"
    # gcloud sends enum names; both sides go through the proto types before comparing.
    assert _normalised_job_spec(sent["jobSpec"]) == _normalised_job_spec(ours["jobSpec"])


def test_the_suggested_gcloud_command_in_the_header_works(fake, run_cli, gcloud_env, spec_file, tmp_path):
    """render --format gcloud prints the gcloud command to use; that command works as printed."""
    config = run_cli("render", spec_file, "--format", "gcloud", "--idempotency-key", "k1").stdout
    (command,) = [
        line.removeprefix("#").strip()
        for line in config.splitlines()
        if line.startswith("#") and "gcloud ai custom-jobs create" in line
    ]
    workdir = tmp_path / "gcloud-work"
    workdir.mkdir()
    (workdir / "job.yaml").write_text(config)
    created = subprocess.run(
        shlex.split(command) + ["--format=json"],
        env=gcloud_env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr
    (request,) = fake.calls("create")
    ours = json.loads(run_cli("render", spec_file, "--format", "json", "--idempotency-key", "k1").stdout)
    assert request.body["labels"] == ours["labels"]
    assert _normalised_job_spec(request.body["jobSpec"]) == _normalised_job_spec(ours["jobSpec"])
