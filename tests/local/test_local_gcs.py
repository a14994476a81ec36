"""The Cloud Storage route for local runs: google-cloud-storage via STORAGE_EMULATOR_HOST, and
TensorFlow's own gs:// filesystem via the TLS-terminating proxy, against gcp-storage-emulator."""

from __future__ import annotations

import json
import os
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


def test_tensorflow_reads_and_writes_gs_through_the_proxy(gcs_emulator, gcs_bucket):
    env = dict(os.environ, **gcs_emulator.env(), TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, "-c", TF_SCRIPT, gcs_bucket], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:] + f"\n{gcs_emulator.requests[-40:]}"
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    out = json.loads(line[len("RESULT "):])
    names = gcs_emulator.list_objects(gcs_bucket)
    context = f"{out}\n{names}\n{gcs_emulator.requests[-40:]}"
    assert out["read"] == "end" and out["size"] == 300003, context
    assert out["files"] == [f"gs://{gcs_bucket}/data/train-00000-of-00001"], context
    assert out["records"] == [f"record-{i}" for i in range(50)], context
    assert out["listdir"] == ["moved.txt"], context
    # What TF wrote is in the emulator, byte for byte (no chunk framing stored).
    assert {"dir/moved.txt", "data/train-00000-of-00001", "empty/", "empty/dir/"} <= set(names), \
        context
    assert gcs_emulator.read_object(gcs_bucket, "dir/moved.txt") == b"x" * 300000 + b"end"


def test_google_cloud_storage_client_uses_the_emulator(gcs_emulator, gcs_bucket, gcs_env):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

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
    req = (f"POST http://storage.googleapis.com/upload/storage/v1/b/{gcs_bucket}/o"
           f"?uploadType=media&name=chunked.txt HTTP/1.1\r\n"
           f"Host: storage.googleapis.com\r\nTransfer-Encoding: chunked\r\n"
           f"Content-Length: 999\r\nConnection: close\r\n\r\n").encode() + body
    resp = _proxy_request(gcs_emulator, req)
    assert resp.startswith(b"HTTP/1.1 200"), resp[:300]
    assert gcs_emulator.read_object(gcs_bucket, "chunked.txt") == b"hello world"

    req = (f"POST http://www.googleapis.com/upload/storage/v1/b/{gcs_bucket}/o"
           f"?uploadType=resumable&name=big.bin HTTP/1.1\r\nHost: www.googleapis.com\r\n"
           f"Content-Length: 0\r\nConnection: close\r\n\r\n").encode()
    resp = _proxy_request(gcs_emulator, req)
    location = [l for l in resp.split(b"\r\n") if l.lower().startswith(b"location:")]
    assert location and location[0].split(b":", 1)[1].strip().startswith(
        b"https://www.googleapis.com/upload/storage/v1/b/"), resp[:500]


def test_proxy_tls_certificate_is_trusted_only_through_the_throwaway_ca(gcs_emulator):
    raw = socket.create_connection(("127.0.0.1", gcs_emulator.proxy_port), timeout=10)
    raw.sendall(b"CONNECT storage.googleapis.com:443 HTTP/1.1\r\n"
                b"Host: storage.googleapis.com:443\r\n\r\n")
    assert raw.recv(1024).startswith(b"HTTP/1.1 200")
    ctx = ssl.create_default_context(cafile=gcs_emulator.ca_path)
    with ctx.wrap_socket(raw, server_hostname="storage.googleapis.com") as tls:
        tls.sendall(b"GET / HTTP/1.1\r\nHost: storage.googleapis.com\r\nConnection: close\r\n\r\n")
        assert tls.recv(1024).startswith(b"HTTP/1.1 200")  # the emulator's health check


def test_proxy_refuses_other_hosts(gcs_emulator):
    resp = _proxy_request(gcs_emulator, b"CONNECT example.com:443 HTTP/1.1\r\n"
                                        b"Host: example.com:443\r\n\r\n")
    assert resp.startswith(b"HTTP/1.1 403")
    assert b"example.com" in resp


def test_dev_gcs_emulator_command_prints_a_working_environment_and_stops_cleanly():
    """`vertex-trainer dev gcs-emulator`: the printed exports reach the emulator; SIGTERM stops
    it and removes the throwaway CA."""
    import shlex
    import signal
    import urllib.request

    proc = subprocess.Popen(
        [sys.executable, "-m", "vertex_trainer.cli", "dev", "gcs-emulator", "--port", "0",
         "--proxy-port", "0", "--bucket", "demo-bucket"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        env = {}
        while "GOOGLE_CLOUD_PROJECT" not in env:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            key, _, value = line.removeprefix("export ").strip().partition("=")
            env[key] = shlex.split(value)[0]
        assert {"STORAGE_EMULATOR_HOST", "https_proxy", "http_proxy", "CURL_CA_BUNDLE",
                "NO_GCE_CHECK", "GOOGLE_AUTH_TOKEN_FOR_TESTING",
                "GCS_RETRY_CONFIG_MAX_RETRIES"} <= set(env)
        assert os.path.exists(env["CURL_CA_BUNDLE"])
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{env['STORAGE_EMULATOR_HOST']}/storage/v1/b/demo-bucket") as resp:
            assert json.loads(resp.read())["name"] == "demo-bucket"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert not os.path.exists(env["CURL_CA_BUNDLE"])
