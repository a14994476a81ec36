"""`vertex-trainer tensorboard JOB` of a sandbox job copies its gs://.../logs/ objects into a
scratch folder (performance/tensorboard_server.py `copy_prefix`), at most MAX_BYTES (2 GiB) in
all. Each object was downloaded whole and only then counted: one object of any size under the
job's logs (whoever writes the bucket) was held in memory before the refusal. The listing's size
is now looked at first, and no object is read past what the bound leaves.
"""

from __future__ import annotations

import pytest
from google.cloud.storage import Blob

from tests.shared import put_object, storage_emulator
from vertex_trainer.errors import UserError
from vertex_trainer.performance import tensorboard_server
from vertex_trainer.settings import Settings

LOGS = "gs://sandbox/runs/r1/logs"
BOUND = 1 << 20

pytestmark = pytest.mark.wire


def test_an_object_over_the_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(tensorboard_server, "MAX_BYTES", BOUND)  # the bound scaled down: 4 MiB over 1
    download = Blob.download_as_bytes
    got: list[int] = []

    def counted(self, *args, **kwargs):  # the client library's download, its size noted
        data = download(self, *args, **kwargs)
        got.append(len(data))
        return data

    monkeypatch.setattr(Blob, "download_as_bytes", counted)
    with storage_emulator("sandbox") as url:
        put_object(url, f"{LOGS}/train/events.out.tfevents.1", b"e1")
        put_object(url, f"{LOGS}/train/events.out.tfevents.2", b"\0" * (4 * BOUND))
        with pytest.raises(UserError) as e:
            tensorboard_server.copy_prefix(Settings(storage_emulator=url), LOGS, tmp_path)
    assert got == [2], got  # the small one only
    assert "are over 1.0 MiB" in e.value.message
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["events.out.tfevents.1"]
