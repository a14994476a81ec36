"""A careless user keeps local runs inside the code folder (issue 42, A1): `image.code: .` with
`submit --local --set output_dir=runs`, then a cloud submit of the same folder.

Every local run's models, checkpoints and the tool's own records (`runs/.vertex-trainer/`, the
resolved spec and the logs) went into the image or the package: uploaded on every submit, and,
each local run changing the content hash, a new image built (and billed) after every one. Only a
`.vertex-trainer/` at the top of the folder was left out. Now a folder that holds local runs (its
`.vertex-trainer/` records) is left out whole, and the dry run says why; a local run no longer
changes the image's tag.
"""

from __future__ import annotations

import json

import yaml

from tests.cli_support import edge_env
from tests.shared import cli_runner

REPOSITORY = "us-central1-docker.pkg.dev/my-project/training/digits"
TASK = """
import os
model = os.environ["AIP_MODEL_DIR"]
os.makedirs(model, exist_ok=True)
open(os.path.join(model, "saved_model.pb"), "w").write(os.environ["CLOUD_ML_JOB_ID"])
"""


def test_local_runs_inside_the_code_folder_are_not_packaged(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "task.py").write_text(TASK)
    spec = project / "spec.yaml"
    image = {"code": ".", "script": "task.py", "repository": REPOSITORY}
    data = {"name": "digits", "project": "my-project", "region": "us-central1", "hardware": "cpu"}
    spec.write_text(yaml.safe_dump({**data, "image": image, "output_dir": "gs://my-bucket/runs"}))
    run = cli_runner(edge_env(tmp_path), cwd=project)

    def packaged() -> dict:
        done = run("package", spec, "--dry-run", "--output", "json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    before = packaged()
    for _ in range(2):  # runs here, written into the code folder
        local = run("submit", spec, "--local", "--set", "output_dir=runs")
        assert local.returncode == 0, local.stderr
    assert (project / "runs" / ".vertex-trainer").is_dir() and (project / "runs" / "latest").exists()

    after = packaged()
    assert after["image"] == before["image"] and after["context_hash"] == before["context_hash"]
    assert after["files"] == before["files"]
    (left,) = [e for e in after["left_out"] if e["path"] == "runs/"]
    assert left["field"] == "image.code" and "local runs of vertex-trainer" in left["reason"]
    text = run("package", spec, "--dry-run")
    assert "runs/  local runs of vertex-trainer (it holds .vertex-trainer/)" in text.stdout
