"""Hyperparameter tuning (docs/contract.md section 10): a spec with `tune:` becomes a Vertex AI
HyperparameterTuningJob whose trials each run the rendered CustomJob, or the same trials here.

The submit plan (api/plan.py) renders the CustomJob once: the tuning job's trial job spec is
that CustomJob's jobSpec (render.tuning_job), and each local trial (`plan_trials`, checked by
`check_trials` when the plan is made) runs that very body through `run_trials`. On Vertex AI the
service picks the parameters and appends `--<parameter id>=<value>` to the container's args; a
local search does the same with the algorithm's grid or seeded random draws, `parallel_trials`
at a time, each trial a `run_local` run with its own output directory (`<output_dir>/<trial>`, as
Vertex AI lays trials out) and its own cloudml-hypertune metric file, read back when it ends.

A job without `trainer:` (your own code, spec/tune.py `own_args`) tunes its own arguments: the
trials append `--NAME=VALUE` with the name as written, the metric is whatever the code reports to
its CLOUD_ML_HP_METRIC_FILE (cloudml-hypertune's JSON lines), and nothing but the spec's own
rules checks the values (the code's parser is its own).
"""

from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import io
import itertools
import json
import math
import os
import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, cast

from rich.console import Console

from vertex_trainer import lazy, render
from vertex_trainer.contract import SUCCEEDED, LocalRun
from vertex_trainer.errors import JobFailed, SpecError
from vertex_trainer.local import layout, run_local
from vertex_trainer.local.display import default_console
from vertex_trainer.local.run import (
    CANCELLED,
    FAILED,
    LocalResult,
    hold_records,
    resolve_output,
    save_run_record,
)
from vertex_trainer.local.supervisor import Interrupted, InterruptGuard
from vertex_trainer.log import Log
from vertex_trainer.settings import Settings
from vertex_trainer.spec import JobSpec, TrainerArgs, check_trainer_flags
from vertex_trainer.spec.tune import Search, TuneSpec, category, grid_warning, own_args
from vertex_trainer.vertex.hptuning import INFEASIBLE, Trial, best_trial
from vertex_trainer.vertex.hptuning import SUCCEEDED as TRIAL_SUCCEEDED

__all__ = [
    "LocalTuning",
    "check_trials",
    "plan_trials",
    "read_reported",
    "run_trials",
    "trial_args",
]

METRIC_FILE = "hypertune/output.metrics"  # cloudml-hypertune's own layout, under each trial's output


# -- the search, as the service would run it ------------------------------------------------------


def plan_trials(spec: JobSpec | Search) -> list[dict[str, Any]]:
    """The parameters of each local trial, by trainer field, in order.

    grid: every combination in order (integer ranges step by 1), at most max_trials;
    random and auto: max_trials seeded draws (seed: trainer.seed, else 0) honouring each scale,
    repeats avoided while the space allows. (auto on Vertex AI is its own Bayesian search.)"""
    search = spec if isinstance(spec, Search) else Search.of(spec)
    tune = search.tune
    names = list(tune.parameters)
    if tune.algorithm == "grid":
        options = [_options(search, name) for name in names]
        combos = itertools.islice(itertools.product(*options), tune.max_trials)
        return [dict(zip(names, combo, strict=True)) for combo in combos]
    rng = random.Random(search.seed)
    planned: list[dict[str, Any]] = []
    seen: set[str] = set()
    for _ in range(tune.max_trials):
        for _attempt in range(100):
            values = {name: _draw(search, name, rng) for name in names}
            if json.dumps(values, sort_keys=True) not in seen:
                break
        seen.add(json.dumps(values, sort_keys=True))
        planned.append(values)
    return planned


def _tune(spec: JobSpec) -> TuneSpec:
    """The spec's tune: block (everything here is for a tune: spec)."""
    if spec.tune is None:
        raise ValueError(f"{spec.name}: not a tuning spec (no tune: block)")
    return spec.tune


def _trainer(spec: JobSpec) -> TrainerArgs:
    """The spec's trainer: block (a tuning study runs the bundled trainer)."""
    if spec.trainer is None:
        raise ValueError(f"{spec.name}: a tuning study runs the bundled trainer (no trainer: block)")
    return spec.trainer


def _field_type(name: str) -> type:
    annotation = TrainerArgs.model_fields[name].annotation
    args = getattr(annotation, "__args__", ())
    return int if int in (annotation, *args) else float


