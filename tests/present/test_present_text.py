"""The presentation layer (vertex_trainer.present): the exact text people read, made from the typed
records the API returns. The CLI tests (tests/cost, tests/throughput, tests/logs, tests/deploy)
show the same words end to end; these pin each function's output on records built here."""

from __future__ import annotations

import io

from vertex_trainer.capacity import attempts_text as attempts
from vertex_trainer.capacity import resources_text as resources
from vertex_trainer.capacity.fallback import AttemptRecord
from vertex_trainer.contract import Failure, JobEvent, LogEntry
from vertex_trainer.cost import cost_text as cost
from vertex_trainer.cost.compare import Alternative, Comparison, Facts, Recommendation
from vertex_trainer.cost.estimate import AttemptCost, Estimate
from vertex_trainer.deployment import deploy_text as deploy
from vertex_trainer.performance import bench_text as bench
from vertex_trainer.present import logs, runs
from vertex_trainer.vertex.model_deploy import Deployment


def _estimate(*, bound: bool = False, priced: bool = True) -> Estimate:
    first = AttemptCost(1, "us-central1", "flex-start", "h100x8", 40.0, 24.0, 960.0, 2.5, 100.0, bound)
    second = AttemptCost(
        2,
        "us-east5",
        "spot",
        "h100x8",
        20.0 if priced else None,
        24.0,
        480.0 if priced else None,
        None,
        None,
        reason=None if priced else "no spot price for a3-highgpu-8g in us-east5",
    )
    return Estimate("USD", "2026-11-30", "snapshot", (first, second), notes=("a note",))


# -- cost ----------------------------------------------------------------------------------------
def test_price_line_names_each_attempt_its_hourly_and_worst_case():
    assert cost.price_line(_estimate()) == (
        "price: attempt 1 flex-start us-central1: 40.00 USD/h, worst case 960.00 USD (24 h); "
        "attempt 2 spot us-east5: 20.00 USD/h, worst case 480.00 USD (24 h) "
        "(list prices as of 2026-11-30, `vertex-trainer cost` for more)"
    )
    unpriced = cost.price_line(_estimate(bound=True, priced=False))
    assert "attempt 1 flex-start us-central1: <= 40.00 USD/h, worst case <= 960.00 USD (24 h)" in unpriced
    assert "attempt 2 spot: no price (no spot price for a3-highgpu-8g in us-east5)" in unpriced


def test_estimate_text_is_a_line_per_attempt_then_the_plan_and_the_notes():
    lines = cost.estimate_text(_estimate()).split("\n")
    assert lines[0] == "prices   USD, list prices as of 2026-11-30 (snapshot)"
    assert lines[1] == (
        "attempt 1  flex-start us-central1      h100x8       hourly 40.00/h      "
        "worst case 960.00 (24 h)  expected 100.00 (2.5 h)"
    )
    assert lines[2].endswith("worst case 480.00 (24 h)  expected -")
    assert lines[3] == "plan     worst case 960.00 USD; expected 100.00 USD"
    assert lines[4:] == ["note     a note"]
    bounded = cost.estimate_text(_estimate(bound=True, priced=False))
    assert "hourly <=40.00/h" in bounded and "hourly -" in bounded
    assert "plan     worst case -; expected at most 100.00 USD" in bounded


def test_job_cost_line_says_minutes_for_a_short_run_and_never_claims_the_bill():
    ran = {
        "usd": 1.23,
        "hours": 0.05,
        "hourly": 24.6,
        "strategy": "spot",
        "prices_as_of": "2026-11-30",
        "upper_bound": False,
    }
    assert cost.job_cost_line(ran) == (
        "cost     ~1.23 USD (estimate: 3.0 min x 24.60 USD/h spot list price, as of 2026-11-30; not the bill)"
    )
    long = cost.job_cost_line({**ran, "usd": 49.2, "hours": 2.0, "upper_bound": True})
    assert long is not None and long.startswith("cost     at most 49.20 USD (estimate: 2.00 h x")
    assert cost.job_cost_line({"usd": None, "reason": "no price"}) == "cost     unknown (no price)"
    assert cost.job_cost_line(None) is None


