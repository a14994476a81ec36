"""`dev gcs-emulator` takes no token (docs/security-notes/listening.md): Host, Origin and JSON
checks are what keep a web page in your browser from acting on it. But gcp-storage-emulator
serves `GET /wipe`, which deletes every bucket, and a GET is what any page can send to loopback
with no Origin at all (an <img src>, a no-cors fetch): every object gone, from a page. The
guarded server answers it 404 and does nothing; the Cloud Storage API itself is unchanged."""

from __future__ import annotations

import http.client
import json

import pytest

from vertex_trainer.emulators.gcs import GcsEmulator


@pytest.fixture(scope="module")
def emulator():
    with GcsEmulator() as emu:  # as `dev gcs-emulator` starts it: no token
        emu.create_bucket("data")
        yield emu


def _get(emu: GcsEmulator, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(emu.host, emu.port, timeout=30)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _upload(emu: GcsEmulator, name: str) -> None:
    conn = http.client.HTTPConnection(emu.host, emu.port, timeout=30)
    try:
        conn.request(
            "POST",
            f"/upload/storage/v1/b/data/o?uploadType=media&name={name}",
            body=b"train",
            headers={"Content-Type": "application/octet-stream"},
        )
        assert conn.getresponse().status == 200
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/wipe", "/wipe/", "/wipe?x=1", "/wipe;x"])
def test_a_get_a_page_can_send_does_not_wipe_the_emulator(emulator, path):
    _upload(emulator, "train.csv")
    # What a browser sends for <img src="http://127.0.0.1:PORT/wipe">: a loopback Host, no Origin.
    status, body = _get(emulator, path, {"Host": f"127.0.0.1:{emulator.port}", "Accept": "image/*"})
    assert status == 404
    assert "not a Cloud Storage API" in json.loads(body)["error"]["message"]
    assert emulator.list_objects("data") == ["train.csv"]


def test_the_storage_api_is_still_served(emulator):
    _upload(emulator, "eval.csv")
    status, body = _get(emulator, "/storage/v1/b/data/o/eval.csv", {"Host": f"127.0.0.1:{emulator.port}"})
    assert status == 200 and json.loads(body)["name"] == "eval.csv"
    assert emulator.read_object("data", "eval.csv") == b"train"
