"""Rendering: the example specs against golden files, the REST shape, and purity."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from vertex_trainer import render
from vertex_trainer.render import Artifact
from vertex_trainer.spec import load_spec, spec_hash

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
SPECS = sorted(p.name for p in (ROOT / "job_specs").glob("*.yaml"))
IMAGE = Artifact("us-docker.pkg.dev/my-project/training/trainer:golden")
FIXED = [
    "image.repository=null",
    "image.uri=us-docker.pkg.dev/my-project/training/trainer:golden",
    "image.variant=auto",
]


def load_example(name: str):
    # Templated names ({{ timestamp }}) are pinned so the golden bytes stay put.
    return load_spec(ROOT / "job_specs" / name, sets=[f"name={Path(name).stem}"])


def check_golden(path: Path, text: str) -> None:
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1 once and review it"
    assert text == path.read_text(), f"{path.name} changed; if intended, UPDATE_GOLDEN=1 and review the diff"


def test_all_five_examples_exist():
    assert {
        "quickstart-local.yaml",
        "resnet50-v100x4.yaml",
        "resnet50-a100x8.yaml",
        "resnet50-h100x8-flex.yaml",
        "resnet50-tpu-v5e.yaml",
    } <= set(SPECS)


@pytest.mark.parametrize("name", SPECS)
def test_examples_render_to_golden(name):
    spec = load_example(name)
    job = render.custom_job(spec, IMAGE, idempotency_key="golden-key")
    stem = Path(name).stem
    check_golden(GOLDEN / f"{stem}.json", render.to_json(job))
    check_golden(GOLDEN / f"{stem}.gcloud.yaml", render.to_gcloud_config(spec, job))


@pytest.mark.parametrize("name", SPECS)
def test_cli_render_matches_python_render(name, cli):
    stem = Path(name).stem
    # json is what Vertex AI is sent, and refuses a local output_dir: yaml prints a local spec's.
    local = not load_example(name).output_dir.startswith("gs://")
    result = cli(
        "render",
        ROOT / "job_specs" / name,
        "--set",
        f"name={stem}",
        *(arg for s in FIXED for arg in ("--set", s)),
        "--idempotency-key",
        "golden-key",
        *(("--format", "yaml") if local else ()),
    )
    assert result.code == 0, result.err
    job = yaml.safe_load(result.out) if local else json.loads(result.out)
    golden = json.loads((GOLDEN / f"{stem}.json").read_text())
    # The CLI path changes image.* to pin the URI, so only the spec-hash label differs.
    assert job["labels"].pop("vertex-trainer-spec") and golden["labels"].pop("vertex-trainer-spec")
    assert job == golden


def test_rest_shape_of_the_flex_start_job():
    spec = load_example("resnet50-h100x8-flex.yaml")
    job = render.custom_job(spec, IMAGE, idempotency_key="k1")
    pools = job["jobSpec"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == ["1", "1"]  # int64 travels as a string
    assert pools[0]["machineSpec"] == {
        "machineType": "a3-highgpu-8g",
        "acceleratorType": "NVIDIA_H100_80GB",
        "acceleratorCount": 8,
    }
    assert pools[0] == {**pools[1], "replicaCount": "1"}  # same machine, image, args, env, disk
    assert job["jobSpec"]["scheduling"] == {
        "strategy": "FLEX_START",
        "timeout": "86400s",
        "maxWaitDuration": "14400s",
    }
    assert job["labels"]["vertex-trainer-key"] == "k1"
    assert job["labels"]["vertex-trainer-spec"] == spec_hash(spec)
    assert job["jobSpec"]["baseOutputDirectory"] == {  # the submission's own folder (section 15)
        "outputUriPrefix": "gs://my-bucket/runs/resnet50-h100x16/resnet50-h100x8-flex-k1"
    }
    args = pools[0]["containerSpec"]["args"]
    assert "--batch-size=8192" in args and "--steps-per-execution=200" in args


def test_replicas_split_into_chief_and_workers(base_spec):
    from vertex_trainer.spec import build_spec

    base_spec["replicas"] = 4
    job = render.custom_job(build_spec(base_spec), IMAGE)
    pools = job["jobSpec"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == ["1", "3"]
    pools[1]["containerSpec"]["args"].append("--only-workers")
    assert "--only-workers" not in pools[0]["containerSpec"]["args"]  # pools share no objects
    base_spec["replicas"] = 1
    job = render.custom_job(build_spec(base_spec), IMAGE)
    assert len(job["jobSpec"]["workerPoolSpecs"]) == 1


def test_optional_fields_and_python_package(base_spec):
    from vertex_trainer.spec import build_spec

    base_spec.update(
        {
            "service_account": "trainer@my-project.iam.gserviceaccount.com",
            "network": "projects/123/global/networks/my-vpc",
            "tensorboard": "projects/my-project/locations/us-central1/tensorboards/42",
            "encryption_key": "projects/my-project/locations/us-central1/keyRings/r/cryptoKeys/k",
            "env": {"A": "1"},
            "labels": {"team": "vision"},
            "scheduling": {"strategy": "spot", "restart_on_worker_restart": True},
        }
    )
    spec = build_spec(base_spec)
    pkg = Artifact(
        "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest",
        package_uris=("gs://b/staging/trainer-abc.tar.gz",),
    )
    job = render.custom_job(spec, pkg)
    js = job["jobSpec"]
    assert js["serviceAccount"] == "trainer@my-project.iam.gserviceaccount.com"
    assert js["network"] == "projects/123/global/networks/my-vpc"
    assert js["tensorboard"].endswith("/tensorboards/42")
    assert job["encryptionSpec"] == {"kmsKeyName": base_spec["encryption_key"]}
    assert js["scheduling"] == {"strategy": "SPOT", "restartJobOnWorkerRestart": True}
    pps = js["workerPoolSpecs"][0]["pythonPackageSpec"]
    assert pps["packageUris"] == ["gs://b/staging/trainer-abc.tar.gz"]
    assert pps["pythonModule"] == "trainer.task"
    assert pps["env"] == [{"name": "A", "value": "1"}]
    assert "containerSpec" not in js["workerPoolSpecs"][0]
    assert job["labels"]["team"] == "vision" and "vertex-trainer-key" not in job["labels"]


def test_render_parses_as_aiplatform_custom_job():
    from google.cloud import aiplatform_v1

    for name in SPECS:
        spec = load_example(name)
        job = render.custom_job(spec, IMAGE, idempotency_key="k")
        parsed = aiplatform_v1.CustomJob.from_json(json.dumps(job))
        back = json.loads(
            aiplatform_v1.CustomJob.to_json(
                parsed, use_integers_for_enums=False, always_print_fields_with_no_presence=False
            )
        )
        assert back["displayName"] == job["displayName"]
        assert (
            back["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
            == job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
        )
        assert back["jobSpec"]["scheduling"].get("strategy") == job["jobSpec"]["scheduling"]["strategy"]


def test_rendering_is_pure():
    spec = load_example("resnet50-a100x8.yaml")
    a = render.to_json(render.custom_job(spec, IMAGE))
    b = render.to_json(render.custom_job(spec, IMAGE))
    assert a == b


def test_gcloud_config_is_the_job_spec_with_int_replicas():
    spec = load_example("resnet50-h100x8-flex.yaml")
    job = render.custom_job(spec, IMAGE, idempotency_key="k")
    text = render.to_gcloud_config(spec, job)
    assert text.startswith("# CustomJobSpec")
    assert "gcloud ai custom-jobs create --project=my-project --region=us-central1" in text
    body = yaml.safe_load(text)
    assert body["workerPoolSpecs"][0]["replicaCount"] == 1
    assert body["scheduling"]["strategy"] == "FLEX_START"


def test_render_of_a_build_spec_uses_the_content_hash_tag(cli):
    result = cli("render", ROOT / "job_specs" / "resnet50-a100x8.yaml")
    assert result.code == 0, result.err
    uri = json.loads(result.out)["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"]
    repo, tag = uri.rsplit(":", 1)
    assert repo == "us-central1-docker.pkg.dev/my-project/training/trainer"
    assert len(tag) >= 12 and tag.isalnum()
    again = cli("render", ROOT / "job_specs" / "resnet50-a100x8.yaml")
    assert json.loads(again.out)["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] == uri


def test_render_formats(cli):
    spec = ROOT / "job_specs" / "resnet50-tpu-v5e.yaml"
    y = cli("render", spec, "-f", "yaml")
    assert y.code == 0 and yaml.safe_load(y.out)["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] == {
        "machineType": "ct5lp-hightpu-8t",
        "tpuTopology": "2x4",
    }
    s = cli("render", spec, "--format", "spec")
    assert s.code == 0 and yaml.safe_load(s.out)["hardware"]["machine_type"] == "ct5lp-hightpu-8t"
    bad = cli("render", spec, "--format", "xml")
    assert bad.code == 2


def test_an_attempt_of_the_plan_renders_as_its_number():
    """custom_job takes the plan's PlannedAttempt itself (submit renders each attempt from the plan
    it made once) and renders the very job its number gives."""
    from vertex_trainer.spec import build_spec
    from vertex_trainer.spec.attempts import attempts

    spec = build_spec(
        {
            "name": "plan-render",
            "project": "test-project",
            "region": "us-central1",
            "hardware": "h100x8",
            "image": {"uri": "us-docker.pkg.dev/test-project/training/trainer:v1"},
            "scheduling": {"strategy": "flex-start", "max_wait": "30m", "fallback": ["spot", "standard"]},
            "output_dir": "gs://test-bucket/runs/plan",
            "trainer": {"train_data": "gs://test-bucket/data/train-*", "num_classes": 10},
        }
    )
    plan = attempts(spec)
    by_attempt = [render.custom_job(spec, idempotency_key="k", attempt=a) for a in plan]
    assert by_attempt == [render.custom_job(spec, idempotency_key="k", attempt=a.n) for a in plan]
    assert [j["jobSpec"]["scheduling"]["strategy"] for j in by_attempt] == ["FLEX_START", "SPOT", "STANDARD"]
