"""A job's accelerator, accelerator-memory and CPU utilization from Cloud Monitoring, and what it
means (`status JOB --utilization`, the report; issue 43 item 5).

What Vertex AI records (read 2026-12-03: Google Cloud's metrics list, "ml"): for every training
job, on the monitored resource `cloudml_job` (label `job_id`), the GAUGE/DOUBLE metrics

  ml.googleapis.com/training/accelerator/utilization          fraction of the allocated accelerator in use
  ml.googleapis.com/training/accelerator/memory/utilization   fraction of its memory in use
  ml.googleapis.com/training/cpu/utilization                  fraction of the allocated CPU in use
                                                              (may pass 1.0 on machines with many vCPUs)

sampled every 60 seconds, one series per replica (told apart by the resource's `task_name` or the
metric's `task_type`/`task_index` labels, whichever the series carry). No tool shows them for
Vertex AI; this reads them with one `projects.timeSeries.list` per metric (monitoring v3 REST),
filtered by the metric type and the job's id over the job's start and end, aligned to at least
60 s with ALIGN_MEAN so the answer stays small, through the one pager (`ApiClient.pages`).

`verdict` turns a pool's figures into one of three readings, with the fix that fits the job (a
job of the bundled trainer has `steps_per_execution` and `precision` flags; a script job gets the
`model.compile(...)` line to add). Its bounds are `THRESHOLDS`, each with its reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from vertex_trainer.contract import TRAINER_MODULE
from vertex_trainer.gcp.http import ApiError, ProjectApi
from vertex_trainer.settings import Settings

ACCELERATOR = "ml.googleapis.com/training/accelerator/utilization"
MEMORY = "ml.googleapis.com/training/accelerator/memory/utilization"
CPU = "ml.googleapis.com/training/cpu/utilization"
METRICS = {"accelerator": ACCELERATOR, "memory": MEMORY, "cpu": CPU}
RESOURCE = "cloudml_job"
# Vertex AI samples every 60 s and timeSeries.list refuses a shorter alignment period; a long job
# is read at a coarser period so that one series stays within MAX_POINTS points (one page).
MIN_ALIGNMENT_S = 60
MAX_POINTS = 360
PAGE_SIZE = 100  # series per page: one per replica and metric
MAX_PAGES = 20
# The metric label a stand-in's series carry to say where their figures come from (the sandbox:
# "measured on this machine ...", docs/sandbox.md); shown as a note, never read as a figure.
SOURCE_LABEL = "measured_by"


@dataclass(frozen=True)
class Thresholds:
    """The bounds of every verdict, stated once.

    - accelerator_busy 0.75: below it the accelerator waits a quarter of the time or more, more
      than a step's own kernel-launch and synchronisation gaps account for; at or above it, more
      input or fewer round trips can win back at most a quarter, and the step's own cost is what
      is left to cut.
    - cpu_busy 0.6: the trainer's CPU work is the input pipeline (decode, augment) plus the
      launch of each execution; with 60% or more of the vCPUs busy while the accelerator waits,
      the pipeline is what it waits for; below it the host has cycles to spare, so the wait is
      the round trip between executions, not the data.
    - memory_headroom 0.6: memory at its peak below 60% leaves room for a batch at least 1.5x
      larger (activations grow about linearly with the batch), which feeds the accelerator
      bigger executions.
    """

    accelerator_busy: float = 0.75
    cpu_busy: float = 0.6
    memory_headroom: float = 0.6


THRESHOLDS = Thresholds()
# The steps_per_execution the host-bound fix names (issue 43: spe 64 runs 1.2-2.1x spe 1 here).
ROUND_TRIP_SPE = 32


@dataclass(frozen=True)
class Figure:
    """One metric of one pool: the mean and the peak of its aligned points (fractions of 1)."""

    mean: float
    peak: float
    points: int


@dataclass(frozen=True)
class PoolUse:
    """A replica pool's figures (None: no series of that metric)."""

    pool: str
    replicas: int
    accelerator: Figure | None = None
    memory: Figure | None = None
    cpu: Figure | None = None


