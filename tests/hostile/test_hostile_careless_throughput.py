"""A careless user's throughput that is no number (issue 42, A1): `cost SPEC --throughput nan`
(or inf, or a bench file holding NaN) passed the `> 0` check: `--output json` printed
`"expected_hours": NaN`, which is not JSON, and inf priced the plan at 0.00 USD. Now they are
exit 2 naming the flag, the value and the fix, as 0 and negative figures were."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import T4_JOB, cli_runner

SPEC = {
    **T4_JOB,
    "hardware": "cpu",  # (priced in the snapshot)
    "scheduling": {"strategy": "standard", "timeout": "2h"},
    "trainer": {**T4_JOB["trainer"], "steps_per_epoch": 100},
}


@pytest.fixture
def cost(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    return lambda *args: run("cost", spec, "--output", "json", *args)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_throughput_that_is_no_finite_number_is_exit_2(cost, value):
    done = cost("--throughput", value)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert json.loads(done.stdout)["error"]["kind"] == "invalid"  # (--output json: the one object)
    assert "must be a number more than 0 examples per second" in done.stderr
    assert "hint: e.g. --throughput 1200" in done.stderr


def test_a_bench_file_holding_nan_is_exit_2(cost, tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text('{"real_examples_per_sec": NaN, "synthetic_examples_per_sec": NaN}')
    done = cost("--bench", bench)
    assert done.returncode == 2 and "has no real_examples_per_sec" in done.stderr


def test_a_real_figure_still_prices_the_plan_in_valid_json(cost):
    done = cost("--throughput", "10")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert out["expected_cost"] > 0 and out["attempts"][0]["expected_hours"] > 0
