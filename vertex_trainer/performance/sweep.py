"""`bench --sweep FIELD=V1,V2,...`: the spec's job run briefly once per value of one field, and
the value to use (issue 43 item 3).

Called by api.bench, which runs the jobs as `bench` runs its two (locally or as short CustomJobs,
each with its own idempotency key). Here: reading `--sweep`, the runs (`plan`: the bench's brief
job, performance.benchmark.brief_sets, with the field set to each value), and the report: per value
the steady examples/s, the input wait and the host overhead (metrics.json's
`host_overhead_fraction`, None where the trainer wrote none), and the recommendation.

The fields:
- steps_per_execution: positive integers and `auto` (or 0: the trainer's choice from the
  epoch's steps, trainer/executions.py). Every run has the same steps, enough for
  benchmark.MIN_EXECUTIONS executions of the largest value, so each runs the value it names.
- batch_size: positive integers, the global batch. The trainer scales the learning rate linearly
  from trainer.base_batch_size (trainer/schedules.py scaled_learning_rate), so each run trains at
  learning_rate x batch_size / base_batch_size, as the job at that batch size would.

The recommendation (RULE): of the values whose rate is within 5% of the best rate measured, the
smallest (steps_per_execution: as resolved, `auto` first on a tie; fewer steps per execution
keep the callbacks, progress lines and checkpoints more frequent; batch_size: the smaller batch
needs less memory and changes the optimisation least).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from vertex_trainer.errors import UserError
from vertex_trainer.performance import benchmark
from vertex_trainer.spec import JobSpec, build_spec
from vertex_trainer.spec.trainer import BY_NAME, choose_steps_per_execution

FIELDS = ("steps_per_execution", "batch_size")
AUTO = ("auto", "0")  # steps_per_execution: the trainer's own choice
WITHIN = 0.05  # the recommendation is within this share of the best rate
RULE = "the smallest value within 5% of the best rate measured"
MAX_VALUES = 8  # a sweep is a handful of brief jobs, not a search
MAX_REPEAT = 5
_EXAMPLE = "--sweep steps_per_execution=1,8,32,auto (or --sweep batch_size=256,512,1024)"


@dataclass(frozen=True)
class Sweep:
    """`--sweep FIELD=V1,V2,...`, read."""

    field: str
    values: tuple[str, ...]  # as given, normalised: "auto" for 0, integers without signs or zeros


def _bad(text: str, why: str) -> UserError:
    return UserError(f"--sweep {text!r}: {why}", hint=f"e.g. {_EXAMPLE}")


def parse(text: str) -> Sweep:
    """`FIELD=V1,V2,...` -> Sweep; UserError (exit 2) naming --sweep, the value and the fix."""
    field, eq, rest = text.partition("=")
    field = field.strip().removeprefix("trainer.")
    if not eq or not field:
        raise _bad(text, "write FIELD=V1,V2,... (one field, two or more values)")
    if field not in FIELDS:
        raise _bad(text, f"{field!r} cannot be swept: the fields are {', '.join(FIELDS)}")
    values: list[str] = []
    for raw in rest.split(","):
        value = raw.strip().lower()
        if field == "steps_per_execution" and value in AUTO:
            value = "auto"
        elif not (value.isascii() and value.isdigit()) or int(value) < 1:  # ("²".isdigit() too)
            allowed = "positive integers or auto" if field == "steps_per_execution" else "positive integers"
            raise _bad(text, f"{raw.strip()!r} is not a valid {field}: use {allowed}")
        else:
            value = str(int(value))
        if value in values:
            raise _bad(text, f"{value} is given twice: list each value once")
        values.append(value)
    if len(values) < 2:
        raise _bad(text, f"a sweep compares values: give two or more, not {len(values)}")
    if len(values) > MAX_VALUES:
        raise _bad(text, f"{len(values)} values: a sweep runs one brief job each, at most {MAX_VALUES}")
    return Sweep(field, tuple(values))


@dataclass(frozen=True)
class SweepRun:
    """One value's brief job."""

    value: str
    spec: JobSpec
    steps_per_execution: int
    batch_size: int
    peak_learning_rate: float  # learning_rate x batch_size / base_batch_size


