"""The Cloud Storage route for local runs: google-cloud-storage via STORAGE_EMULATOR_HOST, and
TensorFlow's own gs:// filesystem via the TLS-terminating proxy, against gcp-storage-emulator."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import socket
import ssl
import subprocess
import sys

import pytest

pytestmark = pytest.mark.wire

TF_SCRIPT = r"""
import json, sys, tensorflow as tf
bucket = sys.argv[1]
out = {}
with tf.io.gfile.GFile(f"gs://{bucket}/dir/hello.txt", "w") as f:
    f.write("x" * 300000 + "end")          # > 1 upload chunk's worth for curl's framing
out["read"] = tf.io.gfile.GFile(f"gs://{bucket}/dir/hello.txt").read()[-3:]
out["size"] = tf.io.gfile.stat(f"gs://{bucket}/dir/hello.txt").length
with tf.io.TFRecordWriter(f"gs://{bucket}/data/train-00000-of-00001") as w:
    for i in range(50):
        w.write(b"record-%d" % i)
files = tf.io.gfile.glob(f"gs://{bucket}/data/train-*")
out["files"] = files
out["records"] = [r.numpy().decode() for r in tf.data.TFRecordDataset(files)]
tf.io.gfile.makedirs(f"gs://{bucket}/empty/dir")   # empty "directory" objects
tf.io.gfile.rename(f"gs://{bucket}/dir/hello.txt", f"gs://{bucket}/dir/moved.txt")
out["listdir"] = sorted(tf.io.gfile.listdir(f"gs://{bucket}/dir"))
print("RESULT " + json.dumps(out))
"""


@pytest.mark.trainer  # imports TensorFlow (in a child process)
def test_tensorflow_reads_and_writes_gs_through_the_proxy(gcs_emulator, gcs_bucket):
    env = dict(os.environ, **gcs_emulator.env(), TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(
        [sys.executable, "-c", TF_SCRIPT, gcs_bucket], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + f"\n{gcs_emulator.requests[-40:]}"
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    out = json.loads(line[len("RESULT ") :])
    names = gcs_emulator.list_objects(gcs_bucket)
    context = f"{out}\n{names}\n{gcs_emulator.requests[-40:]}"
    assert out["read"] == "end" and out["size"] == 300003, context
    assert out["files"] == [f"gs://{gcs_bucket}/data/train-00000-of-00001"], context
    assert out["records"] == [f"record-{i}" for i in range(50)], context
    assert out["listdir"] == ["moved.txt"], context
    # What TF wrote is in the emulator, byte for byte (no chunk framing stored).
    assert {"dir/moved.txt", "data/train-00000-of-00001", "empty/", "empty/dir/"} <= set(names), context
    assert gcs_emulator.read_object(gcs_bucket, "dir/moved.txt") == b"x" * 300000 + b"end"


def test_google_cloud_storage_client_uses_the_emulator(gcs_emulator, gcs_bucket, gcs_env, monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    # The client library's own switch, read from the process environment as in a user's shell.
    for k, v in gcs_env.items():
        monkeypatch.setenv(k, v)

    client = storage.Client(project="local-emulator", credentials=AnonymousCredentials())
    client.bucket(gcs_bucket).blob("staging/pkg.tar.gz").upload_from_string(b"payload")
    assert gcs_emulator.read_object(gcs_bucket, "staging/pkg.tar.gz") == b"payload"
    assert [b.name for b in client.list_blobs(gcs_bucket)] == ["staging/pkg.tar.gz"]


def _proxy_request(emu, raw: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", emu.proxy_port), timeout=10) as s:
        s.sendall(raw)
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


def test_proxy_dechunks_uploads_and_rewrites_resumable_location(gcs_emulator, gcs_bucket):
    # Plain-http proxy form, chunked body AND a (wrong) Content-Length, as TF/libcurl sends it.
    body = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    req = (
        f"POST http://storage.googleapis.com/upload/storage/v1/b/{gcs_bucket}/o"
        f"?uploadType=media&name=chunked.txt HTTP/1.1\r\n"
        f"Host: storage.googleapis.com\r\nTransfer-Encoding: chunked\r\n"
        f"Content-Length: 999\r\nConnection: close\r\n\r\n"
    ).encode() + body
    resp = _proxy_request(gcs_emulator, req)
    assert resp.startswith(b"HTTP/1.1 200"), resp[:300]
    assert gcs_emulator.read_object(gcs_bucket, "chunked.txt") == b"hello world"

    req = (
        f"POST http://www.googleapis.com/upload/storage/v1/b/{gcs_bucket}/o"
        f"?uploadType=resumable&name=big.bin HTTP/1.1\r\nHost: www.googleapis.com\r\n"
        f"Content-Length: 0\r\nConnection: close\r\n\r\n"
    ).encode()
    resp = _proxy_request(gcs_emulator, req)
    location = [h for h in resp.split(b"\r\n") if h.lower().startswith(b"location:")]
    assert location and location[0].split(b":", 1)[1].strip().startswith(
        b"https://www.googleapis.com/upload/storage/v1/b/"
    ), resp[:500]


def test_proxy_tls_certificate_is_trusted_only_through_the_throwaway_ca(gcs_emulator):
    raw = socket.create_connection(("127.0.0.1", gcs_emulator.proxy_port), timeout=10)
    raw.sendall(b"CONNECT storage.googleapis.com:443 HTTP/1.1\r\nHost: storage.googleapis.com:443\r\n\r\n")
    assert raw.recv(1024).startswith(b"HTTP/1.1 200")
    ctx = ssl.create_default_context(cafile=gcs_emulator.ca_path)
    with ctx.wrap_socket(raw, server_hostname="storage.googleapis.com") as tls:
        tls.sendall(b"GET / HTTP/1.1\r\nHost: storage.googleapis.com\r\nConnection: close\r\n\r\n")
        assert tls.recv(1024).startswith(b"HTTP/1.1 200")  # the emulator's health check


def test_proxy_refuses_other_hosts(gcs_emulator):
    resp = _proxy_request(gcs_emulator, b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
    assert resp.startswith(b"HTTP/1.1 403")
    assert b"example.com" in resp


def test_dev_gcs_emulator_command_prints_a_working_environment_and_stops_cleanly():
    """`vertex-trainer dev gcs-emulator`: the printed exports reach the emulator; SIGTERM stops
    it and removes the throwaway CA."""
    import shlex
    import signal
    import urllib.request

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vertex_trainer",
            "dev",
            "gcs-emulator",
            "--port",
            "0",
            "--proxy-port",
            "0",
            "--bucket",
            "demo-bucket",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        env = {}
        while "GOOGLE_CLOUD_PROJECT" not in env:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            key, _, value = line.removeprefix("export ").strip().partition("=")
            env[key] = shlex.split(value)[0]
        assert {
            "STORAGE_EMULATOR_HOST",
            "https_proxy",
            "http_proxy",
            "CURL_CA_BUNDLE",
            "NO_GCE_CHECK",
            "GOOGLE_AUTH_TOKEN_FOR_TESTING",
            "GCS_RETRY_CONFIG_MAX_RETRIES",
        } <= set(env)
        assert os.path.exists(env["CURL_CA_BUNDLE"])
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{env['STORAGE_EMULATOR_HOST']}/storage/v1/b/demo-bucket") as resp:
            assert json.loads(resp.read())["name"] == "demo-bucket"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert not os.path.exists(env["CURL_CA_BUNDLE"])


# -- run_local's side of the route: the check, a stand-in run, metrics.json read back ----------

# A stand-in chief that writes metrics.json with google-cloud-storage, which finds the emulator
# through STORAGE_EMULATOR_HOST in the environment run_local gave it.
WRITE_METRICS = r"""
import json, os
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
base = os.environ["AIP_MODEL_DIR"].removesuffix("/model/")
bucket, _, prefix = base.removeprefix("gs://").partition("/")
client = storage.Client(project="local-emulator", credentials=AnonymousCredentials())
client.bucket(bucket).blob(f"{prefix}/metrics.json").upload_from_string(
    json.dumps({"replicas": 1, "strategy": "default"}))
