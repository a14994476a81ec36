"""Fixtures for the sandbox tests: the sandbox in this process (with the real clients aimed at it),
`vertex-trainer dev sandbox` as a subprocess (read up to `# ready`), hand-written CustomJobs whose
replicas are `python -c` stand-ins, and /proc checks that nothing outlives a job or the sandbox."""

from __future__ import annotations

import dataclasses
import os
import queue
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.process_support import processes_with_env, tcp_listeners
from tests.shared import FAST_RETRY as LOOPBACK_RETRY
from vertex_trainer.sandbox import READY, Sandbox
from vertex_trainer.settings import PollPolicy, Settings

ROOT = Path(__file__).resolve().parents[2]
PROJECT, REGION, BUCKET = "sandbox", "us-central1", "sandbox-test"
FAST_RETRY = dataclasses.replace(LOOPBACK_RETRY, read_timeout=30)  # (tests/shared.py, slower reads)
FAST_POLL = PollPolicy(initial=0.05, maximum=0.2)


class Lines(list):
    """What the sandbox echoes (its stderr in the CLI), kept for assertions."""

    def __call__(self, text: str) -> None:
        self.append(text)


# A module whose tests each leave the sandbox as they found it (their own jobs, runs and models,
# looked up by name, no fault left scripted) says `SHARED_SANDBOX = True`: its tests then share one
# sandbox (and its marker and lines), started once for the module and checked empty when it stops;
# what a test scripted in it (vertex.on_strategy, no_capacity) is undone after the test.
# Each sandbox costs a second or two of start-up; one that runs a pipeline also its gRPC face's
# process (about 1.5 s of CPU, started by the first run).
SHARED = "SHARED_SANDBOX"


def _shared(request) -> bool:
    return bool(getattr(request.module, SHARED, False))


@pytest.fixture
def marker(request) -> str:
    """A per-test token in the sandbox's environment: every replica and server inherits it (the
    module's one where the module shares its sandbox)."""
    return request.getfixturevalue("module_marker") if _shared(request) else _new_marker()


@pytest.fixture
def echoed(request) -> Lines:
    """What the sandbox echoes; where the module shares its sandbox, the lines since this test began."""
    if not _shared(request):
        return Lines()
    lines = request.getfixturevalue("module_echoed")
    lines.clear()
    return lines


@pytest.fixture
def sandbox(request):
    """A Sandbox in this process, with the test bucket; stopped (and checked empty) after: after
    the test, or after the module where the module shares its sandbox."""
    if _shared(request):
        box = request.getfixturevalue("module_sandbox")
        yield box
        box.vertex.unscript()  # a capacity fault a test scripted is not the next test's
        return
    yield from _sandbox(request.getfixturevalue("marker"), request.getfixturevalue("echoed"))


@pytest.fixture(scope="module")
def module_marker() -> str:
    return _new_marker()


@pytest.fixture(scope="module")
def module_echoed() -> Lines:
    return Lines()


@pytest.fixture(scope="module")
def module_sandbox(module_marker, module_echoed):
    yield from _sandbox(module_marker, module_echoed)


def _new_marker() -> str:
    return f"VT_TEST_{uuid.uuid4().hex}"


def _sandbox(marker: str, echoed: Lines):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERTEX_TRAINER_", "AIP_"))}
    env[marker] = "1"
    box = Sandbox(env, buckets=[BUCKET], project=PROJECT, region=REGION, echo=echoed)
    with box:
        yield box
    assert processes_with_env(marker) == []


@pytest.fixture
def settings(sandbox) -> Settings:
    """What the CLI would build from the sandbox's exports, with millisecond retries and polls."""
    env = sandbox.env()
    base = Settings.from_environ(env)
    return Settings(
        vertex_endpoint=base.vertex_endpoint,
        logging_endpoint=base.logging_endpoint,
        storage_emulator=base.storage_emulator,
        emulator_token=base.emulator_token,  # the sandbox's, handed out in its variables
        project=PROJECT,
        region=REGION,
        retry=FAST_RETRY,
        poll=FAST_POLL,
        environ=env,
    )


def python_job(
    script: str,
    *,
    replicas: int = 1,
    name: str = "stand-in",
    output_dir: str = f"gs://{BUCKET}/runs/stand-in",
) -> dict:
    """A CustomJob (REST body) whose replicas run `python -c SCRIPT`."""
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {
            "imageUri": "us-docker.pkg.dev/p/r/trainer:v1",
            "command": ["python", "-c", script],
        },
    }
    pools = [pool] + ([{**pool, "replicaCount": str(replicas - 1)}] if replicas > 1 else [])
    return {
        "displayName": name,
        "labels": {"vertex-trainer-key": uuid.uuid4().hex[:12]},
        "jobSpec": {"workerPoolSpecs": pools, "baseOutputDirectory": {"outputUriPrefix": output_dir}},
    }


