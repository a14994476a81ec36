"""HyperparameterTuningJobs whose trials really run: the fake tuning service's runner hook.

`TuningService.runner = TuningRunner(...)` hands every created job to `start(job)`. Its trials
are chosen by the search `submit --local` uses (tuning.tuning_run.plan_trials: the grid in order,
or seeded random draws, over the study's parameters read back as a `tune:` block; seed 0), and
each runs as Vertex AI runs a trial: a CustomJob made of the job's `trialJobSpec` with
`--<parameterId>=<value>` after every pool's args (tuning.tuning_run.trial_args and trial_job),
its base output directory `<baseOutputDirectory>/<trial id>`, and CLOUD_ML_TRIAL_ID and its own
CLOUD_ML_HP_METRIC_FILE in its environment. The CustomJob is created in this fake Vertex AI, so
it trains through the local runner like any other job (sandbox/job_runs.py), and the trainer reports
through cloudml-hypertune. `parallelTrialCount` trials run at a time, `maxTrialCount` in all.

A trial whose job succeeded with the metric reported is SUCCEEDED with its final measurement;
else INFEASIBLE with the reason. The job ends FAILED when `maxFailedTrialCount` trials failed or
every trial did, else SUCCEEDED; a cancel stops the running trials' jobs and ends CANCELLED.
"""

from __future__ import annotations

import concurrent.futures
import copy
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vertex_trainer import render
from vertex_trainer.contract import KEY_LABEL
from vertex_trainer.log import Log
from vertex_trainer.sandbox.runner import Run, Runner, call, internal_error
from vertex_trainer.sandbox.runner import now as _now

if TYPE_CHECKING:
    from vertex_trainer.spec.tune import Search

RUNNING, SUCCEEDED = "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"
FAILED, CANCELLED = "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"
_JOB_ENDS = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")


@dataclass(eq=False)
class _Study(Run):
    trials: list[dict[str, Any]] = field(default_factory=list)