print("metrics written", flush=True)
"""


def test_check_gcs_route_recognises_the_emulator_route(gcs_env):
    from vertex_trainer.local import check_gcs_route

    assert check_gcs_route(gcs_env) == "emulator"


def test_check_gcs_route_finds_gclouds_credentials_from_the_given_environment(tmp_path):
    from vertex_trainer.errors import UserError
    from vertex_trainer.local import check_gcs_route

    config = tmp_path / "gcloud"
    config.mkdir()
    # The shape `gcloud auth application-default login` writes (loading it sends nothing).
    (config / "application_default_credentials.json").write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "id",
                "client_secret": "secret",
                "refresh_token": "token",
            }
        )
    )
    assert check_gcs_route({"CLOUDSDK_CONFIG": str(config)}) == "credentials"
    (config / "application_default_credentials.json").write_text("not json")
    with pytest.raises(UserError, match=re.escape("application_default_credentials.json")):
        check_gcs_route({"CLOUDSDK_CONFIG": str(config)})


def test_a_local_run_reaches_the_emulator_through_the_settings_environment(
    tmp_path, gcs_emulator, gcs_bucket, gcs_env, marker
):
    from rich.console import Console

    from tests.process_support import processes_with_env
    from vertex_trainer.local import SUCCEEDED, run_local
    from vertex_trainer.settings import Settings

    from .conftest import custom_job, python_command, worker_pool

    base = f"gs://{gcs_bucket}/runs/stand-in"
    job = custom_job(base, [worker_pool(command=python_command(WRITE_METRICS))])
    assert "STORAGE_EMULATOR_HOST" not in os.environ  # the route comes from the settings only
    settings = Settings.from_environ(dict(os.environ) | gcs_env | {"VT_MARKER": marker})
    buf = io.StringIO()
    result = run_local(job, None, settings=settings, console=Console(file=buf, width=200))
    assert result.state == SUCCEEDED, buf.getvalue()
    assert result.model_dir == f"{base}/model/"
    assert result.metrics == {"replicas": 1, "strategy": "default"}
    assert "runs/stand-in/metrics.json" in gcs_emulator.list_objects(gcs_bucket)
    assert processes_with_env(marker) == []


def test_read_metrics_on_gs_is_none_when_absent_and_the_emulator_logs_nothing(gcs_bucket, gcs_env, caplog):
    """A script job writes no metrics.json: looking for it is an ordinary answer, not the storage
    emulator's "Resource not found" error on the sandbox's stderr (which --quiet cannot hide)."""
    from vertex_trainer.gcp import storage
    from vertex_trainer.local import read_metrics
    from vertex_trainer.settings import Settings

    settings = Settings.from_environ(gcs_env)
    with caplog.at_level(logging.ERROR):
        assert read_metrics(f"gs://{gcs_bucket}/runs/never", settings) is None
    assert [r.getMessage() for r in caplog.records if r.name.startswith("gcp_storage_emulator")] == []
    storage.client(settings).bucket(gcs_bucket).blob("runs/done/metrics.json").upload_from_string(
        '{"replicas": 1}'
    )
    assert read_metrics(f"gs://{gcs_bucket}/runs/done", settings) == {"replicas": 1}


@pytest.mark.trainer
def test_the_bundled_trainer_reads_its_gcs_data_as_gs_through_the_emulator(tmp_path, gcs_bucket, gcs_env):
    """A spec written for Vertex AI (trainer.train_data: /gcs/BUCKET/...) runs here unchanged:
    the bundled trainer is given gs://BUCKET/... (it opens Cloud Storage itself; there is no /gcs/
    mount here) and trains on the bucket's records, with one line saying so."""
    from rich.console import Console

    from vertex_trainer import api
    from vertex_trainer.local import SUCCEEDED, run_local
    from vertex_trainer.settings import Settings

    from .conftest import custom_job

    settings = Settings.from_environ(dict(os.environ) | gcs_env)
    api.synthesize_data(
        f"gs://{gcs_bucket}/data", examples=64, shards=2, image_size=16, num_classes=2, settings=settings
    )
    flags = [f"--train-data=/gcs/{gcs_bucket}/data/train-*", "--num-classes=2", "--image-size=16"]
    flags += ["--model=tiny-cnn", "--epochs=1", "--batch-size=32", "--precision=float32"]
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": 1,
        "containerSpec": {"imageUri": "x", "args": flags},
    }
    job = custom_job(str(tmp_path / "out"), [pool])
    buf = io.StringIO()
    result = run_local(job, None, settings=settings, console=Console(file=buf, width=300))
    shown = buf.getvalue()
    assert result.state == SUCCEEDED, shown[-3000:]
    assert (
        f"args[0]: /gcs/{gcs_bucket}/data/train-* is read as gs://{gcs_bucket}/data/train-* here" in shown
    ), shown[:2000]
    config = json.loads((tmp_path / "out" / "trainer_config.json").read_text())
    assert config["flags"]["train_data"] == f"gs://{gcs_bucket}/data/train-*"
    assert result.metrics["steps"] == 2  # 64 records of the bucket, batch 32
    assert not os.path.exists(f"/gcs/{gcs_bucket}")  # nothing was written to a local /gcs
