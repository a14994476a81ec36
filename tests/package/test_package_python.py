"""The no-Docker path: an sdist of the trainer, staged in Cloud Storage, run by a prebuilt Vertex AI
TensorFlow image through pythonPackageSpec."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import zipfile

import pytest

from vertex_trainer import packaging as p
from vertex_trainer import render
from vertex_trainer.errors import UserError


def test_sdist_is_uploaded_and_rendered_as_python_package_spec(
    make_spec, trainer_dir, storage, pk, log, settings
):
    spec = make_spec(python_package=True)
    result = p.ensure_artifact(spec, settings=settings, log=log, trainer_dir=trainer_dir)
    plan = p.plan_build(spec, trainer_dir=trainer_dir)
    uri = f"gs://{pk.BUCKET}/runs/pkg-test/staging/packages/{plan.tag}/vertex_trainer_task-1.0.tar.gz"
    assert result.artifact.package_uris == (uri,)
    assert (
        result.image
        == result.artifact.image_uri
        == "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest"
    )  # t4x1 -> gpu
    assert (result.action, result.built, result.pushed) == ("built", True, True)

    blob = storage.bucket(pk.BUCKET).blob(uri.split(f"gs://{pk.BUCKET}/", 1)[1]).download_as_bytes()
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        names = tar.getnames()
        assert "vertex_trainer_task-1.0/trainer/task.py" in names
        assert "vertex_trainer_task-1.0/PKG-INFO" in names
        assert "vertex_trainer_task-1.0/.vertex-trainer/spec.yaml" in names
        pyproject = tar.extractfile("vertex_trainer_task-1.0/pyproject.toml").read().decode()
    # The executor image brings TensorFlow (2.17); tf-keras is matched to it, the trainer's other
    # pins come along, its TF-family pins do not.
    assert '"tf-keras==2.17.0"' in pyproject and '"Pillow>=10"' in pyproject
    assert "tensorflow-cpu" not in pyproject and "2.21.0" not in pyproject

    job = render.custom_job(spec, result.artifact)
    pool = job["jobSpec"]["workerPoolSpecs"][0]
    assert "containerSpec" not in pool
    pps = pool["pythonPackageSpec"]
    assert pps["packageUris"] == [uri]
    assert pps["pythonModule"] == "trainer.task"
    assert pps["executorImageUri"] == result.image

    again = p.ensure_artifact(spec, settings=settings, trainer_dir=trainer_dir)
    assert (again.action, again.built, again.pushed) == ("reused", False, False)
    assert again.artifact == result.artifact
    assert "already staged" in again.summary()


def test_plan_artifact_matches_without_network(make_spec, trainer_dir, no_network):
    spec = make_spec(python_package=True, staging_bucket="gs://other-bucket/stage")
    artifact = p.plan_artifact(spec, trainer_dir=trainer_dir)
    assert artifact.package_uris[0].startswith("gs://other-bucket/stage/packages/")
    assert artifact.python_module == "trainer.task"
    assert no_network == []


def test_the_sdist_builds_into_a_wheel_with_the_trainer(make_spec, trainer_dir, tmp_path):
    spec = make_spec(python_package=True, pip_packages=["pandas==2.2.3"])
    plan = p.plan_build(spec, trainer_dir=trainer_dir)
    sdist = tmp_path / "vertex_trainer_task-1.0.tar.gz"
    sdist.write_bytes(p.archive_bytes(plan, spec))
    out = tmp_path / "wheels"
    # What Vertex AI does with packageUris (pip install), minus the network: no isolation, no deps.
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(sdist),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("vertex_trainer_task-1.0-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "trainer/task.py" in names and "trainer/models/cnn.py" in names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "Requires-Dist: pandas==2.2.3" in metadata


def test_executor_follows_variant_and_region(make_spec, trainer_dir):
    cpu = make_spec(hardware="cpu", python_package=True)
    assert p.executor_image(cpu) == "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"
    eu = cpu.model_copy(update={"region": "europe-west4"})
    assert p.executor_image(eu).startswith("europe-docker.pkg.dev/")
    own = make_spec(python_package=True, executor_image="us-docker.pkg.dev/my-proj/images/tf:2.21")
    assert (
        p.plan_artifact(own, trainer_dir=trainer_dir).image_uri == "us-docker.pkg.dev/my-proj/images/tf:2.21"
    )


def test_tpu_python_package_needs_an_executor_image(make_spec, trainer_dir):
    spec = make_spec(hardware="tpu-v5e-8", python_package=True)
    with pytest.raises(UserError) as e:
        p.plan_artifact(spec, trainer_dir=trainer_dir)
    assert e.value.exit_code == 2 and "image.executor_image" in str(e.value)
