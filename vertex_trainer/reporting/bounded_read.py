"""What `report` reads, bounded and checked (docs/report.md "What the report reads").

A run's files are the user's (their code may write anything into metrics.json, a run may have
been cut short, a folder copied by hand): each file is read up to a bound and checked for the
shape the page needs. What cannot be read, or is not what it should be, is left out and said on
the page (RunData.notes, at most MAX_NOTES), never a traceback:

- JSON records (metrics.json, trainer_config.json, result.json, trials.json, custom_job.json,
  hyperparameter_tuning_job.json): regular files only (never a FIFO), at most MAX_JSON_BYTES,
  UTF-8, an object; NaN and Infinity left out; the figures the page formats must be numbers, the
  times and counts not negative.
- spec.yaml: at most MAX_TEXT_BYTES, other bytes than UTF-8 replaced.
- a replica's log: its last MAX_LOG_BYTES; at most MAX_POINTS progress points (evenly kept).
- TensorBoard event files (read only when the log has no epoch): regular files of at most
  MAX_EVENT_BYTES together (run_data.py); a curve draws at most plots.MAX_PLOTTED epochs.
- a study: at most MAX_TRIALS trials and MAX_PARAMETERS parameters; the best trial's folder is
  read as a run, never as a study (a study whose best trial points back at it ends there).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

MAX_JSON_BYTES = 16 << 20
MAX_TEXT_BYTES = 1 << 20
MAX_LOG_BYTES = 32 << 20
# A run's TensorBoard event files (train/), together: room for what Keras' TensorBoard callback
# writes beside the epochs (the graph, weight histograms: tens of MB for a large model); only the
# epoch tags are kept, at most MAX_POINTS steps of each (run_data.read_event_epochs)
MAX_EVENT_BYTES = 256 << 20
MAX_POINTS = 10_000
MAX_TRIALS = 10_000
MAX_PARAMETERS = 16
MAX_NOTES = 30
MAX_SECONDS = 10 * 365 * 86400.0  # an elapsed time beyond ten years is not a run's
MAX_STEPS = 10**12

# metrics.json's figures the page formats or plots as numbers; the times and counts of them
# cannot be negative.
NUMBERS = frozenset(
    {
        "eval_accuracy",
        "eval_loss",
        "final_train_accuracy",
        "final_train_loss",
        "steady_examples_per_sec",
        "wall_examples_per_sec",
        "input_wait_fraction",
        "host_overhead_fraction",
        "learning_rate",
        "epochs",
        "steps",
        "global_batch_size",
        "train_seconds",
        "compile_seconds",
        "checkpoint_seconds",
        "eval_seconds",
    }
)
NOT_NEGATIVE = frozenset(k for k in NUMBERS if not k.endswith(("_loss", "_accuracy")))


def _mib(size: int) -> str:
    return f"{size / (1 << 20):g} MiB"


class Notes:
    """What could not be read, one line each, for the page (at most MAX_NOTES, then a count)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.more = 0

    def add(self, line: str) -> None:
        if line in self.lines:  # (a file read twice, e.g. a study's body for its goal and its job)
            return
        if len(self.lines) < MAX_NOTES:
            self.lines.append(line)
        else:
            self.more += 1

    def all(self) -> tuple[str, ...]:
        extra = (f"... and {self.more} more that could not be read",) if self.more else ()
        return (*self.lines, *extra)


def shown(value: Any, limit: int = 60) -> str:
    """A value as a note quotes it: its repr, on one line, shortened."""
    text = repr(value) if not isinstance(value, float) else f"{value:g}"
    return text if len(text) <= limit else text[:limit] + "..."


def number(value: Any) -> float | int | None:
    """A finite int or float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def _regular(path: Path, notes: Notes) -> bool:
    """Is `path` a regular file to read (a note when it is something else)?"""
    try:
        if not path.exists() and not path.is_symlink():
            return False
        if path.is_file():
            return True
    except OSError:
        pass
    notes.add(f"{path}: not a regular file; left out")
    return False


def _head(path: Path, notes: Notes, limit: int) -> bytes | None:
    """The first `limit` + 1 bytes of a regular file (one more than the limit tells a longer
    file); None when it is absent, or (with a note) not a regular file or unreadable."""
    if not _regular(path, notes):
        return None
    try:
        with open(path, "rb") as f:
            return f.read(limit + 1)
    except OSError as e:
        notes.add(f"{path}: cannot be read ({e.strerror or e}); left out")
        return None


def read_json(path: Path, notes: Notes) -> dict[str, Any] | None:
    """The JSON object in `path`; None when it is absent, or (with a note) unreadable, over
    MAX_JSON_BYTES, not JSON, or not an object."""
    raw = _head(path, notes, MAX_JSON_BYTES)
    if raw is None:
        return None
    if len(raw) > MAX_JSON_BYTES:
        notes.add(f"{path}: more than {_mib(MAX_JSON_BYTES)}, more than the report reads; left out")
        return None
    try:
        value = json.loads(raw)
    except UnicodeDecodeError as e:
        notes.add(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); left out")
        return None
    except json.JSONDecodeError as e:
        notes.add(f"{path}: not JSON ({e.msg} at line {e.lineno}, column {e.colno}); left out")
        return None
    except ValueError as e:  # what json's parser refuses past the grammar: an integer over 4,300 digits
        notes.add(f"{path}: not JSON this report reads ({e}); left out")
        return None
    except RecursionError:
        notes.add(f"{path}: nested too deeply to read; left out")
        return None
    if not isinstance(value, dict):
        notes.add(f"{path}: a JSON {_kind(value)}, not an object; left out")
        return None
    return value


def _kind(value: Any) -> str:
    names = {list: "list", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def read_text(path: Path, notes: Notes, limit: int = MAX_TEXT_BYTES) -> str | None:
    """A text file's first `limit` bytes as text (other bytes than UTF-8 replaced)."""
    raw = _head(path, notes, limit)
    if raw is None:
        return None
    if len(raw) > limit:
        notes.add(f"{path}: more than {_mib(limit)}; the page shows its first {_mib(limit)}")
        raw = raw[:limit]
    return raw.decode("utf-8", errors="replace")


