"""`vertex-trainer report`: a run's whole story gathered from what it left behind (docs/report.md).

`RunData` is everything the page shows, read once: the trainer's metrics.json and
trainer_config.json, the per-epoch progress lines of the run's log (loss, accuracy, examples/s,
input wait), the throughput verdict as the run printed it, the run record (spec.yaml,
custom_job.json, result.json), a study's trials, a fallback plan's attempts and the cost. The
page (reporting/page.py) only draws it.

What the run already records is preferred: the progress lines of a local run's log hold every
epoch's figures and cost no TensorFlow import. TensorBoard's event files (tensorboard's own reader,
`event_accumulator`, which imports TensorFlow: seconds) are read only when the log has no epoch,
e.g. a Vertex AI job whose output is on gs://. The learning-rate schedule is the trainer's
formula (trainer/schedules.py `lr_at`: linear warmup, then cosine decay) over the steps of
trainer_config.json, one point per step: warmup and decay are visible at any epoch count.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from vertex_trainer import lazy
from vertex_trainer.contract import METRICS_FILE, records_of
from vertex_trainer.errors import UserError
from vertex_trainer.local.display import parse_progress
from vertex_trainer.local.layout import RUN_FILE, find_run
from vertex_trainer.reporting import bounded_read as read

__all__ = [
    "Epoch",
    "Point",
    "RunData",
    "from_run_dir",
    "lr_schedule",
    "read_event_epochs",
    "time_split",
    "trials_from_record",
]

TRAINER_CONFIG = "trainer_config.json"
# `<UTC stamp> <line>` in <records>/logs/<replica>.log (local/runlog.py, local/layout.py)
_STAMPED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z) (.*)$")
_VERDICT = re.compile(r"^(?:trainer: )?(throughput: .*)$")
# The figures of a progress line the report reads (trainer/callbacks.py `progress_line`).
_FIELDS = (
    "loss",
    "accuracy",
    "examples_per_sec",
    "input_wait_fraction",
    "host_overhead_fraction",
    "step_time_ms",
)


@dataclass(frozen=True)
class Epoch:
    """One epoch's figures as the trainer logged them at its end (None: not logged)."""

    epoch: int
    loss: float | None = None
    accuracy: float | None = None
    examples_per_sec: float | None = None
    input_wait_fraction: float | None = None
    host_overhead_fraction: float | None = None  # the share of the time between executions
    step_time_ms: float | None = None


@dataclass(frozen=True)
class Point:
    """A progress line on the time axis: seconds since the run's first line, the global step,
    examples/s and the input wait so far in its epoch."""

    seconds: float
    step: int
    examples_per_sec: float | None
    input_wait_fraction: float | None


@dataclass(frozen=True)
class RunData:
    """Everything one report shows. `kind`: "run" (one training run), "tuning" or "fallback"."""

    source: str
    name: str
    kind: str = "run"
    state: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    epochs: tuple[Epoch, ...] = ()
    points: tuple[Point, ...] = ()
    verdict: str | None = None
    spec_yaml: str | None = None
    custom_job: dict[str, Any] | None = None
    elapsed_s: float | None = None
    trials: tuple[dict[str, Any], ...] = ()  # docs/contract.md section 10 trial objects
    goal: str = "MAXIMIZE"
    metric_id: str = "accuracy"
    attempts: tuple[dict[str, Any], ...] = ()  # docs/contract.md section 11 attempt records
    cost: dict[str, Any] | None = None  # cost.job_cost's object
    max_cost: float | None = None
    region: str | None = None  # a local run's spec's region (its run.json), which prices its time
    reference: dict[str, Any] | None = None  # the published figure: examples_per_sec, setup, source
    epochs_from: str = "log"  # "log" (progress lines) or "tensorboard" (event files)
    notes: tuple[str, ...] = ()  # what could not be read, said on the page (never a failure)
    # A cloud job's utilization (vertex/utilization.py's Utilization.to_dict()), when it could be read
    utilization: dict[str, Any] | None = None

    def best_trial(self) -> dict[str, Any] | None:
        """The SUCCEEDED trial with the best metric (the earliest on a tie), or None."""
        done = [t for t in self.trials if t.get("metric") is not None and "SUCCEEDED" in str(t.get("state"))]
        if not done:
            return None
        sign = -1.0 if self.goal.upper() == "MAXIMIZE" else 1.0
        return min(done, key=lambda t: sign * float(t["metric"]))

    def with_(self, **changes: Any) -> RunData:
        """A copy with `changes` (the API adds what only it can read: the job, the cost)."""
        return replace(self, **changes)


