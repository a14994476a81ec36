"""Host round trips (issue 43): the share's arithmetic, the verdict's words, `--profile-steps`, and
the spec's `steps_per_execution: auto`. No training here (test_host_overhead_runs.py trains)."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.cli_support import edge_env, invoke
from trainer.config import UsageError, parse_flags
from trainer.executions import choose_steps_per_execution, parse_profile_steps, profile_executions

DIRS = ["--model-dir=/m/", "--checkpoint-dir=/c/", "--tensorboard-dir=/t/"]
BASE = ["--train-data=/d/train-*", "--num-classes=4", *DIRS]


# -- --profile-steps ----------------------------------------------------------------------------


def test_profile_steps_are_two_ordered_step_numbers():
    assert parse_profile_steps("") is None and parse_profile_steps("  ") is None
    assert parse_profile_steps("10,20") == (10, 20) and parse_profile_steps(" 3 , 3 ") == (3, 3)
    for bad, words in (
        ("10", "two step numbers"),
        ("a,b", "two step numbers"),
        ("1,2,3", "two step numbers"),
        ("-1,4", "two step numbers"),
        ("0,4", "1 <= A <= B"),
        ("9,4", "1 <= A <= B"),
    ):
        with pytest.raises(ValueError, match=words):
            parse_profile_steps(bad)
    assert parse_profile_steps("5,20", total_steps=20) == (5, 20)
    with pytest.raises(ValueError, match="past the run's 20 steps: choose B <= 20"):
        parse_profile_steps("5,21", total_steps=20)


def test_the_window_is_widened_to_whole_executions():
    assert profile_executions((10, 20), 1) == (10, 20)
    # steps 10..20 at 8 per execution: executions 2 (steps 9-16) and 3 (steps 17-24)
    assert profile_executions((10, 20), 8) == (2, 3)
    assert profile_executions((1, 1), 100) == (1, 1)
    assert profile_executions((100, 101), 100) == (1, 2)


def test_the_trainer_refuses_a_bad_window_naming_the_flag():
    assert parse_flags([*BASE, "--profile-steps=2,4"], environ={}).profile_steps == "2,4"
    with pytest.raises(UsageError, match=r"^--profile-steps must be 'A,B' with 1 <= A <= B"):
        parse_flags([*BASE, "--profile-steps=4,2"], environ={})
    # the run's steps are known from the flags: 10 steps x 2 epochs
    with pytest.raises(UsageError, match="past the run's 20 steps"):
        parse_flags([*BASE, "--steps-per-epoch=10", "--epochs=2", "--profile-steps=15,25"], environ={})


# -- the spec -----------------------------------------------------------------------------------


@pytest.fixture
def spec_file(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train-00000-of-00001").write_bytes(b"")
    path = tmp_path / "job.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: spe
        region: us-central1
        hardware: cpu
        image: {{uri: example.com/trainer:v1}}
        output_dir: {tmp_path}/out
        trainer:
          model: tiny-cnn
          train_data: {data}/train-*
          num_classes: 4
          steps_per_epoch: 10
          epochs: 2
        """)
    )
    return path


def _args(done) -> list[str]:
    body = json.loads(done.stdout)
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "args" in node and isinstance(node["args"], list):
                found.extend(node["args"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(body)
    return found


@pytest.mark.parametrize("value", ["auto", "AUTO", "0"])
def test_auto_and_0_are_valid_and_sent_as_the_trainers_0(spec_file, tmp_path, value):
    env = edge_env(tmp_path)
    sets = ["--set", f"trainer.steps_per_execution={value}", "--set", "trainer.profile_steps=2,4"]
    done = invoke(["submit", spec_file, "--local", "--dry-run", "--output", "json", *sets], env=env)
    assert done.returncode == 0, done.stderr
    args = _args(done)
    assert "--steps-per-execution=0" in args and "--profile-steps=2,4" in args


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("steps_per_execution", "-1", "greater than or equal to 0"),
        ("steps_per_execution", "fast", "valid integer"),
        ("profile_steps", "4,2", "1 <= A <= B"),
        ("profile_steps", "15,25", "past the run's 20 steps"),
    ],
)
def test_a_bad_value_is_exit_2_naming_the_field(spec_file, tmp_path, field, value, words):
    done = invoke(
        ["validate", spec_file, "--local", "--set", f"trainer.{field}={value}"], env=edge_env(tmp_path)
    )
    assert done.returncode == 2, done.stderr
    assert f"trainer.{field}" in done.stderr and words in done.stderr and value in done.stderr


# -- the share and the verdict (trainer.throughput: TensorFlow in this process) ------------------


