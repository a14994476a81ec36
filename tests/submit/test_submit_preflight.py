"""The bucket pre-flight of a cloud submit, against gcp-storage-emulator and the fake Vertex."""

from __future__ import annotations

import os

import pytest

from tests.shared import make_bucket, put_object, storage_emulator
from vertex_trainer import api
from vertex_trainer.errors import UserError
from vertex_trainer.preflight import buckets_of, location_mismatch
from vertex_trainer.spec import build_spec

pytestmark = pytest.mark.wire


@pytest.mark.parametrize(
    "region,location,kind,far",
    [
        ("us-central1", "US-CENTRAL1", "region", False),
        ("us-central1", "EUROPE-WEST4", "region", True),
        ("us-central1", "US", "multi-region", False),
        ("northamerica-northeast1", "US", "multi-region", False),
        ("europe-west4", "US", "multi-region", True),
        ("europe-west4", "EU", "multi-region", False),
        ("asia-southeast1", "ASIA", "multi-region", False),
        ("us-central1", "NAM4", "dual-region", False),
    ],
)
def test_location_mismatch(region, location, kind, far):
    assert (location_mismatch(region, location, kind) is not None) is far


def _spec(region="us-central1", **trainer):
    return build_spec(
        {
            "name": "preflight",
            "project": "test-project",
            "region": region,
            "hardware": "cpu",
            "image": {"uri": "us-docker.pkg.dev/p/r/trainer:v1"},
            "output_dir": "gs://out-bucket/runs/x",
            "trainer": {
                "train_data": "gs://data-bucket/train-*",
                "eval_data": "/gcs/data-bucket/val-*",
                "num_classes": 10,
                "model": "tiny-cnn",
                **trainer,
            },
        }
    )


def test_buckets_are_listed_once_with_their_first_field():
    assert buckets_of(_spec()) == {"out-bucket": "output_dir", "data-bucket": "trainer.train_data"}


@pytest.fixture
def storage(monkeypatch):
    """gcp-storage-emulator in-process; STORAGE_EMULATOR_HOST points at it. Yields make(bucket)."""
    with storage_emulator() as url:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        yield lambda name: make_bucket(url, name)


def test_missing_bucket_stops_the_submit_before_any_create(storage, fake, monkeypatch):
    monkeypatch.setenv("VERTEX_TRAINER_API_ENDPOINT", fake.url)
    storage("out-bucket")  # data-bucket does not exist
    with pytest.raises(UserError) as e:
        api.submit(_spec())
    assert "trainer.train_data: bucket gs://data-bucket does not exist" in str(e.value)
    assert "--location=us-central1" in str(e.value)
    assert fake.jobs == {} and fake.connections == 0


def test_far_bucket_warns_and_submits(storage, fake, monkeypatch):
    monkeypatch.setenv("VERTEX_TRAINER_API_ENDPOINT", fake.url)
    storage("out-bucket")
    storage("data-bucket")  # the emulator puts every bucket in the US multi-region
    for name in ("train-00000", "val-00000"):  # the data is there (tests/submit/test_submit_data_check.py)
        put_object(os.environ["STORAGE_EMULATOR_HOST"], f"gs://data-bucket/{name}")
    messages = []
    job = api.submit(_spec(region="europe-west4"), log=messages.append)
    assert job.name.startswith("projects/test-project/locations/europe-west4/customJobs/")
    warnings = [m for m in messages if m.startswith("warning: ")]
    buckets = [m for m in warnings if "gs://" in m]
    assert len(buckets) == 2 and all("US multi-region, the job runs in europe-west4" in m for m in buckets)
    # ...and the image, in the us multi-region too, is pulled across regions (issue 15)
    assert [m for m in warnings if "gs://" not in m] == [
        "warning: image.uri is in us, the job runs in europe-west4: every replica pulls the image across "
        "regions (slower start, egress charges); use a repository in the job's region (europe-west4)"
    ]
    messages.clear()
    api.submit(_spec(region="us-central1"), log=messages.append)
    assert not [m for m in messages if m.startswith("warning: ")]


def test_offline_vertex_without_storage_emulator_skips_the_check(fake, monkeypatch):
    monkeypatch.setenv("VERTEX_TRAINER_API_ENDPOINT", fake.url)
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    job = api.submit(_spec())
    assert job.name.endswith(tuple("0123456789"))
