"""The measured input wait and `bench --local`, with the real trainer (docs/contract.md section 9).

One bench run (session fixture) trains twice: on synthetic batches, then on 512 px JPEGs decoded
by one thread for a 32 px tiny-cnn (starved of input). Timing on a shared 2-core machine is
noisy, so the bounds below are wide; the starved run waits ~80 % of its step time here, the
synthetic one a few percent.
"""

from __future__ import annotations

import re

import pytest

from vertex_trainer.present.bench import bench_text

pytestmark = [pytest.mark.trainer, pytest.mark.slow]

PROGRESS = re.compile(r"^progress epoch=\d+/\d+ step=(\d+)/(\d+) .*input_wait_fraction=([\d.]+)")


def test_a_synthetic_run_waits_for_input_near_zero(bench_run):
    m = bench_run.metrics("synthetic")
    assert m["synthetic_data"] is True and m["eval_accuracy"] is None  # no files, no evaluation
    assert 0.0 <= m["input_wait_fraction"] < 0.2, m
    assert m["input_wait_measured_steps"] == 48  # 3 executions of 16; the first is tracing
    assert m["steady_examples_per_sec"] > 0


def test_the_same_job_starved_of_input_waits_clearly_longer(bench_run):
    synthetic, starved = bench_run.metrics("synthetic"), bench_run.metrics("real")
    assert starved["synthetic_data"] is False
    assert starved["input_wait_fraction"] >= 0.4, starved
    assert starved["input_wait_fraction"] >= synthetic["input_wait_fraction"] + 0.3
    assert starved["bound"] == "input"


def test_bench_prints_both_throughputs_and_the_input_wait(bench_run):
    r = bench_run.result
    assert {"synthetic_examples_per_sec", "real_examples_per_sec", "input_wait_fraction", "bound"} <= set(r)
    assert r["synthetic_examples_per_sec"] > 0 and r["real_examples_per_sec"] > 0
    assert r["real_examples_per_sec"] <= 1.15 * r["synthetic_examples_per_sec"]  # within noise
    assert (
        r["bound"] == "input" and r["input_wait_fraction"] == bench_run.metrics("real")["input_wait_fraction"]
    )
    assert r["steps"] == 64 and r["steps_per_execution"] == 16 and r["device"] == "cpu"
    assert r["reference"] is None  # tiny-cnn on a CPU: no published figure
    assert [run["state"] for run in r["runs"].values()] == ["JOB_STATE_SUCCEEDED"] * 2
    text = bench_text(r)
    assert "synthetic" in text and "real data" in text and "input-bound" in text


def test_every_training_run_ends_with_the_verdict(bench_run):
    for kind in ("synthetic", "real"):
        lines = bench_run.trainer_lines(kind)
        assert lines[-1].startswith("trainer: throughput: "), lines[-3:]
    real = bench_run.trainer_lines("real")[-1]
    assert re.search(
        r"input-bound: \d+% of the time waiting for data \([\d,]+ examples/s\); this machine "
        r"has \d+ vCPUs for 1 CPU replica: try a machine type with more vCPUs, or "
        r"--read-parallelism/--data-threads \(now 1\)",
        real,
    ), real
    assert "synthetic data, the compute ceiling of 1 CPU replica" in bench_run.trainer_lines("synthetic")[-1]


def test_progress_lines_carry_the_input_wait(bench_run):
    found = [PROGRESS.match(line) for line in bench_run.trainer_lines("real")]
    found = [m for m in found if m]
    assert found and float(found[-1].group(3)) >= 0.4