def _options(search: Search, name: str) -> list:
    """Every value of a grid parameter (integer, discrete or categorical), in order."""
    p, kind = search.tune.parameters[name], search.kind(name)
    if kind == "integer":
        low, high = p.bounds
        return list(range(int(low), int(high) + 1))
    if kind == "discrete":
        values = sorted(float(v) for v in p.listed)
        # Whole numbers as integers: a trainer field that is one, or (your own code's) a list of
        # whole numbers, as a cloud trial's parameters are read back (vertex/hptuning.py).
        whole = _field_type(name) is int if not search.own_args else all(v.is_integer() for v in values)
        return [int(v) for v in values] if whole else values
    return [category(v) for v in p.listed]


def _draw(search: Search, name: str, rng: random.Random) -> Any:
    p, kind = search.tune.parameters[name], search.kind(name)
    if kind in ("discrete", "categorical"):
        return rng.choice(_options(search, name))
    low, high = (float(b) for b in p.bounds)
    if p.scale == "log":
        x = math.exp(rng.uniform(math.log(low), math.log(high)))
    elif p.scale == "reverse_log":  # dense near max: mirror a log draw
        x = high + low - math.exp(rng.uniform(math.log(low), math.log(high)))
    else:
        x = rng.uniform(low, high)
    if kind == "integer":
        return min(int(high), max(int(low), round(x)))
    return float(f"{x:.6g}")


def trial_args(spec: JobSpec | Search, values: dict[str, Any]) -> list[str]:
    """The flags Vertex AI appends to a trial's args: `--<parameter id>=<value>`, DOUBLE and
    DISCRETE values as doubles ("256.0", which the trainer reads as 256), INTEGER as integers,
    CATEGORICAL as the category's text. The id is the trainer's flag spelling, or your code's
    argument name as written (spec/tune.py parameter_id)."""
    search = spec if isinstance(spec, Search) else Search.of(spec)
    args = []
    for name, value in values.items():
        kind = search.kind(name)
        if kind == "integer":
            text = str(int(value))
        elif kind in ("double", "discrete"):
            text = repr(float(value))
        else:
            text = category(value)
        args.append(f"--{search.parameter_id(name)}={text}")
    return args


def check_trials(spec: JobSpec, planned: list[dict[str, Any]]) -> None:
    """Each local trial's args must pass the trainer's own parser (exit 2 before any trial).
    Your own code's arguments are its parser's: the spec's rules (spec/tune.py) are all we check."""
    if own_args(spec):
        return
    base = _trainer(spec).model_dump()
    for i, values in enumerate(planned, 1):
        try:
            trainer = TrainerArgs.model_validate({**base, **values})
            check_trainer_flags(spec.model_copy(update={"trainer": trainer}))
        except SpecError as e:
            raise SpecError(
                "tune.parameters",
                f"trial {i} ({' '.join(trial_args(spec, values))}): {e.message}",
                has_value=False,
                hint=e.hint,
            ) from None
        except Exception as e:
            raise SpecError(
                "tune.parameters", f"trial {i} ({' '.join(trial_args(spec, values))}): {e}", has_value=False
            ) from None


# -- local trials ----------------------------------------------------------------------------------


@dataclass
class LocalTuning(LocalRun):
    """A tuning study run on this machine by ``submit(spec, local=True)``: `trials()`,
    `best_trial()`, and each trial's `LocalResult` in `results`. A Handle (api/handles.py)
    whose study has ended when `submit` returns (contract.LocalRun), so `refresh`, `wait` and
    `cancel` have nothing to ask."""

    name: str
    state: str
    output_dir: str
    goal: str
    metric_id: str
    image: str | None
    idempotency_key: str
    found: list[Trial] = field(default_factory=list)
    results: dict[str, LocalResult] = field(default_factory=dict)
    elapsed_s: float = 0.0
    adopted: bool = False
    console_url: None = None

    def trials(self) -> list[Trial]:
        return list(self.found)

    def wait(self, timeout: float | None = None, *, check: bool = True) -> LocalTuning:
        """The study has ended: only the check (`timeout` is unused); raises JobFailed (exit 1)
        with `check` unless it SUCCEEDED. Returns: self."""
        if check and not self.succeeded:
            raise JobFailed(self.failure_message())
        return self

    def best_trial(self) -> Trial | None:
        return best_trial(self.found, self.goal)

    def failure_message(self) -> str:
        failed = [t for t in self.found if t.state == INFEASIBLE]
        text = f"local tuning {self.name} ended {self.state.removeprefix('JOB_STATE_')}"
        if self.state == CANCELLED:
            return text + f" (interrupted; {len(self.found) - len(failed)} trial(s) had ended)"
        if failed:
            text += f": {len(failed)} of {len(self.found)} trials failed"
            first = failed[0]
            tail = self.results.get(first.id)
            text += f" (trial {first.id}: {first.error})"
            if tail is not None and tail.log_tail:
                text += "\n" + "\n".join(tail.log_tail[-10:])
        return text

    def to_dict(self) -> dict:
        best = self.best_trial()
        result = self.results.get(best.id) if best else None
        return {
            **self.submit_object(self.output_dir, result.metrics if result else None),
            "trials": [t.to_dict() for t in self.found],
            "best_trial": best.to_dict() if best else None,
        }