@dataclass(frozen=True)
class TrainerFlags:
    """What the job's body says about the code it runs: the bundled trainer (its
    steps_per_execution and precision flags as sent; None: left to the trainer, i.e. auto) or a
    script job of your own (`bundled` False: its compile() is not visible here)."""

    bundled: bool
    steps_per_execution: str | None = None
    precision: str | None = None


@dataclass(frozen=True)
class Verdict:
    """What a pool's figures mean: `kind` (compute-bound, input-bound, host-bound, cpu-only,
    no-data), the reason in words and the fixes, in order."""

    kind: str
    reason: str
    fixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Utilization:
    """`status JOB --utilization`: the job, the interval read, each pool's figures and verdict."""

    job: str
    job_id: str
    state: str
    start: str | None
    end: str | None
    pools: tuple[PoolUse, ...] = ()
    verdicts: tuple[Verdict, ...] = ()  # one per pool, in the same order
    notes: tuple[str, ...] = ()  # where the figures come from (a stand-in's label), what is missing
    flags: TrainerFlags = field(default_factory=lambda: TrainerFlags(bundled=False))

    @property
    def empty(self) -> bool:
        return not self.pools

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pools"] = [
            {**asdict(p), "verdict": asdict(v)} for p, v in zip(self.pools, self.verdicts, strict=True)
        ]
        del d["verdicts"]
        return d


# -- the verdict (pure) -----------------------------------------------------------------------------
def verdict(use: PoolUse, flags: TrainerFlags, limits: Thresholds = THRESHOLDS) -> Verdict:
    """What `use` means for a job run with `flags`, by `limits` (see Thresholds)."""
    accel, cpu, memory = use.accelerator, use.cpu, use.memory
    if accel is None:
        if cpu is None:
            return Verdict("no-data", "no utilization series for this pool yet")
        return Verdict(
            "cpu-only",
            f"no accelerator figures (a CPU-only machine): the vCPUs are {_pct(cpu.mean)} busy on "
            f"average, {_pct(cpu.peak)} at peak",
            (_cpu_fix(cpu, limits),),
        )
    if accel.mean >= limits.accelerator_busy:
        return Verdict(
            "compute-bound",
            f"the accelerator is busy ({_pct(accel.mean)} on average, >= "
            f"{_pct(limits.accelerator_busy)}): the step's own compute is the ceiling",
            tuple(_compute_fixes(memory, flags, limits)),
        )
    idle = f"the accelerator is idle {_pct(1 - accel.mean)} of the time ({_pct(accel.mean)} busy)"
    if cpu is not None and cpu.mean >= limits.cpu_busy:
        return Verdict(
            "input-bound",
            f"{idle} while the vCPUs are {_pct(cpu.mean)} busy (>= {_pct(limits.cpu_busy)}): it "
            "waits for the input pipeline",
            (
                "more vCPUs: a larger machine type for this pool (the pipeline's decode runs on them)",
                "more data threads: tf.data's num_parallel_calls=tf.data.AUTOTUNE on map(), and "
                "prefetch(tf.data.AUTOTUNE)",
                "caching: .cache() after the decode when the data fits, or the data on local disk",
            ),
        )
    host = "unknown" if cpu is None else f"{_pct(cpu.mean)} busy"
    return Verdict(
        "host-bound",
        f"{idle} while the host is mostly idle (vCPUs {host}, < {_pct(limits.cpu_busy)}): it "
        "waits on a host round trip between executions",
        (_round_trip_fix(flags),),
    )


def _round_trip_fix(flags: TrainerFlags) -> str:
    if not flags.bundled:
        return (
            f"run {ROUND_TRIP_SPE} steps per execution: in your script, "
            f"model.compile(..., steps_per_execution={ROUND_TRIP_SPE})"
        )
    spe = flags.steps_per_execution
    now = "auto" if spe in (None, "0", "auto") else spe
    if now == "auto":
        return (
            f"trainer.steps_per_execution is auto here: set it to {ROUND_TRIP_SPE} or more "
            "(`bench SPEC --sweep steps_per_execution=...` measures each)"
        )
    return f"trainer.steps_per_execution: {now} -> 0 (auto) or >= {ROUND_TRIP_SPE}"


