"""A careless user's grid search with fewer trials than combinations (issue 42, H2 round 3):
`algorithm: grid` over batch_size [32, 64, 128] x optimizer [sgd, lamb] with `max_trials: 4`
(the default is 10: three parameters of three values are 27).

A grid search takes the combinations in order and stops at max_trials, so batch_size 128 was
never tried, and the study's "best" was the best of the first four: `validate` said "4 trials,
2 at a time (grid search)", `submit` nothing, and the money went on a search that did not cover
what was asked. Now validate's tune line says "4 of its 6 combinations", and validate, a cloud
submit and a local study warn with the count that covers the grid; a grid that max_trials
covers says nothing more."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vertex_trainer.errors import UserError
from vertex_trainer.spec import build_spec
from vertex_trainer.spec.tune import grid_warning

QUICKSTART = Path(__file__).resolve().parents[2] / "job_specs" / "quickstart-local.yaml"
CLOUD = ("--set", "trainer.train_data=gs://bkt/t", "--set", "trainer.eval_data=gs://bkt/e")
WARNING = "warning: tune.max_trials: 4 trials try 4 of the grid's 6 combinations"


def _spec_file(tmp_path: Path, max_trials: int = 4) -> Path:
    data = yaml.safe_load(QUICKSTART.read_text())
    data["output_dir"] = "gs://bkt/runs"
    data["tune"] = {
        "max_trials": max_trials,
        "parallel_trials": 2,
        "algorithm": "grid",
        "parameters": {"batch_size": {"values": [32, 64, 128]}, "optimizer": {"values": ["sgd", "lamb"]}},
    }
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_validate_says_the_grid_is_not_covered_and_by_how_much(run_cli, tmp_path):
    proc = run_cli("validate", _spec_file(tmp_path), *CLOUD)
    assert proc.returncode == 0, proc.stderr
    assert "(grid search: 4 of its 6 combinations)" in proc.stdout
    assert WARNING in proc.stderr and "raise max_trials to 6" in proc.stderr


def test_a_grid_that_max_trials_covers_says_nothing_more(run_cli, tmp_path):
    proc = run_cli("validate", _spec_file(tmp_path, max_trials=6), *CLOUD)
    assert proc.returncode == 0, proc.stderr
    assert "(grid search)" in proc.stdout and "tune.max_trials" not in proc.stderr


def test_integer_ranges_count_each_whole_number_and_other_algorithms_never_warn(tmp_path):
    data = yaml.safe_load(_spec_file(tmp_path).read_text())
    data["tune"]["parameters"] = {"warmup_epochs": {"min": 0, "max": 2, "type": "integer"}}
    data["trainer"]["epochs"] = 5
    data["tune"]["max_trials"] = 2
    assert "of the grid's 3 combinations" in (grid_warning(build_spec(data)) or "")
    data["tune"]["algorithm"] = "random"
    assert grid_warning(build_spec(data)) is None


def test_a_range_of_one_value_is_not_told_to_swap_its_ends(tmp_path):
    """`{min: 0.1, max: 0.1}` was refused with "swap them (min: 0.1, max: 0.1)": the same range."""
    data = yaml.safe_load(_spec_file(tmp_path).read_text())
    data["tune"]["algorithm"] = "random"
    data["tune"]["parameters"] = {"learning_rate": {"min": 0.1, "max": 0.1}}
    try:
        build_spec(data)
    except UserError as e:
        text = f"{e}\n{e.hint}"
    else:
        raise AssertionError("a range of one value was accepted")
    assert "min 0.1 is not less than max 0.1" in text
    assert "swap" not in text and "widen the range" in text
    data["tune"]["parameters"] = {"learning_rate": {"min": 0.2, "max": 0.1}}
    with pytest.raises(UserError, match="not less than max"):
        build_spec(data)
