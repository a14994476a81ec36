"""`bench`: the spec's job run briefly twice, on synthetic then real data, and what the two say.

Called by api.bench, which runs the two jobs (locally or as short CustomJobs on the spec's
hardware). Here: the two job variants (`plan`), the idempotency key of each, reading a cloud
run's metrics.json, and the report: both throughputs, the measured input wait of the real run,
`bound`, and, for known hardware and models, the published reference per accelerator with its
source (docs/contract.md section 9).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vertex_trainer.errors import UserError
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings
from vertex_trainer.spec import JobSpec, TrainerArgs, build_spec
from vertex_trainer.spec.trainer import choose_steps_per_execution

DEFAULT_STEPS = 400
MIN_EXECUTIONS = 4  # the first (tracing, compilation) is not measured: 3 are
BENCH_TIMEOUT_S = 2 * 3600  # a brief job: a cloud bench never runs longer than this
INPUT_BOUND = 0.10  # the trainer's threshold (trainer/throughput.py), for old metrics files
SLACK = 0.05  # a real run measured this much faster than the synthetic one is noted (report)
KINDS = ("synthetic", "real")
_SHORT = {"synthetic": "syn", "real": "real"}  # in job names and idempotency keys

_DLE = (
    "NVIDIA DeepLearningExamples, ResNet-50 v1.5 for TensorFlow, training performance, "
    "1 GPU, batch 256/GPU (FP32: 128), averaged over an epoch: https://github.com/NVIDIA/"
    "DeepLearningExamples/tree/master/TensorFlow/Classification/ConvNets/resnet50v1.5"
)
_MLPERF = "MLPerf Training v4.0, ResNet-50, NVIDIA H200 with DALI data loading (approximate, per GPU)"


@dataclass(frozen=True)
class Reference:
    """A published training throughput of one accelerator (ResNet-50, 224 px)."""

    accelerators: tuple[str, ...]
    mixed: bool  # mixed precision (AMP) vs float32/TF32
    examples_per_sec: float  # per accelerator
    setup: str
    source: str


# docs/facts.md, "Throughput anchors"; only ResNet-50 at 224 px has published figures.
REFERENCES = (
    Reference(("NVIDIA_TESLA_V100",), True, 1270, "mixed precision (AMP) + XLA, TF 1.15", _DLE),
    Reference(("NVIDIA_TESLA_V100",), False, 412, "FP32 + XLA, TF 1.15", _DLE),
    Reference(
        ("NVIDIA_TESLA_A100", "NVIDIA_A100_80GB"),
        True,
        2375,
        "mixed precision (AMP) + XLA, TF 1.15, A100 40GB",
        _DLE,
    ),
    Reference(("NVIDIA_TESLA_A100", "NVIDIA_A100_80GB"), False, 909, "TF32 + XLA, TF 1.15, A100 40GB", _DLE),
    Reference(
        ("NVIDIA_H200_141GB",), True, 7950, "mixed precision, DALI (not TensorFlow's tf.data)", _MLPERF
    ),
)


def reference_for(spec: JobSpec) -> Reference | None:
    """The published figure for the spec's accelerator, model and precision, if there is one."""
    accelerator = spec.hardware.accelerator
    t = spec.trainer
    if t is None:  # script jobs (issue 32): no bundled model to look up
        return None
    if accelerator is None or t.model != "resnet50" or (t.image_size or 224) != 224:
        return None
    precision = t.precision or "auto"
    mixed = precision != "float32" and (precision != "auto" or accelerator.precision != "float32")
    return next((r for r in REFERENCES if accelerator.name in r.accelerators and r.mixed == mixed), None)


@dataclass(frozen=True)
class Run:
    """One of the two bench jobs, to be run."""

    kind: str  # synthetic | real
    spec: JobSpec


@dataclass(frozen=True)
class Plan:
    runs: tuple[Run, Run]
    steps: int
    steps_per_execution: int
    local: bool = False  # both run on this machine, not on the spec's hardware
    notes: tuple[str, ...] = ()


def require_trainer(spec: JobSpec) -> TrainerArgs:
    """The spec's trainer: block; UserError (exit 2) for a script job, whose steps, synthetic
    data and input pipeline a bench cannot set."""
    if spec.trainer is None:  # script jobs (issue 32): bench drives the bundled trainer's flags
        raise UserError(
            "bench needs the bundled trainer or a model factory (a trainer: block, e.g. "
            "trainer.model: package.module:function from image.code): this spec runs your own "
            "code or image, whose steps, synthetic data and input pipeline bench cannot set",
            hint="train your model through the bundled trainer with trainer.model: pkg.mod:fn; or "
            "measure your code's examples per second yourself and price it with `cost SPEC "
            "--throughput EX_PER_S --examples-per-epoch N`",
        )
    return spec.trainer