def _compute_fixes(memory: Figure | None, flags: TrainerFlags, limits: Thresholds) -> list[str]:
    fixes = []
    precision = flags.precision
    if not flags.bundled:
        fixes.append(
            "mixed precision, unless on already: "
            'keras.mixed_precision.set_global_policy("mixed_bfloat16") before building the model'
        )
    elif precision == "float32":
        fixes.append("mixed precision: trainer.precision: auto (or mixed_bfloat16) instead of float32")
    if memory is not None and memory.peak < limits.memory_headroom:
        factor = 2 ** max(1, math.floor(math.log2(0.9 / max(memory.peak, 0.01))))
        fixes.append(
            f"memory peaks at {_pct(memory.peak)}: a batch about {factor}x larger fits, with the "
            f"learning rate scaled by {factor} (linear scaling)"
        )
    if not fixes:
        fixes.append("nothing cheap left: more accelerators, or a faster kind")
    return fixes


def _cpu_fix(cpu: Figure, limits: Thresholds) -> str:
    if cpu.mean >= limits.cpu_busy:
        return "the vCPUs are the ceiling: an accelerator, or a machine type with more vCPUs"
    return "the vCPUs wait too: check the input pipeline's waits (report) and steps_per_execution"


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


# -- the series -> figures (pure) -------------------------------------------------------------------
_POOL = re.compile(r"^(workerpool\d+)-\d+$")


def replica_of(series: dict[str, Any]) -> tuple[str, str]:
    """(pool, replica) of one time series: the resource's task_name ("workerpool0-1"), else the
    metric's task_type and task_index, else the job as one pool."""
    resource = (series.get("resource") or {}).get("labels") or {}
    labels = (series.get("metric") or {}).get("labels") or {}
    task = str(resource.get("task_name") or "")
    if task:
        m = _POOL.match(task)
        return (m[1] if m else task), task
    kind = str(labels.get("task_type") or "")
    if kind:
        return kind, f"{kind}-{labels.get('task_index', '0')}"
    return "job", "job"


def values(series: dict[str, Any]) -> list[float]:
    """The points' values (doubleValue, or an int64Value as text)."""
    out = []
    for point in series.get("points") or ():
        value = point.get("value") or {}
        raw: Any = value.get("doubleValue", value.get("int64Value"))
        try:
            out.append(float(raw))
        except (TypeError, ValueError):  # None, or not a number
            continue
    return out


def summarize(series_by_metric: dict[str, list[dict[str, Any]]]) -> tuple[PoolUse, ...]:
    """Each pool's figures from the series of each metric (keys of METRICS): the mean of all its
    replicas' aligned points and the highest of them. Pools in name order."""
    pools: dict[str, dict[str, Any]] = {}
    for what, found in series_by_metric.items():
        for series in found:
            pool, replica = replica_of(series)
            entry = pools.setdefault(pool, {"replicas": set(), "values": {}})
            entry["replicas"].add(replica)
            entry["values"].setdefault(what, []).extend(values(series))
    out = []
    for pool in sorted(pools):
        entry = pools[pool]
        figures = {
            what: Figure(round(sum(v) / len(v), 4), round(max(v), 4), len(v))
            for what, v in entry["values"].items()
            if v
        }
        if figures:
            out.append(PoolUse(pool, len(entry["replicas"]), **figures))
    return tuple(out)


def sources(series_by_metric: dict[str, list[dict[str, Any]]]) -> tuple[str, ...]:
    """What the series say about their source (SOURCE_LABEL), each once, in order."""
    seen: list[str] = []
    for found in series_by_metric.values():
        for series in found:
            text = ((series.get("metric") or {}).get("labels") or {}).get(SOURCE_LABEL)
            if text and text not in seen:
                seen.append(str(text))
    return tuple(seen)