def _number(value: str | None) -> float | None:
    try:
        out = float(value) if value is not None else None
    except ValueError:
        return None
    return out if out is not None and math.isfinite(out) else None


def parse_log(lines: list[str]) -> tuple[list[Epoch], list[Point], str | None]:
    """The epochs (each epoch's last progress line at its last step), the time series (every
    progress line) and the verdict line, from a replica's stamped log lines."""
    epochs: dict[int, Epoch] = {}
    points: list[Point] = []
    verdict = None
    start: datetime | None = None
    for raw in lines:
        m = _STAMPED.match(raw.rstrip("\n"))
        stamp, line = (m[1], m[2]) if m else (None, raw.rstrip("\n"))
        when = _when(stamp)
        start = start or when
        found = _VERDICT.match(line)
        if found:
            verdict = found[1]
            continue
        kv = parse_progress(line)
        if kv is None or "/" not in kv.get("epoch", "") or "/" not in kv.get("step", ""):
            continue
        try:
            epoch, step, steps = int(kv["epoch"].split("/")[0]), *map(int, kv["step"].split("/"))
        except ValueError:
            continue
        values = {k: _number(kv.get(k)) for k in _FIELDS}
        seconds = (when - start).total_seconds() if when and start else float(len(points))
        points.append(
            Point(
                seconds, (epoch - 1) * steps + step, values["examples_per_sec"], values["input_wait_fraction"]
            )
        )
        if step == steps:
            epochs[epoch] = Epoch(epoch, **values)
    if len(points) > read.MAX_POINTS:  # evenly kept, the last one too
        stride = math.ceil(len(points) / read.MAX_POINTS)
        points = points[-1::-stride][::-1]
    return [epochs[e] for e in sorted(epochs)], points, verdict