def check_steps(steps: int) -> None:
    if steps < MIN_EXECUTIONS:
        raise UserError(
            f"--steps {steps} is too few: the bench needs at least {MIN_EXECUTIONS} steps",
            hint=f"the default is {DEFAULT_STEPS}",
        )


def brief_sets(
    spec: JobSpec, *, name: str, steps: int, steps_per_execution: int, label: str, output: str
) -> list[tuple[str, str]]:
    """The `--set`s that make the spec's job a bench's brief one: named `name`, one epoch of
    `steps` steps at `steps_per_execution`, no evaluation and no learning-rate warmup (it changes
    no step's cost), labelled vertex-trainer-bench=`label`, its output below
    <output_dir>/bench/`output`, with nothing registered, deployed or tuned."""
    timeout = min(spec.scheduling.timeout or BENCH_TIMEOUT_S, BENCH_TIMEOUT_S)
    sets = [
        ("name", name),
        ("trainer.epochs", "1"),
        ("trainer.steps_per_epoch", str(steps)),
        # warmup shapes the learning rate, not the cost of a step: the spec's warmup epochs
        # would outlast the bench's one epoch (the rule "warmup < epochs"), so none here
        ("trainer.warmup_epochs", "0"),
        ("trainer.steps_per_execution", str(steps_per_execution)),
        ("trainer.eval_data", "null"),
        ("labels.vertex-trainer-bench", label),
        ("scheduling.timeout", str(timeout)),
    ]
    if spec.output_dir:
        sets.append(("output_dir", f"{spec.output_dir.rstrip('/')}/bench/{output}"))
    data = spec.to_dict()
    for optional in ("deploy", "tune"):  # a bench registers, deploys and tunes nothing
        if optional in data:
            sets.append((optional, "null"))
    return sets


def plan(spec: JobSpec, *, steps: int = DEFAULT_STEPS, local: bool = False) -> Plan:
    """The two short jobs: the spec's own, one epoch of `steps` steps, no evaluation and no
    learning-rate warmup (brief_sets), first with `trainer.synthetic_data: true`, then on the
    spec's data. Each has its own output_dir (<output_dir>/bench/<kind>, below which each run
    gets its own folder) and is named <name>-bench-<kind>."""
    trainer = require_trainer(spec)
    check_steps(steps)
    notes = []
    requested = trainer.steps_per_execution or 0
    # The trainer's own choice (trainer/executions.py), so the bench measures what the job would run.
    spe, steps = choose_steps_per_execution(steps, requested, min_executions=MIN_EXECUTIONS)
    if requested and spe != requested:
        notes.append(
            f"steps_per_execution {requested} -> {spe} for both runs, so that "
            f"{MIN_EXECUTIONS - 1} executions after the first are measured "
            f"(or pass --steps {requested * MIN_EXECUTIONS})"
        )
    data = spec.to_dict()
    runs = []
    for kind in KINDS:
        sets = brief_sets(
            spec,
            name=f"{spec.name[:88]}-bench-{_SHORT[kind]}",
            steps=steps,
            steps_per_execution=spe,
            label=kind,
            output=kind,
        )
        sets.append(("trainer.synthetic_data", "true" if kind == "synthetic" else "false"))
        runs.append(Run(kind, build_spec(data, sets=sets)))
    if not local and not spec.runs_bundled_trainer:
        notes.append(
            "the job runs image.uri / image.context: that trainer must take "
            "--synthetic-data and write input_wait_fraction (the bundled trainer does)"
        )
    if local and spec.hardware.accelerator is not None:
        notes.append(
            f"run here, not on {spec.hardware.describe()}: the figures are this "
            "machine's; run without --local to measure the spec's hardware"
        )
    return Plan(
        runs=(runs[0], runs[1]), steps=steps, steps_per_execution=spe, local=local, notes=tuple(notes)
    )


def run_key(key: str, kind: str) -> str:
    """The idempotency key of one bench job, derived from the bench's key (<= 63 chars)."""
    suffix = f"-bench-{_SHORT[kind]}"
    return key[: 63 - len(suffix)] + suffix


def read_metrics(settings: Settings, output_dir: str | None) -> dict[str, Any] | None:
    """metrics.json of a finished cloud run (the base output directory), or None."""
    if not output_dir or not output_dir.startswith("gs://"):
        return None
    return storage.read_json(settings, f"{output_dir.rstrip('/')}/metrics.json")


