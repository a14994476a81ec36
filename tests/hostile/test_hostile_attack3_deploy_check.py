"""`deploy` checks that the export it registers exists (deployment/deploy_request.py
`check_model_dir`) by reading its saved_model.pb, and read it whole: a SavedModel of frozen weights
is up to 2 GB of protobuf, and a model folder in a shared bucket is anyone's who writes it, so
`deploy --model-dir gs://...` held it all in memory to learn that it was there. Now its first
byte is read; a missing one is still exit 2 before anything is sent.
"""

from __future__ import annotations

import pytest

from vertex_trainer.deployment import deploy_request
from vertex_trainer.errors import UserError
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings

pytestmark = pytest.mark.wire


def test_the_export_is_seen_from_its_first_byte(emulator, bucket, monkeypatch):
    settings = Settings.from_environ(emulator.env())
    blob = storage.client(settings).bucket(bucket).blob("runs/1/model/saved_model.pb")
    blob.upload_from_string(b"\x08\x01" * (2 << 20))  # 4 MiB
    read = storage.read_bytes
    got: list[int] = []

    def counted(*args, **kwargs):  # the real read, its size noted
        data = read(*args, **kwargs)
        got.append(-1 if data is None else len(data))
        return data

    monkeypatch.setattr(storage, "read_bytes", counted)
    lines: list[str] = []
    deploy_request.check_model_dir(settings, f"gs://{bucket}/runs/1/model/", log=lines.append)
    assert got == [1] and lines == []
    with pytest.raises(UserError) as e:
        deploy_request.check_model_dir(settings, f"gs://{bucket}/runs/2/model", log=lines.append)
    assert "no SavedModel at gs://" in e.value.message and got == [1, -1]
