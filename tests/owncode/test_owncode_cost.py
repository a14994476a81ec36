"""`cost` and `bench` for a script job (issue 32 item 6): your code's epoch is its own, so the
expected hours come from --throughput with --examples-per-epoch (and --epochs); a throughput
alone is exit 2 naming the flag; bench says it needs the bundled trainer or a model factory."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.owncode.conftest import script_data


@pytest.fixture
def spec_file(tmp_path, code_dir):
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(script_data(code_dir, scheduling={"timeout": "10h"})))
    return path


def test_without_a_throughput_it_prices_the_hardware_and_says_what_to_give(run_cli, spec_file):
    result = run_cli("cost", spec_file, "--output", "json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    (attempt,) = out["attempts"]
    assert attempt["hourly"] > 0 and attempt["max_hours"] == 10.0
    assert attempt["expected_hours"] is None and out["expected_cost"] is None
    assert any("--throughput EX_PER_S and --examples-per-epoch N" in n for n in out["notes"])


def test_the_throughput_and_the_epochs_give_the_expected_hours(run_cli, spec_file):
    result = run_cli(
        "cost", spec_file, "--throughput", "500", "--examples-per-epoch", "600000", "--epochs", "3",
        "--output", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (attempt,) = json.loads(result.stdout)["attempts"]
    assert attempt["expected_hours"] == pytest.approx(3 * 600_000 / 500 / 3600, abs=0.01)  # 1.0 h
    assert attempt["expected_cost"] == pytest.approx(attempt["hourly"] * 1.0, abs=0.01)


def test_a_throughput_without_the_epoch_size_is_exit_2_naming_the_flag(run_cli, spec_file):
    result = run_cli("cost", spec_file, "--throughput", "500")
    assert result.returncode == 2
    assert "--examples-per-epoch N" in result.stderr and "Traceback" not in result.stderr


def test_the_epoch_flags_are_refused_for_the_bundled_trainer(run_cli, tmp_path):
    from tests.shared import T4_JOB, spec_yaml
    from tests.shared import write_spec as write_text

    path = write_text(tmp_path, spec_yaml(T4_JOB, name="bundled"), "bundled.yaml")
    result = run_cli("cost", path, "--throughput", "500", "--epochs", "3")
    assert result.returncode == 2
    assert "--set trainer.epochs=E" in result.stderr


def test_bench_says_it_needs_the_bundled_trainer_or_a_factory(run_cli, spec_file):
    result = run_cli("bench", spec_file, "--local", "--dry-run")
    assert result.returncode == 2
    assert "bundled trainer or a model factory" in result.stderr
    assert "trainer.model: package.module:function" in result.stderr
