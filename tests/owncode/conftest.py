"""Fixtures of the script-job tests (issue 32): a code directory of your own and its spec."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.process_support import processes_with_env
from tests.sandbox.conftest import SandboxProcess, cli_base_env
from vertex_trainer.spec import JobSpec, build_spec

REPOSITORY = "us-central1-docker.pkg.dev/my-project-1/training/own"


def script_data(code: Path | str, **changes: Any) -> dict:
    """The raw data of a one-replica CPU script job running task.py from `code`."""
    data: dict[str, Any] = {
        "name": "own",
        "project": "my-project-1",
        "region": "us-central1",
        "hardware": "cpu",
        "image": {"code": str(code), "script": "task.py", "repository": REPOSITORY},
        "output_dir": "gs://my-bucket/runs/own",
        "args": ["--epochs=2"],
    }
    for key, value in changes.items():
        if key == "image":
            data["image"] = {**data["image"], **value}
        else:
            data[key] = value
    return {k: v for k, v in data.items() if v is not None}


def factory_data(code: Path, **image: Any) -> dict:
    """The raw data of a model factory job (trainer.model models.net:build), the factory written
    into `code`; `image`: more image fields."""
    (code / "models").mkdir(parents=True, exist_ok=True)
    (code / "models" / "__init__.py").write_text("")
    (code / "models" / "net.py").write_text("def build(num_classes, image_size, dtype):\n    return None\n")
    return {
        "name": "factory",
        "project": "my-project-1",
        "region": "us-central1",
        "hardware": "cpu",
        "image": {"code": str(code), "repository": REPOSITORY, **image},
        "output_dir": "gs://my-bucket/runs/factory",
        "trainer": {"model": "models.net:build", "train_data": "gs://my-bucket/d/train-*", "num_classes": 3},
    }


def script_spec(code: Path | str, **changes: Any) -> JobSpec:
    return build_spec(script_data(code, **changes))


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    """A copy of the notebook-shaped script (shapes/notebook/task.py) as the code directory."""
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(Path(__file__).parent / "shapes" / "notebook" / "task.py", code / "task.py")
    return code


@pytest.fixture
def code_dir(tmp_path: Path) -> Path:
    """A code directory: task.py importing a sibling module, a package, requirements.txt."""
    code = tmp_path / "code"
    (code / "trainer").mkdir(parents=True)
    (code / "helper.py").write_text("GREETING = 'hello from helper'\n")
    (code / "task.py").write_text("import sys\nimport helper\nprint(helper.GREETING, sys.argv[1:])\n")
    (code / "trainer" / "__init__.py").write_text("")
    (code / "trainer" / "task.py").write_text("import sys\nprint('module', sys.argv[1:])\n")
    (code / "requirements.txt").write_text("# the code's own\nPyYAML>=6\n")
    return code


BUCKET = "own-code"  # the sandbox's bucket in these tests


@pytest.fixture(scope="module")
def sandbox_env(tmp_path_factory):
    """`vertex-trainer dev sandbox --bucket own-code` for one test module (its tests write below
    prefixes of their own); its environment. Checked when the module ends: it stopped cleanly, no
    emulator error on its stderr, no process left."""
    home = tmp_path_factory.mktemp("owncode-sandbox")
    # Unique across pytest-xdist workers: mktemp numbers its folders per worker, and two modules
    # sharing a marker would each see the other's processes as left behind.
    marker = "VT_TEST_OWNCODE_" + uuid.uuid4().hex.upper()
    base = cli_base_env(marker, home)
    box = SandboxProcess("--bucket", BUCKET, env=base)
    try:
        yield box.env(base)
        code, err = box.terminate()
        assert code == 0
        # A script job writes no metrics.json: looking for it is no emulator error on stderr.
        assert "Resource not found" not in err, err[-2000:]
    finally:
        box.kill()
    assert processes_with_env(marker) == []