def read_log(path: Path, notes: Notes) -> list[str]:
    """A log's lines, of its last MAX_LOG_BYTES (the note says so when it is longer)."""
    if not _regular(path, notes):
        return []
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - MAX_LOG_BYTES))
            raw = f.read(MAX_LOG_BYTES)
    except OSError as e:
        notes.add(f"{path}: cannot be read ({e.strerror or e}); left out")
        return []
    if size > MAX_LOG_BYTES:
        raw = raw.partition(b"\n")[2]  # from the first whole line
        notes.add(
            f"{path}: {size / (1 << 20):.1f} MiB; the report read its last {_mib(MAX_LOG_BYTES)} "
            "(the epochs before it are not shown)"
        )
    return raw.decode("utf-8", errors="replace").splitlines()


def clean_figures(raw: Mapping[str, Any], source: str, notes: Notes) -> dict[str, Any]:
    """metrics.json's figures: NaN and Infinity left out, NUMBERS numbers, NOT_NEGATIVE >= 0."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, float) and not math.isfinite(value):
            notes.add(f"{source}: {shown(key)[1:-1]} is {value}; left out")
        elif key in NUMBERS and number(value) is None:
            notes.add(f"{source}: {key} is {shown(value)}, not a number; left out")
        elif key in NOT_NEGATIVE and value < 0:
            notes.add(f"{source}: {key} is {shown(value)}, less than 0; left out")
        else:
            out[key] = value
    return out


def clean_config(raw: Mapping[str, Any], source: str, notes: Notes) -> dict[str, Any]:
    """trainer_config.json: the learning-rate schedule's figures checked, flags an object."""
    out = dict(raw)
    rules: dict[str, Callable[[Any], bool]] = {
        "peak_learning_rate": lambda v: number(v) is not None and v >= 0,
        "warmup_steps": lambda v: _count(v, 0),
        "total_steps": lambda v: _count(v, 0),
        "steps_per_epoch": lambda v: _count(v, 1),
    }
    for key, ok in rules.items():
        if key in out and out[key] is not None and not ok(out[key]):
            notes.add(f"{source}: {key} is {shown(out.pop(key))}; left out")
    if not isinstance(out.get("flags", {}), dict):
        notes.add(f"{source}: flags is {shown(out.pop('flags'))}, not an object; left out")
    return out


