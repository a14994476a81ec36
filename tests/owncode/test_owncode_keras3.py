"""A Keras 3 model factory (issue 42 item 2): `import keras`, the keras-io style, in the bundled
trainer. `validate` says which Keras trains it (read from the module's imports, nothing imported)
and refuses what Keras 3 cannot train (several machines; steps_per_execution > 1 on several
devices) with exit 2 naming the field; the rendered args carry `--keras=3`; `submit --local` on
two CPU replicas trains it (steps_per_execution 1, said why), exports the serving signatures, and
the server's own loader serves it. The resume from a checkpoint: tests/trainer/test_trainer_keras3.py;
the factory built into an image and run in the sandbox: tests/owncode/test_owncode_sandbox.py (one
sandbox for that module's tests).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.owncode.conftest import factory_data
from tests.shared import cli_runner, latest_run, records
from trainer import keras_choice
from vertex_trainer.errors import SpecError
from vertex_trainer.render import job_args
from vertex_trainer.spec import build_spec, check_trainer_flags

# The keras-io style, Keras imported inside build() as the example does: validate's probe imports
# the module, and stays fast.
KERAS3_NET = '''
def build(num_classes, image_size, dtype):
    import keras
    from keras import layers

    inputs = keras.Input(shape=(image_size, image_size, 3))
    x = layers.Conv2D(8, 3, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x), name="k3net")
'''


def keras3_data(code: Path, **trainer: object) -> dict:
    data = factory_data(code)
    (code / "models" / "net.py").write_text(KERAS3_NET)
    data["trainer"].update(trainer)
    return data


def test_the_rendered_args_and_validate_name_keras_3(tmp_path):
    data = keras3_data(tmp_path / "code")
    spec = build_spec(data)
    check_trainer_flags(spec)  # one replica: Keras 3 trains it
    assert "--keras=3" in job_args(spec)  # auto, resolved where the request is made
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    result = cli_runner(edge_env(tmp_path), cwd=tmp_path)("validate", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "trained with Keras 3 (models/net.py line 3: import keras)" in result.stdout
    # Said explicitly, it wins (and is sent as written).
    spec = build_spec(keras3_data(tmp_path / "code", keras=2))
    assert spec.trainer.keras == "2" and job_args(spec).count("--keras=2") == 1


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"replicas": 2}, "replicas", "MultiWorkerMirroredStrategy (several machines) even at"),
        (
            {"trainer": {"steps_per_execution": 4, "cpu_replicas": 2}},
            "trainer.steps_per_execution",
            "steps_per_execution > 1 on several replicas",
        ),
    ],
)
def test_validate_refuses_what_keras_3_cannot_train_naming_the_field(tmp_path, changes, field, words):
    data = keras3_data(tmp_path / "code", **changes.pop("trainer", {}))
    data.update(changes)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)  # nothing is sent: no fake needed
    for args in (("validate", path), ("submit", path, "--dry-run")):
        result = run(*args)
        assert result.returncode == 2, result.stdout + result.stderr
        assert f"error: {field}:" in result.stderr and words in result.stderr, result.stderr
        assert "a Keras 3 model (models/net.py line 3: import keras)" in result.stderr
        assert "hint:" in result.stderr and "tf_keras" in result.stderr and "Traceback" not in result.stderr
    # The same spec with a tf-keras model goes (tf-keras runs both).
    (tmp_path / "code" / "models" / "net.py").write_text(
        KERAS3_NET.replace("import keras", "import tf_keras as keras").replace(
            "from keras import", "from tf_keras import"
        )
    )
    check_trainer_flags(build_spec(data))


def test_a_module_importing_both_kerases_is_refused_unless_trainer_keras_says(tmp_path):
    data = keras3_data(tmp_path / "code")
    both = "def _old():\n    import tf_keras\n" + KERAS3_NET  # inside functions: the probe stays fast
    (tmp_path / "code" / "models" / "net.py").write_text(both)
    with pytest.raises(SpecError) as e:
        check_trainer_flags(build_spec(data))
    assert e.value.field == "trainer.keras" and e.value.exit_code == 2
    assert "models/net.py line 5: import keras (Keras 3) and models/net.py line 2: import tf_keras" in (
        e.value.message
    )
    data["trainer"]["keras"] = 3
    assert job_args(build_spec(data))[-1] == "--keras=3"


def test_keras_3_is_for_factories_only(tmp_path):
    data = keras3_data(tmp_path / "code")
    data["image"] = {"repository": data["image"]["repository"]}
    data["trainer"].update(model="tiny-cnn", keras=3)
    with pytest.raises(SpecError) as e:
        build_spec(data)
    assert e.value.field == "trainer.keras" and "tiny-cnn is a built-in model" in e.value.message
    assert e.value.exit_code == 2 and "remove trainer.keras" in (e.value.hint or "")
    with pytest.raises(ValueError, match="--keras=3 is for a model factory"):  # the trainer's exit 2
        keras_choice.choose("3", "tiny-cnn", [], is_factory=False)


@pytest.mark.parametrize(
    ("source", "major"),
    [
        ("import keras\n", "3"),
        ("from keras import layers\n", "3"),
        ("def f():\n    import keras.layers\n", "3"),
        ("import tf_keras as keras\n", "2"),
        ("from tensorflow import keras\n", "2"),
        ("from tensorflow.keras import layers\n", "2"),
        ("import tensorflow as tf\nx = tf.keras.layers.Dense\n", "2"),
        ("from . import blocks\n", "3"),  # models/blocks.py, beside it, imports keras
        ("import models.blocks\n", "3"),
        ("import numpy\n", None),
    ],
)
def test_the_keras_is_read_from_the_imports_and_the_code_it_imports(tmp_path, source, major):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "blocks.py").write_text("from keras import layers\n")
    (tmp_path / "models" / "net.py").write_text(source)
    assert keras_choice.detect("models.net:build", [str(tmp_path)]).major == major


def test_the_trainer_runs_keras_3_at_one_step_per_execution_on_several_replicas():
    from trainer.config import UsageError, parse_flags
    from trainer.plan import _steps_per_execution

    base = ["--train-data=x", "--num-classes=3", "--model=models.net:build", "--keras=3"]
    dirs = {"AIP_MODEL_DIR": "/m", "AIP_CHECKPOINT_DIR": "/c", "AIP_TENSORBOARD_LOG_DIR": "/t"}
    auto = parse_flags(base, environ=dirs)
    assert _steps_per_execution(auto, replicas=2, workers=1) == 1  # the trainer's choice, said in its log
    assert _steps_per_execution(auto, replicas=1, workers=1) == 0  # one replica: chosen as for tf-keras
    four = parse_flags([*base, "--steps-per-execution=4"], environ=dirs)
    assert _steps_per_execution(four, replicas=1, workers=1) == 4
    with pytest.raises(
        UsageError, match=re.escape("--steps-per-execution=4: Keras 3.15 fails with steps_per_execution > 1")
    ):
        _steps_per_execution(four, replicas=2, workers=1)
    with pytest.raises(UsageError, match="MultiWorkerMirroredStrategy"):
        _steps_per_execution(auto, replicas=2, workers=2)
    tf_keras = parse_flags([*base[:-1], "--keras=2", "--steps-per-execution=4"], environ=dirs)
    assert _steps_per_execution(tf_keras, replicas=2, workers=2) == 4


@pytest.mark.trainer
@pytest.mark.slow
def test_a_keras_3_factory_trains_on_two_replicas_exports_and_serves(tmp_path):
    """`submit --local` on two CPU replicas (MirroredStrategy): Keras 3 trains the factory at one
    step per execution, with the trainer's telemetry, and the export answers as a tf-keras one."""
    from trainer import export, serve

    (tmp_path / "train-0").write_bytes(b"")  # validate --local's check of the pattern (synthetic)
    data = keras3_data(
        tmp_path / "code",
        train_data=str(tmp_path / "train-*"),
        synthetic_data=True,
        steps_per_epoch=4,
        batch_size=8,
        image_size=16,
        cpu_replicas=2,
        warmup_epochs=0,
        optimizer="lamb",
        extra_args=["--intra-op-threads=2", "--inter-op-threads=2"],
    )
    data["output_dir"] = str(tmp_path / "out")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    result = cli_runner(edge_env(tmp_path), cwd=tmp_path, timeout=300)("submit", path, "--local")
    assert result.returncode == 0, result.stdout + result.stderr
    out = latest_run(tmp_path / "out")
    log = (records(out) / "logs" / "workerpool0-0.log").read_text()
    assert "Keras 3 trains models.net:build (models/net.py line 3: import keras)" in log
    assert "Keras 3 on 2 replicas: steps_per_execution 1: Keras 3.15 fails" in log
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["replicas"] == 2 and metrics["strategy"] == "mirrored"
    assert metrics["steps_per_execution"] == 1 and metrics["steps"] == 4
    assert metrics["train_examples_per_sec"] > 0 and metrics["input_wait_fraction"] is not None
    config = json.loads((out / "trainer_config.json").read_text())
    assert config["flags"]["keras"] == "3" and config["keras"].startswith("3.")
    assert list((out / "logs").rglob("events.out.tfevents.*"))  # TensorBoard wrote its events
    # The export: the signature contract, served by the server's own loader (plain TensorFlow).
    serving = json.loads((out / "model" / export.SERVING_CONFIG).read_text())
    assert serving["signature"] == export.BYTES_SIGNATURE and serving["num_classes"] == 3
    model = serve.Model(str(out / "model"))
    assert model.num_classes == 3
    import numpy as np

    from trainer._keras import tf

    pngs = [tf.io.encode_png(np.full((20, 20, 3), v, np.uint8)).numpy() for v in (0, 255)]
    for answer in model.predict(pngs):
        probabilities = answer["probabilities"]
        assert len(probabilities) == 3 and abs(sum(probabilities) - 1) < 1e-5
        assert answer["class"] == int(np.argmax(probabilities))
