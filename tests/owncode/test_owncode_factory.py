"""Your model in the bundled trainer (issue 32 item 5): `trainer.model: package.module:function`
from image.code. The spec's rules, the factory checked before anything is built or run (a short
process imports it: exit 2 naming trainer.model), the image holding the code (in the content
hash), the local and sandbox runs putting it on PYTHONPATH, and one short training through
`submit --local` whose metrics.json has the bundled trainer's throughput fields."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli_support import edge_env
from tests.docs import harness
from tests.shared import ROOT, THROUGHPUT_FIELDS, cli_runner, latest_run
from vertex_trainer.errors import SpecError
from vertex_trainer.local import owncode
from vertex_trainer.local.cluster import Replica
from vertex_trainer.packaging import plan_build
from vertex_trainer.packaging.build_plan import archive_bytes
from vertex_trainer.spec import build_spec, check_trainer_flags
from vertex_trainer.spec.factory import runs_factory

REPOSITORY = "us-central1-docker.pkg.dev/my-project-1/training/trainer"
EXAMPLE = ROOT / "examples" / "model-factory"
HERE = "tests/owncode/test_owncode_factory.py"
EXAMPLE_RUN = "submit examples/model-factory/model-factory.yaml --local"  # docs/own-code.md
GOOD = "def build(num_classes, image_size, dtype):\n    return None\n"


@pytest.fixture
def factory_dir(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    (code / "models").mkdir(parents=True)
    (code / "models" / "__init__.py").write_text("")
    (code / "models" / "net.py").write_text(GOOD + "SIZE = 3\n\ndef other(x):\n    return x\n")
    return code


def factory_data(code: Path | str, model: str = "models.net:build", **changes: Any) -> dict:
    data: dict[str, Any] = {
        "name": "factory",
        "project": "my-project-1",
        "region": "us-central1",
        "hardware": "cpu",
        "image": {"code": str(code), "repository": REPOSITORY},
        "output_dir": "gs://my-bucket/runs/factory",
        "trainer": {"model": model, "train_data": "gs://my-bucket/data/train-*", "num_classes": 3},
    }
    for key, value in changes.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and key in data else value
    return {k: v for k, v in data.items() if v is not None}


# -- the spec ------------------------------------------------------------------------------------


def test_a_factory_job_runs_the_bundled_trainer_with_the_code(factory_dir):
    spec = build_spec(factory_data(factory_dir))
    assert runs_factory(spec) and spec.runs_bundled_trainer and not spec.is_script_job
    assert "--model=models.net:build" in spec.trainer.to_args()
    check_trainer_flags(spec)  # imports models.net in a process of its own: it is fine


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        # a factory needs image.code (the directory holding it)
        ({"image": {"code": None}}, "trainer.model", "the spec has no image.code"),
        # image.code with no script or module needs a factory
        ({"trainer": {"model": "tiny-cnn"}}, "image.code", "trainer.model is 'tiny-cnn'"),
        ({"trainer": None}, "image.code", "needs image.script or image.module"),
        # the bundled trainer's own package cannot be shadowed
        ({"trainer": {"model": "trainer.task:main"}}, "trainer.model", "bundled trainer's own"),
    ],
)
def test_the_rules_name_the_field_and_the_fix(factory_dir, changes, field, words):
    data = factory_data(factory_dir)
    for key, value in changes.items():
        data[key] = (
            None if value is None else {k: v for k, v in {**data[key], **value}.items() if v is not None}
        )
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(SpecError) as e:
        build_spec(data)
    assert e.value.field == field and words in e.value.message, e.value.message
    assert e.value.exit_code == 2 and e.value.hint


def test_an_image_built_elsewhere_may_hold_the_factory(factory_dir):
    # e.g. `trigger` pins a factory job's built image: image.uri, no image.code to check
    pinned = f"{REPOSITORY}:0123456789abcdef01234567"
    spec = build_spec(factory_data(factory_dir, image={"code": None, "repository": None, "uri": pinned}))
    assert not runs_factory(spec) and spec.trainer.model == "models.net:build"


def test_a_script_job_still_refuses_trainer_even_with_a_factory_model(factory_dir):
    (factory_dir / "task.py").write_text("print('hi')\n")
    data = factory_data(factory_dir, image={"script": "task.py"})
    with pytest.raises(SpecError) as e:
        build_spec(data)
    assert e.value.field == "trainer" and "script job" in e.value.message


@pytest.mark.parametrize(
    ("model", "source", "words"),
    [
        ("models.nope:build", None, "no module 'models.nope' in image.code"),
        ("models.net:missing", None, "models.net has no 'missing' (it defines: build, other)"),
        ("models.net:SIZE", None, "models.net.SIZE is not callable (a int)"),
        ("models.net:other", None, "other(x) cannot be called with num_classes=, image_size=, dtype="),
        ("json:loads", None, "module 'json' is not in image.code"),
        (
            "models.net:build",
            "import not_installed_anywhere\n" + GOOD,
            "no module named 'not_installed_anywhere'",
        ),
        ("models.net:build", "raise RuntimeError('boom')\n", "RuntimeError: boom (net.py line 1)"),
    ],
)
def test_a_factory_that_does_not_import_or_fit_is_exit_2_naming_trainer_model(
    factory_dir, model, source, words
):
    if source is not None:
        (factory_dir / "models" / "net.py").write_text(source)
    spec = build_spec(factory_data(factory_dir, model=model))
    with pytest.raises(SpecError) as e:
        check_trainer_flags(spec)
    assert e.value.field == "trainer.model" and e.value.value == model
    assert words in e.value.message, e.value.message
    assert "num_classes: int, image_size: int, dtype: str" in (e.value.hint or "")


def test_an_edited_factory_is_checked_again(factory_dir):
    spec = build_spec(factory_data(factory_dir))
    check_trainer_flags(spec)
    (factory_dir / "models" / "net.py").write_text("def build(num_classes):\n    return None\n")
    with pytest.raises(SpecError, match="cannot be called with"):
        check_trainer_flags(spec)


def test_validate_and_a_dry_run_refuse_a_broken_factory_before_any_build(tmp_path, factory_dir):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(factory_data(factory_dir, model="models.net:missing")))
    run_cli = cli_runner(edge_env(tmp_path), cwd=tmp_path)  # nothing is sent: no fake needed
    for args in (("validate", path), ("submit", path, "--dry-run")):
        result = run_cli(*args)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "trainer.model" in result.stderr and "models.net has no 'missing'" in result.stderr
        assert "Traceback" not in result.stderr


def test_validate_local_names_a_requirement_missing_here(tmp_path, factory_dir):
    (factory_dir / "requirements.txt").write_text("not-installed-anywhere-xyz>=1\n")
    (tmp_path / "train-0").write_bytes(b"")
    data = factory_data(factory_dir, output_dir=str(tmp_path / "out"))
    data["trainer"]["train_data"] = str(tmp_path / "train-*")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    result = cli_runner(edge_env(tmp_path), cwd=tmp_path)("validate", path, "--local")
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "image.requirements" in result.stderr
        and "not-installed-anywhere-xyz>=1 (not installed)" in result.stderr
    )
    assert "pip install" in result.stderr


# -- packaging -----------------------------------------------------------------------------------


def test_the_image_holds_the_code_on_pythonpath_and_its_hash_follows_the_code(factory_dir):
    spec = build_spec(factory_data(factory_dir, image={"requirements": ["PyYAML>=6"]}))
    plan = plan_build(spec)
    names = {e.name for e in plan.entries}
    assert {"code/models/__init__.py", "code/models/net.py"} <= names
    assert "trainer_image/trainer/task.py" in names  # the bundled trainer, as for a built-in model
    dockerfile = _read(plan, spec, "Dockerfile")
    assert "COPY code/ /opt/code/" in dockerfile and "ENV PYTHONPATH=/opt/trainer:/opt/code" in dockerfile
    assert "!code/" in _read(plan, spec, ".dockerignore")  # docker sees what was hashed
    assert _read(plan, spec, "trainer_image/requirements-extra.txt") == "PyYAML>=6\n"
    assert plan.target.startswith(REPOSITORY + ":") and "image.code" in plan.source
    # A local run's caches do not move the tag; an edit does.
    (factory_dir / "models" / "__pycache__").mkdir()
    (factory_dir / "models" / "__pycache__" / "net.cpython-311.pyc").write_bytes(b"x")
    assert plan_build(spec).target == plan.target
    (factory_dir / "models" / "net.py").write_text(GOOD + "# edited\n")
    assert plan_build(spec).target != plan.target


def test_the_sandbox_finds_the_code_in_the_built_context(tmp_path, factory_dir):
    spec = build_spec(factory_data(factory_dir))
    archive = archive_bytes(plan_build(spec), spec)
    code = owncode.code_in_image_context(archive, tmp_path / "extracted")
    assert code is not None and code.on_path and code.entry == ()
    assert (code.directory / "models" / "net.py").read_text() == (
        factory_dir / "models" / "net.py"
    ).read_text()


def test_a_local_run_puts_the_code_first_on_pythonpath(factory_dir):
    spec = build_spec(factory_data(factory_dir))
    code = owncode.factory_code(spec)
    replica = Replica(pool=0, index=0, address="127.0.0.1:1", argv=("python", "-m", "trainer.task"), env={})
    later = Replica(pool=0, index=0, address="127.0.0.1:1", argv=("python",), env={"PYTHONPATH": "/x"})
    first, second = owncode.path_replicas(code, [replica, later])
    assert first.env["PYTHONPATH"] == str(factory_dir.resolve()) and first.argv == replica.argv
    assert second.env["PYTHONPATH"].split(":") == [str(factory_dir.resolve()), "/x"]


@pytest.mark.slow  # pip builds the wheel (7 s)
def test_a_python_package_installs_the_code_beside_the_trainer(tmp_path, factory_dir):
    (factory_dir / "toplevel.py").write_text("X = 1\n")
    (factory_dir / "pyproject.toml").write_text("[project]\nname = 'mine'\n")  # the sdist's own wins
    spec = build_spec(
        factory_data(
            factory_dir, image={"repository": None, "python_package": True, "requirements": ["PyYAML>=6"]}
        )
    )
    plan = plan_build(spec)
    assert plan.kind == "python-package" and "image.code" in plan.source
    sdist = tmp_path / "vertex_trainer_task-1.0.tar.gz"
    sdist.write_bytes(archive_bytes(plan, spec))
    out = tmp_path / "wheels"
    # What Vertex AI does with packageUris (pip install), minus the network: no isolation, no deps.
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out)]
    done = subprocess.run([*pip, str(sdist)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("vertex_trainer_task-1.0-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"trainer/task.py", "models/net.py", "models/__init__.py", "toplevel.py"} <= set(names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "Requires-Dist: PyYAML>=6" in metadata
    # The sandbox runs what was staged: the sdist's top first on the trainer's PYTHONPATH.
    code = owncode.factory_in_sdist(archive_bytes(plan, spec), tmp_path / "extracted")
    assert code is not None and code.on_path and (code.directory / "models" / "net.py").is_file()
    assert (code.directory / "trainer" / "task.py").is_file()


def _read(plan: Any, spec: Any, name: str) -> str:
    import io

    with tarfile.open(fileobj=io.BytesIO(archive_bytes(plan, spec)), mode="r:gz") as tar:
        member = tar.extractfile(name)
        assert member is not None
        return member.read().decode()


# -- one real training ---------------------------------------------------------------------------


def test_this_file_runs_every_block_of_the_docs_that_names_it() -> None:
    named = {b.id for b in harness.blocks() if b.checked_by == HERE}
    assert named == {harness.checked_block("docs/own-code.md", EXAMPLE_RUN, HERE).id}


@pytest.mark.trainer
@pytest.mark.slow
def test_the_example_factory_trains_through_the_bundled_trainer(tmp_path, tmp_path_factory):
    """docs/own-code.md's block (`validate --local`, `submit --local` of the example), run here as
    the docs harness runs it (`checked-by`), on the quickstart data."""
    block = harness.checked_block("docs/own-code.md", EXAMPLE_RUN, HERE)
    work = harness.workdir(tmp_path / "work", harness.quickstart_data(tmp_path_factory))
    harness.run_block(block, work)
    trainer = yaml.safe_load((EXAMPLE / "model-factory.yaml").read_text())["trainer"]
    out = latest_run(work / "runs" / "model-factory")  # the run's own folder below the spec's output_dir
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == "models.small_net:build"
    assert metrics["steps"] == trainer["epochs"] * trainer["steps_per_epoch"]
    assert trainer["steps_per_epoch"] % metrics["steps_per_execution"] == 0  # the trainer's choice
    # compile_seconds is the first execution's excess over a steady one: None after one execution.
    executions = metrics["steps"] // metrics["steps_per_execution"]
    unset = [] if executions > 1 else ["compile_seconds"]
    missing = [k for k in THROUGHPUT_FIELDS if k not in metrics or (metrics[k] is None and k not in unset)]
    assert not missing, f"metrics.json lacks {missing}: {sorted(metrics)}"
    assert all(metrics[k] is None for k in unset) and metrics["train_examples_per_sec"] > 0
    # The export has the serving signature and its config, as a built-in model's.
    serving = json.loads((out / "model" / "serving_config.json").read_text())
    assert serving["model"] == "models.small_net:build" and serving["num_classes"] == trainer["num_classes"]
    assert (out / "model" / "saved_model.pb").is_file()


BAD_MODELS = '''
import tf_keras as keras

def not_a_model(num_classes, image_size, dtype):
    return "a string"

def softmax(num_classes, image_size, dtype):
    return keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(num_classes, activation="softmax")])

def wrong_shape(num_classes, image_size, dtype):
    return keras.Sequential([keras.layers.Dense(num_classes)])  # [N, S, S, classes]

def good(num_classes, image_size, dtype):
    assert dtype == "float32"  # the policy's compute dtype (float32 on a CPU)
    return keras.Sequential([keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(num_classes)])
'''


@pytest.mark.trainer
@pytest.mark.parametrize(
    ("function", "words"),
    [
        ("not_a_model", "returned str, not a tf-keras Model"),
        ("softmax", "ends in a softmax; return logits"),
        ("wrong_shape", "it must return logits [N, 5]"),
    ],
)
def test_the_trainer_refuses_what_is_not_a_logits_model(tmp_path, monkeypatch, function, words):
    from trainer.config import UsageError
    from trainer.model import build_model

    (tmp_path / "badmodels.py").write_text(BAD_MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))  # as PYTHONPATH holds image.code
    with pytest.raises(UsageError, match=re.escape(words)):  # the trainer's exit 2 (trainer/task.py main)
        build_model(f"badmodels:{function}", num_classes=5, image_size=8)
    model = build_model("badmodels:good", num_classes=5, image_size=8)
    assert model.input.dtype.name == "uint8" and model.output.shape.as_list() == [None, 5]
    assert model.layers[-1].dtype == "float32"  # the trainer's float32 softmax
