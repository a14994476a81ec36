"""JSON records in a bucket (or a data folder) whose writer is someone else: a dataset's
manifest.json beside its shards, which `cost` and `bench` read for the examples of an epoch, and a
run's metrics.json or result.json in a shared bucket (storage.read_json reads them all).

`cost SPEC --throughput N` of a spec whose data's manifest.json held `{"splits": [1]}`, an
`examples` that is text (with an escape sequence, say), or arrays nested 100,000 deep ended in a
traceback (AttributeError, ValueError, RecursionError), and storage.read_json downloaded an object
of any size whole into memory. Now what is over storage.MAX_JSON_BYTES is not downloaded past it,
what is nested too deep is "not JSON", and a manifest of another shape is a note naming the field
and its value (escaped), exit 0, the estimate without the epoch's figure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import DIGITS_CPU_JOB, cli_runner
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings

DEEP = "{" + '"splits": ' + "[" * 100_000 + "]" * 100_000 + "}"
HOSTILE = {
    '{"splits": [1]}': "its splits are [1], not an object",
    '{"splits": {"train": 7}}': "its splits.train is 7, not an object",
    '{"splits": {"train": {"examples": "7\\u001b]0;PWNED\\u0007"}}}': (
        "its splits.train.examples is '7\\x1b]0;PWNED\\x07', not a count of examples"
    ),
    '{"splits": {"train": {"examples": 1' + "0" * 400 + "}}}": "not a count of examples",
    DEEP: "(written by `vertex-trainer data convert`) with train examples",
}


def _spec(tmp_path: Path, train_data: str) -> Path:
    spec = tmp_path / "spec.yaml"
    job = {
        **DIGITS_CPU_JOB,
        "trainer": {"model": "tiny-cnn", "train_data": train_data, "num_classes": 10, "epochs": 3},
    }
    spec.write_text(yaml.safe_dump(job))
    return spec


@pytest.mark.wire
def test_a_manifest_in_the_data_bucket_of_another_shape_is_a_note_not_a_traceback(tmp_path, emulator, bucket):
    run = cli_runner(edge_env(tmp_path, **emulator.env()), cwd=tmp_path)
    spec = _spec(tmp_path, f"gs://{bucket}/data/train-*")
    client = storage.client(Settings.from_environ(emulator.env()))
    for manifest, said in HOSTILE.items():
        client.bucket(bucket).blob("data/manifest.json").upload_from_string(manifest)
        done = run("cost", str(spec), "--throughput", "100")
        assert done.returncode == 0, done.stderr[-2000:]
        assert said in done.stdout, done.stdout
        assert "\x1b" not in done.stdout + done.stderr
    client.bucket(bucket).blob("data/manifest.json").upload_from_string(
        '{"splits": {"train": {"examples": 2048}}}'
    )
    assert "2048 train examples" in run("cost", str(spec), "--throughput", "100").stdout


def test_a_local_manifest_of_another_shape_or_a_fifo_is_a_note(tmp_path):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    spec = _spec(tmp_path, str(tmp_path / "data" / "train-*"))
    manifest = tmp_path / "data" / "manifest.json"
    manifest.parent.mkdir()
    for text, said in HOSTILE.items():
        manifest.write_text(text)
        done = run("cost", str(spec), "--throughput", "100")
        assert done.returncode == 0 and said in done.stdout, done.stdout + done.stderr[-2000:]
    manifest.unlink()
    os.mkfifo(manifest)  # never opened: it would wait for a writer
    done = run("cost", str(spec), "--throughput", "100")
    assert done.returncode == 0 and "with train examples" in done.stdout, done.stdout + done.stderr[-2000:]


@pytest.mark.wire
def test_read_json_downloads_no_more_than_its_bound_and_takes_deep_nesting_as_not_json(emulator, bucket):
    settings = Settings.from_environ(emulator.env())
    blobs = storage.client(settings).bucket(bucket)
    big = '{"a": "' + "x" * storage.MAX_JSON_BYTES + '"}'
    blobs.blob("big.json").upload_from_string(big)
    assert storage.read_json(settings, f"gs://{bucket}/big.json") is None
    assert len(storage.read_bytes(settings, f"gs://{bucket}/big.json", 100) or b"") == 101
    blobs.blob("deep.json").upload_from_string(DEEP)
    assert storage.read_json(settings, f"gs://{bucket}/deep.json") is None
    blobs.blob("ok.json").upload_from_string('{"state": "JOB_STATE_SUCCEEDED"}')
    assert storage.read_json(settings, f"gs://{bucket}/ok.json") == {"state": "JOB_STATE_SUCCEEDED"}
