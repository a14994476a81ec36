"""`bench` on Vertex AI: two short CustomJobs on the spec's hardware, at most once per key, and
their metrics.json read back from Cloud Storage (the fake Vertex server and the GCS emulator)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vertex_trainer import api
from vertex_trainer.contract import run_name
from vertex_trainer.emulators.gcs import GcsEmulator
from vertex_trainer.emulators.vertex import FakeVertex
from vertex_trainer.gcp import storage
from vertex_trainer.settings import PollPolicy, RetryPolicy, Settings
from vertex_trainer.spec import load_spec

pytestmark = pytest.mark.wire

REPO = Path(__file__).resolve().parents[2]
BUCKET = "bench-bucket"


def test_a_cloud_bench_runs_two_short_jobs_once_per_key():
    with FakeVertex() as fake, GcsEmulator() as gcs:
        fake.set_script(["JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"])
        gcs.create_bucket(BUCKET)
        settings = Settings(
            vertex_endpoint=fake.url,
            storage_emulator=gcs.endpoint,
            # No fault is injected here: the read timeout only has to outlast the fake's first
            # answer on a busy machine (it loads aiplatform_v1's types to check the body).
            retry=RetryPolicy(attempts=3, initial=0.01, maximum=0.05, deadline=120, read_timeout=60),
            poll=PollPolicy(initial=0.01, maximum=0.05),
        )
        spec = load_spec(
            REPO / "job_specs" / "bench-resnet50-a100x8.yaml",
            project="test-project",
            sets=[
                ("image.repository", "null"),
                ("image.uri", "us-docker.pkg.dev/p/r/t:v1"),
                ("output_dir", f"gs://{BUCKET}/a100"),
                ("trainer.train_data", f"gs://{BUCKET}/imagenet/train-*"),
            ],
        )
        # The data a cloud submit checks is there before it creates anything (issue 40 item 5).
        storage.client(settings).bucket(BUCKET).blob("imagenet/train-00000").upload_from_string(b"x")
        # What the two jobs' chiefs write when they finish (trainer/task.py, metrics.json).
        for kind, rate, wait in (("synthetic", 18_000.0, 0.01), ("real", 12_000.0, 0.3)):
            short = {"synthetic": "syn", "real": "real"}[kind]  # each run's own folder (section 15)
            run = run_name(f"{spec.name}-bench-{short}", f"ci-7-bench-{short}")
            storage.client(settings).bucket(BUCKET).blob(
                f"a100/bench/{kind}/{run}/metrics.json"
            ).upload_from_string(
                json.dumps(
                    {
                        "device": "gpu",
                        "replicas": 8,
                        "steady_examples_per_sec": rate,
                        "input_wait_fraction": wait,
                        "bound": "input" if wait >= 0.1 else "compute",
                        "model": "resnet50",
                        "image_size": 224,
                        "global_batch_size": 2048,
                        "precision": "mixed_bfloat16",
                    }
                )
            )
        notes: list[str] = []
        result = api.bench(spec, idempotency_key="ci-7", settings=settings, log=notes.append)

        creates = fake.calls("create")
        assert len(creates) == 2
        pools = [c.body["jobSpec"]["workerPoolSpecs"][0] for c in creates]
        assert all(p["machineSpec"]["machineType"] == "a2-highgpu-8g" for p in pools)  # same hardware
        args = [p["containerSpec"]["args"] for p in pools]
        assert "--synthetic-data=true" in args[0] and "--synthetic-data=false" in args[1]
        assert all("--epochs=1" in a and "--steps-per-epoch=400" in a for a in args)
        assert [c.body["labels"]["vertex-trainer-key"] for c in creates] == [
            "ci-7-bench-syn",
            "ci-7-bench-real",
        ]
        assert result["synthetic_examples_per_sec"] == 18_000 and result["real_examples_per_sec"] == 12_000
        assert result["bound"] == "input" and result["idempotency_key"] == "ci-7"
        assert result["reference"]["real_vs_reference"] == round(1500 / 2375, 3)
        assert any("JOB_STATE_SUCCEEDED" in n or "SUCCEEDED" in n for n in notes)

        again = api.bench(spec, idempotency_key="ci-7", settings=settings, log=notes.append)
        assert len(fake.calls("create")) == 2  # a retried bench adopts its jobs
        assert again["runs"] == result["runs"]
