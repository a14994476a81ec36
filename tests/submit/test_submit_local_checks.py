"""What a local run checks before anything starts (issue 15): a local-only spec needs no image
or region, and local data that does not exist is exit 2 naming the field."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli_support import invoke

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}  # no gcloud config, no project, no region
    return invoke(args, env=env, cwd=cwd)  # in this process (tests/cli_support.py)


def test_a_local_only_spec_validates_and_missing_data_is_exit_2(tmp_path):
    spec = tmp_path / "local.yaml"
    spec.write_text(
        "name: local-only\nhardware: cpu\noutput_dir: out\n"
        "trainer: {model: tiny-cnn, train_data: data/train-*, num_classes: 4}\n"
    )
    missing = run("submit", str(spec), "--local", cwd=tmp_path)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "trainer.train_data: no files match 'data/train-*'" in missing.stderr
    assert not (tmp_path / "out").exists()  # nothing ran
    # validate --local answers what submit --local answers (issue 24 item 4)
    assert run("validate", str(spec), "--local", cwd=tmp_path).stderr == missing.stderr

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train-0").write_bytes(b"")
    ok = run("validate", str(spec), "--local", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "(none: --local only)" in ok.stdout and "(for --local)" in ok.stdout

    cloud = run("submit", str(spec), "--dry-run", cwd=tmp_path)
    assert cloud.returncode == 2
    for field in ("project:", "region:", "image:", "output_dir:", "trainer.train_data:"):
        assert f"  {field}" in cloud.stderr, cloud.stderr
    # validate checks for a cloud submit unless --local: the same problems as submit --dry-run
    validated = run("validate", str(spec), cwd=tmp_path)
    assert validated.returncode == 2 and validated.stderr == cloud.stderr


def test_an_image_built_elsewhere_without_a_trainer_block_is_exit_2_for_local(tmp_path):
    # image.uri runs the image's own command on Vertex AI; this machine runs no container, so a
    # local run would start the bundled trainer with the image's args: refused before it starts.
    spec = tmp_path / "uri.yaml"
    spec.write_text(
        "name: uri-job\nproject: my-project\nregion: us-central1\nhardware: cpu\n"
        "image: {uri: us-docker.pkg.dev/my-project/r/t:v1}\noutput_dir: out\nargs: ['--epochs=1']\n"
    )
    local = run("submit", str(spec), "--local", "--wait", cwd=tmp_path)
    assert local.returncode == 2 and "Traceback" not in local.stderr
    assert "trainer: is required for --local" in local.stderr and "image.code" in local.stderr
    assert not (tmp_path / "out").exists()  # nothing ran
    assert run("validate", str(spec), "--local", cwd=tmp_path).stderr == local.stderr