def test_compare_text_stars_the_spec_s_own_row_caps_the_table_and_ends_with_the_recommendation():
    est = _estimate()
    rows = [
        Alternative("h100x8", "spot", "us-east5", 20.0, 2.5, 50.0, 480.0, quota=16),
        Alternative("h100x8", "flex-start", "us-central1", 40.0, 2.5, 100.0, 960.0, current=True),
        Alternative("h100x8", "standard", "us-central1", None, None, None, None, reason="no price"),
    ]
    facts = Facts(2.5, True, True, True, True, None, True)
    rec = Recommendation("spot", "it checkpoints", "us-central1", "h100x8", 20.0, 50.0)
    lines = cost.compare_text(Comparison(est, rows, facts, rec), limit=2).split("\n")
    assert lines[0] == "alternatives (list prices as of 2026-11-30; expected from the throughput):"
    assert lines[1].split() == [
        "hardware", "strategy", "region", "hourly", "USD", "exp.", "hours", "exp.", "cost", "worst",
        "case", "quota",
    ]  # fmt: skip
    assert lines[2].split() == ["h100x8", "spot", "us-east5", "20.00", "2.5", "50", "480", "16"]
    assert lines[3].startswith("* h100x8") and lines[3].split()[-1] == "-"
    assert lines[4] == "  ... 1 more (--output json lists them all)"
    assert lines[5] == "recommendation: spot (h100x8, us-central1): it checkpoints"
    # `cost --compare` prints the estimate, then the comparison; `cost` the estimate alone
    both = cost.cost_text(Comparison(est, rows, facts, rec)).split("\n")
    assert both[0].startswith("prices   USD") and both[3].startswith("plan     worst case")
    assert both[5].startswith("alternatives (") and both[-1].startswith("recommendation: spot")
    assert cost.cost_text(est) == cost.estimate_text(est)


# -- bench ---------------------------------------------------------------------------------------
def _bench_result(**extra) -> dict:
    return {
        "spec": "resnet",
        "hardware": "a2-highgpu-1g + 1 x NVIDIA_TESLA_A100",
        "model": "resnet50",
        "image_size": 224,
        "global_batch_size": 256,
        "precision": "mixed_float16",
        "steps": 400,
        "steps_per_execution": 100,
        "synthetic_examples_per_sec": 2125.0,
        "real_examples_per_sec": 1187.5,
        "real_vs_synthetic": 0.559,
        "input_wait_fraction": 0.42,
        "bound": "input",
        "per_device_examples_per_sec": {"synthetic": 2125.0, "real": 1187.5},
        "reference": {
            "accelerator": "NVIDIA_TESLA_A100",
            "examples_per_sec_per_device": 2375,
            "setup": "AMP + XLA",
            "source": "NVIDIA DeepLearningExamples",
            "synthetic_vs_reference": 0.895,
            "real_vs_reference": 0.5,
        },
        "notes": ["a note"],
        **extra,
    }


def test_bench_text_has_both_rates_the_wait_the_reference_and_the_key():
    text = bench.bench_text(_bench_result(idempotency_key="ci-1"))
    assert text.split("\n") == [
        "bench      resnet on a2-highgpu-1g + 1 x NVIDIA_TESLA_A100: resnet50 224 px, batch 256, "
        "mixed_float16, 400 steps (100 per execution)",
        "synthetic  2,125 examples/s  (2125.0 per device)",
        "real data  1,188 examples/s  (1187.5 per device), 56% of synthetic",
        "input wait 42% of the real run's step time: input-bound",
        "reference  2,375 examples/s per NVIDIA_TESLA_A100 (AMP + XLA): synthetic 90%, real 50% of it",
        "           source: NVIDIA DeepLearningExamples",
        "note       a note",
        "key        ci-1 (bench again with --idempotency-key ci-1 to adopt these jobs, not create new ones)",
    ]


def test_bench_text_cost_per_epoch_or_per_million_examples():
    per_epoch = {
        "usd": 3.21,
        "examples": 1_281_024,
        "hours": 0.3,
        "hourly": 10.7,
        "strategy": "spot",
        "region": "us-central1",
        "prices_as_of": "2026-11-30",
        "note": "at this machine's throughput",
    }
    text = bench.bench_text(_bench_result(cost_per_epoch=per_epoch))
    assert (
        "cost       3.21 USD per epoch (1,281,024 examples: 0.30 h x 10.70 USD/h spot in "
        "us-central1, list prices as of 2026-11-30); at this machine's throughput"
    ) in text
    unknown = {"usd": None, "usd_per_million_examples": 2.5, "hourly": 10.7, "strategy": "spot"}
    text = bench.bench_text(_bench_result(cost_per_epoch={**unknown, "region": "r", "reason": "no size"}))
    assert (
        "cost       2.50 USD per million examples (10.70 USD/h spot in r); per epoch unknown: no size" in text
    )
    text = bench.bench_text(_bench_result(cost_per_epoch={"usd": None, "reason": "no price"}))
    assert "cost       per epoch unknown (no price)" in text


