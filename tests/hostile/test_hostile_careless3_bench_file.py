"""`cost SPEC --bench FILE` with a file that is not what `bench --output json` printed (HE found
the first): JSON nested 100,000 deep ended in a RecursionError traceback (only ValueError was
caught), and `"real_examples_per_sec": true` priced the job at 1 example a second. Each is exit 2
naming the file (vertex_trainer/cost/estimate.py load_bench, throughput_of)."""

from __future__ import annotations

import json

import pytest

SPEC = "job_specs/quickstart-local.yaml"


@pytest.mark.parametrize(
    "text,says",
    [
        ("[" * 100_000 + "]" * 100_000, "not JSON"),
        ('{"real_examples_per_sec": true}', "has no real_examples_per_sec or synthetic_examples_per_sec"),
        ('{"synthetic_examples_per_sec": "fast"}', "has no real_examples_per_sec"),
    ],
)
def test_a_bench_file_that_is_no_bench_result_is_exit_2(run_cli, tmp_path, text, says):
    bench = tmp_path / "bench.json"
    bench.write_text(text)
    done = run_cli("cost", SPEC, "--bench", str(bench))
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr


def test_a_bench_result_still_prices_the_job(run_cli, tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text('{"real_examples_per_sec": 2000.0, "hardware": "cpu"}')
    done = run_cli("cost", SPEC, "--bench", str(bench), "--set", "trainer.train_examples=72000", "-o", "json")
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout)["attempts"][0]
    assert first["expected_hours"] == pytest.approx(72_000 * 3 / 2000 / 3600, abs=0.005)  # 3 epochs
