"""An empty object (0 bytes) read within a bound: Cloud Storage answers a ranged read of one with
416 Range Not Satisfiable (RFC 9110: byte 0 is past its end), and google-cloud-storage raises
RequestRangeNotSatisfiable. Since the bounded reads (665201d: read_json, 1c07471, 5179bb4,
c07fabd), an empty manifest.json beside a dataset's shards made `cost SPEC --throughput N` end in
that exception's traceback, where the whole download had read b"" and the estimate said there
was no manifest; the same for an empty metrics.json or trace file. An empty object is b"" again.

The storage emulator answers such a read with 200 and no bytes, so the service's answer is
reproduced here at the client library's download (not the code under test).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from google.api_core.exceptions import RequestRangeNotSatisfiable
from google.cloud.storage import Blob

from tests.shared import DIGITS_CPU_JOB
from vertex_trainer import api
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings

pytestmark = pytest.mark.wire


@pytest.fixture
def as_cloud_storage(monkeypatch):
    """Blob.download_as_bytes as it fares against Cloud Storage: a range of an empty object is 416."""
    download = Blob.download_as_bytes

    def ranged(self, *args, **kwargs):
        data = download(self, *args, **{k: v for k, v in kwargs.items() if k not in ("start", "end")})
        if "start" in kwargs and not data:
            raise RequestRangeNotSatisfiable("GET ...: Request range not satisfiable")
        return data if "start" not in kwargs else data[kwargs["start"] : kwargs["end"] + 1]

    monkeypatch.setattr(Blob, "download_as_bytes", ranged)


def test_an_empty_object_reads_as_empty_within_a_bound(emulator, bucket, as_cloud_storage):
    settings = Settings.from_environ(emulator.env())
    objects = storage.client(settings).bucket(bucket)
    objects.blob("runs/r1/metrics.json").upload_from_string(b"")
    objects.blob("runs/r1/big.json").upload_from_string(b'{"a": 1}')
    assert storage.read_bytes(settings, f"gs://{bucket}/runs/r1/metrics.json", 16) == b""
    assert storage.read_json(settings, f"gs://{bucket}/runs/r1/metrics.json") is None
    assert storage.read_json(settings, f"gs://{bucket}/runs/r1/big.json") == {"a": 1}
    assert storage.read_bytes(settings, f"gs://{bucket}/runs/r1/big.json", 2) == b'{"a'
    assert storage.read_bytes(settings, f"gs://{bucket}/runs/r1/none.json", 16) is None


def test_cost_with_an_empty_manifest_in_the_data_bucket_is_an_estimate(
    tmp_path: Path, emulator, bucket, as_cloud_storage
):
    settings = Settings.from_environ(emulator.env())
    storage.client(settings).bucket(bucket).blob("data/manifest.json").upload_from_string(b"")
    spec = tmp_path / "spec.yaml"
    job = {
        **DIGITS_CPU_JOB,
        "trainer": {"model": "tiny-cnn", "train_data": f"gs://{bucket}/data/train-*", "num_classes": 10},
    }
    spec.write_text(yaml.safe_dump(job))
    est = api.cost(api.load_spec(str(spec), settings=settings), throughput=100, settings=settings)
    assert est.examples_per_epoch is None
    assert any("manifest.json (written by `vertex-trainer data convert`)" in n for n in est.notes), est.notes


def test_an_empty_record_read_through_the_json_api_is_no_record():
    """The same answer to the JSON API's client (storage.object_json: the look a cloud submit
    takes for a run made here): a 416 for the range of an empty object is no record, not a
    failure (which stops the submit, exit 3). A stand-in on loopback answers as Cloud Storage."""
    import http.server
    import threading

    from vertex_trainer.gcp.http import ApiClient

    class CloudStorage(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            empty = "alt=media" in self.path and self.headers.get("Range")
            body = b'{"error": {"code": 416, "message": "Requested range not satisfiable."}}'
            self.send_response(416 if empty else 200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body) if empty else 2))
            self.end_headers()
            self.wfile.write(body if empty else b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CloudStorage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = Settings(storage_emulator=f"http://127.0.0.1:{server.server_port}")
        api_client = storage.storage_api(settings)
        assert isinstance(api_client, ApiClient)
        uri = "gs://b/runs/.vertex-trainer/r1/result.json"
        assert storage.object_json(api_client, uri, emulator=True) is None
    finally:
        server.shutdown()
        server.server_close()
