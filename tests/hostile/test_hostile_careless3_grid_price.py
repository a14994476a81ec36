"""A grid search priced by max_trials, not by the trials it runs (HB, item 3).

A grid search stops once it has tried each combination (Vertex AI's GRID_SEARCH; the local study
and the fake do the same), so `algorithm: grid` with 2 x 3 values and `max_trials: 40` runs 6
trials. Its worst case was priced as 40 trials: `cost` and `validate` said 40 x one trial's, and
scheduling.max_cost refused a budget that 6 trials fit ("the worst case of the whole search is
... (40 trials x ...)", exit 2), though the job could never cost that. Now the search is priced by
the trials it runs: min(max_trials, the grid's combinations).
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import A100_STANDARD_JOB, cli_runner

GRID = 6  # 2 x 3 combinations
SPEC = {
    **A100_STANDARD_JOB,
    "tune": {
        "metric": "accuracy",
        "goal": "maximize",
        "algorithm": "grid",
        "max_trials": 40,
        "parallel_trials": 2,
        "parameters": {
            "batch_size": {"values": [64, 128]},
            "label_smoothing": {"values": [0.0, 0.1, 0.2]},
        },
    },
}


@pytest.fixture
def cli(tmp_path):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)

    def go(*args, **scheduling):
        spec = tmp_path / "job.yaml"
        spec.write_text(yaml.safe_dump({**SPEC, "scheduling": {**SPEC["scheduling"], **scheduling}}))
        return run(args[0], spec, *args[1:])

    return go


def test_a_grid_under_max_trials_is_priced_by_its_combinations(cli):
    done = cli("cost", "--output", "json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    one = out["max_cost"]
    assert out["trials"] == GRID and out["search_max_cost"] == pytest.approx(one * GRID, abs=0.01 * GRID)

    shown = cli("validate")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout + shown.stderr
    (figure,) = re.findall(rf"search +up to {GRID} trials, worst case ([\d,.]+) USD", text)
    assert figure == f"{out['search_max_cost']:,.2f}"
    assert f"each of its {GRID} combinations once, under max_trials 40" in text


def test_a_budget_the_grid_fits_is_not_refused_and_one_it_does_not_is(cli, tmp_path):
    one = json.loads(cli("cost", "--output", "json").stdout)["max_cost"]
    fits = cli("submit", "--dry-run", max_cost=round(one * GRID + 1, 2))  # 6 trials: under it
    assert fits.returncode == 0, fits.stderr
    over = cli("submit", "--dry-run", max_cost=round(one * GRID - 1, 2))
    assert over.returncode == 2, over.stderr
    assert f"({GRID} trials x {one:,.2f} USD" in over.stderr and "nothing was sent" in over.stderr
