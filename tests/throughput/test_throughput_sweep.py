"""`bench --sweep FIELD=V1,V2,...` (issue 43 item 3): reading --sweep, the plan (one brief job per
value), the recommendation and its rule, the table, a cloud sweep on the fake Vertex AI server (each
job its own key, adopted on a retry), and docs/performance.md's local sweep, run as the docs
harness runs it. The synthetic run's input without tf.data (trainer/synthetic.py) is checked at
the end."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli_support import edge_env, invoke
from vertex_trainer.contract import run_name
from vertex_trainer.errors import UserError
from vertex_trainer.performance import benchmark, sweep
from vertex_trainer.performance.bench_text import sweep_text
from vertex_trainer.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
HERE = "tests/throughput/test_throughput_sweep.py"
SWEEP_RUN = "--sweep steps_per_execution=1,auto"  # docs/performance.md's local sweep
ROW = re.compile(r"^  (\S+) +(\d+) +(\d+) +([\d,]+|-) +(\d+%|-) +(\d+%|-)$", re.M)
QUICKSTART = REPO / "job_specs" / "quickstart-local.yaml"
A100 = REPO / "job_specs" / "bench-resnet50-a100x8.yaml"


@pytest.mark.parametrize(
    ("text", "field", "values"),
    [
        ("steps_per_execution=1,8,32,auto", "steps_per_execution", ("1", "8", "32", "auto")),
        ("trainer.steps_per_execution= 0, 016", "steps_per_execution", ("auto", "16")),
        ("batch_size=256,512,1024", "batch_size", ("256", "512", "1024")),
    ],
)
def test_a_sweep_is_read_as_one_field_and_its_values(text, field, values):
    assert sweep.parse(text) == sweep.Sweep(field, values)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("steps_per_execution=8", "give two or more, not 1"),
        ("epochs=1,2", "'epochs' cannot be swept: the fields are steps_per_execution, batch_size"),
        ("batch_size=0,256", "'0' is not a valid batch_size: use positive integers"),
        ("batch_size=auto,256", "'auto' is not a valid batch_size"),
        (
            "steps_per_execution=1,fast",
            "'fast' is not a valid steps_per_execution: use positive integers or auto",
        ),
        ("steps_per_execution=0,auto", "auto is given twice"),
        ("steps_per_execution", "write FIELD=V1,V2,..."),
        ("batch_size=" + ",".join(str(2**i) for i in range(9)), "9 values: a sweep runs one brief job each"),
    ],
)
def test_a_bad_sweep_names_the_option_the_value_and_the_fix(text, says):
    with pytest.raises(UserError) as raised:
        sweep.parse(text)
    assert str(raised.value).startswith(f"--sweep {text!r}: ") and says in str(raised.value)
    assert raised.value.exit_code == 2 and "--sweep steps_per_execution=1,8,32,auto" in str(raised.value)


def test_a_bad_sweep_is_exit_2_before_anything_runs(tmp_path):
    env = edge_env(tmp_path, GOOGLE_CLOUD_PROJECT="my-project")  # no endpoint: a request would fail
    done = invoke(["bench", A100, "--sweep", "learning_rate=0.1,0.2"], env=env, cwd=REPO)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert "--sweep 'learning_rate=0.1,0.2': 'learning_rate' cannot be swept" in done.stderr


def test_repeat_without_a_sweep_is_exit_2(tmp_path):
    env = edge_env(tmp_path, GOOGLE_CLOUD_PROJECT="my-project")
    done = invoke(["bench", A100, "--repeat", "3", "--dry-run"], env=env, cwd=REPO)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert "--repeat 3 is for --sweep" in done.stderr


def test_each_steps_per_execution_runs_as_named_with_enough_steps():
    spec = load_spec(QUICKSTART)
    swept = sweep.plan(spec, sweep.parse("steps_per_execution=1,8,32,auto"), steps=64, local=True)
    # 32 per execution needs 4 executions (3 measured): every run gets 128 steps, and says so
    assert swept.steps == 4 * 32 and "128 steps per run, not 64" in swept.notes[0]
    assert [(r.value, r.steps_per_execution) for r in swept.runs] == [
        ("1", 1),
        ("8", 8),
        ("32", 32),
        ("auto", benchmark.choose_steps_per_execution(128, 0, min_executions=4)[0]),
    ]
    for run in swept.runs:
        t = run.spec.trainer
        assert (t.epochs, t.steps_per_epoch, t.warmup_epochs, t.eval_data) == (1, 128, 0, None)
        assert t.steps_per_execution == run.steps_per_execution and t.batch_size == spec.trainer.batch_size
        assert run.spec.name == f"{spec.name}-sweep-{run.value}"
        assert run.spec.output_dir == f"runs/quickstart/bench/sweep/steps_per_execution-{run.value}"
        assert run.spec.labels["vertex-trainer-bench"] == "sweep"
    assert [sweep.run_key("ci-1", i) for i in range(2)] == ["ci-1-sweep-0", "ci-1-sweep-1"]


def test_a_batch_size_sweep_scales_the_learning_rate_as_the_trainer_does():
    spec = load_spec(QUICKSTART)  # learning_rate 0.05 at base_batch_size 64
    swept = sweep.plan(spec, sweep.parse("batch_size=32,128"), steps=64, local=True)
    t = spec.trainer
    for run, batch in zip(swept.runs, (32, 128), strict=True):
        assert run.spec.trainer.batch_size == run.batch_size == batch
        # the spec keeps its learning rate at base_batch_size: the trainer scales it per run
        assert run.spec.trainer.learning_rate == t.learning_rate
        # linear scaling, as trainer/schedules.py scaled_learning_rate (which imports TensorFlow)
        assert run.peak_learning_rate == t.learning_rate * batch / t.base_batch_size
    assert any("learning rate scaled as the trainer scales it" in n for n in swept.notes)


def _row(value, rate, spe=None, host=None):
    return {"value": value, "steps_per_execution": spe or int(value), "examples_per_sec": rate, "host": host}


def test_repeats_alternate_the_order_and_the_row_is_the_median_of_its_runs():
    spec = load_spec(QUICKSTART)
    swept = sweep.plan(spec, sweep.parse("steps_per_execution=1,8,auto"), steps=400, local=True, repeat=3)
    assert [swept.runs[i].value for i in swept.order] == [
        "1",
        "8",
        "auto",
        "auto",
        "8",
        "1",
        "1",
        "8",
        "auto",
    ]
    rates = {"1": [500.0, 700.0, 600.0], "8": [900.0, 1000.0, 950.0], "auto": [990.0, 980.0, 1200.0]}
    seen = {value: iter(found) for value, found in rates.items()}
    results = []
    for i in swept.order:
        run = swept.runs[i]
        metrics = _metrics(next(seen[run.value]), 0.01, run.steps_per_execution)
        results.append(benchmark.Result(run.value, run.value, "JOB_STATE_SUCCEEDED", None, metrics))
    report = sweep.report(spec, swept, results)
    assert [r["examples_per_sec"] for r in report["rows"]] == [600.0, 950.0, 990.0]
    assert [r["examples_per_sec"] for r in report["rows"][0]["runs"]] == [500.0, 700.0, 600.0]
    assert report["recommendation"]["value"] == "8" and report["repeat"] == 3  # 950 >= 0.95 x 990
    text = sweep_text({**report, "idempotency_key": None})
    assert "3 runs per value (medians)" in text.splitlines()[0] and "each run (examples/s)" in text
    assert re.search(r"^  1 .* 600 .* 500 700 600$", text, re.M), text
    with pytest.raises(UserError, match=r"^--repeat 6: runs each value 1 to 5 times"):
        sweep.plan(spec, sweep.parse("steps_per_execution=1,8"), repeat=6)


def test_the_recommendation_is_the_smallest_value_within_five_percent_of_the_best():
    rows = [_row("1", 500.0), _row("8", 960.0), _row("32", 1000.0), _row("auto", 990.0, spe=100)]
    rec = sweep.recommend("steps_per_execution", rows)
    assert rec["value"] == "8" and rec["best_value"] == "32" and rec["of_best"] == 0.96
    assert rec["rule"] == "the smallest value within 5% of the best rate measured"
    # just outside 5%: the next value up
    assert sweep.recommend("steps_per_execution", [*rows[:1], _row("8", 949.0), *rows[2:]])["value"] == "32"
    # auto resolved to the same steps as a number: auto
    tie = [_row("1", 100.0), _row("auto", 1000.0, spe=32), _row("32", 1000.0)]
    assert sweep.recommend("steps_per_execution", tie)["value"] == "auto"
    batches = [_row("256", 1000.0), _row("512", 1050.0), _row("1024", 1100.0)]
    assert sweep.recommend("batch_size", batches)["value"] == "512"
    assert sweep.recommend("batch_size", [_row("256", None), _row("512", None)]) is None


def _metrics(rate, wait, spe, host=None):
    found = {
        "device": "cpu",
        "model": "tiny-cnn",
        "image_size": 32,
        "global_batch_size": 64,
        "synthetic_data": False,
        "steps_per_execution": spe,
        "steady_examples_per_sec": rate,
        "input_wait_fraction": wait,
        "bound": "compute",
    }
    return found if host is None else {**found, "host_overhead_fraction": host}


def test_the_table_shows_each_value_and_a_dash_where_no_host_overhead_was_written():
    spec = load_spec(QUICKSTART)
    swept = sweep.plan(spec, sweep.parse("steps_per_execution=1,auto"), steps=400, local=True)
    results = [
        benchmark.Result("1", "a", "JOB_STATE_SUCCEEDED", "/o/1", _metrics(512.4, 0.02, 1, host=0.31)),
        benchmark.Result("auto", "b", "JOB_STATE_SUCCEEDED", "/o/a", _metrics(1003.0, 0.01, 100)),
    ]
    report = sweep.report(spec, swept, results)
    assert [(r["value"], r["steps_per_execution"], r["host_overhead_fraction"]) for r in report["rows"]] == [
        ("1", 1, 0.31),
        ("auto", 100, None),
    ]
    assert report["recommendation"]["value"] == "auto"
    text = sweep_text({**report, "idempotency_key": None})
    lines = text.splitlines()
    assert lines[0].startswith(f"sweep      {spec.name} on this machine: tiny-cnn 32 px, steps_per_execution")
    assert re.fullmatch(r"  1 +1 +64 +512 +2% +31%", lines[2]), text
    assert re.fullmatch(r"  auto +100 +64 +1,003 +1% +-", lines[3]), text
    assert lines[4] == (
        "recommend  steps_per_execution: auto (1,003 examples/s, 100% of the best rate): "
        "the smallest value within 5% of the best rate measured"
    )


def test_a_sweep_dry_run_sends_nothing_and_shows_each_create(tmp_path):
    env = edge_env(tmp_path, GOOGLE_CLOUD_PROJECT="my-project")  # no endpoint: a request would fail
    cmd = ["bench", A100, "--sweep", "batch_size=1024,2048", "--dry-run", "--idempotency-key", "k-1"]
    done = invoke([*cmd, "--output", "json"], env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["dry_run"] is True and list(out["runs"]) == ["1024", "2048"]
    assert out["values"]["2048"]["peak_learning_rate"] == pytest.approx(0.1 * 2048 / 256)  # trainer defaults
    creates = [r for run in out["runs"].values() for r in run["requests"] if r["method"] == "POST"]
    args = [c["body"]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] for c in creates]
    assert ["--batch-size=1024" in a and "--batch-size=2048" not in a for a in args] == [True, False]
    assert [c["body"]["labels"]["vertex-trainer-key"] for c in creates] == ["k-1-sweep-0", "k-1-sweep-1"]
    text = invoke(cmd, env=env, cwd=REPO)
    assert text.returncode == 0 and text.stdout.startswith("# dry run: nothing was sent"), text.stderr
    assert "# batch_size=2048: 100 steps per execution, batch 2048, peak learning rate 0.8" in text.stdout


@pytest.mark.wire
def test_a_cloud_sweep_runs_one_job_per_value_once_per_key():
    from vertex_trainer import api
    from vertex_trainer.emulators.gcs import GcsEmulator
    from vertex_trainer.emulators.vertex import FakeVertex
    from vertex_trainer.gcp import storage
    from vertex_trainer.settings import PollPolicy, RetryPolicy, Settings

    bucket = "sweep-bucket"
    with FakeVertex() as fake, GcsEmulator() as gcs:
        fake.set_script(["JOB_STATE_PENDING", "JOB_STATE_SUCCEEDED"])
        gcs.create_bucket(bucket)
        settings = Settings(
            vertex_endpoint=fake.url,
            storage_emulator=gcs.endpoint,
            # generous bounds: the fake server answers slowly with both cores busy (a 5 s read timed out)
            retry=RetryPolicy(attempts=3, initial=0.01, maximum=0.05, deadline=120, read_timeout=60),
            poll=PollPolicy(initial=0.01, maximum=0.05),
        )
        spec = load_spec(
            A100,
            project="test-project",
            sets=[
                ("image.repository", "null"),
                ("image.uri", "us-docker.pkg.dev/p/r/t:v1"),
                ("output_dir", f"gs://{bucket}/a100"),
                ("trainer.train_data", f"gs://{bucket}/imagenet/train-*"),
            ],
        )
        store = storage.client(settings).bucket(bucket)
        store.blob("imagenet/train-00000").upload_from_string(b"x")
        # What each job's chief writes (trainer/task.py metrics.json), in its run's own folder.
        for i, (value, rate, host) in enumerate((("1", 9_000.0, 0.4), ("auto", 15_000.0, 0.01))):
            run = run_name(f"{spec.name}-sweep-{value}", f"ci-8-sweep-{i}")
            metrics = _metrics(rate, 0.02, 1 if value == "1" else 100, host=host)
            store.blob(f"a100/bench/sweep/steps_per_execution-{value}/{run}/metrics.json").upload_from_string(
                json.dumps({**metrics, "device": "gpu", "model": "resnet50", "image_size": 224})
            )
        result = api.bench(
            spec, sweep="steps_per_execution=1,auto", idempotency_key="ci-8", settings=settings
        )
        creates = fake.calls("create")
        assert [c.body["labels"]["vertex-trainer-key"] for c in creates] == ["ci-8-sweep-0", "ci-8-sweep-1"]
        args = [c.body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] for c in creates]
        assert ["--steps-per-execution=1" in args[0], "--steps-per-execution=100" in args[1]] == [True, True]
        assert [(r["value"], r["examples_per_sec"], r["host_overhead_fraction"]) for r in result["rows"]] == [
            ("1", 9_000.0, 0.4),
            ("auto", 15_000.0, 0.01),
        ]
        assert result["recommendation"]["value"] == "auto" and result["hardware"] == spec.hardware.describe()
        again = api.bench(spec, sweep="steps_per_execution=1,auto", idempotency_key="ci-8", settings=settings)
        assert len(fake.calls("create")) == 2  # a retried sweep adopts its jobs
        assert [r["runs"] for r in again["rows"]] == [r["runs"] for r in result["rows"]]


@pytest.mark.trainer
@pytest.mark.slow
def test_the_docs_local_sweep_prints_the_table_and_a_recommendation(tmp_path_factory):
    """docs/performance.md's sweep block, as the docs harness runs it: two local runs on the
    quickstart data, each with its metrics, host overhead and steps per execution as named."""
    from tests.docs import harness
    from tests.shared import latest_run

    block = harness.checked_block("docs/performance.md", SWEEP_RUN, HERE)
    assert {b.id for b in harness.blocks() if b.checked_by == HERE} == {block.id}
    work = harness.workdir(tmp_path_factory.mktemp("docs-sweep"), harness.quickstart_data(tmp_path_factory))
    stdout, _ = harness.run_block(block, work)
    rows = ROW.findall(stdout)
    assert [r[0] for r in rows] == ["1", "auto"], stdout
    rates = {}
    for value, spe, batch, rate, _wait, host in rows:
        folder = work / "runs" / "quickstart" / "bench" / "sweep" / f"steps_per_execution-{value}"
        m = json.loads((latest_run(folder) / "metrics.json").read_text())
        assert (int(spe), int(batch)) == (m["steps_per_execution"], m["global_batch_size"])
        assert float(rate.replace(",", "")) == round(m["steady_examples_per_sec"]) > 0
        shown = m.get("host_overhead_fraction")
        assert host == ("-" if shown is None else f"{100 * shown:.0f}%")
        rates[value] = m["steady_examples_per_sec"]
    assert int(rows[1][1]) > 1  # auto: more than one step per execution
    chosen = re.search(r"^recommend  steps_per_execution: (\S+) \(", stdout, re.M)
    assert chosen and rates[chosen.group(1)] >= 0.95 * max(rates.values()), stdout
    if rates["1"] >= 0.95 * rates["auto"]:  # the rule: the smaller value when it is within 5%
        assert chosen.group(1) == "1"


@pytest.mark.trainer
def test_a_synthetic_run_reads_its_batch_without_a_tf_data_get_next():
    """trainer/synthetic.py: the steps of a synthetic run read one captured batch, so no
    IteratorGetNext (an asynchronous op, handed to a tf.data thread: waiting under load) is in the
    training function; TPUs keep the distributed dataset."""
    import tensorflow as tf

    from trainer import data, synthetic

    cfg = data.PipelineConfig(image_size=8, num_classes=3, training=True, seed=4)
    dataset = tf.distribute.get_strategy().distribute_datasets_from_function(
        lambda ctx: data.synthetic_dataset(cfg, 4, shard_index=ctx.input_pipeline_id)
    )
    fixed = synthetic.source(dataset, "default")
    assert isinstance(fixed, tf.distribute.DistributedDataset) and fixed.element_spec == dataset.element_spec
    assert synthetic.source(dataset, "tpu") is dataset

    def ops(source):
        iterator = iter(source)

        @tf.function
        def step():
            images, labels = next(iterator)
            return tf.reduce_sum(tf.cast(images, tf.int32)) + tf.reduce_sum(labels)

        graph = step.get_concrete_function().graph
        return {op.type for op in graph.get_operations()}, step

    fixed_ops, fixed_step = ops(fixed)
    dataset_ops, dataset_step = ops(dataset)
    assert any(t.startswith("IteratorGetNext") for t in dataset_ops)  # what the real pipeline runs
    assert not any(t.startswith("Iterator") for t in fixed_ops), fixed_ops
    # the same batch at every step: the dataset's one cached batch
    assert fixed_step().numpy() == fixed_step().numpy() == dataset_step().numpy()
