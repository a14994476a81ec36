"""A script job's artifact (issue 32): the generated image (Dockerfile on the prebuilt Vertex AI
training image, content-hashed) and the python_package sdist, and the CustomJob each renders."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.owncode.conftest import REPOSITORY, script_spec
from tests.package.conftest import hadolint_path
from vertex_trainer import catalog, render
from vertex_trainer.errors import SpecError
from vertex_trainer.packaging import archive_bytes, plan_artifact, plan_build
from vertex_trainer.packaging.templates import VARIANTS

PREBUILT_CPU = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"


def _files(plan) -> dict[str, bytes]:
    return {e.name: e.read() for e in plan.entries}


def test_the_image_is_the_code_on_the_prebuilt_training_image(code_dir):
    plan = plan_build(script_spec(code_dir, image={"requirements": ["numpy>=1.26"]}))
    files = _files(plan)
    dockerfile = files["Dockerfile"].decode()
    assert f"FROM {PREBUILT_CPU}\n" in dockerfile
    assert 'ENTRYPOINT ["python3", "task.py"]' in dockerfile
    assert "RUN rm -rf /var/sitecustomize" in dockerfile  # as gcloud does on prebuilt images
    # image.requirements first, then the code's requirements.txt
    assert files["vertex-trainer/requirements.txt"] == b"numpy>=1.26\nPyYAML>=6\n"
    assert {"code/task.py", "code/helper.py", "code/trainer/task.py"} <= set(files)
    assert plan.target.startswith(f"{REPOSITORY}:") and plan.base_image == PREBUILT_CPU


def test_hardware_and_region_pick_the_prebuilt_image(code_dir):
    gpu = plan_build(script_spec(code_dir, hardware="t4x1", region="europe-west4"))
    assert gpu.base_image == "europe-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest"
    with pytest.raises(SpecError) as e:
        plan_build(script_spec(code_dir, hardware="tpu-v5e-8", region="us-west1"))
    assert e.value.field == "image.base_image" and "tpu" in e.value.message
    own = plan_build(script_spec(code_dir, image={"base_image": "python:3.11.13-slim-bookworm"}))
    assert own.base_image == "python:3.11.13-slim-bookworm"
    assert "sitecustomize" not in _files(own)["Dockerfile"].decode()


def test_the_catalog_and_the_python_package_executors_agree():
    rows = {r["variant"]: r["image"] for r in catalog.table("training_images")}
    assert rows == {v.name: v.executor for v in VARIANTS.values() if v.executor}


def test_a_module_runs_with_dash_m(code_dir):
    spec = script_spec(code_dir, image={"script": None, "module": "trainer.task"})
    assert 'ENTRYPOINT ["python3", "-m", "trainer.task"]' in _files(plan_build(spec))["Dockerfile"].decode()


@pytest.mark.parametrize("requirements", [True, False])
@pytest.mark.parametrize("entry", [{}, {"script": None, "module": "trainer.task"}])
def test_the_generated_dockerfile_passes_hadolint(tmp_path, code_dir, requirements, entry):
    if not requirements:
        (code_dir / "requirements.txt").unlink()
    path = tmp_path / "Dockerfile"
    path.write_bytes(_files(plan_build(script_spec(code_dir, image=entry)))["Dockerfile"])
    result = subprocess.run(
        [hadolint_path(), "--no-color", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_unchanged_code_keeps_its_tag(code_dir):
    spec = script_spec(code_dir)
    first = plan_artifact(spec).image_uri
    # What a local run leaves beside the code does not count.
    (code_dir / "__pycache__").mkdir()
    (code_dir / "__pycache__" / "helper.cpython-311.pyc").write_bytes(b"\0compiled")
    assert plan_artifact(spec).image_uri == first
    # The code's own .dockerignore is honoured.
    (code_dir / ".dockerignore").write_text("notes.txt\n")
    second = plan_artifact(spec).image_uri
    (code_dir / "notes.txt").write_text("not shipped")
    assert plan_artifact(spec).image_uri == second
    (code_dir / "task.py").write_text("print('changed')\n")
    assert plan_artifact(spec).image_uri != second


def test_a_missing_directory_or_entry_point_is_exit_2_before_any_build(tmp_path, code_dir):
    with pytest.raises(SpecError) as e:
        plan_build(script_spec(tmp_path / "nowhere"))
    assert e.value.field == "image.code" and e.value.exit_code == 2
    with pytest.raises(SpecError) as e:
        plan_build(script_spec(code_dir, image={"script": "train.py"}))
    assert e.value.field == "image.script"
    with pytest.raises(SpecError) as e:
        plan_build(script_spec(code_dir, image={"script": None, "module": "trainer.missing"}))
    assert e.value.field == "image.module"
    (code_dir / "requirements.txt").write_text("--index-url http://example.com/simple\n")
    with pytest.raises(SpecError) as e:
        plan_build(script_spec(code_dir))
    assert "requirements.txt line 1" in e.value.field


def _package_spec(code_dir, **image):
    return script_spec(
        code_dir,
        image={"python_package": True, "repository": None, **image},
        output_dir="gs://my-bucket/runs/own",
    )


def _install(plan, spec, target: Path) -> None:
    sdist = target.parent / "code.tar.gz"
    sdist.write_bytes(archive_bytes(plan, spec))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            str(target),
            str(sdist),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )


def test_the_sdist_runs_the_script_as_a_module(tmp_path, code_dir):
    """The SDK's CustomJob.from_local_script wraps a script as module `task` of package
    aiplatform_custom_trainer_script (google/cloud/aiplatform/utils/source_utils.py,
    _TrainingScriptPythonPackager.make_package); ours is vertex_trainer_script.task, which runs
    the script as `python task.py` would (its sibling modules importable, argv passed)."""
    spec = _package_spec(code_dir)
    plan = plan_build(spec)
    assert plan.kind == "python-package" and plan.python_module == "vertex_trainer_script.task"
    assert plan.target.startswith("gs://my-bucket/runs/own/staging/packages/")
    target = tmp_path / "site"
    _install(plan, spec, target)
    out = subprocess.run(
        [sys.executable, "-m", "vertex_trainer_script.task", "--epochs=2"],
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "hello from helper ['--epochs=2']"
    with tarfile.open(fileobj=io.BytesIO(archive_bytes(plan, spec))) as tar:
        pyproject = tar.extractfile("vertex_trainer_code-1.0/pyproject.toml").read().decode()
    assert 'dependencies = ["PyYAML>=6"]' in pyproject


def test_the_sdist_of_a_module_runs_it(tmp_path, code_dir):
    spec = _package_spec(code_dir, script=None, module="trainer.task")
    plan = plan_build(spec)
    assert plan.python_module == "trainer.task"
    target = tmp_path / "site"
    _install(plan, spec, target)
    out = subprocess.run(
        [sys.executable, "-m", "trainer.task", "--x"],
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == "module ['--x']", out.stderr


def _v1(job: dict):
    from google.cloud.aiplatform_v1 import CustomJob
    from google.protobuf import json_format

    return CustomJob.wrap(json_format.ParseDict(job, CustomJob.pb(CustomJob()), ignore_unknown_fields=False))


def test_python_package_renders_the_body_the_sdk_sends(code_dir):
    """The pool mirrors what the SDK's CustomJob.from_local_script puts in each worker pool for a
    prebuilt executor image (google/cloud/aiplatform/jobs.py, from_local_script: the
    `spec["python_package_spec"] = {executor_image_uri, python_module, package_uris}` branch,
    then args and env), in the REST API's camelCase."""
    spec = _package_spec(code_dir, requirements=["numpy>=1.26"])
    spec = spec.model_copy(update={"env": {"MODE": "test"}})
    job = render.custom_job(spec, plan_artifact(spec))
    pool = job["jobSpec"]["workerPoolSpecs"][0]
    plan = plan_build(spec)
    assert pool["pythonPackageSpec"] == {
        "executorImageUri": PREBUILT_CPU,
        "packageUris": [plan.target],
        "pythonModule": "vertex_trainer_script.task",
        "args": ["--epochs=2"],
        "env": [{"name": "MODE", "value": "test"}],
    }
    parsed = _v1(job)  # the v1 API's own message accepts every field
    assert (
        parsed.job_spec.worker_pool_specs[0].python_package_spec.python_module == "vertex_trainer_script.task"
    )


