"""A model factory named with image.uri (an image built elsewhere holds the code, e.g. a factory
job's pinned by `trigger`) run here: a local run runs the installed trainer, not the image, so
`submit --local` and `validate --local` are exit 2 naming trainer.model, image.uri and the fix
(image.code) before anything runs, unless the module is importable here."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import cli_runner

PINNED = "us-central1-docker.pkg.dev/my-project-1/training/trainer:0123456789abcdef01234567"


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    (tmp_path / "train-0").write_bytes(b"")
    data = {
        "name": "factory",
        "hardware": "cpu",
        "image": {"uri": PINNED},
        "output_dir": str(tmp_path / "out"),
        "trainer": {"model": "mymodels.net:build", "train_data": str(tmp_path / "train-*"), "num_classes": 3},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("args", [("validate", "--local"), ("submit", "--local")])
def test_a_factory_in_an_image_built_elsewhere_is_exit_2_before_a_local_run(tmp_path, spec_path, args):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    result = run(args[0], spec_path, *args[1:])
    assert result.returncode == 2, result.stdout + result.stderr
    assert "trainer.model: names a model factory, and a local run cannot import 'mymodels.net'" in (
        result.stderr
    )
    assert f"image.uri ({PINNED})" in result.stderr
    assert "give image.code: DIR (the directory holding mymodels/net.py)" in result.stderr
    assert not (tmp_path / "out").exists() and "Traceback" not in result.stderr  # nothing ran


def test_a_factory_importable_here_passes(tmp_path, spec_path):
    # the replicas run `python -m trainer.task` from the current directory: its modules import
    (tmp_path / "mymodels").mkdir()
    (tmp_path / "mymodels" / "__init__.py").write_text("")
    (tmp_path / "mymodels" / "net.py").write_text(
        "def build(num_classes, image_size, dtype):\n    return None\n"
    )
    result = cli_runner(edge_env(tmp_path), cwd=tmp_path)("validate", spec_path, "--local")
    assert result.returncode == 0, result.stdout + result.stderr