def run_trials(
    spec: JobSpec,
    job: dict,
    *,
    key: str,
    image: str | None,
    settings: Settings,
    console: Any = None,
    wait: bool = True,
    log: Log | None = None,
    planned: list[dict[str, Any]] | None = None,
    run: str | None = None,
    adopt: bool = False,
) -> LocalTuning:
    """Run the study's trials here, `parallel_trials` at a time; returns when all have ended
    (or the failures reached max_failed_trials, or the user interrupted). The study runs in its
    own folder (the job's baseOutputDirectory, or <tmp>/vertex-trainer/<name>/<run>), each trial
    in <folder>/<trial id>/ as on Vertex AI; the study's records go beside the folder. `adopt`:
    a study of that run that SUCCEEDED here is returned as it ended, `adopted`, and no trial runs
    again (the same idempotency key again); a study whose records another process holds (the
    same key running) is refused (UserError) before anything starts."""
    # Each trial's metric is read from its report, as Vertex AI does: the bundled trainer reports
    # with cloudml-hypertune; your own code reports as it likes (its requirements are its own).
    if not own_args(spec) and not lazy.available("hypertune"):
        raise lazy.missing("hypertune")
    tune = _tune(spec)
    planned = planned if planned is not None else plan_trials(spec)
    name = str(job.get("displayName") or spec.name)
    base = resolve_output(job, name, run or key)
    record = layout.record_dir(base)
    if adopt and record is not None and os.path.isdir(base) and os.listdir(base):  # (removed, emptied: rerun)
        earlier = _adopted_study(record, run or base.rsplit("/", 1)[-1], base, tune, key=key, image=image)
        if earlier is not None:
            _Output(console).note(
                f"{earlier.output_dir}: this submission (its idempotency key) already SUCCEEDED here: "
                "adopted, no trial ran again (to tune again: another --idempotency-key)",
                style="",
            )
            return earlier
    # Held for the whole study: the same key in another process is refused, not run into it.
    held = hold_records(record, run or base.rsplit("/", 1)[-1], base) if record is not None else None
    try:
        if record is not None:
            os.makedirs(base, exist_ok=True)
            save_run_record(
                record,
                render.tuning_job(spec, job),
                spec,
                key,
                run=run or base.rsplit("/", 1)[-1],
                run_dir=base,
                body_file="hyperparameter_tuning_job.json",
            )
            layout.link_latest(base)  # <output_dir>/latest: this study
        out = _Output(console)
        out.note(
            f"Tuning {name} locally: {len(planned)} trial(s), {tune.parallel_trials} at a time, "
            f"{tune.goal} {tune.metric}; output {base}"
        )
        if grid := grid_warning(spec):
            out.note(grid, style="yellow")
        study = LocalTuning(
            name=name,
            state=SUCCEEDED,
            output_dir=base,
            goal=tune.goal,
            metric_id=tune.metric,
            image=image,
            idempotency_key=key,
        )
        cancel = threading.Event()
        started = time.monotonic()
        pending = list(enumerate(planned, 1))
        running: dict[concurrent.futures.Future, str] = {}
        failures = 0
        # The trials run off the main thread, where no signal reaches them: Ctrl-C, SIGTERM and SIGHUP
        # raise here and stop them through `cancel` (each trial then ends CANCELLED, cleaned up).
        with (
            concurrent.futures.ThreadPoolExecutor(tune.parallel_trials, thread_name_prefix="trial") as pool,
            InterruptGuard() as guard,
        ):
            try:
                while pending or running:
                    limit_hit = tune.max_failed_trials and failures >= tune.max_failed_trials
                    while (
                        pending
                        and len(running) < tune.parallel_trials
                        and not limit_hit
                        and not cancel.is_set()
                    ):
                        number, values = pending.pop(0)
                        trial_id = str(number)
                        out.note(f"trial {trial_id} started: {' '.join(trial_args(spec, values))}")
                        future = pool.submit(
                            _run_trial,
                            spec,
                            job,
                            base,
                            trial_id,
                            values,
                            settings=settings,
                            console=out.for_trial(trial_id),
                            cancel=cancel,
                        )
                        running[future] = trial_id
                    if not running:
                        break
                    done, _ = concurrent.futures.wait(
                        running, timeout=0.5, return_when=concurrent.futures.FIRST_COMPLETED
                    )
                    for future in done:
                        running.pop(future)
                        trial, result = future.result()
                        study.found.append(trial)
                        study.results[trial.id] = result
                        failures += trial.state == INFEASIBLE
                        out.trial_ended(trial, tune.metric, result)
            except (Interrupted, KeyboardInterrupt):
                guard.disarm()
                cancel.set()
                out.note("Interrupted: stopping the running trials")
                for future in concurrent.futures.as_completed(list(running)):
                    trial, result = future.result()
                    study.found.append(trial)
                    study.results[trial.id] = result
                study.state = CANCELLED
            except BaseException:
                cancel.set()  # a trial could not start (e.g. no route to gs://): stop the others too
                raise
        study.found.sort(key=lambda t: int(t.id))
        study.elapsed_s = round(time.monotonic() - started, 3)
        if study.state != CANCELLED:
            succeeded = [t for t in study.found if t.state == TRIAL_SUCCEEDED]
            over = bool(tune.max_failed_trials) and failures >= tune.max_failed_trials
            study.state = FAILED if over or not succeeded else SUCCEEDED
        if record is not None:
            _save_trials(record, study)
        out.summary(study)
        return study
    finally:
        if held is not None:
            os.close(held)


