"""The measured input wait and `bench --local`, with the real trainer (docs/contract.md section 9).

README.md's bench block (`<!-- docs-test: checked-by tests/throughput/test_throughput_bench.py
-->`: a dry run, then `bench job_specs/quickstart-local.yaml --local --steps 64`) runs here once,
as the docs harness runs it: its synthetic run, its real run on the quickstart data and its report.
A job starved of input (conftest.py `starved_run`: 512 px JPEGs decoded by one thread for a 32 px
tiny-cnn) is the bench's real-data run of that job. Timing on a shared 2-core machine is noisy, so
the bounds below are wide; the starved run waits ~80 % of its step time here. A synthetic run's
steps read no iterator (trainer/synthetic.py), so its wait is ~0 with both cores busy too (these
tests were run beside two `yes > /dev/null` loops: benchmarks/RESULTS-sweep.md).
"""

from __future__ import annotations

import json
import re

import pytest

from tests.docs import harness
from tests.shared import latest_run
from tests.throughput.conftest import STARVED_STEPS, STEPS, TrainerRuns

pytestmark = [pytest.mark.trainer, pytest.mark.slow]

HERE = "tests/throughput/test_throughput_bench.py"
BENCH_RUN = "bench job_specs/quickstart-local.yaml --local --steps 64"  # README.md, "Throughput"
PROGRESS = re.compile(r"^progress epoch=\d+/\d+ step=(\d+)/(\d+) .*input_wait_fraction=([\d.]+)")
RATE = re.compile(r"^(synthetic|real data)\s+([\d,]+) examples/s", re.M)


@pytest.fixture(scope="module")
def readme_bench(tmp_path_factory) -> TrainerRuns:
    """README.md's bench block, run as the docs harness runs it, in a scratch workdir with the
    quickstart data: the dry run's JSON and the local bench's report on stdout, both runs' lines
    on stderr; its runs each in their own folder below runs/quickstart/bench/<kind>."""
    block = harness.checked_block("README.md", BENCH_RUN, HERE)
    work = harness.workdir(tmp_path_factory.mktemp("readme-bench"), harness.quickstart_data(tmp_path_factory))
    stdout, stderr = harness.run_block(block, work)
    runs = {kind: latest_run(work / "runs" / "quickstart" / "bench" / kind) for kind in ("synthetic", "real")}
    job = re.search(r"^bench +(\S+) on ", stdout, re.M)
    assert job, stdout[-3000:]
    names = {"synthetic": f"{job.group(1)}-bench-syn", "real": f"{job.group(1)}-bench-real"}
    return TrainerRuns(stdout, stderr, runs, names)


def test_this_file_runs_every_block_of_the_docs_that_names_it():
    named = {b.id for b in harness.blocks() if b.checked_by == HERE}
    assert named == {harness.checked_block("README.md", BENCH_RUN, HERE).id}


def test_a_synthetic_run_waits_for_input_near_zero(readme_bench):
    m = readme_bench.metrics("synthetic")
    assert m["synthetic_data"] is True and m["eval_accuracy"] is None  # no files, no evaluation
    # its steps read one captured batch (trainer/synthetic.py), no tf.data get_next: ~0 under load too
    assert 0.0 <= m["input_wait_fraction"] < 0.02, m
    assert m["steps"] == STEPS and m["steps_per_execution"] == 8  # the spec's own
    assert m["input_wait_measured_steps"] == STEPS - 8  # every execution but the first (tracing)
    assert m["steady_examples_per_sec"] > 0


def test_a_job_starved_of_input_waits_clearly_longer(starved_run, readme_bench):
    synthetic, starved = readme_bench.metrics("synthetic"), starved_run.metrics("real")
    assert starved["synthetic_data"] is False
    assert starved["steps"] == STARVED_STEPS and starved["steps_per_execution"] == 8  # the bench's choice
    assert starved["input_wait_fraction"] >= 0.4, starved
    assert starved["input_wait_fraction"] >= synthetic["input_wait_fraction"] + 0.3
    assert starved["bound"] == "input"


def test_bench_prints_both_throughputs_and_the_input_wait(readme_bench):
    """The local bench's report for people (performance/bench_text.py: the figures of
    performance.benchmark.report), after the dry run's JSON of the block's first line."""
    dry, _ = json.JSONDecoder().raw_decode(readme_bench.stdout.lstrip())
    assert dry["dry_run"] is True and list(dry["runs"]) == ["synthetic", "real"]
    text = readme_bench.stdout[readme_bench.stdout.index("\nbench ") + 1 :]
    header = r"bench +quickstart-\S+ on this machine: tiny-cnn 32 px, batch 64, float32, 64 steps \(8 per"
    assert re.match(header, text), text
    synthetic, real = readme_bench.metrics("synthetic"), readme_bench.metrics("real")
    rates = {kind: float(rate.replace(",", "")) for kind, rate in RATE.findall(text)}
    assert rates == {
        "synthetic": round(synthetic["steady_examples_per_sec"]),
        "real data": round(real["steady_examples_per_sec"]),
    }, text
    # Both rates are measured (> 0); which is higher is the machine's load at the time, not the
    # code's: a busy core can slow the synthetic run below the real one.
    assert rates["real data"] > 0 and rates["synthetic"] > 0
    wait = f"input wait {100 * real['input_wait_fraction']:.0f}% of the real run's step time"
    assert f"{wait}: {real['bound']}-bound" in text and real["bound"] in ("input", "compute")
    assert "reference" not in text  # tiny-cnn on a CPU: no published figure
    # A failed run ends the bench with exit 1 (api.bench: JobFailed); both ran here.
    assert [readme_bench.metrics(kind)["device"] for kind in ("synthetic", "real")] == ["cpu", "cpu"]


def test_every_training_run_ends_with_the_verdict(readme_bench, starved_run):
    for kind in ("synthetic", "real"):
        lines = readme_bench.trainer_lines(kind)
        assert lines[-1].startswith("trainer: throughput: "), lines[-3:]
    ceiling = readme_bench.trainer_lines("synthetic")[-1]
    assert "synthetic data, the compute ceiling of 1 CPU replica" in ceiling, ceiling
    starved = starved_run.trainer_lines("real")[-1]
    assert re.search(
        r"input-bound: \d+% of the time waiting for data \([\d,]+ examples/s\); this machine "
        r"has \d+ vCPUs for 1 CPU replica: try a machine type with more vCPUs, or "
        r"--read-parallelism/--data-threads \(now 1\)",
        starved,
    ), starved


def test_progress_lines_carry_the_input_wait(starved_run):
    found = [PROGRESS.match(line) for line in starved_run.trainer_lines("real")]
    found = [m for m in found if m]
    assert found and float(found[-1].group(3)) >= 0.4
