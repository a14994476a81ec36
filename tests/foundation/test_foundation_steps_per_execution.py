"""One decision, one place (issue 31): steps_per_execution is chosen by the trainer's
`choose_steps_per_execution` (trainer/executions.py), and bench's plan is that same choice, so the
bench measures the cut of the epoch the trainer would run."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer import config, executions
from trainer.config import parse_flags
from vertex_trainer.performance import benchmark
from vertex_trainer.spec import load_spec, trainer

REPO = Path(__file__).resolve().parents[2]
DIRS = ["--model-dir=/m/", "--checkpoint-dir=/c/", "--tensorboard-dir=/t/"]


def _spec(requested: int):
    value = str(requested) if requested else "null"  # unset: the trainer chooses
    return load_spec(
        REPO / "job_specs" / "bench-resnet50-a100x8.yaml",
        sets=[("trainer.steps_per_epoch", "null"), ("trainer.steps_per_execution", value)],
    )


def test_one_function_decides():
    choose = executions.choose_steps_per_execution
    assert config.choose_steps_per_execution is choose  # the trainer's import path
    assert trainer.choose_steps_per_execution is choose  # what spec/ gives the bench
    assert benchmark.choose_steps_per_execution is choose


@pytest.mark.parametrize(
    "steps, requested",
    [
        (400, 0),
        (64, 0),
        (6, 0),
        (11, 0),
        (399, 0),
        (1000, 0),
        (1251, 0),
        (400, 100),
        (100, 100),
        (400, 30),
        (100, 30),
        (50, 7),
    ],
)
def test_bench_plans_what_the_trainer_chooses_and_the_trainer_runs_it(steps, requested):
    spec = _spec(requested)
    assert (spec.trainer.steps_per_execution or 0) == requested
    plan = benchmark.plan(spec, steps=steps)
    expected = executions.choose_steps_per_execution(
        steps, requested, min_executions=benchmark.MIN_EXECUTIONS
    )
    assert (plan.steps_per_execution, plan.steps) == expected
    assert plan.steps % plan.steps_per_execution == 0
    assert plan.steps // plan.steps_per_execution >= benchmark.MIN_EXECUTIONS
    assert bool(plan.notes) == bool(requested and expected[0] != requested)
    for run in plan.runs:
        # The trainer, given the bench job's own args, keeps the bench's cut as it is.
        cfg = parse_flags([*run.spec.trainer.to_args(), *DIRS], environ={})
        assert (cfg.steps_per_epoch, cfg.steps_per_execution) == (plan.steps, plan.steps_per_execution)
        assert config.choose_steps_per_execution(cfg.steps_per_epoch, cfg.steps_per_execution) == (
            plan.steps_per_execution,
            plan.steps,
        )


@pytest.mark.parametrize("steps", [1, 5, 99, 100, 101, 399, 1000, 5004])
def test_the_trainer_alone_is_min_executions_1(steps):
    # The bench's bound changes nothing the trainer chooses for an epoch it already cuts that often.
    choose = executions.choose_steps_per_execution
    spe, epoch = choose(steps, 0)
    assert choose(steps, 0, min_executions=1) == (spe, epoch)
    if epoch // spe >= 4:
        assert choose(steps, 0, min_executions=4) == (spe, epoch)


def test_no_steps_is_the_callers_error():
    with pytest.raises(ValueError, match="steps per epoch must be >= 1"):
        executions.choose_steps_per_execution(0, 0)
