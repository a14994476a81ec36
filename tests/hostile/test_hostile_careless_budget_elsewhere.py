"""scheduling.max_cost held only where this tool sends the job (issue 42, H2 round 2).

`submit`, `validate`, `pipeline submit` and `bench` refuse a plan whose worst case is over the
spec's budget, but the two commands that make a job to run elsewhere did not: `render --format
json|gcloud` (the body for `gcloud ai custom-jobs create --config`, docs/contract.md section 2)
and `pipeline compile` (the pipeline the console or kfp runs) printed or wrote a job of 2 x 8
H100s for 7 days (about 30,000 USD) from a spec that says `max_cost: 100`, exit 0. Now both are
exit 2 with submit's figures, and write nothing; `render --format yaml`, for looking at any
spec's body, still prints it.
"""

from __future__ import annotations

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import T4_JOB, cli_runner

OVER = {
    **T4_JOB,
    "hardware": "h100x8",
    "replicas": 2,
    "scheduling": {"strategy": "standard", "max_cost": 100},  # no timeout: Vertex AI's 7 days
    "trainer": {**T4_JOB["trainer"], "batch_size": 64},
}


@pytest.fixture
def cli(tmp_path):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)

    def go(command: str, *options: str, **changes):
        spec = tmp_path / "job.yaml"
        spec.write_text(yaml.safe_dump({**OVER, **changes}))
        return run(*command.split(), spec, *options)

    return go


def _refused(done, refusal: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert refusal in done.stderr and "over the budget of 100.00 USD" in done.stderr


def test_what_runs_elsewhere_is_held_to_the_specs_budget(cli, tmp_path):
    submitted = cli("submit", "--dry-run")  # the refusal submit makes, word for word
    assert submitted.returncode == 2
    (refusal,) = [
        line for line in submitted.stderr.splitlines() if line.startswith("error: scheduling.max_cost")
    ]

    _refused(cli("render"), refusal)
    _refused(cli("render", "--format", "gcloud"), refusal)
    out = tmp_path / "pipeline.yaml"
    _refused(cli("pipeline compile", "-o", str(out)), refusal)
    assert not out.exists()

    shown = cli("render", "--format", "yaml")  # for looking at: any spec's body
    assert shown.returncode == 0, shown.stderr
    assert "a3-highgpu-8g" in shown.stdout


def test_a_plan_within_the_budget_renders_and_compiles(cli, tmp_path):
    within = {"strategy": "standard", "max_cost": 1_000_000}
    assert cli("render", scheduling=within).returncode == 0
    assert cli("render", "--format", "gcloud", scheduling=within).returncode == 0
    out = tmp_path / "pipeline.yaml"
    done = cli("pipeline compile", "-o", str(out), scheduling=within)
    assert done.returncode == 0, done.stderr
    assert out.exists()