def test_image_mode_renders_the_body_gcloud_sends(code_dir):
    """gcloud ai custom-jobs create --local-package-path=DIR --script=task.py --args=... builds
    an image whose ENTRYPOINT runs the script and sends containerSpec {imageUri, args}
    (googlecloudsdk/command_lib/ai/custom_jobs/custom_jobs_util.py, ConstructCustomJobSpec: args
    set on each pool's containerSpec); the image itself: docker/build.py, _MakeDockerfile."""
    spec = script_spec(code_dir, replicas=2)
    job = render.custom_job(spec, plan_artifact(spec))
    pools = job["jobSpec"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == ["1", "1"]
    assert pools[0]["containerSpec"] == {"imageUri": plan_artifact(spec).image_uri, "args": ["--epochs=2"]}
    assert "command" not in pools[0]["containerSpec"]  # the image's ENTRYPOINT runs the script
    parsed = _v1(job)
    assert list(parsed.job_spec.worker_pool_specs[1].container_spec.args) == ["--epochs=2"]
    config = render.to_gcloud_config(spec, job)
    assert "gcloud ai custom-jobs create" in config and "--config=job.yaml" in config
    assert json.loads(render.to_json(job)) == job


@pytest.mark.parametrize("mode", ["image", "python_package"])
def test_submit_dry_run_shows_the_custom_job(tmp_path, mode):
    from tests.cli_support import edge_env
    from tests.shared import ROOT, cli_runner

    sets = ["--set", "output_dir=gs://my-bucket/own"]
    if mode == "python_package":
        sets += ["--set", "image.python_package=true", "--set", "image.repository="]
    run = cli_runner(edge_env(tmp_path), cwd=ROOT)
    result = run("submit", "examples/own-code/own-code.yaml", "--dry-run", *sets)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout[result.stdout.index("\n{") : result.stdout.rindex("}") + 1])
    pool = body["jobSpec"]["workerPoolSpecs"][0]
    key = "containerSpec" if mode == "image" else "pythonPackageSpec"
    assert pool[key]["args"] == ["--epochs=2", "--steps-per-epoch=4", "--batch-size=32"]
    _v1(body)