# A serving container stand-in: Vertex AI's custom-container contract (AIP_HTTP_PORT, the health
# and predict routes), echoing its instances; {"bad": ...} is refused like a bad image.
ECHO_SERVER = textwrap.dedent("""\
    import json, os
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.answer(200 if self.path == os.environ["AIP_HEALTH_ROUTE"] else 404, {})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != os.environ["AIP_PREDICT_ROUTE"]:
                return self.answer(404, {"error": "no route " + self.path})
            if any("bad" in i for i in body["instances"]):
                return self.answer(400, {"error": "instance 0: not a JPEG or PNG image"})
            self.answer(200, {"predictions": [{"echo": i, "model": os.environ["AIP_STORAGE_URI"]}
                                              for i in body["instances"]],
                              "deployedModelId": os.environ["AIP_DEPLOYED_MODEL_ID"]})

    HTTPServer(("127.0.0.1", int(os.environ["AIP_HTTP_PORT"])), Handler).serve_forever()
    """)


def echo_deploy_request(endpoint: str = "echo"):
    """A DeployRequest for a model served by ECHO_SERVER."""
    from vertex_trainer.vertex.model_deploy import DeployRequest, ServingContainer

    return DeployRequest(
        model_display_name="echo",
        artifact_uri=f"gs://{BUCKET}/runs/echo/model",
        container=ServingContainer(
            image_uri="us-docker.pkg.dev/p/r/serve:v1", command=("python", "-c", ECHO_SERVER)
        ),
        job_id="123",
        endpoint=endpoint,
        machine_type="n1-standard-4",
    )


# -- `vertex-trainer dev sandbox` as a subprocess ------------------------------------------------


def cli() -> list[str]:
    script = Path(sys.executable).parent / "vertex-trainer"
    return [str(script)] if script.exists() else [sys.executable, "-m", "vertex_trainer"]


class SandboxProcess:
    """`vertex-trainer dev sandbox ...` started; `env` is what it exported, read up to `# ready`."""

    def __init__(self, *args: str, env: dict[str, str], timeout: float = 60):
        # stderr (every job's lines) to a file: an unread pipe would fill and stall the sandbox.
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [*cli(), "dev", "sandbox", *args],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=env,
            cwd=ROOT,
        )
        self.exports: dict[str, str] = {}
        self.lines: list[str] = []
        # A thread reads stdout (select() on a buffered pipe would miss lines already read).
        lines: queue.Queue = queue.Queue()
        threading.Thread(
            target=lambda: [lines.put(x) for x in iter(self.proc.stdout.readline, "")] + [lines.put(None)],
            daemon=True,
        ).start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise AssertionError("dev sandbox printed no `# ready`") from None
            if line is None:
                raise AssertionError(f"dev sandbox ended: {self.err()[-2000:]}")
            line = line.rstrip("\n")
            self.lines.append(line)
            if line == READY:
                break
            assert line.startswith("export "), line
            name, _, value = line[len("export ") :].partition("=")
            self.exports[name] = value.strip("'")

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, **self.exports}

    def err(self) -> str:
        """What it wrote on stderr so far."""
        self.stderr.seek(0)
        return self.stderr.read()

    def terminate(self, timeout: float = 60) -> tuple[int, str]:
        """SIGTERM, then its exit code and stderr."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=timeout)
        return self.proc.returncode, self.err()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


@pytest.fixture
def base_env(marker, tmp_path) -> dict[str, str]:
    """The environment for CLI subprocesses: no tool or gcloud settings of the machine, the marker."""
    return cli_base_env(marker, tmp_path)


def cli_base_env(marker: str, tmp_path: Path) -> dict[str, str]:
    """`base_env` for fixtures of a wider scope: `marker` set, gcloud's configuration in `tmp_path`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERTEX_TRAINER_", "GOOGLE_", "CLOUDSDK_", "AIP_"))
    }
    gcloud = tmp_path / "gcloud-config"
    gcloud.mkdir(exist_ok=True)
    env.update(
        {
            marker: "1",
            "CLOUDSDK_CONFIG": str(gcloud),
            "COLUMNS": "200",
            "VERTEX_TRAINER_RETRY": "attempts=4,initial=0.01,maximum=0.05,deadline=20",
        }
    )
    return env


# -- processes and ports ---------------------------------------------------------------------------


def ports_of(exports: dict[str, str]) -> list[int]:
    """The loopback ports the sandbox's variables name."""
    from urllib.parse import urlsplit

    return sorted(
        {urlsplit(v).port for v in exports.values() if v.startswith("http://127.0.0.1:") and urlsplit(v).port}
    )


def listening_sockets(ports: list[int]) -> dict[int, set[str]]:
    """port -> the inodes of the sockets that listen on it (/proc/net/tcp and tcp6), for `ports`.
    A socket a port had when the sandbox stopped that is still there afterwards outlived it; a
    new socket on the same port is another test's server (the workers bind ephemeral ports)."""
    found: dict[int, set[str]] = {}
    for _, port, inode in tcp_listeners():
        if port in ports:
            found.setdefault(port, set()).add(inode)
    return found
