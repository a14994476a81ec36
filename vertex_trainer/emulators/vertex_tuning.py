"""The fake Vertex AI hyperparameterTuningJobs (REST, v1), mounted in FakeVertex (`fake.tuning`).

- ``POST /v1/{parent}/hyperparameterTuningJobs``            create (HyperparameterTuningJob)
- ``GET  /v1/{parent}/hyperparameterTuningJobs``            list (``filter=labels.k="v"``, paging)
- ``GET  /v1/{parent}/hyperparameterTuningJobs/ID``         get
- ``POST /v1/{parent}/hyperparameterTuningJobs/ID:cancel``  cancel

Bodies are parsed strictly with the real ``aiplatform_v1.HyperparameterTuningJob`` and checked
as the service checks them (a study with metrics and parameters, trial counts, a trial job spec
with worker pools, grid search without DOUBLE parameters). Answers use enum names.

A job moves one step per GET: QUEUED, PENDING, then RUNNING; while it runs, every GET first ends
the trials that are ACTIVE (each gets its final measurement, or INFEASIBLE) and then starts new
ones, up to `parallelTrialCount` at a time and `maxTrialCount` in all. When all have ended the
job SUCCEEDED (FAILED when `maxFailedTrialCount` failures were seen, or every trial failed).
Trial parameters are chosen deterministically from the study spec (the grid in order for
GRID_SEARCH). A test controls the metric values with :meth:`TuningService.set_metrics` (a list,
one value per trial in order, None = the trial fails) or a function of (trial id, parameters).

With a `runner` plugged in (the sandbox's, vertex_trainer/sandbox/tuning.py) nothing is scripted:
the runner is handed every created job (``start(job)``) and every cancel (``cancel(name)``), runs
the trials for real and reports the job's state and trials with :meth:`TuningService.report`.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from vertex_trainer.emulators._http import Collection, collection_routes
from vertex_trainer.emulators.vertex_models import ServiceError, _parse, labels_filter, list_page

TERMINAL = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"})
START_SCRIPT = ("JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING")
TRIAL_ERROR = "The trial's CustomJob failed: the replica workerpool0-0 exited with a non-zero status of 1."

Metric = Callable[[str, dict[str, Any]], "float | None"]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def default_metric(trial_id: str, parameters: dict[str, Any]) -> float:
    """A deterministic, non-monotonic value per trial: 0.50, 0.78, 0.56, 0.84, ..."""
    return round(0.5 + 0.04 * ((int(trial_id) * 7) % 10), 4)


@dataclass
class _Tuning:
    data: dict[str, Any]
    pos: int = 0  # in START_SCRIPT, then the trials drive it
    grid: list[dict[str, Any]] = field(default_factory=list)  # GRID_SEARCH: every combination, in order


class TuningService(Collection):
    """The routes above over the tuning jobs of one FakeVertex; `route()` then the handler."""

    ROUTES = collection_routes("hyperparameterTuningJobs", "tuning")

    def __init__(self, lock: threading.RLock):
        super().__init__(lock)
        self.jobs: dict[str, _Tuning] = {}
        self._ids = itertools.count(6_000_000_000_000_000_001)
        self._job_ids = itertools.count(7_000_000_000_000_000_001)
        self._metric: Metric = default_metric
        self._values: list[float | None] | None = None

    # -- test controls -------------------------------------------------------------------------
    def set_metrics(self, values: list[float | None] | Metric) -> None:
        """Final measurements from now on: a list (trial 1 gets values[0], ...; None = that trial
        fails; past the end, the default), or a function (trial id, parameters) -> value|None."""
        with self._lock:
            if callable(values):
                self._metric, self._values = values, None
            else:
                self._metric, self._values = default_metric, list(values)

    def job(self, name: str) -> dict[str, Any]:
        """The stored job (a copy), as GET answers it without advancing it."""
        with self._lock:
            return dict(self.jobs[name].data)

    def add_job(
        self,
        body: dict[str, Any],
        *,
        parent: str = "projects/test-project/locations/us-central1",
        state: str | None = None,
    ) -> dict[str, Any]:
        """Store a job directly (as if created earlier)."""
        with self._lock:
            stored = self._create(parent, {}, body)
            if state:
                self.jobs[stored["name"]].data["state"] = state
                self.jobs[stored["name"]].pos = len(START_SCRIPT)
            return dict(self.jobs[stored["name"]].data)

    # -- handlers ------------------------------------------------------------------------------
    def _create(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        data = _parse("HyperparameterTuningJob", body)
        _check(data)
        for output_only in (
            "name",
            "state",
            "trials",
            "createTime",
            "startTime",
            "endTime",
            "updateTime",
            "error",
        ):
            data.pop(output_only, None)
        with self._lock:
            name = f"{parent}/hyperparameterTuningJobs/{next(self._ids)}"
            now = _now()
            data.update(name=name, createTime=now, updateTime=now, state=START_SCRIPT[0])
            job = _Tuning(data)
            if data["studySpec"].get("algorithm") == "GRID_SEARCH":
                job.grid = _grid(data["studySpec"]["parameters"])
            self.jobs[name] = job
            answer = copy.deepcopy(data)
            runner = self._claim(name)
        return self._hand_over(runner, answer)

    def report(
        self,
        name: str,
        *,
        state: str | None = None,
        trials: list[dict[str, Any]] | None = None,
        error: dict[str, Any] | None = None,
    ) -> bool:
        """For a runner: job `name`'s trials (all of them, as the service lists them) and state.
        An ended job stays as it is; a cancelling one only moves on to an end. False when ignored."""
        with self._lock:
            job = self.jobs.get(name)
            if job is None or job.data["state"] in TERMINAL:
                return False
            if trials is not None:
                job.data["trials"] = copy.deepcopy(trials)
                job.data["updateTime"] = _now()
            if state is not None and not (
                job.data["state"] == "JOB_STATE_CANCELLING" and state not in TERMINAL
            ):
                self._set_state(job, state, error)
            return True

    def _list(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        keep = labels_filter(query.get("filter") or "")
        with self._lock:
            found = [
                dict(j.data) for n, j in self.jobs.items() if n.startswith(parent + "/") and keep(j.data)
            ]
        return list_page(found, query, "hyperparameterTuningJobs", size=50)

    def _get(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            job = self.jobs.get(name)
            if job is None:
                raise ServiceError(404, f'The HyperparameterTuningJob "{name}" does not exist.')
            self._advance(job)
            return dict(job.data)

    def _cancel(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            job = self.jobs.get(name)
            if job is None:
                raise ServiceError(404, f'The HyperparameterTuningJob "{name}" does not exist.')
            if job.data["state"] in TERMINAL:
                raise ServiceError(
                    400,
                    f"Cannot cancel HyperparameterTuningJob {name} because it "
                    f"is already in state {job.data['state']}.",
                )
            if name in self._run_by_runner:  # CANCELLED once the runner has stopped the trials
                self._set_state(job, "JOB_STATE_CANCELLING")
                runner = self.runner
            else:
                runner = None
        if runner is not None:
            runner.cancel(name)
            return {}
        with self._lock:
            for trial in job.data.get("trials", []):
                if trial["state"] == "ACTIVE":
                    trial.update(state="INFEASIBLE", endTime=_now(), infeasibleReason="CANCELED")
            self._set_state(job, "JOB_STATE_CANCELLED", {"code": 1, "message": "CANCELED"})
            return {}

    # -- the study -----------------------------------------------------------------------------
    def _advance(self, job: _Tuning) -> None:
        data = job.data
        if data["state"] in TERMINAL or data["name"] in self._run_by_runner:
            return
        if job.pos < len(START_SCRIPT) - 1:
            job.pos += 1
            self._set_state(job, START_SCRIPT[job.pos])
            return
        trials = data.setdefault("trials", [])
        for trial in trials:
            if trial["state"] == "ACTIVE":
                self._end_trial(trial, data)
        failed = sum(t["state"] == "INFEASIBLE" for t in trials)
        limit = int(data.get("maxFailedTrialCount") or 0)
        if limit and failed >= limit:
            return self._set_state(
                job,
                "JOB_STATE_FAILED",
                {"code": 9, "message": f"{failed} trials failed, reaching maxFailedTrialCount {limit}."},
            )
        total = int(data["maxTrialCount"])
        if job.grid:
            total = min(total, len(job.grid))
        while len(trials) < total and sum(t["state"] == "ACTIVE" for t in trials) < int(
            data["parallelTrialCount"]
        ):
            trials.append(self._start_trial(job, len(trials) + 1))
        if all(t["state"] != "ACTIVE" for t in trials) and len(trials) >= total:
            if failed == len(trials):
                self._set_state(job, "JOB_STATE_FAILED", {"code": 9, "message": "All trials failed."})
            else:
                self._set_state(job, "JOB_STATE_SUCCEEDED")
        else:
            data["updateTime"] = _now()

    def _start_trial(self, job: _Tuning, number: int) -> dict[str, Any]:
        trial_id = str(number)
        if job.grid:
            values = job.grid[number - 1]
        else:
            values = {p["parameterId"]: _choose(p, number) for p in job.data["studySpec"]["parameters"]}
        parent = job.data["name"].split("/hyperparameterTuningJobs/")[0]
        return {
            "id": trial_id,
            "state": "ACTIVE",
            "startTime": _now(),
            "parameters": [{"parameterId": k, "value": v} for k, v in values.items()],
            "customJob": f"{parent}/customJobs/{next(self._job_ids)}",
        }

    def _end_trial(self, trial: dict[str, Any], data: dict[str, Any]) -> None:
        params = {p["parameterId"]: p["value"] for p in trial["parameters"]}
        index = int(trial["id"]) - 1
        if self._values is not None and index < len(self._values):
            value = self._values[index]
        else:
            value = self._metric(trial["id"], params)
        trial["endTime"] = _now()
        if value is None:
            trial.update(state="INFEASIBLE", infeasibleReason=TRIAL_ERROR)
            return
        metric_id = data["studySpec"]["metrics"][0]["metricId"]
        trial.update(
            state="SUCCEEDED",
            finalMeasurement={
                "stepCount": "100",
                "metrics": [{"metricId": metric_id, "value": float(value)}],
            },
        )

    def _set_state(self, job: _Tuning, state: str, error: dict[str, Any] | None = None) -> None:
        data = job.data
        now = _now()
        data.update(state=state, updateTime=now)
        if state == "JOB_STATE_RUNNING":
            data.setdefault("startTime", now)
        if state in TERMINAL:
            data["endTime"] = now
        if error:
            data["error"] = error


def _check(data: dict[str, Any]) -> None:
    """What the service refuses in a HyperparameterTuningJob (beyond the proto's own types)."""

    def bad(path: str, message: str = "Required field is not set.") -> ServiceError:
        return ServiceError(
            400, f"List of found errors:\t1.Field: hyperparameter_tuning_job.{path}; Message: {message}\t"
        )

    if not data.get("displayName"):
        raise bad("display_name")
    study = data.get("studySpec") or {}
    if not study.get("metrics"):
        raise bad("study_spec.metrics")
    if not study.get("parameters"):
        raise bad("study_spec.parameters")
    for key, path in (("maxTrialCount", "max_trial_count"), ("parallelTrialCount", "parallel_trial_count")):
        if int(data.get(key) or 0) <= 0:
            raise bad(path, "Must be greater than 0.")
    if not (data.get("trialJobSpec") or {}).get("workerPoolSpecs"):
        raise bad("trial_job_spec.worker_pool_specs")
    ids = set()
    for p in study["parameters"]:
        pid = p.get("parameterId", "")
        if not pid or re.search(r"\s", pid) or pid in ids:
            raise bad("study_spec.parameters.parameter_id", f"Invalid or repeated parameter id {pid!r}.")
        ids.add(pid)
        kinds = [
            k
            for k in ("doubleValueSpec", "integerValueSpec", "discreteValueSpec", "categoricalValueSpec")
            if k in p
        ]
        if len(kinds) != 1:
            raise bad("study_spec.parameters", f"Parameter {pid!r} needs exactly one value spec.")
        spec = p[kinds[0]]
        if kinds[0] in ("doubleValueSpec", "integerValueSpec"):
            low, high = float(spec.get("minValue", 0)), float(spec.get("maxValue", 0))
            if low > high:
                raise bad("study_spec.parameters", f"Parameter {pid!r}: min_value > max_value.")
            if p.get("scaleType") in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE") and low <= 0:
                raise bad("study_spec.parameters", f"Parameter {pid!r}: a log scale needs values > 0.")
        elif kinds[0] == "discreteValueSpec":
            values = [float(v) for v in spec.get("values") or []]
            if not values or any(b <= a for a, b in itertools.pairwise(values)):
                raise bad("study_spec.parameters", f"Parameter {pid!r}: discrete values must be increasing.")
        elif p.get("scaleType"):
            raise bad(
                "study_spec.parameters", f"Parameter {pid!r}: a categorical parameter takes no scale_type."
            )
        if study.get("algorithm") == "GRID_SEARCH" and kinds[0] == "doubleValueSpec":
            raise bad(
                "study_spec.algorithm",
                "To use grid search, all parameters must be INTEGER, CATEGORICAL, or DISCRETE.",
            )
    for key, value in (data.get("labels") or {}).items():
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key) or not re.fullmatch(r"[a-z0-9_-]{0,63}", value):
            raise ServiceError(
                400,
                f"Label '{key}={value}' is invalid: keys and values must be "
                "<= 63 lowercase letters, digits, '_' or '-'.",
            )