def trainer_flags(job: dict[str, Any]) -> TrainerFlags:
    """The bundled trainer's flags from a CustomJob body, or a script job (`bundled` False): the
    bundled trainer is the python module trainer.task, or an image run with the trainer's
    `--model=` flag and no command of its own."""
    pools = [p for p in (job.get("jobSpec") or {}).get("workerPoolSpecs") or [] if p]
    first = pools[0] if pools else {}
    package, container = first.get("pythonPackageSpec") or {}, first.get("containerSpec") or {}
    args = [str(a) for a in (package.get("args") or container.get("args") or [])]
    bundled = package.get("pythonModule") == TRAINER_MODULE or (
        bool(container) and not container.get("command") and any(a.startswith("--model=") for a in args)
    )
    if not bundled:
        return TrainerFlags(bundled=False)
    return TrainerFlags(True, _flag(args, "steps_per_execution"), _flag(args, "precision"))


def _flag(args: Iterable[str], name: str) -> str | None:
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("-").replace("-", "_") == name:
            return value
    return None


# -- the client -----------------------------------------------------------------------------------
def rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def alignment_s(start: datetime, end: datetime) -> int:
    """The alignment period for a job that ran from `start` to `end`: 60 s, or a whole number of
    minutes that keeps a series within MAX_POINTS points."""
    seconds = max(0.0, (end - start).total_seconds())
    minutes = max(1, math.ceil(seconds / MAX_POINTS / 60))
    return max(MIN_ALIGNMENT_S, minutes * 60)


class MonitoringClient(ProjectApi):
    """Cloud Monitoring's `projects.timeSeries.list` for one project (read-only)."""

    SERVICE = "Cloud Monitoring"
    HOST = "monitoring.googleapis.com"

    def endpoint(self, settings: Settings) -> str:
        return settings.monitoring_url()

    def hint(self, err: ApiError) -> str | None:
        return _hint(err)

    @property
    def path(self) -> str:
        return f"v3/projects/{self.project}/timeSeries"

    def params(self, metric: str, job_id: str, start: datetime, end: datetime) -> dict[str, str]:
        """The query of one metric's series for the job `job_id` from `start` to `end`."""
        return {
            "filter": (
                f'metric.type = "{metric}" AND resource.type = "{RESOURCE}" '
                f'AND resource.labels.job_id = "{job_id}"'
            ),
            "interval.startTime": rfc3339(start),
            "interval.endTime": rfc3339(end),
            "aggregation.alignmentPeriod": f"{alignment_s(start, end)}s",
            "aggregation.perSeriesAligner": "ALIGN_MEAN",
            "view": "FULL",
        }

    def series(self, metric: str, job_id: str, start: datetime, end: datetime) -> list[dict[str, Any]]:
        """Every series of `metric` for the job, through the one pager."""
        return self.api.list(
            "timeSeries.list",
            self.path,
            items="timeSeries",
            params=self.params(metric, job_id, start, end),
            page_size=PAGE_SIZE,
            max_pages=MAX_PAGES,
        )


def _hint(err: ApiError) -> str | None:
    if err.code == 403:
        return "reading Cloud Monitoring needs monitoring.timeSeries.list (role roles/monitoring.viewer)"
    return None


def _time(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def read(
    job: dict[str, Any],
    client: MonitoringClient,
    *,
    now: datetime | None = None,
    limits: Thresholds = THRESHOLDS,
) -> Utilization:
    """The utilization of the CustomJob `job` (its REST body, as fetched): each pool's figures
    over the job's start to its end (now, while it runs) and their verdicts. A job that has not
    started is read not at all (no series can exist yet)."""
    name = str(job.get("name") or "")
    job_id = name.rsplit("/", 1)[-1]
    state = str(job.get("state") or "")
    start, end = _time(job.get("startTime")), _time(job.get("endTime"))
    flags = trainer_flags(job)
    base = Utilization(name, job_id, state, job.get("startTime"), job.get("endTime"), flags=flags)
    if start is None:
        return replace(base, notes=("the job has not started: Vertex AI records utilization once it runs",))
    stop = end or now or datetime.now(timezone.utc)
    found = {what: client.series(metric, job_id, start, stop) for what, metric in METRICS.items()}
    pools = summarize(found)
    notes = list(sources(found))
    if not pools:
        notes.append(
            "no utilization series yet: Vertex AI samples every 60 s and shows a sample up to a few "
            "minutes later"
        )
    verdicts = tuple(verdict(p, flags, limits) for p in pools)
    return replace(base, pools=pools, verdicts=verdicts, notes=tuple(notes))
