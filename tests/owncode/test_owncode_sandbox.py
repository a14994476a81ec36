"""A script job in `vertex-trainer dev sandbox` (issue 32): the fake Cloud Build builds the generated
image from the code (or the sdist is staged in the emulated bucket), and the CustomJob runs that
code, as built, with its lines in Cloud Logging and its model in the emulated bucket: the example,
a python_package job, the notebook-shaped script of test_owncode_notebook.py and the Keras 3
factory of test_owncode_keras3.py. The tests share one sandbox (conftest.py `sandbox_env`, module
scope: a start costs seconds of CPU), each writing below a prefix of its own."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.cli_support import invoke
from tests.owncode.conftest import BUCKET, script_data
from tests.owncode.test_owncode_keras3 import keras3_data
from tests.owncode.test_owncode_notebook import _local_only, _spec
from tests.sandbox.conftest import ROOT
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings

REPOSITORY = "us-central1-docker.pkg.dev/sandbox/training/own-code"


def _run(args: list, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`vertex-trainer ARGS` against the sandbox, in this process (tests/cli_support.py `invoke`:
    the subject is what the sandbox runs, not the CLI's start-up); it must exit 0."""
    done = invoke(args, env=env, cwd=cwd)
    assert done.returncode == 0, (
        f"{args}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    return done


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(360)
def test_the_example_trains_in_the_sandbox_from_its_built_image(sandbox_env):
    out = f"gs://{BUCKET}/runs/own-code"
    submit = _run(
        [
            "submit",
            "examples/own-code/own-code.yaml",
            "--wait",
            "--project=sandbox",
            "--set",
            f"output_dir={out}",
            "--set",
            f"image.repository={REPOSITORY}",
        ],
        sandbox_env,
    )
    assert re.search(r"^final\s+SUCCEEDED", submit.stdout, re.M), submit.stdout
    assert "(built and pushed with cloud-build)" in submit.stderr
    job = re.search(r"^created\s+(\S+)", submit.stdout, re.M)[1]
    folder = re.search(r"^output\s+(\S+)", submit.stdout, re.M)[1]  # the run's own, below output_dir
    run = folder.removeprefix(f"gs://{BUCKET}/")
    assert run.startswith("runs/own-code/own-code-"), folder
    logs = _run(["logs", job], sandbox_env).stdout
    # The script wrote /gcs/own-code/... (Cloud Storage FUSE's path); the objects are the bucket's.
    assert f"[workerpool0-0] saved the model to /gcs/{BUCKET}/{run}/model/" in logs
    assert "[workerpool1-0] Epoch 2/2" in logs
    blobs = {b.name for b in storage.client(Settings.from_environ(sandbox_env)).list_blobs(BUCKET)}
    assert f"{run}/model/model.keras" in blobs


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_python_package_job_runs_the_staged_sdist(sandbox_env, tmp_path, code_dir):
    (code_dir / "task.py").write_text(
        "import os, sys\nimport helper\nprint(helper.GREETING, sys.argv[1:], os.path.basename(os.getcwd()))\n"
    )
    (code_dir / "requirements.txt").unlink()
    data = script_data(
        code_dir,
        project="sandbox",
        image={"python_package": True, "repository": None},
        output_dir=f"gs://{BUCKET}/runs/package",
        args=["--epochs=3"],
    )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    submit = _run(["submit", path, "--wait"], sandbox_env, cwd=tmp_path)
    assert re.search(r"^final\s+SUCCEEDED", submit.stdout, re.M), submit.stdout + submit.stderr
    job = re.search(r"^created\s+(\S+)", submit.stdout, re.M)[1]
    logs = _run(["logs", job], sandbox_env).stdout
    # The wrapper of the sdist ran the script: its sibling module, its args, from the sdist's top.
    assert "[workerpool0-0] hello from helper ['--epochs=3'] vertex_trainer_code-1.0" in logs


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_the_notebook_script_trains_in_the_sandbox_and_locally_into_its_bucket(
    sandbox_env, tmp_path, notebook
):
    """tests/owncode/test_owncode_notebook.py's script (its shape: shapes/notebook/task.py) on
    the cloud path and by --local into the sandbox's bucket."""
    env = sandbox_env
    client = storage.client(Settings.from_environ(env))
    # The cloud path: the sdist of the script on the prebuilt image, mirrored over the replica.
    package = script_data(
        notebook,
        project="sandbox",
        image={"python_package": True, "repository": None},
        output_dir=f"gs://{BUCKET}/runs/notebook",
        args=["--distribute=mirror", "--steps=1"],
    )
    submit = _run(["submit", _spec(tmp_path, package), "--wait"], env, cwd=tmp_path)
    assert re.search(r"^final\s+SUCCEEDED", submit.stdout, re.M), submit.stdout + submit.stderr
    folder = re.search(r"^output\s+gs://[^/]+/(\S+)", submit.stdout, re.M)[1].rstrip("/")
    assert f"{folder}/model/saved_model.pb" in {b.name for b in client.list_blobs(BUCKET, prefix=folder)}
    # --local with a gs:// output_dir (the sandbox's bucket): the model is named where it was
    # written, and a run that wrote none says so.
    local = _local_only(notebook, f"gs://{BUCKET}/local", ["--steps=1"])
    here = _run(["submit", _spec(tmp_path, local), "--local"], env, cwd=tmp_path)
    model = re.search(r"^model\s+(\S+)$", here.stdout, re.M)[1]
    bucket, _, prefix = model.removeprefix("gs://").partition("/")
    assert bucket == BUCKET and any(
        b.name.endswith("saved_model.pb") for b in client.list_blobs(BUCKET, prefix=prefix)
    )
    local["args"] = ["--no-save"]
    empty = _run(["submit", _spec(tmp_path, local), "--local"], env, cwd=tmp_path)
    assert re.search(r"^model\s+none: nothing was written to AIP_MODEL_DIR \(gs://", empty.stdout, re.M), (
        empty.stdout
    )


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_keras_3_factory_trains_in_the_sandbox_from_its_built_image(sandbox_env, tmp_path):
    """The cloud path (issue 42 item 5): the image built with the factory's code (the fake Cloud
    Build), the CustomJob run as built, Keras 3 chosen from the imports, the export in the bucket."""
    client = storage.client(Settings.from_environ(sandbox_env))
    client.bucket(BUCKET).blob("data/train-0").upload_from_string(b"")  # the pattern's object
    data = keras3_data(
        tmp_path / "code",
        train_data=f"gs://{BUCKET}/data/train-*",
        synthetic_data=True,
        steps_per_epoch=2,
        batch_size=8,
        image_size=16,
        warmup_epochs=0,
        epochs=1,
    )
    data.update(project="sandbox", output_dir=f"gs://{BUCKET}/runs/keras3")
    data["image"]["repository"] = "us-central1-docker.pkg.dev/sandbox/training/keras3"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    done = _run(["submit", path, "--wait"], sandbox_env, cwd=tmp_path)
    assert re.search(r"^final\s+SUCCEEDED", done.stdout, re.M), done.stdout
    folder = re.search(r"^output\s+gs://[^/]+/(\S+)", done.stdout, re.M)[1].rstrip("/")
    names = {b.name for b in client.list_blobs(BUCKET, prefix=folder)}
    assert f"{folder}/model/saved_model.pb" in names and f"{folder}/metrics.json" in names
    job = re.search(r"^created\s+(\S+)", done.stdout, re.M)[1]
    logs = _run(["logs", job], sandbox_env, cwd=tmp_path)
    assert "Keras 3 trains models.net:build (models/net.py line 3: import keras)" in logs.stdout, logs.stdout[
        -3000:
    ]