class TuningRunner(Runner[_Study]):
    """The runner hook of TuningService (`start`, `cancel`); `service` is set by the sandbox.

    `vertex_url`: the fake Vertex AI, where each trial's CustomJob is created; `jobs`: the
    sandbox's JobRunner (to wait for a trial's job); `echo`: the study's notes; `token`: the
    sandbox's, which its Vertex AI requires."""

    kind = "tuning"

    def __init__(self, *, vertex_url: str, jobs: Any, echo: Log | None = None, token: str | None = None):
        super().__init__(echo=echo)
        self.token = token
        self.vertex_url = vertex_url.rstrip("/")
        self.jobs = jobs
        self.service: Any = None
        self._dir = tempfile.mkdtemp(prefix="vertex-trainer-trials-")

    def _new(self, body: dict[str, Any]) -> _Study:
        return _Study(body["name"], body)

    def _refuse(self, study: _Study) -> None:
        self._report(study, FAILED, {"code": 14, "message": "The sandbox is shutting down."})

    def _cancelled(self, study: _Study) -> None:
        """Cancel the running trials' CustomJobs (each trial ends once its job has)."""
        for trial in list(study.trials):
            if trial["state"] == "ACTIVE" and trial.get("customJob"):
                self._call("POST", f"/v1/{trial['customJob']}:cancel", {})

    def _stopped(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- one study --------------------------------------------------------------------------
    def _run(self, study: _Study) -> None:
        try:
            state, error = self._execute(study)
        except Exception as exc:
            state, error = FAILED, {"code": 13, "message": internal_error(exc)}
        self._report(study, state, error)
        self.echo(
            f"[tuning {study.job_id}] {state.replace('JOB_STATE_', '')}"  # (as the CLI says it)
            + (f": {error['message']}" if error else "")
        )

    def _execute(self, study: _Study) -> tuple[str, dict[str, Any] | None]:
        from vertex_trainer.tuning.tuning_run import plan_trials, trial_args
        from vertex_trainer.vertex.hptuning import verbatim_ids

        body = study.body
        metric = body["studySpec"]["metrics"][0]["metricId"]
        try:
            search = as_tune_spec(body["studySpec"], int(body["maxTrialCount"]), verbatim_ids(body))
            planned = plan_trials(search)
        except (KeyError, ValueError) as exc:
            return FAILED, {"code": 3, "message": f"The sandbox cannot search this study: {exc}"}
        self._report(study, RUNNING)
        parallel = max(1, int(body.get("parallelTrialCount") or 1))
        limit = int(body.get("maxFailedTrialCount") or 0)
        with concurrent.futures.ThreadPoolExecutor(parallel, thread_name_prefix="trial") as pool:
            pending: set[concurrent.futures.Future[Any]] = set()
            for number, values in enumerate(planned, 1):
                while len(pending) >= parallel:
                    _done, pending = concurrent.futures.wait(
                        pending, return_when=concurrent.futures.FIRST_COMPLETED
                    )
                if study.cancel.is_set() or (limit and self._failed(study) >= limit):
                    break
                trial = {
                    "id": str(number),
                    "state": "ACTIVE",
                    "startTime": _now(),
                    "parameters": [
                        {"parameterId": search.parameter_id(k), "value": v} for k, v in values.items()
                    ],
                }
                study.trials.append(trial)
                pending.add(pool.submit(self._trial, study, trial, trial_args(search, values), metric))
            concurrent.futures.wait(pending)
        if study.cancel.is_set():
            return CANCELLED, {"code": 1, "message": "CANCELED"}
        failed = self._failed(study)
        if limit and failed >= limit:
            return FAILED, {
                "code": 9,
                "message": f"{failed} trials failed, reaching maxFailedTrialCount {limit}.",
            }
        if failed == len(study.trials):
            return FAILED, {"code": 9, "message": "All trials failed."}
        return SUCCEEDED, None

    def _trial(self, study: _Study, trial: dict[str, Any], args: list[str], metric: str) -> None:
        from vertex_trainer.tuning.tuning_run import read_reported, trial_job

        spec = copy.deepcopy(study.body["trialJobSpec"])
        base = ((spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or "").rstrip("/")
        metric_file = os.path.join(self._dir, study.job_id, trial["id"], "hypertune", "output.metrics")
        os.makedirs(os.path.dirname(metric_file), exist_ok=True)
        job = trial_job(
            {"displayName": f"{study.body['displayName']}", "jobSpec": spec},
            trial["id"],
            f"{base}/{trial['id']}",
            args,
        )
        for pool in job["jobSpec"].get("workerPoolSpecs") or []:
            # What Vertex AI sets in a trial's containers (a python package's too: its env).
            container = (pool or {}).get("containerSpec") or (pool or {}).get("pythonPackageSpec")
            if container is not None:
                container["env"] = [
                    *container.get("env", []),
                    {"name": "CLOUD_ML_TRIAL_ID", "value": trial["id"]},
                    {"name": "CLOUD_ML_HP_METRIC_FILE", "value": metric_file},
                ]
        # The study's labels (its idempotency key among them) stay on the study: a trial's job
        # must not be mistaken for a run of the spec by a later submit's look-up.
        job["labels"] = {k: v for k, v in (study.body.get("labels") or {}).items() if k != KEY_LABEL}
        status, created = self._call(
            "POST", f"/v1/{study.name.split('/hyperparameterTuningJobs/')[0]}/customJobs", job
        )
        if status != 200:
            reason = ((created or {}).get("error") or {}).get("message") or f"HTTP {status}"
            return self._end(study, trial, None, f"The trial's CustomJob was refused: {reason}")
        trial["customJob"] = created["name"]
        self._report(study)
        self.echo(
            f"[tuning {study.job_id}] trial {trial['id']}: {' '.join(args)} "
            f"-> {created['name'].rsplit('/', 1)[-1]}"
        )
        self.jobs.wait(created["name"])
        _, ended = self._call("GET", f"/v1/{created['name']}")
        state = (ended or {}).get("state")
        value = read_reported(metric_file, metric) if state == "JOB_STATE_SUCCEEDED" else None
        if state == "JOB_STATE_SUCCEEDED" and value is None:
            reason = f"The trial reported no {metric!r} through cloudml-hypertune."
        elif state == "JOB_STATE_CANCELLED":
            reason = "CANCELED"
        elif state != "JOB_STATE_SUCCEEDED":
            error = ((ended or {}).get("error") or {}).get("message", state)
            reason = f"The trial's CustomJob failed: {error}"
        else:
            reason = None
        self._end(study, trial, value, reason)

    def _end(self, study: _Study, trial: dict[str, Any], value: float | None, reason: str | None) -> None:
        trial["endTime"] = _now()
        if reason is None and value is not None:  # reason None: a value was reported
            metric = study.body["studySpec"]["metrics"][0]["metricId"]
            trial.update(
                state="SUCCEEDED",
                finalMeasurement={"stepCount": "1", "metrics": [{"metricId": metric, "value": float(value)}]},
            )
        else:
            trial.update(state="INFEASIBLE", infeasibleReason=reason)
        self._report(study)

    def _failed(self, study: _Study) -> int:
        return sum(t["state"] == "INFEASIBLE" for t in study.trials)

    def _report(self, study: _Study, state: str | None = None, error: dict[str, Any] | None = None) -> None:
        if self.service is not None:
            self.service.report(study.name, state=state, trials=copy.deepcopy(study.trials), error=error)

    def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call(self.vertex_url, method, path, body, timeout=60, token=self.token)


def as_tune_spec(study: dict[str, Any], max_trials: int, verbatim: bool = False) -> Search:
    """The study's parameters as the `tune:` block the local search reads (the inverse of
    render.study_spec), as the Search `plan_trials` takes (seed 0). `verbatim`: the ids are a
    job's own argument names (no trainer:, vertex/hptuning.py verbatim_ids), kept as they are."""
    from vertex_trainer.spec.tune import Search, TuneSpec

    scales = {v: k for k, v in render.SCALES.items()}
    algorithms = {v: k for k, v in render.ALGORITHMS.items()}
    parameters: dict[str, dict[str, Any]] = {}
    for p in study["parameters"]:
        name = p["parameterId"] if verbatim else p["parameterId"].replace("-", "_")
        if "doubleValueSpec" in p:
            s = p["doubleValueSpec"]
            out: dict[str, Any] = {
                "min": float(s.get("minValue", 0)),
                "max": float(s.get("maxValue", 0)),
                "type": "double",
            }
        elif "integerValueSpec" in p:
            s = p["integerValueSpec"]
            out = {"min": int(s.get("minValue", 0)), "max": int(s.get("maxValue", 0)), "type": "integer"}
        elif "discreteValueSpec" in p:
            out = {"values": [float(v) for v in p["discreteValueSpec"].get("values", [])], "type": "discrete"}
        else:
            out = {"values": list(p["categoricalValueSpec"].get("values", [])), "type": "categorical"}
        if p.get("scaleType") in scales and out["type"] != "categorical":
            out["scale"] = scales[p["scaleType"]]
        parameters[name] = out
    goal = "minimize" if study["metrics"][0].get("goal") == "MINIMIZE" else "maximize"
    tune = TuneSpec(
        metric=study["metrics"][0]["metricId"],
        goal=goal,
        max_trials=max_trials,
        algorithm=algorithms.get(study.get("algorithm", ""), "auto"),
        parameters=parameters,
    )
    return Search("sandbox-study", tune, own_args=verbatim, seed=0)