@dataclass(frozen=True)
class SweepPlan:
    field: str
    runs: tuple[SweepRun, ...]  # one per value, in the order given
    steps: int
    local: bool = False
    notes: tuple[str, ...] = ()
    repeat: int = 1

    @property
    def order(self) -> tuple[int, ...]:
        """The jobs to run, as indexes into `runs`: each value `repeat` times, every other round
        in reverse (1, 8, auto, auto, 8, 1, ...), so that a load that rises or falls through the
        sweep weighs on every value alike."""
        forward = list(range(len(self.runs)))
        return tuple(i for r in range(self.repeat) for i in (forward if r % 2 == 0 else forward[::-1]))


def plan(
    spec: JobSpec,
    sweep: Sweep,
    *,
    steps: int = benchmark.DEFAULT_STEPS,
    local: bool = False,
    repeat: int = 1,
) -> SweepPlan:
    """One brief job per value: the bench's job (benchmark.brief_sets: one epoch of `steps`
    steps, no evaluation or warmup) on the spec's data (trainer.synthetic_data as the spec says),
    with the field set to the value. Each has its own output_dir (<output_dir>/bench/sweep/
    <field>-<value>) and is named <name>-sweep-<value>; with `repeat` > 1 each runs that many
    times (SweepPlan.order)."""
    trainer = benchmark.require_trainer(spec)
    benchmark.check_steps(steps)
    if not 1 <= repeat <= MAX_REPEAT:
        raise UserError(
            f"--repeat {repeat}: runs each value 1 to {MAX_REPEAT} times",
            hint="--repeat 3 evens out a machine whose load changes (the median of each value's runs)",
        )
    notes: list[str] = []
    numbers = [int(v) for v in sweep.values if v != "auto"]
    if sweep.field == "steps_per_execution" and numbers:
        needed = benchmark.MIN_EXECUTIONS * max(numbers)
        if steps < needed:
            notes.append(
                f"{needed} steps per run, not {steps}: steps_per_execution {max(numbers)} needs "
                f"{benchmark.MIN_EXECUTIONS} executions ({benchmark.MIN_EXECUTIONS - 1} measured)"
            )
            steps = needed
    # the trainer's defaults where the spec leaves a field out (trainer/flags.py)
    base_lr = trainer.learning_rate or BY_NAME["learning_rate"].default
    base_batch = trainer.base_batch_size or BY_NAME["base_batch_size"].default
    spec_batch = trainer.batch_size or BY_NAME["batch_size"].default
    runs = []
    for value in sweep.values:
        if sweep.field == "steps_per_execution":
            requested, batch = (0 if value == "auto" else int(value)), spec_batch
        else:
            requested, batch = trainer.steps_per_execution or 0, int(value)
        spe, run_steps = choose_steps_per_execution(steps, requested, min_executions=benchmark.MIN_EXECUTIONS)
        sets = benchmark.brief_sets(
            spec,
            name=f"{spec.name[:80]}-sweep-{value}",
            steps=run_steps,
            steps_per_execution=spe,
            label="sweep",
            output=f"sweep/{sweep.field}-{value}",
        )
        if sweep.field == "batch_size":
            sets.append(("trainer.batch_size", value))
        lr = base_lr * batch / base_batch  # trainer/schedules.py scaled_learning_rate
        runs.append(SweepRun(value, build_spec(spec.to_dict(), sets=sets), spe, batch, lr))
    if sweep.field == "batch_size":
        notes.append(
            f"learning rate scaled as the trainer scales it: {base_lr:g} at base_batch_size "
            f"{base_batch} x batch_size / {base_batch}"
        )
    if local and spec.hardware.accelerator is not None:
        notes.append(
            f"run here, not on {spec.hardware.describe()}: the figures are this machine's; run "
            "without --local to measure the spec's hardware"
        )
    return SweepPlan(sweep.field, tuple(runs), steps, local, tuple(notes), repeat)


