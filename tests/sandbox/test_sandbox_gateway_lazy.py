"""The pipelines' gateway's gRPC face (sandbox/gateway.py) is a process of its own that only
pipeline tasks use: `dev sandbox` starts it with the first pipeline run, one for two runs begun
at once, on loopback, and SIGTERM ends it with the rest (checked in /proc)."""

from __future__ import annotations

import ipaddress
import os
import threading
import time
import uuid

import pytest

from tests.process_support import tcp_listeners
from vertex_trainer.sandbox.runner import call
from vertex_trainer.sandbox.services import DEFAULT_PROJECT

from .conftest import BUCKET, REGION, SandboxProcess, processes_with_env

pytestmark = pytest.mark.wire

PARENT = f"projects/{DEFAULT_PROJECT}/locations/{REGION}"
# A compiled pipeline with no task: its run begins (and so needs the gateway) and succeeds.
EMPTY_PIPELINE = {"pipelineInfo": {"name": "empty"}, "root": {"dag": {"tasks": {}}}}


def _grpc_faces(marker: str) -> list[int]:
    """The pids of the test's processes that run the gateway's gRPC face."""
    found = []
    for pid in processes_with_env(marker):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"vertex_trainer.sandbox.gateway" in argv:
            found.append(pid)
    return found


def _listening(pid: int) -> list[tuple[str, int, str]]:
    """(address, port, inode) of the TCP sockets process `pid` listens on."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    return [entry for entry in tcp_listeners() if entry[2] in inodes]


def _loopback(address: str) -> bool:
    """127.0.0.1, ::1, or 127.0.0.1 as an IPv6 socket shows it (::ffff:127.0.0.1)."""
    ip = ipaddress.ip_address(address)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return (mapped or ip).is_loopback


def _ended(vertex: str, token: str, name: str, timeout: float = 120) -> dict:
    """Run `name` as the fake answers it once it has ended (another process's state: read every
    50 ms, at most `timeout` s)."""
    deadline, pause = time.monotonic() + timeout, threading.Event()
    while True:
        status, run = call(vertex, "GET", f"/v1/{name}", token=token)
        assert status == 200, run
        if run["state"] in ("PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED"):
            return run
        assert time.monotonic() < deadline, run
        pause.wait(0.05)


@pytest.mark.timeout(240)
def test_the_grpc_face_starts_with_the_first_pipeline_run_and_ends_with_the_sandbox(base_env, marker):
    box = SandboxProcess("--bucket", BUCKET, env=base_env)
    try:
        vertex, token = (
            box.exports["VERTEX_TRAINER_API_ENDPOINT"],
            box.exports["VERTEX_TRAINER_EMULATOR_TOKEN"],
        )
        assert _grpc_faces(marker) == []  # ready, and no pipeline yet: no gRPC face

        # Two runs created back to back: both begin while the first one's face is starting.
        names = []
        for _ in range(2):
            body = {
                "displayName": "empty",
                "pipelineSpec": EMPTY_PIPELINE,
                "runtimeConfig": {"gcsOutputDirectory": f"gs://{BUCKET}/pipeline-root"},
            }
            job_id = f"empty-{uuid.uuid4().hex[:8]}"
            status, created = call(
                vertex, "POST", f"/v1/{PARENT}/pipelineJobs?pipelineJobId={job_id}", body, token=token
            )
            assert status == 200, created
            names.append(created["name"])
        for name in names:
            run = _ended(vertex, token, name)
            assert run["state"] == "PIPELINE_STATE_SUCCEEDED", run.get("error")

        faces = _grpc_faces(marker)
        assert len(faces) == 1, faces  # one face, for both runs
        served = _listening(faces[0])
        assert len(served) == 1 and _loopback(served[0][0]), served  # its one port, on loopback

        code, err = box.terminate()
        assert code == 0, err[-2000:]
        assert processes_with_env(marker) == [], "a process outlived the sandbox"
        left = {inode for _, _, inode in tcp_listeners()}
        assert not left & {inode for _, _, inode in served}, "the gRPC face's socket outlived it"
    finally:
        box.kill()
