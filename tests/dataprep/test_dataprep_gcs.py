"""gs:// in and out, through gcp-storage-emulator (in-process): the same pipeline, Beam's own
Cloud Storage filesystem, the marker object last."""

from __future__ import annotations

import io
import json

import pytest

from tests.shared import storage_emulator
from vertex_trainer.dataprep import records

from .conftest import make_tree, rel_of, run_cli

pytestmark = pytest.mark.wire


@pytest.fixture
def bucket(monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    with storage_emulator() as url:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        client = storage.Client(
            project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": url}
        )
        yield client.create_bucket("photos")


def test_gs_in_gs_out(bucket, tmp_path):
    tree = make_tree(tmp_path / "img", crops=3)
    for path in sorted(tree.root.rglob("*")):
        if path.is_file():
            bucket.blob(f"images/{path.relative_to(tree.root)}").upload_from_filename(str(path))
    bucket.blob("images/temple/").upload_from_string(b"")  # a console-made "folder" object

    result = run_cli("data", "convert", "gs://photos/images/", "gs://photos/datasets/v1", "--shards", "2")
    assert result.code == 0, result.err
    names = sorted(b.name for b in bucket.client.list_blobs("photos", prefix="datasets/v1/"))
    assert names == [
        f"datasets/v1/{n}"
        for n in (
            "_SUCCESS",
            "labels.txt",
            "manifest.json",
            "rejected.txt",
            "train-00000-of-00002",
            "train-00001-of-00002",
        )
    ]
    stored = []
    for name in names[-2:]:
        data = bucket.blob(name).download_as_bytes()
        stored += [records.decode_example(r) for r in records.read_records(io.BytesIO(data))]
    assert sorted(rel_of(ex) for ex in stored) == sorted(tree.good)
    rejected = bucket.blob("datasets/v1/rejected.txt").download_as_text().splitlines()
    assert sorted(line.split("\t")[0] for line in rejected) == sorted(
        f"gs://photos/images/{r}" for r in tree.bad
    )
    manifest = json.loads(bucket.blob("datasets/v1/manifest.json").download_as_bytes())
    assert manifest["trainer"]["train_data"] == "gs://photos/datasets/v1/train-*"
    # The marker is the newest object (written last).
    blobs = {b.name: b for b in bucket.client.list_blobs("photos", prefix="datasets/v1/")}
    marker = blobs.pop("datasets/v1/_SUCCESS")
    assert all(b.updated <= marker.updated for b in blobs.values())

    result = run_cli("data", "convert", "gs://photos/nothing-here", "gs://photos/x")
    assert result.code == 2 and "no class folders" in result.err


def test_dataflow_translates_the_job_up_to_the_wire(bucket, tmp_path):
    """Everything a Dataflow submit does before sending: list the classes, check OUT_DIR, build
    the worker wheel, and Beam's DataflowRunner translating the graph (its own --dry_run)."""
    tree = make_tree(tmp_path / "img", crops=1, bad=False)
    for path in sorted(tree.root.rglob("*")):
        if path.is_file():
            bucket.blob(f"images/{path.relative_to(tree.root)}").upload_from_filename(str(path))
    result = run_cli(
        "data",
        "convert",
        "gs://photos/images",
        "gs://photos/datasets/v2",
        "--eval-fraction",
        "0.1",
        "--runner",
        "dataflow",
        "--project",
        "my-project",
        "--region",
        "us-central1",
        "--job-name",
        "convert-photos",
        "--beam-option=--dry_run=True",
        "--beam-option=--no_auth",
        "--output",
        "json",
    )
    assert result.code == 0, result.err
    assert json.loads(result.out)["job_name"] == "convert-photos"
    assert "staging vertex_trainer_dataprep_worker-" in result.err
    assert "translated for Dataflow and not submitted" in result.err
    assert "binary-compatible" not in result.err
    assert not list(bucket.client.list_blobs("photos", prefix="datasets/"))  # nothing written