def _options(p: dict[str, Any]) -> list[Any]:
    """Every value of a gridable parameter, in order."""
    if "integerValueSpec" in p:
        s = p["integerValueSpec"]
        return list(range(int(s.get("minValue", 0)), int(s.get("maxValue", 0)) + 1))
    if "discreteValueSpec" in p:
        return [float(v) for v in p["discreteValueSpec"].get("values", [])]
    return list(p["categoricalValueSpec"].get("values", []))


def _grid(parameters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ids = [p["parameterId"] for p in parameters]
    return [
        dict(zip(ids, combo, strict=True)) for combo in itertools.product(*(_options(p) for p in parameters))
    ]


def _choose(p: dict[str, Any], number: int) -> Any:
    """A deterministic value for trial `number` (a low-discrepancy walk through the space)."""
    frac = (number * 0.6180339887498949) % 1.0
    if "doubleValueSpec" in p:
        s = p["doubleValueSpec"]  # proto JSON leaves out zeros
        low, high = float(s.get("minValue", 0.0)), float(s.get("maxValue", 0.0))
        if p.get("scaleType") == "UNIT_LOG_SCALE" and low > 0:
            return round(math.exp(math.log(low) + frac * (math.log(high) - math.log(low))), 6)
        return round(low + frac * (high - low), 6)
    options = _options(p)
    return options[(number - 1) % len(options)]
