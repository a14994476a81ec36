"""`vertex-trainer dev sandbox` as a user runs it: the exports, `# ready`, the env file, a command
run inside it, and SIGTERM leaving no process and no port behind (checked in /proc and by
connecting)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import pytest

from vertex_trainer import api
from vertex_trainer.settings import PollPolicy, RetryPolicy, Settings
from vertex_trainer.vertex.custom_jobs import Job, JobsClient

from .conftest import (
    BUCKET,
    REGION,
    SandboxProcess,
    cli,
    echo_deploy_request,
    listening_sockets,
    ports_of,
    processes_with_env,
    python_job,
)

pytestmark = pytest.mark.wire

EXPECTED = (
    "VERTEX_TRAINER_API_ENDPOINT",
    "VERTEX_TRAINER_CLOUDBUILD_ENDPOINT",
    "VERTEX_TRAINER_REGISTRY_ENDPOINT",
    "VERTEX_TRAINER_LOGGING_ENDPOINT",
    "VERTEX_TRAINER_QUOTAS_ENDPOINT",
    "VERTEX_TRAINER_MONITORING_ENDPOINT",
    "STORAGE_EMULATOR_HOST",
    "https_proxy",
    "http_proxy",
    "CURL_CA_BUNDLE",
    "GOOGLE_AUTH_TOKEN_FOR_TESTING",
    "GOOGLE_CLOUD_PROJECT",
    "CLOUDSDK_AI_REGION",
)


def test_sigterm_stops_jobs_model_servers_and_every_port(base_env, marker, tmp_path):
    env_file = tmp_path / "sandbox.env"
    box = SandboxProcess("--bucket", BUCKET, "--env-file", str(env_file), "--project", "demo", env=base_env)
    try:
        assert set(EXPECTED) <= set(box.exports)
        assert box.exports["GOOGLE_CLOUD_PROJECT"] == "demo"
        # The env file: the same variables as NAME=value lines (`env $(cat FILE) ...`).
        assert dict(line.split("=", 1) for line in env_file.read_text().splitlines()) == box.exports

        settings = dataclasses.replace(
            Settings.from_environ(box.env(base_env)),
            retry=RetryPolicy(attempts=4, initial=0.01, read_timeout=30),
            poll=PollPolicy(initial=0.05, maximum=0.2),
        )
        client = JobsClient("demo", REGION, settings=settings)
        script = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(600)"
        job = Job(client.create_once(python_job(script, replicas=2)), client)
        from vertex_trainer.vertex.model_deploy import deploy
        from vertex_trainer.vertex.models import RegistryClient

        deployment = deploy(
            RegistryClient("demo", REGION, settings=settings), echo_deploy_request(), poll=settings.poll
        )
        assert deployment.predict([{"x": 1}])[0]["echo"] == {"x": 1}  # its server is up
        pids = _logged_pids(job, settings, count=2)
        assert len(processes_with_env(marker)) >= 4  # the sandbox, 2 replicas, the model server

        ports = ports_of(box.exports)
        served = listening_sockets(ports)
        assert sorted(served) == ports  # each port the sandbox exported has its server
        code, err = box.terminate()
        assert code == 0, err[-2000:]
        assert processes_with_env(marker) == [], "a process outlived the sandbox"
        assert all(not os.path.exists(f"/proc/{p}") for p in pids)
        assert len(ports) >= 7  # vertex, cloud build, registry, logging, quotas, storage, TLS proxy
        # None of those sockets is left (another test's server may have taken a port since).
        assert {p: s & served[p] for p, s in listening_sockets(ports).items() if s & served[p]} == {}
        assert not env_file.exists()  # it would name ports nobody listens on
        assert not os.path.exists(box.exports["CURL_CA_BUNDLE"])  # the throwaway CA is gone
    finally:
        box.kill()


def _logged_pids(job: Job, settings: Settings, count: int, timeout: float = 30) -> list[int]:
    """The pids the sleeper replicas logged, read through Cloud Logging (another process: no
    event to await, so look every 50 ms up to `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [
            int(e.message.split()[1])
            for e in api.logs(job.name, settings=settings)
            if e.message.startswith("pid ")
        ]
        if len(pids) >= count or time.monotonic() > deadline:
            assert len(pids) == count, pids
            return pids
        time.sleep(0.05)


def test_a_command_runs_inside_the_sandbox_and_its_exit_code_is_the_sandboxs(base_env, marker):
    check = (
        "import os, sys; ok = os.environ['VERTEX_TRAINER_API_ENDPOINT'].startswith("
        "'http://127.0.0.1:') and os.environ['STORAGE_EMULATOR_HOST']; sys.exit(7 if ok else 1)"
    )
    done = subprocess.run(
        [*cli(), "dev", "sandbox", "--", sys.executable, "-c", check],
        env=base_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 7, done.stderr[-2000:]
    assert done.stdout == ""  # the variables reached the command only; nothing to export
    assert "# sandbox ready: running" in done.stderr
    assert processes_with_env(marker) == []