def test_bench_dry_run_text_shows_each_create_and_the_keys():
    run = {
        "image": "img:1",
        "package": None,
        "requests": [
            {"method": "GET", "url": "https://x/customJobs"},
            {"method": "POST", "url": "https://x/customJobs", "body": {"displayName": "a"}},
        ],
    }
    result = {
        "local": False,
        "steps": 400,
        "steps_per_execution": 100,
        "notes": [],
        "runs": {"synthetic": run},
        "idempotency_key": "k",
    }
    assert bench.dry_run_text(result).split("\n") == [
        "# dry run: nothing was sent, built or run. bench would run two jobs of 400 steps "
        "(100 per execution) on Vertex AI:",
        "# synthetic data: image img:1",
        "POST https://x/customJobs",
        "{",
        '  "displayName": "a"',
        "}",
        "# key k (the jobs' keys: k-bench-syn, -bench-real)",
    ]


# -- the fallback's attempts ------------------------------------------------------------------------
def test_attempts_line_from_records_and_from_their_json():
    records = [
        AttemptRecord(1, "us-central1", "flex-start", "h100x8", "j1", "JOB_STATE_FAILED", "no-capacity"),
        AttemptRecord(2, "us-east5", "spot", "h100x8", None, None, "skipped-quota"),
        AttemptRecord(3, "us-east5", "standard", "h100x8", "j3", "JOB_STATE_SUCCEEDED"),
    ]
    expected = (
        "attempts flex-start in us-central1 FAILED (no capacity) -> spot in us-east5 skipped (quota) "
        "-> standard in us-east5 SUCCEEDED"
    )
    assert attempts.attempts_line(records) == expected
    assert attempts.attempts_line([r.to_dict() for r in records]) == expected
    one_region = [AttemptRecord(1, "r", "spot", "h", "j", "JOB_STATE_RUNNING")]
    assert attempts.summary(one_region) == "spot RUNNING"


# -- logs ----------------------------------------------------------------------------------------
def test_entry_lines_prefix_the_replica_and_leave_out_tensorflow_s_banner():
    banner = "I0000 00:00:1733000000.000000   12345 cpu_feature_guard.cc:210] This TensorFlow binary"
    entry = LogEntry("2026-12-01T00:00:00Z", "workerpool0-0", f"epoch 1\n{banner}\nloss 0.5")
    assert list(logs.entry_lines(entry)) == ["[workerpool0-0] epoch 1", "[workerpool0-0] loss 0.5"]


class _State:
    def __init__(self, state: str, done: bool = False):
        self.state, self.done = state, done


def test_follow_view_notes_state_changes_lines_by_replica_and_the_failing_replica():
    from rich.console import Console

    out = io.StringIO()

    class _Job:
        id = "123"

    view = logs.FollowView(Console(file=out, width=200, force_terminal=False), _Job())
    with view:  # not a terminal: no spinner, plain lines
        view.show(JobEvent(_State("JOB_STATE_RUNNING"), changed=True))
        view.show(JobEvent(_State("JOB_STATE_RUNNING"), changed=False))
        view.show(LogEntry("t", "workerpool0-0", "step 1"))
        view.show(LogEntry("t", "workerpool1-0", "step 1"))
        view.failure(Failure("boom", "workerpool1-0", ("Traceback", "OOM")))
    lines = out.getvalue().splitlines()
    assert len(lines) == 6 and lines[0].endswith("  RUNNING")
    assert lines[1:] == [
        "workerpool0-0 | step 1",
        "workerpool1-0 | step 1",
        "workerpool1-0: its last lines:",
        "  Traceback",
        "  OOM",
    ]
    assert logs.event_line(JobEvent(_State("JOB_STATE_PENDING"), True, "queued 5m")).endswith(
        "  PENDING  (queued 5m)"
    )


# -- deploy, resources, a local run ----------------------------------------------------------------
def test_deployment_text_names_the_version_the_endpoint_and_the_traffic():
    d = Deployment(
        "projects/p/locations/r/models/m",
        "2",
        "projects/p/.../endpoints/e",
        "456",
        {"456": 30, "111": 70},
        False,
    )
    assert deploy.deployment_text(d).split("\n") == [
        "deployed  projects/p/locations/r/models/m@2",
        "endpoint  projects/p/.../endpoints/e",
        "model id  456",
        "traffic   30% to this version, 70% to deployed model 111",
    ]
    again = Deployment("m", "2", "e", "456", {"456": 100}, True)
    assert deploy.deployment_text(again).startswith("already deployed m@2\n")
    plan = {
        "requests": [
            {"method": "POST", "url": "https://x:upload", "body": {"a": 1}},
            {"method": "GET", "url": "https://x"},
        ]
    }
    assert deploy.dry_run_text(plan).split("\n") == [
        "# dry run: nothing was sent. deploy would look for the model and endpoint, then:",
        "POST https://x:upload",
        "{",
        '  "a": 1',
        "}",
        "GET https://x",
    ]