def _run_trial(
    spec: JobSpec,
    job: dict,
    base: str,
    trial_id: str,
    values: dict[str, Any],
    *,
    settings: Settings,
    console: Any,
    cancel: threading.Event,
) -> tuple[Trial, LocalResult]:
    """One trial: the CustomJob with the trial's flags appended and its own output directory,
    run by run_local; its metric read from its own cloudml-hypertune file."""
    trial_base = f"{base}/{trial_id}"
    if trial_base.startswith("gs://"):
        metric_file = os.path.join(tempfile.mkdtemp(prefix="vertex-trainer-trial-"), METRIC_FILE)
    else:
        metric_file = os.path.join(trial_base, METRIC_FILE)
    environ = {**settings.environ, "CLOUD_ML_HP_METRIC_FILE": metric_file, "CLOUD_ML_TRIAL_ID": trial_id}
    body = trial_job(job, trial_id, trial_base, trial_args(spec, values))
    result = run_local(
        body,
        spec,
        settings=dataclasses.replace(settings, environ=environ),
        wait=False,
        console=console,
        cancel=cancel,
    )
    metric = read_reported(metric_file, _tune(spec).metric) if result.state == SUCCEEDED else None
    if result.state == SUCCEEDED and metric is not None:
        return Trial(trial_id, TRIAL_SUCCEEDED, values, metric, output_dir=trial_base), result
    if result.state == SUCCEEDED and own_args(spec):
        error = (
            f"the trial reported no {_tune(spec).metric!r}: your code reports it with cloudml-hypertune "
            "(report_hyperparameter_tuning_metric), which writes to $CLOUD_ML_HP_METRIC_FILE"
        )
    elif result.state == SUCCEEDED:
        error = (
            f"the trial reported no {_tune(spec).metric!r} (no eval_data, or cloudml-hypertune "
            "missing in the trainer's environment?)"
        )
    elif result.state == CANCELLED:
        error = "cancelled"
    else:
        error = f"{result.failed_replica or 'a replica'} exited with code {result.failed_exit_code}"
    return Trial(trial_id, INFEASIBLE, values, None, output_dir=trial_base, error=error), result


def trial_job(job: dict, trial_id: str, output_dir: str, args: list[str]) -> dict:
    """The CustomJob one trial runs: `job` with the trial's flags after every pool's args and
    its base output directory `output_dir`."""
    body = copy.deepcopy(job)
    body["displayName"] = f"{job.get('displayName', 'job')}-trial-{trial_id}"
    spec = body["jobSpec"]
    spec["baseOutputDirectory"] = {"outputUriPrefix": output_dir}
    for pool in spec.get("workerPoolSpecs") or []:
        for key in ("containerSpec", "pythonPackageSpec"):
            if key in (pool or {}):
                pool[key]["args"] = list(pool[key].get("args") or []) + list(args)
    return body


