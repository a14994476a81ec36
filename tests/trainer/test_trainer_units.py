"""Fast unit tests: flags, precision choice, LR schedule, steps_per_execution, cluster parsing."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from trainer import flags, precision, strategy
from trainer.config import TrainConfig, UsageError, choose_steps_per_execution, parse_flags

REQUIRED = ["--train-data=/data/train-*", "--num-classes=10"]
DIRS = ["--model-dir=/out/model/", "--checkpoint-dir=/out/checkpoints/", "--tensorboard-dir=/out/logs/"]


# --- flags --------------------------------------------------------------------------------


def test_contract_flags_parse_in_kebab_case_form():
    cfg = parse_flags(
        [
            "--model=resnet50",
            "--train-data=gs://b/train-*",
            "--eval-data=gs://b/validation-*",
            "--num-classes=1000",
            "--image-size=224",
            "--epochs=90",
            "--steps-per-epoch=625",
            "--batch-size=2048",
            "--learning-rate=0.1",
            "--base-batch-size=256",
            "--warmup-epochs=5",
            "--precision=mixed_bfloat16",
            "--steps-per-execution=200",
            "--seed=7",
            "--label-offset=1",
            *DIRS,
        ],
        environ={},
    )
    assert (cfg.model, cfg.num_classes, cfg.batch_size, cfg.steps_per_execution) == (
        "resnet50",
        1000,
        2048,
        200,
    )
    assert (cfg.learning_rate, cfg.base_batch_size, cfg.warmup_epochs) == (0.1, 256, 5.0)
    assert (cfg.precision, cfg.seed, cfg.label_offset, cfg.steps_per_epoch) == ("mixed_bfloat16", 7, 1, 625)
    assert cfg.model_dir == "/out/model/" and cfg.tensorboard_dir == "/out/logs/"


def test_snake_case_and_boolean_extras():
    cfg = parse_flags(
        [
            *REQUIRED,
            *DIRS,
            "--batch_size=64",
            "--skip-corrupt",
            "--cache=false",
            "--label-smoothing=0.1",
            "--optimizer=lamb",
        ],
        environ={},
    )
    assert cfg.batch_size == 64 and cfg.skip_corrupt is True and cfg.cache is False
    assert cfg.label_smoothing == 0.1 and cfg.optimizer == "lamb"


def test_directories_default_to_vertex_environment():
    env = {
        "AIP_MODEL_DIR": "gs://b/run/model/",
        "AIP_CHECKPOINT_DIR": "gs://b/run/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": "gs://b/run/logs/",
    }
    cfg = parse_flags(REQUIRED, environ=env)
    assert (cfg.model_dir, cfg.checkpoint_dir, cfg.tensorboard_dir) == (
        "gs://b/run/model/",
        "gs://b/run/checkpoints/",
        "gs://b/run/logs/",
    )


def test_missing_directory_is_a_clear_error():
    with pytest.raises(UsageError, match=r"--model-dir is not set and \$AIP_MODEL_DIR"):
        parse_flags(REQUIRED, environ={})


def test_unknown_flag_names_it_and_suggests():
    with pytest.raises(UsageError, match=r"unknown flags: --batch-sise=8 \(did you mean --batch-size\?\)"):
        parse_flags([*REQUIRED, *DIRS, "--batch-sise=8"], environ={})


@pytest.mark.parametrize(
    "bad, message",
    [
        ("--batch-size=0", "--batch-size must be >= 1"),
        ("--precision=fp8", "invalid choice"),
        ("--model=vgg", "invalid choice"),
        ("--label-smoothing=1.5", "--label-smoothing must be in"),
    ],
)
def test_bad_values(bad, message):
    with pytest.raises(UsageError, match=message):
        parse_flags([*REQUIRED, *DIRS, bad], environ={})


def test_train_config_has_one_field_per_flag_with_the_tables_defaults():
    fields = dataclasses.fields(TrainConfig)
    assert [f.name for f in fields] == [flag.name for flag in flags.FLAGS]
    for f in fields:
        if f.default is not dataclasses.MISSING:
            assert f.default == flags.BY_NAME[f.name].default, f.name


def test_every_flag_parses_in_both_spellings():
    cfg = parse_flags([*REQUIRED, *DIRS], environ={})
    for flag in flags.FLAGS:
        if flag.type is bool or flag.env or flag.required:
            continue
        value = flag.choices[-1] if flag.choices else {int: "7", float: "0.5", str: "x"}[flag.type]
        value = {"profile_steps": "2,4"}.get(flag.name, value)  # a text flag with a form: "A,B"
        kebab = parse_flags([*REQUIRED, *DIRS, f"{flag.option}={value}"], environ={})
        snake = parse_flags([*REQUIRED, *DIRS, f"--{flag.name}={value}"], environ={})
        assert getattr(kebab, flag.name) == getattr(snake, flag.name) == flag.type(value), flag.name
        assert getattr(cfg, flag.name) == flag.default, flag.name


@pytest.mark.parametrize(
    "flag",
    [
        f
        for f in flags.FLAGS
        if f.type in (int, float) and (f.ge, f.gt, f.le, f.lt) != (None, None, None, None)
    ],
    ids=lambda f: f.name,
)
def test_every_bound_in_the_table_is_enforced(flag):
    low = flag.ge - 1 if flag.ge is not None else flag.gt if flag.gt is not None else None
    high = flag.le + 1 if flag.le is not None else flag.lt if flag.lt is not None else None
    for bad in (v for v in (low, high) if v is not None):
        with pytest.raises(UsageError, match=f"^{flag.option} must be "):
            parse_flags([*REQUIRED, *DIRS, f"{flag.option}={flag.type(bad)}"], environ={})


def test_choice_tuples_are_the_trainers_registries():
    import inspect

    from trainer import model

    assert set(flags.MODELS) == {"tiny-cnn", *model._APPLICATIONS} and model.MODELS is flags.MODELS
    assert precision.POLICIES is flags.PRECISIONS
    for policy in flags.PRECISIONS:
        assert precision.resolve(policy, "gpu", (8, 0)) in flags.PRECISIONS
    assert strategy.STRATEGIES is flags.STRATEGIES
    source = inspect.getsource(strategy.create)
    assert all(f'"{kind}"' in source for kind in flags.STRATEGIES)


@pytest.mark.trainer
def test_every_optimizer_in_the_table_is_built():
    from trainer import schedules

    for name in flags.OPTIMIZERS:
        assert schedules.make_optimizer(name, 0.1, weight_decay=1e-4) is not None, name


# --- precision ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "device, capability, expected",
    [
        ("tpu", None, "mixed_bfloat16"),
        ("gpu", (8, 0), "mixed_bfloat16"),  # A100
        ("gpu", (8, 9), "mixed_bfloat16"),  # L4
        ("gpu", (9, 0), "mixed_bfloat16"),  # H100/H200
        ("gpu", (10, 0), "mixed_bfloat16"),  # B200
        ("gpu", (7, 0), "mixed_float16"),  # V100
        ("gpu", (7, 5), "mixed_float16"),  # T4
        ("cpu", None, "float32"),
    ],
)
def test_auto_precision_per_device(device, capability, expected):
    assert precision.resolve("auto", device, capability) == expected


def test_explicit_precision_is_kept():
    assert precision.resolve("float32", "tpu") == "float32"
    assert precision.resolve("mixed_float16", "cpu") == "mixed_float16"
    with pytest.raises(ValueError):
        precision.resolve("fp8", "gpu")


# --- steps_per_execution --------------------------------------------------------------------


@pytest.mark.parametrize(
    "steps, requested, expected",
    [
        (100, 0, (100, 100)),
        (1251, 0, (96, 1248)),  # 13 executions of 96 steps: epoch rounded to the nearest multiple
        (625, 0, (89, 623)),
        (10, 0, (10, 10)),
        (1000, 200, (200, 1000)),
        (1001, 200, (200, 1000)),  # explicit: epoch rounded down to a multiple
        (50, 200, (50, 50)),  # clipped to the epoch
    ],
)
def test_steps_per_execution_divides_the_epoch(steps, requested, expected):
    spe, epoch = choose_steps_per_execution(steps, requested)
    assert (spe, epoch) == expected
    assert epoch % spe == 0 and abs(epoch - steps) < max(spe, 1)


# --- learning-rate schedule ----------------------------------------------------------------


@pytest.mark.trainer
def test_learning_rate_scaling_warmup_and_cosine():
    from trainer import schedules

    peak = schedules.scaled_learning_rate(0.1, 2048, 256)
    assert peak == pytest.approx(0.8)
    sched = schedules.WarmupCosineDecay(peak, warmup_steps=100, total_steps=1100)
    expected = {
        0: 0.0,
        50: 0.4,
        99: 0.792,
        100: 0.8,
        600: 0.4,
        1100: 0.0,
        2000: 0.0,
        350: 0.8 * 0.5 * (1 + math.cos(math.pi * 0.25)),
    }
    for step, value in expected.items():
        assert float(sched(step)) == pytest.approx(value, abs=1e-6), step
        assert schedules.lr_at(step, peak=peak, warmup_steps=100, total_steps=1100) == pytest.approx(
            value, abs=1e-6
        )
    # Monotonic up during warmup, down afterwards.
    values = [float(sched(s)) for s in range(0, 1100, 25)]
    assert values[:4] == sorted(values[:4]) and values[4:] == sorted(values[4:], reverse=True)


@pytest.mark.trainer
def test_optimizers_and_weight_decay_exclusions():
    import tensorflow as tf

    from trainer import schedules

    sgd = schedules.make_optimizer("sgd", 0.1, weight_decay=1e-4)
    assert sgd.nesterov and sgd.momentum == 0.9
    lamb = schedules.make_optimizer("lamb", 0.01, weight_decay=0.01)
    w = tf.Variable([[1.0, -2.0], [3.0, 0.5]], name="kernel")
    before = w.numpy().copy()
    lamb.apply_gradients([(tf.constant([[0.1, 0.1], [0.1, 0.1]]), w)])
    # LAMB's step is lr * ||w|| / ||update|| * update: its size scales with the weight norm.
    step = before - w.numpy()
    assert float(tf.norm(step)) == pytest.approx(0.01 * float(tf.norm(before)), rel=1e-3)


# --- cluster ------------------------------------------------------------------------------


def test_cluster_spec_is_read_first_and_translated():
    spec = {
        "cluster": {"workerpool0": ["10.0.0.1:2222"], "workerpool1": ["10.0.0.2:2222", "10.0.0.3:2222"]},
        "task": {"type": "workerpool1", "index": 1},
        "job": {"worker_pool_specs": []},
    }
    other = {"cluster": {"worker": ["x:1"]}, "task": {"type": "worker", "index": 0}}
    cluster = strategy.cluster_from_env({"CLUSTER_SPEC": json.dumps(spec), "TF_CONFIG": json.dumps(other)})
    assert cluster.spec == {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"]}
    assert (cluster.task_type, cluster.task_index, cluster.num_workers, cluster.is_chief) == (
        "worker",
        1,
        3,
        False,
    )
    assert json.loads(cluster.tf_config())["task"] == {"type": "worker", "index": 1}


def test_tf_config_and_chief_rules():
    cfg = {"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, "task": {"type": "chief", "index": 0}}
    cluster = strategy.cluster_from_env({"TF_CONFIG": json.dumps(cfg)})
    assert cluster.is_chief and cluster.num_workers == 2
    no_chief = {"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}
    assert strategy.cluster_from_env({"TF_CONFIG": json.dumps(no_chief)}).is_chief
    assert strategy.cluster_from_env({}) is None


def test_bad_cluster_spec_is_a_clear_error():
    with pytest.raises(strategy.ClusterError, match="not valid JSON"):
        strategy.cluster_from_env({"CLUSTER_SPEC": "{"})
    bad = {"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "workerpool1", "index": 0}}
    with pytest.raises(strategy.ClusterError, match="not in the cluster"):
        strategy.cluster_from_env({"CLUSTER_SPEC": json.dumps(bad)})


def test_output_base_is_the_parent_of_the_model_dir():
    from trainer.task import output_base

    assert output_base("gs://b/runs/x/model/") == "gs://b/runs/x"
    assert output_base("/tmp/run/model") == "/tmp/run"


def test_local_data_patterns_are_checked_before_tensorflow(tmp_path):
    from trainer.plan import check_local_data

    (tmp_path / "train-0").touch()
    (tmp_path / ".hidden-0").touch()  # TensorFlow's glob matches names starting with a dot
    out = [f"--model-dir={tmp_path}/m/", f"--checkpoint-dir={tmp_path}/c/", f"--tensorboard-dir={tmp_path}/l"]

    def check(*args: str) -> None:
        check_local_data(parse_flags(["--num-classes=3", *out, *args]))

    check(f"--train-data={tmp_path}/train-*, {tmp_path}/*-0", f"--eval-data={tmp_path}/.h*")
    # gs:// needs TensorFlow's filesystem; [^...] and backslashes read differently in Python's glob.
    check("--train-data=gs://b/none-*", rf"--eval-data={tmp_path}/[^x]*,{tmp_path}/\none")
    check("--train-data=/none/*", "--synthetic-data=true", "--steps-per-epoch=2", "--eval-data=/none/*")
    for args, missing in [
        ([f"--train-data={tmp_path}/train-*,{tmp_path}/eval-*"], f"{tmp_path}/eval-*"),
        ([f"--train-data={tmp_path}/train-*", "--eval-data=/none/validation-*"], "/none/validation-*"),
        (["--train-data=/none/train-*", "--synthetic-data=true"], "/none/train-*"),  # counts the records
    ]:
        with pytest.raises(UsageError) as err:
            check(*args)
        assert str(err.value) == f"no files match {missing}"


def test_config_module_stays_light():
    import subprocess
    import sys

    code = (
        "import sys, trainer.config, trainer.datagen, trainer.task; "
        "print(any(m == 'tensorflow' or m.startswith('tensorflow.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- models -------------------------------------------------------------------------------


@pytest.mark.trainer
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_keeps_float32_outputs(policy):
    from trainer import precision
    from trainer._keras import keras
    from trainer.model import build_model

    precision.apply(policy)
    try:
        model = build_model("tiny-cnn", num_classes=3, image_size=16)
        compute = {layer.name: layer.compute_dtype for layer in model.layers}
        assert compute["conv0"] == policy.removeprefix("mixed_")
        assert model.input.dtype.name == "uint8" and model.output.dtype.name == "float32"
        import numpy as np

        probs = model(np.zeros((2, 16, 16, 3), np.uint8)).numpy()
        assert probs.dtype == np.float32 and np.allclose(probs.sum(axis=1), 1.0, atol=1e-3)
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.mark.trainer
def test_resnet50_by_name_without_pretrained_weights():
    from trainer.model import build_model

    model = build_model("resnet50", num_classes=7, image_size=32)
    assert model.output_shape == (None, 7)
    assert 23_000_000 < model.count_params() < 24_000_000  # ResNet-50 body + a 7-way head
    with pytest.raises(ValueError, match="unknown model 'vgg'"):
        build_model("vgg", num_classes=7, image_size=32)


@pytest.mark.trainer
def test_eval_examples_left_out_of_whole_batches_are_named(capsys):
    """Issue 15: 20 eval images at a global batch of 16 evaluate 16; the run says so."""
    from trainer.task import count_steps

    cfg = parse_flags([*REQUIRED, *DIRS, "--batch-size=16", "--steps-per-epoch=4", "--eval-examples=20"])
    assert count_steps(cfg, ["train"], ["eval"]) == (4, 1)
    out = capsys.readouterr().out
    assert "evaluation uses 16 of 20 eval examples" in out and "4 are left out" in out
    whole = dataclasses.replace(cfg, eval_examples=32)
    assert count_steps(whole, ["train"], ["eval"]) == (4, 2)
    assert "left out" not in capsys.readouterr().out