def test_resources_text_lists_each_pool_or_says_there_are_none():
    pool = {
        "id": "pool-0",
        "machineSpec": {
            "machineType": "a3-highgpu-8g",
            "acceleratorType": "NVIDIA_H100_80GB",
            "acceleratorCount": 8,
        },
        "replicaCount": 2,
    }
    found = [
        {
            "name": "projects/p/locations/r/persistentResources/team",
            "state": "RUNNING",
            "resourcePools": [pool],
        }
    ]
    assert resources.resources_text(found, "p", "r").split("\n") == [
        "team  RUNNING",
        "  pool-0: a3-highgpu-8g (8 x NVIDIA_H100_80GB), pd-ssd 100 GB, 2 replicas",
    ]
    assert resources.resources_text([], "p", "r") == "no persistent resources in p / r"


def test_local_summary_shows_the_metrics_the_run_display_names():
    from types import SimpleNamespace

    result = SimpleNamespace(
        name="quick",
        state="JOB_STATE_SUCCEEDED",
        succeeded=True,
        output_dir="runs/quick",
        metrics={"epochs": 2, "eval_accuracy": 0.5, "not_shown": 1},
        result=SimpleNamespace(elapsed_s=12.34, model_dir="runs/quick/model", model_written=True),
    )
    assert runs.local_summary(result).split("\n") == [
        "local    quick",
        "state    SUCCEEDED in 12.3s",
        "model    runs/quick/model",
        "output   runs/quick",
        'metrics  {"epochs": 2, "eval_accuracy": 0.5}',
    ]
    failed = SimpleNamespace(**{**vars(result), "state": "JOB_STATE_FAILED", "succeeded": False})
    assert runs.local_summary(failed).split("\n") == [
        "local    quick",
        "state    FAILED in 12.3s",
        "output   runs/quick",
    ]
    # A run that wrote no model says so, not where a model would have been.
    empty = SimpleNamespace(
        **{**vars(result), "result": SimpleNamespace(elapsed_s=1.0, model_dir="m/", model_written=False)}
    )
    assert "model    none: nothing was written to AIP_MODEL_DIR (m/)" in runs.local_summary(empty).split("\n")


# -- Google's words (issue 40 item 6): machines, accelerators and states as Vertex AI says them -----
def _plan(hardware, replicas: int = 1, region: str = "us-central1"):
    from vertex_trainer import api
    from vertex_trainer.settings import Settings
    from vertex_trainer.spec import build_spec

    spec = build_spec(
        {
            "name": "words",
            "project": "my-project",
            "region": region,
            "hardware": hardware,
            "replicas": replicas,
            "image": {"uri": "us-docker.pkg.dev/my-project/r/trainer:v1"},
            "output_dir": "gs://my-bucket/runs/words",
            "trainer": {"train_data": "gs://my-bucket/train-*", "num_classes": 10, "model": "tiny-cnn"},
        }
    )
    return api.plan_submit(spec, settings=Settings(vertex_endpoint="http://127.0.0.1:1"))


def _hardware_line(plan) -> str:
    from vertex_trainer.present.plan import validate_text

    return next(x for x in validate_text(plan, "job.yaml").split("\n") if x.startswith("  hardware"))


def test_validate_counts_machines_as_vertex_ai_does_and_the_gpus_or_tpu_chips_they_hold():
    assert _hardware_line(_plan("h100x8", replicas=2)) == (
        "  hardware  h100x8: 2 machines (workerpool0: 1, workerpool1: 1) of a3-highgpu-8g "
        "with 8 x NVIDIA_H100_80GB each = 16 GPUs"
    )
    assert _hardware_line(_plan("t4x1")) == (
        "  hardware  t4x1: 1 machine of n1-standard-8 with 1 x NVIDIA_TESLA_T4 = 1 GPU"
    )
    assert _hardware_line(_plan("cpu", replicas=3)) == (
        "  hardware  cpu: 3 machines (workerpool0: 1, workerpool1: 2) of n1-standard-8"
    )
    assert _hardware_line(_plan("tpu-v5e-4")) == (
        "  hardware  tpu-v5e-4: 1 machine of ct5lp-hightpu-4t with 4 x TPU_V5_LITEPOD (topology 2x2) "
        "= 4 TPU chips"
    )
    assert _hardware_line(_plan("tpu-v3-8", region="us-central1")) == (
        "  hardware  tpu-v3-8: 1 machine of cloud-tpu with 8 x TPU_V3 = 8 TPU cores"
    )
    assert "replica" not in _hardware_line(_plan("a100x8", replicas=2))


def test_a_local_run_s_own_summary_says_the_state_as_the_console_does():
    import rich.console

    from vertex_trainer.local.display import Display
    from vertex_trainer.local.run import LocalResult

    out = io.StringIO()
    display = Display(rich.console.Console(file=out, width=200), ["workerpool0-0"], live=False)
    display.summary(LocalResult("quick", "JOB_STATE_CANCELLED", "runs/quick", "runs/quick/model", None, 1))
    assert out.getvalue().startswith("CANCELLED in 0.0s  (quick, )")