@dataclass
class Result:
    """What one bench job ended with."""

    kind: str
    name: str
    state: str
    output_dir: str | None
    metrics: dict[str, Any] | None = field(default=None)


def rate(metrics: dict[str, Any]) -> float | None:
    # Steady state (executions after the first); older trainers: the epoch's rate.
    value = metrics.get("steady_examples_per_sec") or metrics.get("train_examples_per_sec")
    return float(value) if value else None


def report(spec: JobSpec, bench: Plan, results: dict[str, Result]) -> dict[str, Any]:
    """The bench's answer (docs/contract.md section 9) from the two finished runs."""
    missing = [k for k in KINDS if not (results.get(k) and results[k].metrics)]
    if missing:
        where = ", ".join(f"{results[k].output_dir}/metrics.json" for k in missing if k in results)
        raise UserError(
            f"the {' and '.join(missing)} bench run left no metrics.json ({where or 'no output'})",
            hint="the job succeeded but wrote no metrics: check its log",
        )
    # the check above: both runs left their metrics
    syn, real = results["synthetic"].metrics or {}, results["real"].metrics or {}
    syn_rate, real_rate = rate(syn), rate(real)
    wait = real.get("input_wait_fraction")
    bound = real.get("bound") or (None if wait is None else "input" if wait >= INPUT_BOUND else "compute")
    devices = int(real.get("replicas") or spec.total_devices)
    trainer = spec.trainer  # plan() refuses a spec without one; the metrics name the model anyway
    out: dict[str, Any] = {
        "spec": spec.name,
        "hardware": "this machine" if bench.local else spec.hardware.describe(),
        "device": real.get("device"),
        "devices": devices,
        "model": real.get("model", trainer.model if trainer else None),
        "image_size": real.get("image_size", trainer.image_size if trainer else None),
        "global_batch_size": real.get("global_batch_size"),
        "precision": real.get("precision"),
        "steps": bench.steps,
        "steps_per_execution": bench.steps_per_execution,
        "synthetic_examples_per_sec": syn_rate,
        "real_examples_per_sec": real_rate,
        "real_vs_synthetic": round(real_rate / syn_rate, 3) if syn_rate and real_rate else None,
        "input_wait_fraction": wait,
        "synthetic_input_wait_fraction": syn.get("input_wait_fraction"),
        "bound": bound,
        "per_device_examples_per_sec": {
            "synthetic": round(syn_rate / devices, 1) if syn_rate else None,
            "real": round(real_rate / devices, 1) if real_rate else None,
        },
        "reference": _reference(spec, real, syn_rate, real_rate, devices, local=bench.local),
        "runs": {
            k: {"name": r.name, "state": r.state, "output_dir": r.output_dir} for k, r in results.items()
        },
        "notes": list(bench.notes) + _below_ceiling(syn_rate, real_rate, local=bench.local),
    }
    return out


def _below_ceiling(syn_rate: float | None, real_rate: float | None, *, local: bool) -> list[str]:
    """A note when the synthetic run, the ceiling, measured below the real one: the synthetic
    steps do strictly less (no reading, no decoding), so the machine changed between the runs."""
    if not syn_rate or not real_rate or real_rate <= (1 + SLACK) * syn_rate:
        return []
    where = "other work on this machine" if local else "the machines or their neighbours"
    return [
        f"the synthetic run ({syn_rate:,.0f} examples/s) measured below the real one "
        f"({real_rate:,.0f}): a synthetic step does less than a real one, so {where} changed "
        "between the two runs; bench again when the load is steady"
    ]


def _reference(
    spec: JobSpec,
    real: dict[str, Any],
    syn_rate: float | None,
    real_rate: float | None,
    devices: int,
    *,
    local: bool,
) -> dict[str, Any] | None:
    ref = reference_for(spec)
    accelerator = spec.hardware.accelerator
    if ref is None or accelerator is None:  # a reference is per accelerator
        return None
    on_hardware = not local and real.get("device") in ("gpu", "tpu")  # else shown, not compared

    def ratio(rate: float | None) -> float | None:
        return round(rate / devices / ref.examples_per_sec, 3) if on_hardware and rate else None

    return {
        "accelerator": accelerator.name,
        "examples_per_sec_per_device": ref.examples_per_sec,
        "setup": ref.setup,
        "source": ref.source,
        "synthetic_vs_reference": ratio(syn_rate),
        "real_vs_reference": ratio(real_rate),
    }
