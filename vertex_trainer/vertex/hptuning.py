"""Vertex AI HyperparameterTuningJobs: create (idempotent), get, list, cancel, and `TuningJob`
to follow one, with its trials and the best trial (docs/contract.md section 10).

The JobService wire of `customJobs`, for the `hyperparameterTuningJobs` collection: the same
client (`TuningClient` is a `JobsClient` on another collection), the same idempotent create
(`jobs.create_idempotent`: the key label, list before create, adopt after a lost answer) and the
same `Job` to follow, plus the trials. The request body is `render.tuning_job`, which the tests
parse with `aiplatform_v1.HyperparameterTuningJob`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import IO, Any

from vertex_trainer.gcp.http import ApiError
from vertex_trainer.redact import shown_name, terminal_safe
from vertex_trainer.settings import PollPolicy
from vertex_trainer.spec.tune import PARAMS_LABEL, VERBATIM
from vertex_trainer.vertex.custom_jobs import Job, JobsClient, create_idempotent
from vertex_trainer.vertex.names import job_name
from vertex_trainer.vertex.stateful import StatePrinter

__all__ = [
    "Trial",
    "TuningClient",
    "TuningJob",
    "best_trial",
    "create_idempotent",
    "parse_trial",
    "tuning_job_name",
    "verbatim_ids",
]

COLLECTION = "hyperparameterTuningJobs"
# aiplatform_v1.Trial.State (the REST transport may answer with numbers).
_TRIAL_STATES = {
    0: "STATE_UNSPECIFIED",
    1: "REQUESTED",
    2: "ACTIVE",
    3: "STOPPING",
    4: "SUCCEEDED",
    5: "INFEASIBLE",
}
SUCCEEDED, INFEASIBLE = "SUCCEEDED", "INFEASIBLE"
TRIAL_ENDED = frozenset({SUCCEEDED, INFEASIBLE})


class TuningClient(JobsClient):
    """JobService's hyperparameterTuningJobs over REST for one project and region."""

    collection = COLLECTION

    def _hint(self, op: str, err: ApiError) -> str | None:
        if err.code == 404 and op in ("get", "cancel"):
            return (
                f"no such hyperparameter tuning job in project {self.project}, region "
                f"{self.region}: check the job name and --project/--region"
            )
        return super()._hint(op, err)


def tuning_job_name(job: str, project: str | None = None, region: str | None = None) -> str:
    """A full resource name from a resource name, or a numeric id plus project and region."""
    return job_name(job, project, region, collection=COLLECTION, what="hyperparameter tuning job")


