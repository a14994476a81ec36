"""`vertex-trainer package` from the command line: dry run, JSON output, exit codes, and hostile
spec values refused with exit 2 before anything is rendered."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.package.conftest import HOSTILE_VALUES
from vertex_trainer import cli


def run(argv, capsys):
    try:
        cli.main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def spec_file(tmp_path, pk):
    def write(**image):
        path = tmp_path / "job.yaml"
        path.write_text(yaml.safe_dump(pk.spec_data(**image)))
        return path

    return write


def test_dry_run_json_prints_the_plan_and_touches_nothing(spec_file, capsys, no_network, pk):
    code, out, err = run(["package", str(spec_file()), "--dry-run", "--output", "json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["image"].startswith(pk.REPOSITORY + ":") and len(data["image"].rsplit(":", 1)[1]) == 24
    assert data["built"] is False and data["pushed"] is False and data["dry_run"] is True
    assert data["context_hash"].startswith("sha256:") and data["builder"] == "cloud-build"
    paths = [f["path"] for f in data["files"]]
    assert "Dockerfile" in paths and any(x.startswith("trainer_image/trainer/") for x in paths)
    assert no_network == []


def test_dry_run_text_lists_files_size_hash_tag_builder(spec_file, capsys):
    code, out, _ = run(["package", str(spec_file()), "--dry-run", "--builder", "docker"], capsys)
    assert code == 0
    for needle in (
        "image: ",
        "context hash: sha256:",
        "builder: docker",
        "Dockerfile",
        " files, ",
        "variant: gpu (base tensorflow/tensorflow:2.21.0-gpu)",
        "dry run: nothing built",
    ):
        assert needle in out


def test_bad_builder_is_exit_2(spec_file, capsys):
    code, _, err = run(["package", str(spec_file()), "--dry-run", "--builder", "kaniko"], capsys)
    assert code == 2 and "--builder" in err and "Traceback" not in err


HOSTILE = [*HOSTILE_VALUES, ("executor_image", "us-docker.pkg.dev/x/y:latest\nRUN id")]


@pytest.mark.parametrize("field,value", HOSTILE)
def test_hostile_values_are_refused_with_exit_2(spec_file, capsys, field, value, no_network):
    image = {"repository": "us-central1-docker.pkg.dev/test-project/training/trainer", field: value}
    if field == "executor_image":
        image = {"python_package": True, field: value}
    code, out, err = run(["package", str(spec_file(**image)), "--dry-run"], capsys)
    assert code == 2, (out, err)
    assert err.startswith("error: image.") and "Traceback" not in err
    assert "FROM" not in out and out == ""


@pytest.mark.parametrize(
    "repository",
    [
        "us-central1-docker.pkg.dev/p/r/trainer:v1",
        "us-central1-docker.pkg.dev/p/r/Trainer",
        "us-central1-docker.pkg.dev/p/r/x\nRUN id",
    ],
)
def test_bad_repository_is_exit_2(spec_file, capsys, repository):
    code, _, err = run(["package", str(spec_file(repository=repository)), "--dry-run"], capsys)
    assert code == 2 and "image.repository" in err


def test_render_and_submit_dry_run_refuse_hostile_values_too(spec_file, capsys):
    path = spec_file(
        repository="us-central1-docker.pkg.dev/test-project/training/trainer", pip_packages=["x\nRUN id"]
    )
    for argv in (["render", str(path)], ["submit", str(path), "--dry-run"]):
        code, out, err = run(argv, capsys)
        assert code == 2 and "image.pip_packages[0]" in err and out == ""


def test_render_shows_the_exact_tag(spec_file, capsys):
    path = spec_file()
    _, out, _ = run(["package", str(path), "--dry-run", "--output", "json"], capsys)
    image = json.loads(out)["image"]
    code, out, _ = run(["render", str(path)], capsys)
    assert code == 0
    pool = json.loads(out)["jobSpec"]["workerPoolSpecs"][0]
    assert pool["containerSpec"]["imageUri"] == image


def test_image_uri_needs_no_packaging(spec_file, capsys, no_network):
    uri = "us-docker.pkg.dev/test-project/training/trainer:v1"
    code, out, _ = run(["package", str(spec_file(uri=uri)), "--output", "json"], capsys)
    assert code == 0
    assert json.loads(out) == {
        "image": uri,
        "built": False,
        "pushed": False,
        "context_hash": None,
        "action": "given",
        "builder": None,
        "log_url": None,
    }