@pytest.mark.trainer
def test_steps_per_execution_for_brings_the_share_under_the_target():
    from trainer.throughput import HOST_TARGET, steps_per_execution_for

    for share, spe in ((0.31, 1), (0.69, 1), (0.12, 8), (0.5, 100), (0.999, 1)):
        n = steps_per_execution_for(share, spe)
        ratio = spe * share / (1 - share)  # round trip / step time, as measured
        assert n & (n - 1) == 0  # a power of two
        assert ratio / (ratio + n) <= HOST_TARGET  # the share it predicts at n
        assert n == 1 or ratio / (ratio + n // 2) > HOST_TARGET  # and the smallest such power


@pytest.mark.trainer
def test_the_share_leaves_out_start_up_checkpoints_and_profiling():
    from trainer.throughput import START_UP, Execution, InputWaitMeter

    meter = InputWaitMeter(8)
    # cycles of 10 s each starting at t = 10 k; the round trip is its first 2 s
    meter.executions = [
        Execution(8.0, 0.0, 4, started=10 * k + 2, host=2.0, cycle=10.0, round_started=10 * k)
        for k in range(6)
    ]
    assert meter.host_fraction() == pytest.approx(0.2)
    # start-up round trips are never counted, however long
    meter.executions[START_UP - 1] = Execution(
        8.0, 0.0, 4, started=12, host=9.0, cycle=17.0, round_started=10
    )
    assert meter.host_fraction() == pytest.approx(0.2)
    # a 1 s checkpoint inside the round trip of the execution starting at t = 30: left out of both
    saving = lambda start, end: 1.0 if start <= 30.5 < end else 0.0  # noqa: E731
    assert meter.host_fraction(saving=saving) == pytest.approx((2 + 1 + 2 + 2) / (10 + 9 + 10 + 10))
    # profiler start/stop round trips: left out
    meter.executions[3] = Execution(
        8.0, 0.0, 4, started=32, host=6.0, cycle=14.0, round_started=30, profiled=True
    )
    assert meter.host_fraction() == pytest.approx(0.2)
    out = meter.summary()
    assert out["host_overhead_fraction"] == pytest.approx(0.2)
    assert out["host_overhead_measured_executions"] == len(meter.executions) - START_UP - 1
    assert out["host_round_trip_ms"] == pytest.approx(2000.0)
    assert out["bound"] == "host"


@pytest.mark.trainer
def test_the_verdict_names_the_fix_when_round_trips_dominate():
    from trainer import throughput

    metrics = {
        "input_wait_fraction": 0.02,
        "host_overhead_fraction": 0.31,
        "steady_examples_per_sec": 1234.0,
        "steps_per_execution": 1,
        "steps_per_epoch": 500,
    }
    say = lambda m, **kw: throughput.verdict(m, **{"synthetic": False, "devices": 1, "device": "gpu", **kw})  # noqa: E731
    auto = choose_steps_per_execution(500, 0)[0]
    needed = throughput.steps_per_execution_for(0.31, 1)
    assert say(metrics) == (
        "throughput: host-bound: 31% of the time between executions at steps_per_execution=1: "
        f"use trainer.steps_per_execution: 0 (auto: {auto} here) or >= {needed} "
        "(1,234 examples/s; waiting for data: 2% of the executions' time)"
    )
    # waiting for data more than between executions: input-bound, the round trips' share last
    waiting = say({**metrics, "input_wait_fraction": 0.4})
    assert waiting.startswith("throughput: input-bound: 40% of the time waiting for data (1,234 examples/s)")
    assert waiting.endswith("--read-parallelism/--data-threads; 31% of the time between executions")
    # below the threshold: compute-bound, the share still shown
    low = say({**metrics, "host_overhead_fraction": throughput.HOST_BOUND / 2})
    assert low.startswith("throughput: compute-bound: 2% of the time waiting for data (1,234 examples/s)")
    assert low.endswith("; 5% of the time between executions") and "steps_per_execution" not in low
    # a synthetic run says the same fix after its ceiling
    assert say(metrics, synthetic=True).endswith(f"or >= {needed}")
    # not measured (a run of too few executions): no share, no fix
    assert "between executions" not in say({**metrics, "host_overhead_fraction": None})


@pytest.mark.trainer
@pytest.mark.parametrize("ring", [2, 1])
def test_a_fit_records_every_round_trip_with_the_gpu_sync_exercised_on_cpu(ring):
    """The meter in a real fit (10 steps, 2 per execution) with sync_on (the GPU path, run on
    the CPU: the step-start read and the end-of-execution read); a ring too small for the
    executions (1 slot for 2 steps) measures no round trip rather than a wrong one."""
    import tensorflow as tf

    from trainer._keras import keras
    from trainer.model import build_model
    from trainer.throughput import START_UP, InputWaitMeter

    batch = (tf.zeros([8, 8, 8, 3], tf.uint8), tf.zeros([8], tf.int32))
    data = tf.distribute.get_strategy().experimental_distribute_dataset(
        tf.data.Dataset.from_tensors(batch).repeat()
    )
    meter = InputWaitMeter(8, steps_per_execution=ring)
    model = build_model("tiny-cnn", num_classes=4, image_size=8)
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        steps_per_execution=2,
    )
    meter.sync_on(model)
    model.fit(meter.wrap(data), epochs=1, steps_per_epoch=10, callbacks=[meter], verbose=0)
    assert [e.steps for e in meter.executions] == [2] * 5
    measured = meter.executions[START_UP:]
    summary = meter.summary()
    if ring == 2:
        assert all(0 < e.host < e.cycle for e in measured)
        assert summary["host_overhead_measured_executions"] == len(measured)
        assert 0 < summary["host_overhead_fraction"] < 1
    else:
        assert all(e.cycle == 0 for e in measured)
        assert summary["host_overhead_fraction"] is None
        assert summary["host_overhead_measured_executions"] == 0
    assert summary["input_wait_measured_steps"] == 8  # the wait is measured either way