# -- trials ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trial:
    """One trial: its parameters (keyed by trainer field, or by your code's argument name) and
    the metric it reported (None when it reported none). `custom_job` is the trial's CustomJob on
    Vertex AI; `output_dir` a local trial's outputs; `error` why it is INFEASIBLE."""

    id: str
    state: str
    parameters: dict[str, Any]
    metric: float | None
    custom_job: str | None = None
    output_dir: str | None = None
    error: str | None = None

    @property
    def ended(self) -> bool:
        return self.state in TRIAL_ENDED

    def to_dict(self) -> dict[str, Any]:
        """The docs/contract.md section 10 trial object (plus where it ran, and its error, when known)."""
        out: dict[str, Any] = {
            "id": self.id,
            "state": self.state,
            "parameters": dict(self.parameters),
            "metric": self.metric,
        }
        for key in ("custom_job", "output_dir", "error"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out


def _field(parameter_id: str, verbatim: bool = False) -> str:
    """The trainer field of a parameter id (render.parameter_id spells fields as flags); with
    `verbatim` (a job without trainer: tunes its code's own arguments) the id itself."""
    return parameter_id if verbatim else parameter_id.replace("-", "_")


def _trial_line(trial: Trial, metric: str) -> str:
    """A trial as `--wait` shows it when it ends (the job's words escaped: anyone's in the project)."""
    name = shown_name(metric or "metric")
    value = f"{name}={trial.metric:.4f}" if trial.metric is not None else f"no {name}"
    return f"{time.strftime('%H:%M:%S')}  trial {shown_name(trial.id)} {shown_name(trial.state)}: {value}" + (
        f"  ({terminal_safe(trial.error)})" if trial.error else ""
    )


def verbatim_ids(data: dict[str, Any]) -> bool:
    """True when a tuning job's parameter ids are its code's own argument names (the label
    render.tuning_job puts on a job without trainer:), not the bundled trainer's flags."""
    return (data.get("labels") or {}).get(PARAMS_LABEL) == VERBATIM


def _integral_ids(study_spec: dict[str, Any]) -> set[str]:
    """Parameter ids whose values are whole numbers (INTEGER, or DISCRETE of whole numbers)."""
    out = set()
    for p in study_spec.get("parameters") or []:
        discrete = (p.get("discreteValueSpec") or {}).get("values")
        if "integerValueSpec" in p or (discrete and all(float(v).is_integer() for v in discrete)):
            out.add(p.get("parameterId", ""))
    return out


def parse_trial(
    data: dict[str, Any], metric_id: str, integral: Collection[str] = frozenset(), verbatim: bool = False
) -> Trial:
    """A Trial from its REST form (aiplatform_v1.Trial as JSON); its parameters keyed by trainer
    field, or (`verbatim`) by parameter id."""
    state = data.get("state", "STATE_UNSPECIFIED")
    if isinstance(state, int) or (isinstance(state, str) and state.isdigit()):
        state = _TRIAL_STATES.get(int(state), str(state))
    parameters: dict[str, Any] = {}
    for p in data.get("parameters") or []:
        pid, value = p.get("parameterId", ""), p.get("value")
        if pid in integral and isinstance(value, (int, float)) and float(value).is_integer():
            value = int(value)
        parameters[_field(pid, verbatim)] = value
    metric = None
    for m in (data.get("finalMeasurement") or {}).get("metrics") or []:
        if m.get("metricId") == metric_id and m.get("value") is not None:
            metric = float(m["value"])
    return Trial(
        id=str(data.get("id", "")),
        state=state,
        parameters=parameters,
        metric=metric,
        custom_job=data.get("customJob") or None,
        error=data.get("infeasibleReason") or None,
    )


def best_trial(trials: list[Trial], goal: str) -> Trial | None:
    """The SUCCEEDED trial with the best metric (`goal`: maximize or minimize, any case); the
    earliest one on a tie; None when no trial has reported a metric."""
    done = [t for t in trials if t.state == SUCCEEDED and t.metric is not None]
    if not done:
        return None
    sign = -1.0 if goal.lower() == "maximize" else 1.0
    return min(done, key=lambda t: (sign * (t.metric or 0.0), _order(t.id)))  # each has a metric


def _order(trial_id: str) -> tuple[int, str]:
    return (int(trial_id), "") if trial_id.isdigit() else (1 << 62, trial_id)


# -- the job --------------------------------------------------------------------------------------


class TuningJob(Job):
    """A Vertex AI HyperparameterTuningJob: a `Job` (state, refresh, wait, cancel) with
    `trials()` and `best_trial()`. `TuningJob.get(name)` attaches to any tuning job."""

    client_class = TuningClient  # Job.get reads the collection and the client from here
    kind = "hyperparameter tuning job"
    console_page = "training/{id}"
    sdk_class = "HyperparameterTuningJob"
    _on_trial: Callable[[Trial], None] | None = None
    _reported: frozenset[str] = frozenset()

    @property
    def study_spec(self) -> dict[str, Any]:
        return self.data.get("studySpec") or {}

    @property
    def output_dir(self) -> str | None:
        """The tuning job's own folder (its trials' baseOutputDirectory; each trial writes to
        <folder>/<trial id>/, docs/contract.md section 15), or None without one."""
        spec = self.data.get("trialJobSpec") or {}
        base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
        return str(base).rstrip("/") if base else None

    @property
    def metric_id(self) -> str:
        metrics = self.study_spec.get("metrics") or [{}]
        return str(metrics[0].get("metricId", ""))

    @property
    def goal(self) -> str:
        """MAXIMIZE or MINIMIZE (the study's first metric)."""
        goal = (self.study_spec.get("metrics") or [{}])[0].get("goal", "MAXIMIZE")
        return {1: "MAXIMIZE", 2: "MINIMIZE"}.get(goal, str(goal)) if isinstance(goal, int) else str(goal)

    def trials(self, refresh: bool = False) -> list[Trial]:
        """The trials so far, in id order (`refresh=True` fetches the job first)."""
        if refresh:
            self.refresh()
        integral = _integral_ids(self.study_spec)
        verbatim = verbatim_ids(self.data)
        found = [parse_trial(t, self.metric_id, integral, verbatim) for t in self.data.get("trials") or []]
        return sorted(found, key=lambda t: _order(t.id))

    def best_trial(self, refresh: bool = False) -> Trial | None:
        """The trial with the best final measurement of the study's metric, or None."""
        return best_trial(self.trials(refresh), self.goal)

    def _refreshed(self) -> None:
        self._report_ended()

    def wait(
        self,
        timeout: float | None = None,
        *,
        on_state: Callable[[Job], None] | None = None,
        poll: PollPolicy | None = None,
        check: bool = True,
        on_trial: Callable[[Trial], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        quiet: bool = False,
        stream: IO[str] | None = None,
    ) -> TuningJob:
        """`Job.wait` (each state change shown unless `quiet` or `on_state`), and `on_trial(trial)`
        once for every trial as it ends (SUCCEEDED or INFEASIBLE), including those that had ended
        before the wait began; without `on_trial` (and unless `quiet` or `on_state`), a line per
        trial on `stream`, as `--wait` shows them (`trial 3 SUCCEEDED: accuracy=0.9120`)."""
        if on_state is None and not quiet:
            printer = StatePrinter(stream)
            on_state = printer
            if on_trial is None:

                def on_trial(trial: Trial) -> None:
                    printer.write(_trial_line(trial, self.metric_id))

        self._on_trial = on_trial
        try:
            self._report_ended()
            super().wait(timeout, on_state=on_state, poll=poll, check=check, sleep=sleep, quiet=quiet)
        finally:
            self._on_trial = None
        return self

    def _report_ended(self) -> None:
        if self._on_trial is None:
            return
        for trial in self.trials():
            if trial.ended and trial.id not in self._reported:
                self._reported = self._reported | {trial.id}
                self._on_trial(trial)

    # -- output --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The docs/contract.md section 2 submit object plus "trials" and "best_trial" (section 10)."""
        best = self.best_trial()
        return {
            **super().to_dict(),
            "trials": [t.to_dict() for t in self.trials()],
            "best_trial": best.to_dict() if best else None,
        }

    def describe(self) -> dict[str, Any]:
        """The status object, the study's metric and trial counts, the trials and the best."""
        best = self.best_trial()
        return {
            **super().describe(),
            "metric": self.metric_id,
            "goal": self.goal,
            "max_trials": self.data.get("maxTrialCount"),
            "parallel_trials": self.data.get("parallelTrialCount"),
            "trials": [t.to_dict() for t in self.trials()],
            "best_trial": best.to_dict() if best else None,
        }

    def __repr__(self) -> str:
        return (
            f"TuningJob(display_name={self.display_name!r}, id={self.id!r}, state={self.state}, "
            f"trials={len(self.data.get('trials') or [])})"
        )