def run_key(key: str, index: int) -> str:
    """The idempotency key of the sweep's `index`-th job (in SweepPlan.order), derived from the
    sweep's key."""
    suffix = f"-sweep-{index}"
    return key[: 63 - len(suffix)] + suffix


def _rank(field: str, row: dict[str, Any]) -> tuple[int, int]:
    # the smallest value first; steps_per_execution as run ("auto" as resolved, first on a tie)
    if field == "steps_per_execution":
        return row["steps_per_execution"], 0 if row["value"] == "auto" else 1
    return int(row["value"]), 0


def recommend(field: str, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """RULE applied to the measured rows (None when no run measured a rate)."""
    measured = [r for r in rows if r.get("examples_per_sec")]
    if not measured:
        return None
    best = max(measured, key=lambda r: r["examples_per_sec"])
    floor = (1 - WITHIN) * best["examples_per_sec"]
    chosen = min((r for r in measured if r["examples_per_sec"] >= floor), key=lambda r: _rank(field, r))
    return {
        "value": chosen["value"],
        "examples_per_sec": chosen["examples_per_sec"],
        "best_value": best["value"],
        "best_examples_per_sec": best["examples_per_sec"],
        "of_best": round(chosen["examples_per_sec"] / best["examples_per_sec"], 3),
        "rule": RULE,
    }


def _median(values: list[Any]) -> float | None:
    found = [float(v) for v in values if v is not None]
    return round(statistics.median(found), 4) if found else None


def report(spec: JobSpec, swept: SweepPlan, results: list[benchmark.Result]) -> dict[str, Any]:
    """The sweep's answer: one row per value (in the order given; with repeats, the median of its
    runs' figures, each run listed) and the recommendation. `results` follow SweepPlan.order."""
    by_run: dict[int, list[benchmark.Result]] = {}
    for index, result in zip(swept.order, results, strict=True):
        by_run.setdefault(index, []).append(result)
    rows: list[dict[str, Any]] = []
    for index, run in enumerate(swept.runs):
        done = by_run.get(index, [])
        metrics = [r.metrics or {} for r in done]
        spe = next((m["steps_per_execution"] for m in metrics if m.get("steps_per_execution")), None)
        batch = next((m["global_batch_size"] for m in metrics if m.get("global_batch_size")), None)
        rate = _median([benchmark.rate(m) for m in metrics])
        rows.append(
            {
                "value": run.value,
                "steps_per_execution": int(spe or run.steps_per_execution),
                "batch_size": int(batch or run.batch_size),
                "peak_learning_rate": run.peak_learning_rate,
                "examples_per_sec": round(rate, 2) if rate else None,
                "input_wait_fraction": _median([m.get("input_wait_fraction") for m in metrics]),
                "host_overhead_fraction": _median([m.get("host_overhead_fraction") for m in metrics]),
                "bound": next((m["bound"] for m in metrics if m.get("bound")), None),
                "runs": [
                    {
                        "name": r.name,
                        "state": r.state,
                        "output_dir": r.output_dir,
                        "examples_per_sec": benchmark.rate(m),
                    }
                    for r, m in zip(done, metrics, strict=True)
                ],
            }
        )
    missing = [r["value"] for r in rows if not r["examples_per_sec"]]
    notes = list(swept.notes)
    if missing:
        notes.append(f"no examples/s measured for {', '.join(missing)}: see those runs' logs")
    first = next((r for r in results if r.metrics), None)
    m = first.metrics if first and first.metrics else {}
    return {
        "spec": spec.name,
        "hardware": "this machine" if swept.local else spec.hardware.describe(),
        "device": m.get("device"),
        "model": m.get("model", spec.trainer.model if spec.trainer else None),
        "image_size": m.get("image_size"),
        "synthetic_data": bool(m.get("synthetic_data")),
        "field": swept.field,
        "steps": swept.steps,
        "repeat": swept.repeat,
        "rows": rows,
        "recommendation": recommend(swept.field, rows),
        "notes": notes,
    }