def _count(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and least <= value <= MAX_STEPS


def clean_result(raw: Mapping[str, Any], source: str, notes: Notes) -> dict[str, Any]:
    """result.json: name and state text, elapsed_s a number of seconds (0 to ten years)."""
    out = dict(raw)
    for key in ("name", "state"):
        if key in out and not isinstance(out[key], str | type(None)):
            notes.add(f"{source}: {key} is {shown(out.pop(key))}, not text; left out")
    if out.get("elapsed_s") is not None:
        elapsed = number(out["elapsed_s"])
        if elapsed is None:
            notes.add(f"{source}: elapsed_s is {shown(out.pop('elapsed_s'))}, not a number; left out")
        elif elapsed < 0:
            notes.add(f"{source}: elapsed_s is {shown(out.pop('elapsed_s'))}, less than 0; left out")
        elif elapsed > MAX_SECONDS:
            notes.add(f"{source}: elapsed_s is {shown(out.pop('elapsed_s'))}, more than ten years; left out")
    return out


def clean_job(raw: Mapping[str, Any], source: str, notes: Notes) -> dict[str, Any] | None:
    """A recorded CustomJob, with what its cost is computed from (jobSpec's scheduling and worker
    pools) of the REST API's shape; None (with a note) when it is not."""
    spec = raw.get("jobSpec", raw.get("trialJobSpec"))
    if spec is None:
        return dict(raw)
    problem = _job_problem(spec)
    if problem is not None:
        notes.add(f"{source}: {problem}; the run is not priced")
        return None
    return dict(raw)


def _job_problem(job_spec: Any) -> str | None:
    if not isinstance(job_spec, dict):
        return f"jobSpec is {shown(job_spec)}, not an object"
    if not isinstance(job_spec.get("scheduling") or {}, dict):
        return f"jobSpec.scheduling is {shown(job_spec['scheduling'])}, not an object"
    if not isinstance((job_spec.get("scheduling") or {}).get("strategy") or "", str):
        return "jobSpec.scheduling.strategy is not text"
    pools = job_spec.get("workerPoolSpecs") or []
    if not isinstance(pools, list):
        return f"jobSpec.workerPoolSpecs is {shown(pools)}, not a list"
    for i, pool in enumerate(pools):
        where = f"jobSpec.workerPoolSpecs[{i}]"
        if not pool:
            continue
        if not isinstance(pool, dict) or not isinstance(pool.get("machineSpec") or {}, dict):
            return f"{where} is {shown(pool)}, not a worker pool"
        machine = pool.get("machineSpec") or {}
        for key in ("machineType", "acceleratorType", "tpuTopology"):
            if not isinstance(machine.get(key) or "", str):
                return f"{where}.machineSpec.{key} is {shown(machine[key])}, not text"
        for key, holder in (("acceleratorCount", machine), ("replicaCount", pool)):
            value = holder.get(key) or 0
            if not (_count(value, 0) or (isinstance(value, str) and re.fullmatch(r"\d{1,6}", value))):
                return f"{where} {key} is {shown(value)}, not a count"
    return None


def clean_trials(raw: Any, source: str, notes: Notes) -> list[dict[str, Any]]:
    """A study's trials (docs/contract.md section 10 objects): each an object, its id and state
    text, its metric a number (or None), its parameters an object of numbers and text; at most
    MAX_TRIALS trials and MAX_PARAMETERS parameters."""
    if not isinstance(raw, list):
        notes.add(f"{source}: trials is {shown(raw)}, not a list; left out")
        return []
    if len(raw) > MAX_TRIALS:
        notes.add(f"{source}: {len(raw):,} trials; the report shows the first {MAX_TRIALS:,}")
        raw = raw[:MAX_TRIALS]
    names: dict[str, None] = {}
    out = []
    for n, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            notes.add(f"{source}: trial {n} is {shown(item)}, not an object; left out")
            continue
        t = dict(item)
        t["id"] = str(t.get("id", n))
        t["state"] = str(t.get("state") or "")
        if t.get("metric") is not None and number(t["metric"]) is None:
            notes.add(f"{source}: trial {t['id']}'s metric is {shown(t['metric'])}, not a number; left out")
            t["metric"] = None
        parameters = t.get("parameters") or {}
        if not isinstance(parameters, dict):
            notes.add(
                f"{source}: trial {t['id']}'s parameters are {shown(parameters)}, not an object; left out"
            )
            parameters = {}
        kept = {}
        for name, value in parameters.items():
            if name not in names and len(names) >= MAX_PARAMETERS:
                continue
            if isinstance(value, str | bool) or number(value) is not None:
                names.setdefault(name, None)
                kept[name] = value
        t["parameters"] = kept
        if t.get("output_dir") is not None and not isinstance(t["output_dir"], str):
            t.pop("output_dir")
        out.append(t)
    if (
        len({k for item in raw if isinstance(item, dict) for k in _keys(item.get("parameters"))})
        > MAX_PARAMETERS
    ):
        notes.add(
            f"{source}: more than {MAX_PARAMETERS} parameters; the report shows the first {MAX_PARAMETERS}"
        )
    return out


def _keys(value: Any) -> list[str]:
    return list(value) if isinstance(value, dict) else []


def clean_study(body: Mapping[str, Any], source: str, notes: Notes) -> tuple[str, str]:
    """(goal, metric id) of a tuning job's studySpec; MAXIMIZE and "accuracy" when unreadable."""
    spec = body.get("studySpec") or {}
    metrics = spec.get("metrics") if isinstance(spec, dict) else None
    metric = metrics[0] if isinstance(metrics, list) and metrics else {}
    if not isinstance(metric, dict):
        notes.add(f"{source}: studySpec.metrics[0] is {shown(metric)}, not an object; left out")
        metric = {}
    goal = str(metric.get("goal") or "MAXIMIZE").upper()
    if goal not in ("MAXIMIZE", "MINIMIZE"):
        notes.add(
            f"{source}: goal is {shown(metric.get('goal'))}, not MAXIMIZE or MINIMIZE; taken as MAXIMIZE"
        )
        goal = "MAXIMIZE"
    metric_id = metric.get("metricId")
    return goal, metric_id if isinstance(metric_id, str) and metric_id else "accuracy"


def run_budget(kept: Mapping[str, Any] | None, source: str, notes: Notes) -> tuple[str | None, float | None]:
    """(region, max_cost) a local run recorded when it started (run.json: its spec's region and
    scheduling.max_cost, local/layout.py); None for what it lacks. The spec's YAML is not read."""
    if not kept:
        return None, None
    region = kept.get("region") if isinstance(kept.get("region"), str) else None
    budget = kept.get("max_cost")
    if budget is None:
        return region, None
    if number(budget) is None or budget < 0:
        notes.add(f"{source}: max_cost is {shown(budget)}, not a price; left out")
        return region, None
    return region, float(budget)
