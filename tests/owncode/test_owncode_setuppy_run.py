"""A package folder with setup.py (issue 42) trains: `submit --local` from the folder, and in the
sandbox from what was built, in both modes (python_package: pypa build's sdist staged in the
emulated bucket; image: the fake Cloud Build's context, the package pip-installed). The code is
tests/owncode/test_owncode_setuppy.py's, in the shape of Google's course trainer: CSV shards read
through /gcs/, its output folder emptied first, a tiny Keras model saved to AIP_MODEL_DIR."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.cli_support import edge_env
from tests.owncode.conftest import BUCKET
from tests.owncode.test_owncode_sandbox import REPOSITORY, _run
from tests.owncode.test_owncode_setuppy import package_data, write_package, write_shards
from tests.shared import cli_runner, latest_run
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings


@pytest.mark.trainer
def test_submit_local_trains_the_package_from_its_folder(tmp_path):
    folder = write_package(tmp_path)
    write_shards(tmp_path / "data")
    out = tmp_path / "out"
    (out / "trained").mkdir(parents=True)
    (out / "trained" / "stale.txt").write_text("an earlier run's\n")
    data = package_data(folder, train=str(tmp_path / "data" / "train-*.csv"), output=str(out))
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)("submit", path, "--local")
    assert done.returncode == 0, done.stderr
    assert '"nnsize": [4, 2]' in done.stderr  # the flags as the module parsed them
    assert (latest_run(out) / "model" / "model.keras").is_file()
    assert [p.name for p in (out / "trained").iterdir()] == ["history.yaml"]  # emptied first
    assert not list(folder.glob("*.egg-info"))  # nothing was built into the folder


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_the_sandbox_runs_the_package_as_built_in_both_modes(sandbox_env, tmp_path):
    folder = write_package(tmp_path)
    write_shards(tmp_path / "data")
    bucket = storage.client(Settings.from_environ(sandbox_env)).bucket(BUCKET)
    for shard in sorted((tmp_path / "data").iterdir()):
        bucket.blob(f"data/{shard.name}").upload_from_string(shard.read_bytes())
    modes = {"package": {"python_package": True, "repository": None}, "image": {"repository": REPOSITORY}}
    for mode, image in modes.items():
        output = f"gs://{BUCKET}/runs/{mode}"
        bucket.blob(f"runs/{mode}/trained/stale.txt").upload_from_string(b"an earlier run's\n")
        data = package_data(
            folder, train=f"/gcs/{BUCKET}/data/train-*.csv", output=output, project="sandbox", image=image
        )
        data["args"][1] = f"--output_dir=/gcs/{BUCKET}/runs/{mode}/trained"  # through FUSE, as read
        path = tmp_path / f"{mode}.yaml"
        path.write_text(yaml.safe_dump(data))
        submit = _run(["submit", path, "--wait"], sandbox_env, cwd=tmp_path)
        assert re.search(r"^final\s+SUCCEEDED", submit.stdout, re.M), submit.stdout + submit.stderr
        job = re.search(r"^created\s+(\S+)", submit.stdout, re.M)[1]
        logs = _run(["logs", job], sandbox_env).stdout
        assert "[workerpool0-0] hparams" in logs and f"saved the model to /gcs/{BUCKET}/runs/{mode}/" in logs
        names = {b.name for b in bucket.client.list_blobs(BUCKET, prefix=f"runs/{mode}/")}
        assert f"runs/{mode}/trained/history.yaml" in names
        assert f"runs/{mode}/trained/stale.txt" not in names  # the run emptied its output folder
        assert any(n.endswith("/model/model.keras") for n in names), sorted(names)
    staged = {b.name for b in bucket.client.list_blobs(BUCKET, prefix="runs/package/staging/")}
    assert [n.rsplit("/", 1)[-1] for n in staged] == ["ride_time_trainer-0.3.tar.gz"]