def read_reported(path: str, metric: str) -> float | None:
    """The last value cloudml-hypertune wrote for `metric` in `path` (one JSON object per line),
    or None."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
    except OSError:
        return None
    for line in reversed(lines):
        try:
            value = json.loads(line).get(metric)
            if value is not None:
                return float(value)
        except (ValueError, AttributeError):
            continue
    return None


def _adopted_study(
    record: str, run: str, base: str, tune: TuneSpec, *, key: str, image: str | None
) -> LocalTuning | None:
    """The study `run` as it ended when its records say it SUCCEEDED (run.json names it,
    trials.json says so), `adopted`; else None."""
    try:
        with open(os.path.join(record, layout.RUN_FILE), encoding="utf-8") as f:
            kept = json.load(f)
        with open(os.path.join(record, "trials.json"), encoding="utf-8") as f:
            saved = json.load(f)
        if kept.get("run") != run or saved.get("state") != SUCCEEDED:
            return None
        found = [
            Trial(
                str(t["id"]),
                str(t["state"]),
                dict(t.get("parameters") or {}),
                None if t.get("metric") is None else float(t["metric"]),
                output_dir=t.get("output_dir"),
                error=t.get("error"),
            )
            for t in saved.get("trials") or []
        ]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    study = LocalTuning(
        name=str(saved.get("name") or run),
        state=SUCCEEDED,
        output_dir=base,
        goal=tune.goal,
        metric_id=tune.metric,
        image=image,
        idempotency_key=key,
        found=found,
        adopted=True,
    )
    best = study.best_trial()
    if best is not None and best.output_dir:
        study.results[best.id] = LocalResult(
            name=study.name,
            state=SUCCEEDED,
            output_dir=best.output_dir,
            model_dir=f"{best.output_dir}/model/",
            metrics=saved.get("metrics") if isinstance(saved.get("metrics"), dict) else None,
            exit_code=0,
        )
    return study


def _save_trials(record: str, study: LocalTuning) -> None:
    os.makedirs(record, exist_ok=True)  # (kept even if a trial's code removed what it could reach)
    with open(os.path.join(record, "trials.json"), "w", encoding="utf-8") as f:
        json.dump(study.to_dict(), f, indent=2)
        f.write("\n")


class _Output:
    """What a local study shows (stderr): its own notes, and each trial's run prefixed with
    `trial N |` (parallel trials interleave)."""

    def __init__(self, console: Any):
        self.console = console or default_console()
        self.lock = threading.Lock()

    def note(self, text: str, style: str = "bold") -> None:
        with self.lock:
            self.console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)

    def for_trial(self, trial_id: str) -> Any:
        return Console(
            # (a TextIOBase, not typing.IO: rich only writes, flushes and asks isatty)
            file=cast("IO[str]", _Prefixed(self.console.file, f"trial {trial_id} | ", self.lock)),
            highlight=False,
            no_color=True,
            width=max(self.console.width, 120),
        )

    def trial_ended(self, trial: Trial, metric: str, result: LocalResult) -> None:
        shown = f"{metric}={trial.metric:.4f}" if trial.metric is not None else f"no {metric}"
        params = " ".join(f"{k}={v}" for k, v in trial.parameters.items())
        style = "bold green" if trial.state == TRIAL_SUCCEEDED else "bold red"
        extra = f" ({trial.error})" if trial.error else ""
        self.note(
            f"trial {trial.id} {trial.state} in {result.elapsed_s:.1f}s: {shown}  {params}{extra}",
            style=style,
        )

    def summary(self, study: LocalTuning) -> None:
        best = study.best_trial()
        self.note(
            f"{study.state.removeprefix('JOB_STATE_')} in {study.elapsed_s:.1f}s: {len(study.found)} trial(s)"
            + (f", best trial {best.id} ({study.metric_id}={best.metric:.4f})" if best else ""),
            style="bold green" if study.state == SUCCEEDED else "bold red",
        )


class _Prefixed(io.TextIOBase):
    """A text stream that puts `prefix` before every line it passes on (whole lines, locked)."""

    def __init__(self, out: Any, prefix: str, lock: threading.Lock):
        self.out, self.prefix, self.lock = out, prefix, lock
        self.partial = ""

    def write(self, text: str) -> int:
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        if lines:
            with self.lock:
                self.out.write("".join(f"{self.prefix}{line}\n" for line in lines))
                self.out.flush()
        return len(text)

    def flush(self) -> None:
        with self.lock:
            self.out.flush()

    def isatty(self) -> bool:
        return False
