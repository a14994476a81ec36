"""A careless user prices a tuning job with `cost` (issue 42, H2 round 2).

`validate` and `submit --dry-run` say a search's whole worst case (max_trials x one trial's), and
scheduling.max_cost refuses by it, but `vertex-trainer cost SPEC`, the command made to answer
"what will this cost", printed one trial's figures as the plan's ("plan worst case 4.22 USD" for
a 1,000-trial search worth 4,224 USD), the search only in a note's words, and `--output json`
had one trial's "max_cost" alone. Now its text has a `search` line with the whole figure, and
its JSON "trials" and "search_max_cost": the same figure `validate` shows.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import A100_STANDARD_JOB, cli_runner

TRIALS = 40
SPEC = {
    **A100_STANDARD_JOB,
    "tune": {
        "metric": "accuracy",
        "goal": "maximize",
        "max_trials": TRIALS,
        "parallel_trials": 4,
        "parameters": {"learning_rate": {"min": 0.01, "max": 1.0, "scale": "log"}},
    },
}


@pytest.fixture
def cli(tmp_path):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)

    def go(*args, **changes):
        spec = tmp_path / "job.yaml"
        spec.write_text(yaml.safe_dump({**SPEC, **changes}))
        return run(args[0], spec, *args[1:])

    return go


def _validate_search(cli) -> str:
    """The search's worst case as `validate` prints it (its `search` line)."""
    done = cli("validate")
    assert done.returncode == 0, done.stderr
    (figure,) = re.findall(
        rf"search +up to {TRIALS} trials, worst case ([\d,.]+) USD", done.stdout + done.stderr
    )
    return figure


def test_cost_says_the_whole_searchs_worst_case(cli):
    as_json = cli("cost", "--output", "json")
    assert as_json.returncode == 0, as_json.stderr
    out = json.loads(as_json.stdout)
    one = out["max_cost"]  # one trial's, as before
    assert one is not None and one > 0
    assert out["trials"] == TRIALS
    assert out["search_max_cost"] == pytest.approx(one * TRIALS, abs=0.01 * TRIALS)
    shown = _validate_search(cli)
    assert f"{out['search_max_cost']:,.2f}" == shown  # the figure validate shows

    text = cli("cost")
    assert text.returncode == 0, text.stderr
    assert f"search   up to {TRIALS} trials: worst case {shown} USD ({TRIALS} x one trial's)" in text.stdout


def test_a_job_that_is_no_search_has_no_search_figures(cli):
    done = cli("cost", "--output", "json", tune=None)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "trials" not in out and "search_max_cost" not in out and out["max_cost"] > 0
    assert "search" not in cli("cost", tune=None).stdout
