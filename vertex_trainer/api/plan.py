"""The submit plan (docs/contract.md sections 2, 8, 10 and 12): everything `submit` will do, as
one frozen value made before anything is built, sent or run.

`plan_submit(spec, options, ...)` makes every check once, for every kind of job (a custom job, a
fallback plan, a tuning job, a pipeline run, a run here, a local tuning study): the spec's
checks (`check`), the deploy flag, the budget over the whole plan (a tuning job's worst case is
its trials'), the warnings, the region table, a local study's trials. It plans the artifact (no
build: the build is an execution step), renders each attempt's CustomJob once (and the tuning
job around it), and holds the requests each would send and the deploy requests. A pipeline run
(`pipeline submit`) holds its PipelineJob's request (`PipelinePlan`: the run id its key gives,
the pipeline root, the training step's CustomJob); the pipeline is compiled from them when the
request is first read (a dry run), or by the executor only when no run has the id yet.
`submit --dry-run` and `pipeline submit --dry-run` print the plan, `validate` shows it, and the
executors (execute.py) run it: nothing downstream renders again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from vertex_trainer import automation, preflight, pricing, render
from vertex_trainer.api.core import check, require_spec, settings_from_env
from vertex_trainer.api.deploy import deploy as plan_deploy
from vertex_trainer.api.package import artifact_for, local_tensorflow_note, package_step
from vertex_trainer.api.results import DryRun
from vertex_trainer.capacity import availability, fallback
from vertex_trainer.contract import MAX_USER_LABELS, RESUMES_LABEL, Artifact, run_name
from vertex_trainer.cost import estimate as cost
from vertex_trainer.cost.budget import enforce_budget
from vertex_trainer.errors import UserError
from vertex_trainer.local.layout import resumed_run
from vertex_trainer.log import Log, silent
from vertex_trainer.settings import Settings
from vertex_trainer.spec import scaling
from vertex_trainer.spec.attempts import PlannedAttempt
from vertex_trainer.spec.attempts import attempts as plan_of
from vertex_trainer.vertex.custom_jobs import JobsClient, check_key, new_key
from vertex_trainer.vertex.tensorboards import FindOrCreate, TensorboardsClient

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.capacity.availability import QuotaCheck
    from vertex_trainer.cost.estimate import Estimate
    from vertex_trainer.preflight import DataCheck
    from vertex_trainer.spec import JobSpec
    from vertex_trainer.vertex.models import RegistryClient

__all__ = [
    "AttemptPlan",
    "Kind",
    "PipelinePlan",
    "QuotaLook",
    "SubmitOptions",
    "SubmitPlan",
    "TrialPlan",
    "look_at_quota",
    "plan_submit",
]

Kind = Literal["custom", "fallback", "tuning", "pipeline", "local", "local-tuning"]
KINDS: tuple[Kind, ...] = ("custom", "fallback", "tuning", "pipeline", "local", "local-tuning")


@dataclass(frozen=True)
class SubmitOptions:
    """The less common knobs of :func:`submit`, in one object so its signature stays small.

    ``timeout``, ``max_cost`` and ``client`` can also be given to ``submit`` as keywords:
    ``submit(spec, timeout=600)`` is ``submit(spec, options=SubmitOptions(timeout=600))``.

    Attributes:
        timeout: with ``wait``, seconds to follow the job before giving up (None: until it ends).
        quota_check: read the project's quota for the accelerator before creating
            (vertex_trainer.capacity.availability); a dry run never reads it.
        builder: ``docker`` or ``cloud-build`` when the spec builds its image (default: the
            packager's choice).
        on_state: called with the job at each state change while waiting.
        follow: ``follow(job, timeout)`` follows each job created (each attempt of a
            ``scheduling.fallback`` plan) instead of ``Job.wait``; the caller then judges the
            last job: submit raises no JobFailed.
        console: a rich Console for a local run's progress (default: stderr).
        summary: False leaves a local run's end-of-run summary (model, output, metrics) to the
            caller, who prints it from the returned LocalJob (the CLI: on stdout).
        client: the JobsClient to create with (default: one for the spec's project and region).
        max_cost: a budget in USD (``submit --max-cost``; wins over ``scheduling.max_cost``): a
            plan whose worst case (timeout x hourly list price; a tuning job's: x max_trials)
            exceeds it is refused (exit 2) before anything is built or sent (docs/contract.md
            section 12).
    """

    timeout: float | None = None
    quota_check: bool = True
    builder: str | None = None
    on_state: Callable[[Any], None] | None = None  # (called with the Job)
    follow: Callable[[Any, Any], Any] | None = None  # (called with the Job and the seconds left)
    console: Any = None
    summary: bool = True
    client: JobsClient | None = None
    max_cost: float | None = None


@dataclass(frozen=True)
class AttemptPlan:
    """One attempt of the plan: where and how it runs (`planned`, spec/attempts.py), the
    CustomJob it creates (rendered once) and the requests it sends (a cloud job: the key's
    lookup and the create, to its region's endpoint; a run here: none)."""

    planned: PlannedAttempt
    body: dict
    requests: tuple[dict, ...] = ()

    @property
    def n(self) -> int:
        return self.planned.n

    def to_dict(self) -> dict:
        """The dry run's JSON `attempts[]` entry (docs/contract.md section 11)."""
        a = self.planned
        return {
            "attempt": a.n,
            "region": a.region,
            "strategy": a.strategy,
            "hardware": a.hardware_name,
            "reservation": a.reservation,
            "requests": list(self.requests),
        }


@dataclass(frozen=True)
class TrialPlan:
    """One trial of a local tuning study: its parameters and the flags they add."""

    id: str
    parameters: dict[str, Any]
    args: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"id": self.id, "parameters": self.parameters, "args": list(self.args)}


@dataclass(frozen=True)
class PipelinePlan:
    """The PipelineJob a pipeline plan creates (docs/contract.md section 6), at most once per key.

    Attributes:
        run_id: its pipelineJobId, derived from the idempotency key (a run with it is adopted).
        root: its pipeline root (runtimeConfig.gcsOutputDirectory).
        job: the CustomJob its training step creates (the plan's attempt 1, rendered once).
        lookup: the GET of the run with that id; create: the POST, without its body.
        spec, artifact, key: what the pipeline is compiled from.
    """

    run_id: str
    root: str
    job: dict
    lookup: dict
    create: dict
    spec: JobSpec = field(repr=False)
    artifact: Artifact
    key: str

    def compile(self, registry: RegistryClient | None = None) -> dict:
        """The PipelineJob body: the pipeline compiled (kfp) from the plan's CustomJob, its deploy
        steps from the registry's model and endpoint when `registry` is given (read-only look-ups),
        else those of a first deploy."""
        ir = automation.pipeline_ir(self.spec, self.artifact, self.key, registry=registry, job=self.job)
        return automation.pipeline_body(self.spec, ir, self.key, self.root)

    @cached_property
    def body(self) -> dict:
        """The PipelineJob as a dry run shows it (a first deploy; no look-up), compiled once, when
        first read."""
        return self.compile()

    @property
    def requests(self) -> tuple[dict, dict]:
        """What the submit sends: the lookup of the run id, then the create with the body."""
        return self.lookup, {**self.create, "body": self.body}

    @property
    def pipeline_sha256(self) -> str:
        """The SHA-256 of the compiled pipeline spec (`body`'s pipelineSpec, as canonical JSON)."""
        text = json.dumps(self.body["pipelineSpec"], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "root": self.root,
            "pipeline_sha256": self.pipeline_sha256,
            "requests": list(self.requests),
        }


@dataclass(frozen=True)
class SubmitPlan:
    """What `submit` will do for one spec, decided once (see the module doc).

    Attributes:
        kind: custom | fallback | tuning | pipeline | local | local-tuning (the executor that
            runs it).
        spec: the job spec; key: the idempotency key.
        artifact: what the jobs run; image: the image named in the output.
        package: the build or upload a cloud submit makes first (None: nothing to build).
        attempts: each attempt of the spec's plan with its CustomJob (attempt 1 first).
        tuning: the HyperparameterTuningJob (tuning kinds), whose trials run attempt 1's job.
        requests: what submit sends first: the lookup and the create of the job (or of the
            tuning job); a run here: ``{"local": True, "body": ...}``; a pipeline: empty (its
            requests are ``pipeline.requests``, compiled when first read).
        trials: a local study's trials.
        pipeline: a pipeline plan's PipelineJob request.
        deploy: with ``deploy=True``, the requests the deploy after the job would send.
        warnings: valid but worth a look (printed before anything is sent).
        estimate: the prices of the plan (cloud kinds; a tuning job: one trial's figures).
        worst_case: the whole plan's worst case in USD (a tuning job: its trials, max_trials or
            a grid's combinations when fewer, x one trial's), None when a price is missing or the
            job runs here.
        budget, budget_field: the budget the plan passed, and where it was given.
        wait: follow the job to its end (``deploy`` implies it); deploy_after: deploy then.
        options: the SubmitOptions the executors use (follow, client, timeout ...).
        run: the run's name (`<name>-<key>`; a resumed run's own), which names its folder and
            its records (docs/contract.md section 15).
        output: the run's own folder below output_dir, every job's baseOutputDirectory (None:
            no output_dir; a run here then gets one below the temp dir).
        resumed: the run continued (``resume``), or None for a new one.
        checks: the reads a cloud submit makes before it builds or sends (the data patterns
            that must match an object: preflight.py); a dry run lists them.
        tensorboards: with `tensorboard: auto`, the instance of each region of the plan found
            or made before the job is created (vertex/tensorboards.py); the bodies hold
            render.tensorboard_pending until then (`with_tensorboards`). A dry run lists them
            among its checks.
    """

    kind: Kind
    spec: JobSpec
    key: str
    artifact: Artifact
    image: str
    package: dict | None
    attempts: tuple[AttemptPlan, ...]
    requests: tuple[dict, ...]
    tuning: dict | None = None
    trials: tuple[TrialPlan, ...] = ()
    pipeline: PipelinePlan | None = None
    deploy: dict | None = None
    warnings: tuple[str, ...] = ()
    estimate: Estimate | None = None
    worst_case: float | None = None
    budget: float | None = None
    budget_field: str | None = None
    wait: bool = False
    deploy_after: bool = False
    options: SubmitOptions = field(default_factory=SubmitOptions)
    run: str = ""
    output: str | None = None
    resumed: str | None = None
    checks: tuple[DataCheck, ...] = ()
    tensorboards: tuple[FindOrCreate, ...] = ()

    @property
    def local(self) -> bool:
        """True when the job runs on this machine."""
        return self.kind in ("local", "local-tuning")

    @property
    def body(self) -> dict:
        """The CustomJob (attempt 1's; each trial of a tuning job runs it)."""
        return self.attempts[0].body

    @property
    def job(self) -> dict:
        """The body submit creates first: the tuning job, the PipelineJob, or the CustomJob."""
        if self.pipeline is not None:
            return self.pipeline.body
        return self.tuning if self.tuning is not None else self.body

    def to_dict(self) -> dict:
        """The docs/contract.md section 2 submit object of a dry run."""
        return self.dry_run().to_dict()

    def dry_run(self) -> DryRun:
        """The DryRun of this plan.

        Returns:
            what ``submit(dry_run=True)`` returns: the requests, the body, the package step, the
            deploy requests, the fallback's attempts or a local study's trials, and this plan.
        """
        return DryRun(
            self.job,
            list(self.pipeline.requests if self.pipeline is not None else self.requests),
            self.image,
            self.key,
            local=self.local,
            package=self.package,
            deploy=self.deploy,
            attempts=[a.to_dict() for a in self.attempts] if self.kind == "fallback" else None,
            trials=[t.to_dict() for t in self.trials] if self.kind == "local-tuning" else None,
            checks=[c.to_dict() for c in self.checks] + [t.to_dict() for t in self.tensorboards] or None,
            output_dir=self.output,
            plan=self,
        )

    def with_tensorboards(self, names: dict[str, str]) -> SubmitPlan:
        """This plan with each `tensorboard: auto` placeholder (render.tensorboard_pending) in
        its bodies and requests replaced by the instance's name.

        Args:
            names: each placeholder -> the name of the instance found or made for its region.

        Returns:
            the new plan (its `tensorboards` steps done: empty)."""

        def swap(value: Any) -> Any:
            return render.resolve_tensorboards(value, names)

        return dataclasses.replace(
            self,
            attempts=tuple(
                dataclasses.replace(a, body=swap(a.body), requests=swap(a.requests)) for a in self.attempts
            ),
            requests=swap(self.requests),
            tuning=swap(self.tuning),
            pipeline=dataclasses.replace(self.pipeline, job=swap(self.pipeline.job))
            if self.pipeline is not None
            else None,
            tensorboards=(),
        )


def plan_submit(
    spec: JobSpec,
    options: SubmitOptions | None = None,
    *,
    idempotency_key: str | None = None,
    local: bool = False,
    pipeline: bool = False,
    pipeline_root: str | None = None,
    deploy: bool = False,
    wait: bool = False,
    resume: str | None = None,
    settings: Settings | None = None,
    log: Log | None = None,
) -> SubmitPlan:
    """The plan of ``submit(spec, ...)``: every check made, nothing built, sent or run.

    Args:
        spec: the job spec, from :func:`load_spec`.
        options: the less common knobs (:class:`SubmitOptions`): the budget, the builder ...
        idempotency_key: the key the jobs carry (None: a random one).
        local: plan a run on this machine instead of a Vertex AI submit.
        pipeline: plan a Vertex AI Pipelines run instead (train, then register and deploy with
            the spec's ``deploy:``; docs/contract.md section 6).
        pipeline_root: a pipeline's root (default: gs://<output bucket>/pipeline-root).
        deploy: plan the deploy after the job (a cloud custom job only; implies ``wait``).
        wait: the job is to be followed to its end.
        resume: continue an earlier run in its folder (its name below output_dir, or the
            folder itself): the new job reads and writes that run's checkpoints and model
            (docs/contract.md section 15). None: the run gets a folder of its own.
        settings: the process settings (default: read from the environment).
        log: where the packager's planning notes go (default: nowhere).

    Returns:
        the frozen SubmitPlan.

    Raises:
        UserError, SpecError: bad input, the budget exceeded (exit 2; nothing was sent).
    """
    require_spec(spec, "pipeline_submit" if pipeline else "submit")
    opts = options or SubmitOptions()
    settings = settings or (opts.client.settings if opts.client else settings_from_env())
    key = check_key(idempotency_key) if idempotency_key is not None else new_key()
    tuned = spec.tune is not None
    kind: Kind = (
        "pipeline"
        if pipeline
        else ("local-tuning" if tuned else "local")
        if local
        else "tuning"
        if tuned
        else "fallback"
        if spec.scheduling.fallback
        else "custom"
    )
    _check_deploy(spec, deploy=deploy, local=local)
    check(spec, local=local)  # exit 2 before anything is built, sent or run
    root = _pipeline_root(spec, pipeline_root, local=local) if pipeline else None
    warnings: tuple[str, ...] = ()
    estimate = worst = budget = field_ = None
    checks: tuple[DataCheck, ...] = ()
    route = plan_of(spec)  # the attempts, planned once: the checks and the executors use these
    if not local:
        warnings = tuple(availability.warnings(spec, route)) + tuple(scaling.warnings(spec))  # issue 35
        availability.check_regions(route)  # a fallback attempt where its accelerator is not offered
        estimate, worst, budget, field_ = _budget(spec, route, opts.max_cost)
        checks = preflight.data_checks(spec, settings)  # made by the executor (`_reads`)
    else:
        note = local_tensorflow_note(spec)  # your code runs on this machine's TensorFlow
        warnings = (note,) if note else ()
    artifact, image, build = artifact_for(
        spec, dry_run=True, local=local, builder=opts.builder, log=log or silent, settings=settings
    )
    clients = None if local or pipeline else _clients(opts.client, spec, settings)
    run, output = _run_place(spec, key, resume, local=local)
    rendered = []
    for a in route if kind in ("custom", "fallback") else route[:1]:
        body = render.custom_job(
            spec, artifact, idempotency_key=key, attempt=a, output=output, resumed=resume is not None
        )
        where = a.region or spec.region or ""  # (a cloud spec has a region: check() made sure)
        sent = tuple(clients(where).requests_for(body, key)) if clients and not tuned else ()
        rendered.append(AttemptPlan(a, body, sent))
    tuning = render.tuning_job(spec, rendered[0].body) if tuned else None
    boards = _tensorboards(spec, rendered, settings) if not local else ()
    trials: tuple[TrialPlan, ...] = ()
    if kind == "local-tuning":
        trials = _trials(spec)
    planned_run = None
    if root is not None:
        planned_run = _pipeline_plan(spec, rendered[0].body, artifact, key, root, settings)
        requests: tuple[dict, ...] = ()
    elif local:
        requests = ({"local": True, "body": tuning or rendered[0].body},)
    elif tuning is not None:
        from vertex_trainer.vertex.hptuning import TuningClient  # (only a tuning plan loads it)

        tuner = TuningClient(spec.project, spec.region, settings=settings)
        requests = tuple(tuner.requests_for(tuning, key))
    else:
        requests = rendered[0].requests
    deploying = None
    if deploy:
        deploying = plan_deploy(spec, job="JOB", dry_run=True, settings=settings)
    return SubmitPlan(
        kind=kind,
        spec=spec,
        key=key,
        artifact=artifact,
        image=image,
        package=package_step(build),
        attempts=tuple(rendered),
        requests=requests,
        tuning=tuning,
        trials=trials,
        pipeline=planned_run,
        deploy=deploying if isinstance(deploying, dict) else None,
        warnings=warnings,
        estimate=estimate,
        worst_case=worst,
        budget=budget,
        budget_field=field_,
        wait=wait or deploy,
        deploy_after=deploy,
        options=opts,
        run=run,
        output=output,
        resumed=output if resume is not None else None,
        checks=checks,
        tensorboards=boards,
    )


def _tensorboards(spec: JobSpec, rendered: list[AttemptPlan], settings: Settings) -> tuple[FindOrCreate, ...]:
    """With `tensorboard: auto`, the find-or-create step of each region the plan's jobs run in
    (a fallback's attempts may name others), in attempt order; () otherwise."""
    if spec.tensorboard != "auto":
        return ()
    places = dict.fromkeys(a.planned.region or spec.region or "" for a in rendered)
    return tuple(TensorboardsClient(spec.project, r, settings=settings).plan() for r in places)


def _run_place(spec: JobSpec, key: str, resume: str | None, *, local: bool) -> tuple[str, str | None]:
    """(the run's name, its folder) for the submission with `key`, or for the run `resume`
    names (exit 2 when there is no such run to continue)."""
    if resume is None:
        return run_name(spec.name, key), render.run_dir(spec, key)
    limit = MAX_USER_LABELS - bool(spec.scheduling.fallback) - 1  # a resumed job carries RESUMES_LABEL
    if not local and len(spec.labels) > limit:
        raise UserError(
            f"--resume: the spec has {len(spec.labels)} labels; a resumed job may carry at most {limit} "
            f"(Vertex allows 64; vertex-trainer adds its own, {RESUMES_LABEL} among them)",
            hint="remove some labels",
        )
    return resumed_run(spec.output_dir, resume, fixed=spec.fixed_output_dir, local=local)


def _pipeline_root(spec: JobSpec, root: str | None, *, local: bool) -> str:
    """A pipeline plan's root, once the spec can run as a pipeline (exit 2 otherwise)."""
    if local:
        raise ValueError("a pipeline runs on Vertex AI Pipelines, not here")
    automation.check_pipeline(spec)
    return automation.run_root(spec, root)


def _pipeline_plan(
    spec: JobSpec, job: dict, artifact: Artifact, key: str, root: str, settings: Settings
) -> PipelinePlan:
    from vertex_trainer.vertex.pipelines import PipelinesClient, pipeline_job_id  # (a pipeline plan's only)

    run_id = pipeline_job_id(key)
    lookup, create = PipelinesClient(spec.project, spec.region, settings=settings).requests_for({}, run_id)
    create.pop("body")
    return PipelinePlan(run_id, root, job, lookup, create, spec, artifact, key)


def _clients(client: JobsClient | None, spec: JobSpec, settings: Settings) -> Callable[[str], JobsClient]:
    return fallback.region_clients(client or JobsClient(spec.project, spec.region, settings=settings))


def _check_deploy(spec: JobSpec, *, deploy: bool, local: bool) -> None:
    """`deploy=True` needs a CustomJob on Vertex AI (exit 2 otherwise, nothing sent)."""
    if not deploy:
        return
    if local:
        raise UserError(
            "--deploy needs a Vertex AI job; a local run's model is served here",
            hint="vertex-trainer serve <output_dir>/model, after submit --local",
        )
    if spec.tune is not None:
        raise UserError(
            "--deploy serves one job's model; a tuning job has a model per trial",
            hint="deploy the best trial's: vertex-trainer deploy SPEC --model-dir "
            "<the best trial's output_dir>/model (vertex-trainer trials JOB)",
        )


def _budget(
    spec: JobSpec, route: tuple[PlannedAttempt, ...], max_cost: float | None
) -> tuple[Estimate, float | None, float | None, str | None]:
    """The plan's prices, its whole worst case (a tuning job: its trials x one trial's), and the
    budget it passed (over it: exit 2 naming both figures, nothing sent)."""
    est = cost.estimate(spec, pricing.load_snapshot(), plan=route)
    budget, field_ = enforce_budget(spec, est, max_cost=max_cost)
    return est, est.worst_case, budget, field_


def _trials(spec: JobSpec) -> tuple[TrialPlan, ...]:
    """A local study's trials, each checked by the trainer's parser (exit 2 before any runs)."""
    from vertex_trainer.tuning import tuning_run as tuning  # (only a local study loads the trial runner)

    planned = tuning.plan_trials(spec)
    tuning.check_trials(spec, planned)
    return tuple(
        TrialPlan(str(i), values, tuple(tuning.trial_args(spec, values)))
        for i, values in enumerate(planned, 1)
    )


@dataclass(frozen=True)
class QuotaLook:
    """`validate --check-quota`: the project's quota for the plan's accelerator, or why it was not
    read (`skipped`: "offline", "no-accelerator", "no-place", "no-metric")."""

    accelerator: str | None
    checks: tuple[QuotaCheck, ...] = ()
    skipped: str | None = None


def look_at_quota(spec: JobSpec, *, settings: Settings | None = None) -> QuotaLook:
    """Read the project's training quota for each attempt's accelerator (Cloud Quotas API, one
    read-only look); clearly too small for every attempt is exit 2, as on submit.

    Args:
        spec: the job spec.
        settings: the process settings (default: read from the environment).

    Returns:
        a QuotaLook: the checks, or why none was made (an emulator without a quota endpoint, no
        accelerator, no project or region yet, no known metric).
    """
    settings = settings or settings_from_env()
    acc = availability.accelerator(spec)
    if availability.offline(settings):
        return QuotaLook(acc, skipped="offline")
    if not acc:
        return QuotaLook(None, skipped="no-accelerator")
    if not spec.project or not spec.region:
        return QuotaLook(acc, skipped="no-place")
    checks = tuple(availability.check_quota(spec, plan_of(spec), settings=settings, log=silent))
    return QuotaLook(acc, checks, None if checks else "no-metric")