def _when(stamp: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None
    except ValueError:  # a stamp of the right shape that is no time (month 13)
        return None


def chief_log(record: Path, notes: read.Notes | None = None) -> list[str]:
    """The chief's log lines (workerpool0-0: the replica that writes metrics and TensorBoard),
    of its last report_read.MAX_LOG_BYTES."""
    try:
        logs = sorted((record / "logs").glob("*.log"))
    except OSError:
        return []
    chief = next((p for p in logs if p.stem == "workerpool0-0"), logs[0] if logs else None)
    if chief is None:
        return []
    return read.read_log(chief, notes or read.Notes())


def event_epochs(log_dir: str, events: Callable[[str], list[Epoch]]) -> tuple[list[Epoch], str | None]:
    """The epochs of the event files under `log_dir`, and why there are none (None: there are)."""
    try:
        found = events(log_dir)
    except Exception as e:  # no event files there, corrupt ones, or a file system TensorFlow cannot read
        return [], f"no curves: the TensorBoard event files under {log_dir} could not be read ({e})"
    return (
        found,
        None if found else f"no curves: no epoch in the TensorBoard event files under {log_dir}/train",
    )


EPOCH_TAGS = ("epoch_loss", "epoch_accuracy", "epoch_examples_per_sec")  # what Keras' callback writes


def read_event_epochs(log_dir: str) -> list[Epoch]:
    """The epochs from TensorBoard event files under `log_dir` (its train/ run): epoch_loss,
    epoch_accuracy, epoch_examples_per_sec. tensorboard's own file loader, streamed: only the
    epoch tags' values are kept (not a callback's graph or histograms), at most read.MAX_POINTS
    steps of each (ValueError beyond: no run has that many epochs); [] when there are none."""
    train = log_dir.rstrip("/") + "/train"
    files = _check_event_files(train)
    lazy.require("tensorflow", "reading TensorBoard event files")
    purpose = "reading TensorBoard event files"
    loader = lazy.require("tensorboard.backend.event_processing.event_file_loader", purpose)
    tensor_util = lazy.require("tensorboard.util.tensor_util", purpose)

    series: dict[str, dict[int, float]] = {}
    for path in files:
        for event in loader.EventFileLoader(path).Load():
            for value in event.summary.value:
                if value.tag not in EPOCH_TAGS:
                    continue
                kept = series.setdefault(value.tag, {})
                figure = (
                    tensor_util.make_ndarray(value.tensor) if value.HasField("tensor") else value.simple_value
                )
                kept[event.step] = float(figure)
                if len(kept) > read.MAX_POINTS:
                    raise ValueError(
                        f"more than {read.MAX_POINTS:,} steps of {value.tag}, more than a run's epochs"
                    )
    steps = sorted({s for values in series.values() for s in values})
    return [
        Epoch(
            s + 1,
            loss=series.get("epoch_loss", {}).get(s),
            accuracy=series.get("epoch_accuracy", {}).get(s),
            examples_per_sec=series.get("epoch_examples_per_sec", {}).get(s),
        )
        for s in steps
    ]


def _check_event_files(train: str) -> list[str]:
    """The event files in `train` (those whose name holds "tfevents": what tensorboard's reader
    reads), in name order; ValueError (the note's reason) unless they are regular files of at most
    read.MAX_EVENT_BYTES together (reading them takes time; only the epoch tags are kept: a
    reader that kept every scalar took 5 GB for a 10 MB file), and a FIFO would be waited on
    forever. A local folder is looked at without TensorFlow."""
    if "://" in train:  # gs://: through TensorFlow's file system, as the reader will
        gfile = lazy.require("tensorflow", "reading TensorBoard event files").io.gfile
        paths = [f"{train}/{n}" for n in gfile.listdir(train) if "tfevents" in n]
        files = {path: gfile.stat(path).length for path in paths}
    else:
        files = {}
        for entry in os.scandir(train):
            if "tfevents" in entry.name:
                if not entry.is_file(follow_symlinks=True):
                    raise ValueError(f"{entry.path} is not a regular file")
                files[entry.path] = entry.stat().st_size
    if sum(files.values()) > read.MAX_EVENT_BYTES:
        raise ValueError(f"more than {read.MAX_EVENT_BYTES >> 20} MiB of them, more than the report reads")
    return sorted(files)


def lr_schedule(config: Mapping[str, Any], points: int = 200) -> list[tuple[int, float]]:
    """(step, learning rate) over the run, by the trainer's schedule (trainer/schedules.py
    `lr_at`: linear warmup to the peak, then cosine decay to 0); [] without the figures."""
    peak, warmup, total = (config.get(k) for k in ("peak_learning_rate", "warmup_steps", "total_steps"))
    if not isinstance(peak, int | float) or not isinstance(total, int) or total <= 0:
        return []
    warmup = int(warmup or 0)
    out = []
    for step in sorted({round(i * total / points) for i in range(points + 1)} | {warmup}):
        if warmup > 0 and step < warmup:
            lr = peak * step / warmup
        else:
            decay = max(total - warmup, 1)
            lr = peak * 0.5 * (1.0 + math.cos(math.pi * min(max(step - warmup, 0), decay) / decay))
        out.append((step, lr))
    return out


def time_split(metrics: Mapping[str, Any], elapsed_s: float | None = None) -> dict[str, float]:
    """Where the wall time went, in seconds: compile (the first execution's excess), steps (the
    rest of fit() less checkpoints), checkpoints, eval, and the rest of the run (start-up, data
    counting, export) when its elapsed time is known. Absent figures are left out."""

    def num(key: str) -> float:
        value = metrics.get(key)
        return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0

    train = num("train_seconds")
    if not train:  # not a run of the trainer (or not ended): nothing to split
        return {}
    compile_s, ckpt, evaluation = num("compile_seconds"), num("checkpoint_seconds"), num("eval_seconds")
    split = {
        "compile": compile_s,
        "steps": max(0.0, train - compile_s - ckpt),
        "checkpoints": ckpt,
        "eval": evaluation,
    }
    if elapsed_s:
        split["start-up and export"] = max(0.0, elapsed_s - train - evaluation)
    return {k: round(v, 3) for k, v in split.items() if v > 0}


def trials_from_record(
    record: Path, notes: read.Notes | None = None
) -> tuple[list[dict[str, Any]], str, str, Any] | None:
    """A local study's trials (<records>/trials.json, checked: report_read.clean_trials), its goal
    and metric id (from hyperparameter_tuning_job.json's studySpec) and its name as trials.json
    holds it; None when `record` holds no study."""
    notes = notes or read.Notes()
    path = record / "trials.json"
    study = read.read_json(path, notes)
    if study is None:
        return None
    body_path = record / "hyperparameter_tuning_job.json"
    goal, metric_id = read.clean_study(read.read_json(body_path, notes) or {}, str(body_path), notes)
    return read.clean_trials(study.get("trials") or [], str(path), notes), goal, metric_id, study.get("name")


def _record_of(path: Path) -> tuple[Path, Path]:
    """(the run's folder, its records) of a run's folder, its records, or the base folder of a
    spec's runs (the newest run; local/layout.py)."""
    found = find_run(str(path))
    if found is not None:
        return found.run_dir, found.record
    return path, Path(records_of(str(path)))


def from_run_dir(
    path: str,
    *,
    events: Callable[[str], list[Epoch]] = read_event_epochs,
) -> RunData:
    """The report's data of a local run (or a local study) from its output directory. What cannot
    be read is left out and said in `notes` (reporting/bounded_read.py's bounds and checks).

    Args:
        path: the run's folder (or its records), or the base folder of a spec's runs (its
            output_dir: the newest run there).
        events: reads the epochs of TensorBoard event files under a log dir, when the run's log
            has none (default: tensorboard's reader).
    Returns:
        the RunData. Raises UserError (exit 2) when `path` holds no run.
    """
    notes = read.Notes()
    base, record = _record_of(Path(path).expanduser().resolve())
    study = trials_from_record(record, notes)
    if not (base / METRICS_FILE).exists() and study is None and not record.is_dir():
        raise UserError(
            f"report: {path} holds no run (no {METRICS_FILE}, no record of a run)",
            hint="give a run's folder, the output_dir of `submit --local` (its newest run) or a job name",
        )
    data = _run(base, record, notes, events, curves=study is None)
    if study is None:
        return data.with_(notes=notes.all())
    trials, goal, metric_id, name = study
    data = data.with_(
        kind="tuning",
        name=str(name or data.name),
        trials=tuple(trials),
        goal=goal,
        metric_id=metric_id,
    )
    best = data.best_trial() or {}
    folder = Path(best["output_dir"]) if best.get("output_dir") else None
    if folder is not None and folder.is_dir():
        inner_base, inner_record = _record_of(folder.expanduser().resolve())
        if trials_from_record(inner_record) is not None:  # read as a run, never a study: no loop
            notes.add(
                f"trial {best['id']}'s output_dir {folder} is a study, not a run; its curves are left out"
            )
        else:
            inner = _run(inner_base, inner_record, notes, events, curves=True)  # the best trial's curves
            data = data.with_(
                metrics=inner.metrics,
                config=inner.config,
                epochs=inner.epochs,
                points=inner.points,
                verdict=inner.verdict,
                elapsed_s=data.elapsed_s or inner.elapsed_s,
            )
    return data.with_(notes=notes.all())


def _run(
    base: Path, record: Path, notes: read.Notes, events: Callable[[str], list[Epoch]], *, curves: bool
) -> RunData:
    """One run's figures, records and (with `curves`) its log's epochs or its event files'."""
    metrics_path, config_path, result_path = (
        base / METRICS_FILE,
        base / TRAINER_CONFIG,
        record / "result.json",
    )
    metrics = read.clean_figures(read.read_json(metrics_path, notes) or {}, str(metrics_path), notes)
    config = read.clean_config(read.read_json(config_path, notes) or {}, str(config_path), notes)
    result = read.clean_result(read.read_json(result_path, notes) or {}, str(result_path), notes)
    job_path = record / "custom_job.json"
    if not job_path.exists():
        job_path = record / "hyperparameter_tuning_job.json"
    job = read.read_json(job_path, notes)
    run_path = record / RUN_FILE
    region, budget = read.run_budget(read.read_json(run_path, notes), str(run_path), notes)
    data = RunData(
        source=str(base),
        name=str(result.get("name") or base.name),
        state=result.get("state"),
        metrics=metrics,
        config=config,
        spec_yaml=read.read_text(record / "spec.yaml", notes),
        custom_job=read.clean_job(job, str(job_path), notes) if job is not None else None,
        elapsed_s=result.get("elapsed_s"),
        max_cost=budget,
        region=region,
    )
    if not curves:
        return data
    epochs, points, verdict = parse_log(chief_log(record, notes))
    data = data.with_(epochs=tuple(epochs), points=tuple(points), verdict=verdict)
    if not epochs:
        # beside the run (<output>/logs, where AIP_TENSORBOARD_LOG_DIR points locally), or where
        # the trainer says it wrote them
        flags = data.config.get("flags") or {}
        for log_dir in (str(base / "logs"), str(flags.get("tensorboard_dir") or "")):
            if log_dir and os.path.isdir(log_dir.rstrip("/") + "/train"):
                found, note = event_epochs(log_dir, events)
                if note:
                    notes.add(note)
                data = data.with_(epochs=tuple(found), epochs_from="tensorboard")
                break
    return data
