"""A package folder in the shape of Google's course trainers (setup.py, trainer/task.py parsing
--output_dir-style flags, trainer/model.py reading CSV shards from gs:// through /gcs/, emptying
its output folder first, a tiny Keras model saved to AIP_MODEL_DIR): our own code, written for the
tests of issue 42 (this file and tests/owncode/test_owncode_setuppy_run.py)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli_support import edge_env
from tests.owncode.conftest import REPOSITORY
from tests.package.conftest import hadolint_path
from tests.shared import cli_runner
from vertex_trainer.local.owncode import PACKAGE_INSTALL_LINE, missing_requirement
from vertex_trainer.packaging import archive_bytes, plan_artifact, plan_build
from vertex_trainer.spec import build_spec

TRAIN_GS = "gs://my-bucket/data/train-*.csv"

SETUP_PY = """from setuptools import find_packages, setup

setup(
    name="ride-time-trainer",
    version="0.3",
    packages=find_packages(),
    install_requires={requires!r},
    extras_require={{"dev": ["pytest"]}},
    description="Predicts a ride's duration from its distance and hour (a test package).",
)
"""

TASK_PY = '''"""Parses the flags and trains (python -m trainer.task)."""

import argparse
import json

from trainer import model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train_data_path", required=True, help="CSV shards: gs://.../train-*.csv")
    parser.add_argument("--output_dir", required=True, help="emptied first, then written")
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--num_steps", type=int, default=2)
    parser.add_argument("--nnsize", type=int, nargs="+", default=[4])
    args = parser.parse_args()
    hparams = vars(args)
    print("hparams", json.dumps(hparams, sort_keys=True))
    model.train_and_evaluate(hparams)


if __name__ == "__main__":
    main()
'''

MODEL_PY = '''"""The model and its training loop."""

import os

import tensorflow as tf
import yaml

COLUMNS = ["duration", "distance", "hour"]


def fuse(path):
    # Vertex AI mounts every bucket at /gcs/ (Cloud Storage FUSE): gs:// paths are read there.
    return path.replace("gs://", "/gcs/", 1) if path.startswith("gs://") else path


def load_dataset(pattern, batch_size):
    dataset = tf.data.experimental.make_csv_dataset(
        fuse(pattern),
        batch_size,
        column_names=COLUMNS,
        column_defaults=[0.0] * len(COLUMNS),
        label_name="duration",
        num_epochs=None,
    )
    return dataset.map(lambda f, y: (tf.stack([f["distance"], f["hour"]], axis=1), y))


def build_model(nnsize):
    layers = [tf.keras.Input(shape=(2,))]
    layers += [tf.keras.layers.Dense(n, activation="relu") for n in nnsize]
    model = tf.keras.Sequential(layers + [tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    return model


def train_and_evaluate(hparams):
    output_dir = fuse(hparams["output_dir"])
    if tf.io.gfile.exists(output_dir):
        tf.io.gfile.rmtree(output_dir)  # a fresh start, as the course's trainer does
    tf.io.gfile.makedirs(output_dir)
    model = build_model(hparams["nnsize"])
    history = model.fit(
        load_dataset(hparams["train_data_path"], hparams["batch_size"]),
        epochs=1,
        steps_per_epoch=hparams["num_steps"],
        verbose=2,
    )
    with tf.io.gfile.GFile(os.path.join(output_dir, "history.yaml"), "w") as f:
        f.write(yaml.safe_dump({"loss": [float(v) for v in history.history["loss"]]}))
    model_dir = fuse(os.environ["AIP_MODEL_DIR"])
    tf.io.gfile.makedirs(model_dir)
    model.save(os.path.join(model_dir, "model.keras"))
    print("saved the model to", model_dir)
'''


def write_package(root: Path, requires: tuple[str, ...] = ("pyyaml>=5",)) -> Path:
    """The package folder under `root` (root/trainer_pkg): setup.py, trainer/{__init__,task,model}.py."""
    folder = root / "trainer_pkg"
    (folder / "trainer").mkdir(parents=True)
    (folder / "setup.py").write_text(SETUP_PY.format(requires=list(requires)))
    (folder / "trainer" / "__init__.py").write_text("")
    (folder / "trainer" / "task.py").write_text(TASK_PY)
    (folder / "trainer" / "model.py").write_text(MODEL_PY)
    return folder


def write_shards(folder: Path, shards: int = 2, rows: int = 8) -> None:
    """CSV shards train-0000N-of-0000M.csv: duration, distance, hour (no header)."""
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        lines = [
            f"{3.0 * d + h / 10:.2f},{d:.2f},{h}" for d, h in ((1.0 + s + r / 4, r % 24) for r in range(rows))
        ]
        (folder / f"train-{s:05d}-of-{shards:05d}.csv").write_text("\n".join(lines) + "\n")


def package_data(folder: Path, *, train: str, output: str, **changes: Any) -> dict[str, Any]:
    """A one-replica CPU job running `python -m trainer.task` from the package folder."""
    image = {
        "code": str(folder),
        "module": "trainer.task",
        "repository": REPOSITORY,
        **changes.pop("image", {}),
    }
    data: dict[str, Any] = {
        "name": "ride-time",
        "project": "my-project-1",
        "region": "us-central1",
        "hardware": "cpu",
        "image": {k: v for k, v in image.items() if v is not None},
        "output_dir": output,
        "env": {"TF_CPP_MIN_LOG_LEVEL": "2"},
        "args": [f"--train_data_path={train}", f"--output_dir={output}/trained", "--nnsize", "4", "2"],
        **changes,
    }
    return data


# -- the tests: plans, dry runs and refusals (cheap: no TensorFlow, no run) ----------------------

PACKAGE_URI_RE = r"gs://my-bucket/runs/ride/staging/packages/[0-9a-f]{24}/ride_time_trainer-0\.3\.tar\.gz"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_package(tmp_path)


def _spec_file(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _cloud(folder: Path, **changes: Any) -> dict[str, Any]:
    return package_data(folder, train=TRAIN_GS, output="gs://my-bucket/runs/ride", **changes)


def _python_package(folder: Path, **image: Any) -> dict[str, Any]:
    return _cloud(folder, image={"python_package": True, "repository": None, **image})


def _cli(tmp_path: Path, *args: Any):
    return cli_runner(edge_env(tmp_path), cwd=tmp_path)(*args)


def test_python_package_stages_the_packages_own_sdist_and_runs_its_module(tmp_path, folder):
    path = _spec_file(tmp_path, _python_package(folder))
    assert _cli(tmp_path, "validate", path).returncode == 0
    dry = _cli(tmp_path, "package", path, "--dry-run", "--output", "json")
    assert dry.returncode == 0, dry.stderr
    out = json.loads(dry.stdout)
    (uri,) = out["package_uris"]
    assert re.fullmatch(PACKAGE_URI_RE, uri), uri  # the content hash, then build's own file name
    assert out["dependencies"] == {"from": "setup.py install_requires", "requirements": ["pyyaml>=5"]}
    assert {f["path"] for f in out["files"]} == {
        "setup.py",
        *(f"trainer/{m}.py" for m in ("__init__", "task", "model")),
    }
    body = json.loads(_cli(tmp_path, "render", path, "--format", "json").stdout)
    spec = body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]
    assert spec["packageUris"] == [uri] and spec["pythonModule"] == "trainer.task"
    assert spec["executorImageUri"].startswith("us-docker.pkg.dev/vertex-ai/training/tf-cpu.")
    submit = _cli(tmp_path, "submit", path, "--dry-run")
    assert submit.returncode == 0, submit.stderr
    assert "#    (its dependencies, from setup.py install_requires: pyyaml>=5)" in submit.stdout
    # The same code is the same package name; a change to the code is a new one.
    assert plan_artifact(build_spec(_python_package(folder))).package_uris == (uri,)
    (folder / "trainer" / "model.py").write_text(MODEL_PY + "\n# tuned\n")
    assert plan_artifact(build_spec(_python_package(folder))).package_uris != (uri,)


def test_the_staged_sdist_is_pypa_builds_of_the_screened_folder(folder):
    (folder / ".env").write_text("API_KEY=not-for-the-bucket\n")  # a credential: screened out
    (folder.parent / "elsewhere.txt").write_text("a file out of the folder\n")
    (folder / "elsewhere.txt").symlink_to(folder.parent / "elsewhere.txt")  # a link out of it
    (folder / "MANIFEST.in").write_text("include elsewhere.txt\n")  # would read it into the sdist
    plan = plan_build(build_spec(_python_package(folder)))
    assert plan is not None and plan.built_sdist
    assert ".env" not in {e.name for e in plan.entries}
    with tarfile.open(fileobj=io.BytesIO(archive_bytes(plan)), mode="r:gz") as tar:
        names = set(tar.getnames())
        info = tar.extractfile("ride_time_trainer-0.3/PKG-INFO").read().decode()
    assert {"ride_time_trainer-0.3/setup.py", "ride_time_trainer-0.3/trainer/task.py"} <= names
    assert not [n for n in names if n.endswith((".env", "elsewhere.txt"))]
    assert "Name: ride-time-trainer" in info and "Requires-Dist: pyyaml>=5" in info
    # The build ran on a copy: the folder holds what it held (no egg-info, no build/).
    assert sorted(p.name for p in folder.iterdir()) == [
        ".env",
        "MANIFEST.in",
        "elsewhere.txt",
        "setup.py",
        "trainer",
    ]


def test_an_image_pip_installs_the_package_after_copying_it(tmp_path, folder):
    plan = plan_build(build_spec(_cloud(folder)))
    dockerfile = next(e for e in plan.entries if e.name == "Dockerfile").read().decode()
    copy, install = dockerfile.index("COPY code/ /opt/code/"), dockerfile.index(PACKAGE_INSTALL_LINE)
    assert copy < install < dockerfile.index('ENTRYPOINT ["python3", "-m", "trainer.task"]')
    assert plan.dependencies_from == "setup.py install_requires" and plan.dependencies == ("pyyaml>=5",)
    path = tmp_path / "Dockerfile"
    path.write_text(dockerfile)
    lint = subprocess.run(
        [hadolint_path(), "--no-color", str(path)], capture_output=True, text=True, timeout=60
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    dry = _cli(tmp_path, "package", _spec_file(tmp_path, _cloud(folder)), "--dry-run")
    assert "dependencies (setup.py install_requires): pyyaml>=5" in dry.stdout, dry.stderr


def test_a_folder_that_is_no_package_keeps_its_dockerfile(tmp_path, folder):
    (folder / "setup.py").unlink()
    (folder / "pyproject.toml").write_text('[tool.ruff]\nline-length = 100\n')  # settings, no package
    plan = plan_build(build_spec(_cloud(folder)))
    dockerfile = next(e for e in plan.entries if e.name == "Dockerfile").read().decode()
    assert "pip install --no-cache-dir /opt/code" not in dockerfile and plan.dependencies_from is None


def test_a_pyproject_package_declares_its_dependencies_there(tmp_path, folder):
    (folder / "setup.py").unlink()
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "ride-time-trainer"\nversion = "0.4"\ndependencies = ["PyYAML>=5"]\n\n'
        '[tool.setuptools.packages.find]\ninclude = ["trainer*"]\n'
    )
    plan = plan_build(build_spec(_python_package(folder)))
    assert plan.target.endswith("/ride_time_trainer-0.4.tar.gz")
    assert (plan.dependencies_from, plan.dependencies) == (
        "pyproject.toml [project].dependencies",
        ("PyYAML>=5",),  # as the project writes it
    )


@pytest.mark.parametrize(
    ("image", "field", "words"),
    [
        (
            {"module": None, "script": "trainer/task.py"},
            "image.script",
            "set image.module to the script's module instead (e.g. trainer.task)",
        ),
        (
            {"requirements": ["numpy>=1.26"]},
            "image.requirements",
            "declare them in setup.py install_requires",
        ),
    ],
)
def test_python_package_refuses_what_vertex_ai_would_not_run(tmp_path, folder, image, field, words):
    result = _cli(tmp_path, "package", _spec_file(tmp_path, _python_package(folder, **image)), "--dry-run")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"error: {field}:" in result.stderr and words in result.stderr


def test_python_package_refuses_a_requirements_txt_the_package_does_not_declare(tmp_path, folder):
    (folder / "requirements.txt").write_text("PyYAML>=5\nnumpy>=1.26\n")  # PyYAML is declared
    result = _cli(tmp_path, "package", _spec_file(tmp_path, _python_package(folder)), "--dry-run")
    assert result.returncode == 2, result.stderr
    assert (
        "error: image.code: requirements.txt lists numpy>=1.26, which the package ride-time-trainer"
        in result.stderr
    )
    assert "PyYAML" not in result.stderr.split("which")[0]


def test_a_missing_dependency_is_exit_2_naming_it_and_where_it_is_declared(tmp_path):
    folder = write_package(tmp_path, requires=("pyyaml>=5", "no-such-dist-h42>=1"))
    out = tmp_path / "out"
    path = _spec_file(
        tmp_path, package_data(folder, train=str(tmp_path / "data" / "train-*.csv"), output=str(out))
    )
    for command in ("validate", "submit"):
        result = _cli(tmp_path, command, path, "--local")
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert "no-such-dist-h42>=1 (not installed; declared in setup.py install_requires)" in result.stderr
        assert "-m pip install 'no-such-dist-h42>=1'" in result.stderr and "pyyaml" not in result.stderr
    assert not out.exists()  # nothing started


def test_a_setup_py_that_fails_is_exit_2_with_its_last_line(tmp_path, folder):
    (folder / "setup.py").write_text("raise SystemExit('ride-time: the version file is missing')\n")
    result = _cli(tmp_path, "package", _spec_file(tmp_path, _python_package(folder)), "--dry-run")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "image.code: is a package folder (setup.py) whose build backend failed" in result.stderr
    assert "ride-time: the version file is missing" in result.stderr


def test_a_backend_not_installed_here_is_exit_2_naming_what_to_install(tmp_path, folder):
    (folder / "setup.py").unlink()
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["no-such-backend-h42>=1"]\nbuild-backend = "no_such_backend_h42"\n\n'
        '[project]\nname = "ride-time-trainer"\nversion = "0.5"\n'
    )
    result = _cli(tmp_path, "package", _spec_file(tmp_path, _python_package(folder)), "--dry-run")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "whose build backend no_such_backend_h42 is not installed in this interpreter" in result.stderr
    assert "-m pip install 'no-such-backend-h42>=1'" in result.stderr  # quoted: >= is a redirect


def test_a_dependency_whose_marker_excludes_this_interpreter_is_not_asked_for():
    assert missing_requirement('no-such-dist-h42>=1; python_version < "3"') is None
    assert missing_requirement('no-such-dist-h42>=1; python_version >= "3"') == "not installed"
