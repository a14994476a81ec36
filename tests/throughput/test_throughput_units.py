"""The bench's plan and report, the spec's `trainer.synthetic_data`, and the trainer's verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.config import parse_flags
from vertex_trainer import render
from vertex_trainer.contract import Artifact
from vertex_trainer.errors import UserError
from vertex_trainer.performance import benchmark
from vertex_trainer.performance.bench_text import bench_text
from vertex_trainer.spec import build_spec, check_trainer_flags, load_spec
from vertex_trainer.vertex.names import check_key

REPO = Path(__file__).resolve().parents[2]
BENCH_SPECS = sorted((REPO / "job_specs").glob("bench-resnet50-*.yaml"))
IMAGE = Artifact("us-docker.pkg.dev/p/r/trainer:v1")
DIRS = ["--model-dir=/m/", "--checkpoint-dir=/c/", "--tensorboard-dir=/t/"]


def a100_spec(**trainer):
    return load_spec(
        REPO / "job_specs" / "bench-resnet50-a100x8.yaml",
        sets=[(f"trainer.{k}", str(v)) for k, v in trainer.items()],
    )


def test_the_spec_accepts_synthetic_data_and_renders_the_flag():
    spec = a100_spec(synthetic_data="true")
    args = render.custom_job(spec, IMAGE)["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert "--synthetic-data=true" in args
    check_trainer_flags(spec)  # the bundled trainer's own parser accepts it
    assert parse_flags([*args, *DIRS], environ={}).synthetic_data is True
    plain = render.custom_job(a100_spec(), IMAGE)["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert not any(a.startswith("--synthetic-data") for a in plain)  # unset: the trainer's default


def test_the_bench_specs_are_the_published_configurations():
    assert [p.stem for p in BENCH_SPECS] == [
        "bench-resnet50-a100x8",
        "bench-resnet50-h100x8",
        "bench-resnet50-tpu-v5e",
        "bench-resnet50-v100x4",
    ]
    for path in BENCH_SPECS:
        spec = load_spec(path)
        t = spec.trainer
        assert (t.model, t.image_size) == ("resnet50", 224), path
        assert t.precision in ("mixed_float16", "mixed_bfloat16"), path
        assert t.batch_size == 256 * spec.total_devices, path
        assert t.jit_compile == "true" or spec.hardware.accelerator.kind == "tpu", path  # TPUs compile anyway
    assert (
        benchmark.reference_for(load_spec(REPO / "job_specs" / "bench-resnet50-v100x4.yaml")).examples_per_sec
        == 1270
    )
    assert benchmark.reference_for(a100_spec()).examples_per_sec == 2375
    assert benchmark.reference_for(a100_spec(precision="float32")).examples_per_sec == 909
    assert benchmark.reference_for(a100_spec(model="tiny-cnn")) is None
    assert benchmark.reference_for(load_spec(REPO / "job_specs" / "bench-resnet50-h100x8.yaml")) is None


def test_plan_two_short_jobs_of_the_same_spec():
    spec = a100_spec()
    plan = benchmark.plan(spec, steps=400)
    syn, real = (run.spec for run in plan.runs)
    assert [run.kind for run in plan.runs] == ["synthetic", "real"]
    assert (syn.name, real.name) == ("bench-resnet50-a100x8-bench-syn", "bench-resnet50-a100x8-bench-real")
    assert syn.trainer.synthetic_data is True and real.trainer.synthetic_data is False
    for run in (syn, real):
        assert (run.trainer.epochs, run.trainer.steps_per_epoch, run.trainer.steps_per_execution) == (
            1,
            400,
            100,
        )
        assert run.trainer.eval_data is None and run.hardware == spec.hardware
        assert run.trainer.batch_size == spec.trainer.batch_size and run.scheduling.timeout <= 7200
    assert syn.output_dir == "gs://my-bucket/bench/resnet50-a100x8/bench/synthetic"
    assert real.labels["vertex-trainer-bench"] == "real" and plan.notes == ()


def test_plan_keeps_three_measured_executions():
    plan = benchmark.plan(a100_spec(), steps=100)
    assert plan.steps_per_execution == 25 and plan.steps == 100
    assert "steps_per_execution 100 -> 25" in plan.notes[0]
    local = benchmark.plan(a100_spec(), steps=400, local=True)
    assert "run here, not on a2-highgpu-8g" in local.notes[-1]
    with pytest.raises(UserError, match="too few"):
        benchmark.plan(a100_spec(), steps=3)


def test_run_keys_are_valid_labels_and_distinct():
    key = "k" * 63
    keys = {benchmark.run_key(key, kind) for kind in benchmark.KINDS}
    assert len(keys) == 2 and all(check_key(k) for k in keys)


def _metrics(device: str, rate: float, wait: float, replicas: int = 8) -> dict:
    return {
        "device": device,
        "replicas": replicas,
        "steady_examples_per_sec": rate,
        "train_examples_per_sec": rate / 2,
        "input_wait_fraction": wait,
        "model": "resnet50",
        "image_size": 224,
        "global_batch_size": 2048,
        "precision": "mixed_bfloat16",
        "bound": "input" if wait >= 0.1 else "compute",
    }


def _results(syn: dict, real: dict) -> dict:
    return {
        kind: benchmark.Result(kind, f"job-{kind}", "JOB_STATE_SUCCEEDED", f"gs://b/{kind}", m)
        for kind, m in (("synthetic", syn), ("real", real))
    }


def test_report_compares_with_the_published_reference():
    spec = a100_spec()
    out = benchmark.report(
        spec, benchmark.plan(spec), _results(_metrics("gpu", 17_000, 0.01), _metrics("gpu", 9_500, 0.41))
    )
    assert out["synthetic_examples_per_sec"] == 17_000 and out["real_examples_per_sec"] == 9_500
    assert out["input_wait_fraction"] == 0.41 and out["bound"] == "input"
    assert out["per_device_examples_per_sec"] == {"synthetic": 2125.0, "real": 1187.5}
    ref = out["reference"]
    assert ref["examples_per_sec_per_device"] == 2375 and "DeepLearningExamples" in ref["source"]
    assert ref["synthetic_vs_reference"] == round(2125 / 2375, 3) and ref["real_vs_reference"] == 0.5
    text = bench_text(out)
    assert "2,375 examples/s per NVIDIA_TESLA_A100" in text and "input-bound" in text


def test_a_local_run_of_a_gpu_spec_is_not_compared_with_the_gpu_reference():
    spec = a100_spec()
    out = benchmark.report(
        spec,
        benchmark.plan(spec, local=True),
        _results(_metrics("cpu", 20, 0.0, 1), _metrics("cpu", 10, 0.5, 1)),
    )
    assert out["hardware"] == "this machine" and out["devices"] == 1
    assert out["reference"]["real_vs_reference"] is None  # shown, not compared


def test_a_synthetic_run_measured_below_the_real_one_is_noted_as_a_changed_machine():
    """The synthetic steps do strictly less than the real ones (issue 43: under load a bench once
    measured 636 synthetic against 1,017 real examples/s): the report says the load changed."""
    spec = a100_spec()
    plan = benchmark.plan(spec, local=True)

    def notes(syn, real):
        return benchmark.report(
            spec, plan, _results(_metrics("cpu", syn, 0.0, 1), _metrics("cpu", real, 0.0, 1))
        )["notes"]

    below = [n for n in notes(636, 1017) if "measured below the real one" in n]
    assert below == [
        "the synthetic run (636 examples/s) measured below the real one (1,017): a synthetic step does "
        "less than a real one, so other work on this machine changed between the two runs; bench again "
        "when the load is steady"
    ]
    assert below[0] in bench_text(
        benchmark.report(spec, plan, _results(_metrics("cpu", 636, 0.0, 1), _metrics("cpu", 1017, 0.0, 1)))
    )
    # within 5% (noise) or the expected order: no note
    assert not [n for n in notes(1000, 1040) + notes(1000, 900) if "measured below" in n]


def test_a_run_without_metrics_is_a_clear_error():
    spec = a100_spec()
    results = _results(_metrics("gpu", 1, 0), None)
    with pytest.raises(UserError, match=r"real bench run left no metrics\.json"):
        benchmark.report(spec, benchmark.plan(spec), results)


def test_bench_validates_the_spec_like_submit():
    with pytest.raises(UserError):
        build_spec(
            {
                "name": "x",
                "region": "us-central1",
                "hardware": "cpu",
                "image": {"uri": "example.com/t:v1"},
                "trainer": {"synthetic_data": "maybe"},
            }
        )


@pytest.mark.trainer
def test_verdict_wording():
    from trainer import throughput

    def say(fraction, **kw):
        summary = {"input_wait_fraction": fraction, "steady_examples_per_sec": 1234.0}
        return throughput.verdict(
            summary, **{"synthetic": False, "devices": 4, "device": "gpu", "cpus": 8, **kw}
        )

    assert say(0.41) == (
        "throughput: input-bound: 41% of the time waiting for data (1,234 examples/s); "
        "this machine has 8 vCPUs for 4 GPUs: try a machine type with more vCPUs, or "
        "--read-parallelism/--data-threads"
    )
    assert say(0.02).startswith(
        "throughput: compute-bound: 2% of the time waiting for data (1,234 "
        "examples/s); the input pipeline keeps up with 4 GPUs (8 vCPUs)"
    )
    assert "synthetic data, the compute ceiling of 8 TPU cores" in say(
        0.0, synthetic=True, devices=8, device="tpu"
    )
    assert "no input wait was measured" in say(None)
    assert throughput.bound(0.1) == "input" and throughput.bound(0.099) == "compute"


def test_a_spec_with_warmup_benches_without_it():
    """The spec's warmup epochs outlast the bench's one epoch (issue 24: "1 warmup epochs leave no
    training in 1 epochs" for `bench job_specs/quickstart-local.yaml --local --steps 64`)."""
    spec = load_spec(REPO / "job_specs" / "quickstart-local.yaml")
    assert spec.trainer.warmup_epochs  # the quickstart warms up, and trains for more epochs
    plan = benchmark.plan(spec, steps=64, local=True)
    for run in plan.runs:
        assert (run.spec.trainer.epochs, run.spec.trainer.warmup_epochs) == (1, 0)
        assert run.spec.trainer.learning_rate == spec.trainer.learning_rate


def test_bench_dry_run_sends_nothing_and_shows_both_creates(tmp_path):
    import json

    from tests.cli_support import edge_env, invoke

    # No endpoint is set: a request would go to googleapis.com without credentials and fail.
    env = edge_env(tmp_path, GOOGLE_CLOUD_PROJECT="my-project")
    cmd = ["bench", "job_specs/bench-resnet50-a100x8.yaml", "--output", "json", "--dry-run"]
    done = invoke(cmd, env=env, cwd=REPO)  # in this process (tests/cli_support.py)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["dry_run"] is True and set(out["runs"]) == {"synthetic", "real"}
    creates = [r for run in out["runs"].values() for r in run["requests"] if r["method"] == "POST"]
    assert [c["body"]["displayName"] for c in creates] == [
        "bench-resnet50-a100x8-bench-syn",
        "bench-resnet50-a100x8-bench-real",
    ]
    assert out["runs"]["real"]["idempotency_key"] == out["idempotency_key"] + "-bench-real"
    text = invoke(cmd[:-3] + ["--dry-run"], env=env, cwd=REPO)
    assert text.returncode == 0 and text.stdout.startswith("# dry run: nothing was sent"), text.stderr


@pytest.mark.trainer
def test_cpu_contention_is_named_apart_from_waiting():
    from trainer import throughput

    summary = {"input_wait_fraction": 0.02, "steady_examples_per_sec": 1234.0, "host_cpu_busy_fraction": 0.97}
    busy = throughput.verdict(summary, synthetic=False, devices=1, device="cpu", cpus=2)
    assert busy.startswith("throughput: compute-bound: 2% of the time waiting for data")
    assert "but the vCPUs are 97% busy: decoding shares them with the model (CPU contention" in busy
    idle = throughput.verdict(
        {**summary, "host_cpu_busy_fraction": 0.5}, synthetic=False, devices=1, device="cpu", cpus=2
    )
    assert "contention" not in idle
    gpu = throughput.verdict(summary, synthetic=False, devices=1, device="gpu", cpus=2)
    assert "contention" not in gpu  # the model does not compute on a GPU host's vCPUs


@pytest.mark.trainer
def test_steady_rate_leaves_out_the_first_execution_and_checkpoint_time():
    from trainer.throughput import Execution, rates

    # Executions of 4 steps: the first 5 s (compiling), then 1 s each, back to back, except a
    # 2 s checkpoint between the third and the fourth.
    runs = [
        Execution(5.0, 0.0, 4, started=0.0),
        Execution(1.0, 0.0, 4, started=5.0),
        Execution(1.0, 0.0, 4, started=6.0),
        Execution(1.0, 0.0, 4, started=9.0),
    ]
    out = rates(runs, 8, 10.5, lambda start, end: 2.0 if start <= 7.0 < end else 0.0)
    assert out["steady_examples_per_sec"] == pytest.approx(12 * 8 / 3.0)  # 12 steps in 3 s
    assert out["steady_step_time_ms"] == pytest.approx(250.0)
    assert out["compile_seconds"] == pytest.approx(4.0)  # 5 s for 4 steps of 0.25 s
    assert out["wall_examples_per_sec"] == pytest.approx(16 * 8 / 10.5, rel=1e-3)
    one = rates(runs[:1], 8, 5.5)
    assert one["steady_examples_per_sec"] == pytest.approx(32 / 5.0) and one["compile_seconds"] is None
