"""`submit`: the plan (plan.py), then the executor of its kind, behind one protocol.

`plan_submit` makes the plan in one pass (every check, the budget, the artifact planned, each
attempt's CustomJob rendered once); `run(plan)` hands it to `EXECUTORS[plan.kind]`, an
:class:`Executor` (``run(plan, settings, log) -> Handle``), and every executor returns a
:class:`~vertex_trainer.api.handles.Handle` (name, state, console_url, output_dir, refresh, wait,
cancel, to_dict), so ``vt.submit(spec).wait()`` holds whatever the kind:

    custom        CustomExecutor       -> Job         the CustomJob, created once per key
                                                      (deploy after, if asked)
    fallback      FallbackExecutor     -> Job         the plan's attempts in turn
                                                      (capacity/fallback.py)
    tuning        TuningExecutor       -> TuningJob   the HyperparameterTuningJob (vertex/hptuning.py)
    pipeline      PipelineExecutor     -> PipelineRun the PipelineJob, created once per key
                                                      (vertex/pipelines.py); built and compiled
                                                      only when no run has the id yet
    local         LocalExecutor        -> LocalJob    the CustomJob run here (local/)
    local-tuning  LocalTuningExecutor  -> LocalTuning the study's trials run here
                                                      (tuning/tuning_run.py)

A cloud executor first makes the reads that belong before any create (`_ready`: the buckets, the
data, the quota pre-flight, the persistent resource; then the build and the TensorBoard
instances), then sends the plan's bodies: nothing is rendered, planned or checked twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, Protocol, overload

from vertex_trainer import local, preflight
from vertex_trainer.api import run_records
from vertex_trainer.api.core import _stderr, settings_from_env
from vertex_trainer.api.deploy import deploy as deploy_job
from vertex_trainer.api.handles import Handle, Job
from vertex_trainer.api.package import package
from vertex_trainer.api.plan import Kind, SubmitOptions, SubmitPlan, plan_submit
from vertex_trainer.api.project import after_denial
from vertex_trainer.api.results import DryRun, LocalJob
from vertex_trainer.capacity import availability, fallback
from vertex_trainer.contract import RESUMES_LABEL, TERMINAL_STATES, folder_digest
from vertex_trainer.errors import RunInterrupted, UserError, VertexTrainerError
from vertex_trainer.gcp import storage
from vertex_trainer.gcp.http import Denied
from vertex_trainer.local import layout
from vertex_trainer.log import Log
from vertex_trainer.render import tensorboard_pending
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import JobsClient, create_idempotent
from vertex_trainer.vertex.names import keys_of_run
from vertex_trainer.vertex.tensorboards import TensorboardsClient

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import TypedDict, Unpack  # (typing.Unpack from Python 3.11)

    from vertex_trainer.spec import JobSpec
    from vertex_trainer.tuning.tuning_run import LocalTuning
    from vertex_trainer.vertex.hptuning import TuningJob
    from vertex_trainer.vertex.models import RegistryClient
    from vertex_trainer.vertex.pipelines import PipelineRun

    class SubmitKeywords(TypedDict, total=False):
        """submit's keywords besides dry_run, once for its three overloads (the defaults: submit's)."""

        local: bool
        deploy: bool
        options: SubmitOptions | None
        resume: str | None
        settings: Settings | None
        log: Log | None
        timeout: float | None
        max_cost: float | None
        client: JobsClient | None


__all__ = ["EXECUTORS", "Executor", "Handle", "registry_client", "run", "submit"]


@overload
def submit(
    spec: JobSpec,
    wait: bool = ...,
    idempotency_key: str | None = ...,
    *,
    dry_run: Literal[True],
    **keywords: Unpack[SubmitKeywords],
) -> DryRun: ...


@overload
def submit(
    spec: JobSpec,
    wait: bool = ...,
    idempotency_key: str | None = ...,
    *,
    dry_run: Literal[False] = ...,
    **keywords: Unpack[SubmitKeywords],
) -> Handle: ...


@overload
def submit(
    spec: JobSpec,
    wait: bool = ...,
    idempotency_key: str | None = ...,
    *,
    dry_run: bool = ...,
    **keywords: Unpack[SubmitKeywords],
) -> Handle | DryRun: ...


def submit(
    spec: JobSpec,
    wait: bool = False,
    idempotency_key: str | None = None,
    *,
    local: bool = False,
    dry_run: bool = False,
    deploy: bool = False,
    options: SubmitOptions | None = None,
    resume: str | None = None,
    settings: Settings | None = None,
    log: Log | None = None,
    timeout: float | None = None,
    max_cost: float | None = None,
    client: JobsClient | None = None,
) -> Handle | DryRun:
    """Submit a resolved spec as a Vertex AI CustomJob, at most once per idempotency key.

    The one path (docs/contract.md section 2): the plan (:func:`plan_submit`: every check, the
    budget, the artifact planned, each attempt rendered) -> the executor of its kind (the
    pre-send reads, the build when the spec builds, then create (idempotent) | run here). A spec
    with ``tune:`` becomes a HyperparameterTuningJob (section 10); one with
    ``scheduling.fallback`` tries its strategies in turn (section 8). The plan's warnings go to
    ``log`` first.

    Args:
        spec: the job spec, from :func:`load_spec`.
        wait: follow the job to its end; raises JobFailed unless it SUCCEEDED (see
            ``SubmitOptions.follow``).
        idempotency_key: reuse it when retrying (CI: the run id) and no second job is created;
            None picks a random key.
        local: run the same rendered job on this machine instead (vertex_trainer.local).
        dry_run: return the plan as a :class:`DryRun` (``.plan``); nothing is sent, built or run.
        deploy: when the job SUCCEEDED, register its model and deploy it (the spec's ``deploy:``
            block, section 5); implies ``wait``. The Deployment is ``job.deployment`` (a dry run:
            ``DryRun.deploy``, the requests it would send).
        options: the less common knobs (:class:`SubmitOptions`).
        resume: continue an earlier run in its own folder: its name below output_dir, or the
            folder (``submit --resume RUN``). None: the submission runs in a folder of its own,
            ``<output_dir>/<name>-<key>`` (docs/contract.md section 15).
        settings: the process settings (default: read from the environment).
        log: where progress lines and the plan's warnings go (default: stderr).
        timeout: shorthand for ``SubmitOptions.timeout`` (wins over ``options``).
        max_cost: shorthand for ``SubmitOptions.max_cost`` (wins over ``options``).
        client: shorthand for ``SubmitOptions.client`` (wins over ``options``).

    Returns:
        a :class:`Handle` whatever the kind (``submit(spec).wait()`` always holds): a
        :class:`Job` (a custom job or a fallback plan), a ``TuningJob`` (a ``tune:`` spec), a
        :class:`LocalJob` with ``local=True`` (a ``LocalTuning`` for a ``tune:`` spec); or a
        :class:`DryRun` with ``dry_run=True``.

    Raises:
        UserError, SpecError: bad input (exit 2), before anything is built, sent or run.
        JobFailed: ``wait`` and the job did not succeed (unless ``options.follow`` is given).
    """
    opts = options or SubmitOptions()
    opts = dataclasses.replace(
        opts,
        timeout=opts.timeout if timeout is None else timeout,
        max_cost=opts.max_cost if max_cost is None else max_cost,
        client=opts.client if client is None else client,
    )
    settings = settings or (opts.client.settings if opts.client else settings_from_env())
    log = log or _stderr
    plan = plan_submit(
        spec,
        opts,
        idempotency_key=idempotency_key,
        local=local,
        deploy=deploy,
        wait=wait,
        resume=resume,
        settings=settings,
        log=log,
    )
    for warning in plan.warnings:  # valid but worth a look (e.g. max_wait with spot)
        log(warning)
    if dry_run:
        return plan.dry_run()
    try:
        return run(plan, settings=settings, log=log)
    except Denied as exc:  # a disabled API or a denied permission: name the others too (issue 33)
        raise after_denial(spec, exc, settings=settings) from None


def run(plan: SubmitPlan, *, settings: Settings, log: Log) -> Handle:
    """Run a plan with the executor of its kind (`EXECUTORS[plan.kind]`).

    Args:
        plan: from :func:`plan_submit`.
        settings: the process settings.
        log: where progress lines go.

    Returns:
        the plan's Handle (see :func:`submit`).
    """
    return EXECUTORS[plan.kind].run(plan, settings, log)


class Executor(Protocol):
    """Runs the plans of one kind: the pre-send steps its kind needs, then the create (or the run
    here), and the handle of what it made."""

    def run(self, plan: SubmitPlan, settings: Settings, log: Log) -> Handle:
        """Run `plan`.

        Args:
            plan: a plan of the executor's kind, from :func:`plan_submit`.
            settings: the process settings.
            log: where progress lines go.

        Returns:
            the handle of what it created or ran.
        """
        ...


class CustomExecutor:
    """custom: the reads, the build, then the CustomJob created once per key; with `wait`, followed
    (`options.follow` when given: the caller judges the end; else Job.wait); then the deploy."""

    def run(self, plan: SubmitPlan, settings: Settings, log: Log) -> Job:
        plan, _ = _ready(plan, settings, log)
        opts = plan.options
        client = _client(plan, settings, log)
        data, adopted = create_idempotent(client, plan.body, plan.key)
        job = Job(data, client, image=plan.image, idempotency_key=plan.key, adopted=adopted, spec=plan.spec)
        if plan.wait and opts.follow is not None:
            opts.follow(job, opts.timeout)  # (a job adopted after it ended: its log and how it ended)
        elif plan.wait:
            job.wait(timeout=opts.timeout, on_state=opts.on_state)
        return _deployed(plan, job, settings, log)


class FallbackExecutor:
    """fallback: the reads (the quota pre-flight names the attempts to skip), the build, then the
    plan's attempts in turn, each in its own region (docs/contract.md sections 8 and 11); then the
    deploy of the job that succeeded."""

    def run(self, plan: SubmitPlan, settings: Settings, log: Log) -> Job:
        plan, skipped = _ready(plan, settings, log)
        opts = plan.options
        job = fallback.submit(
            fallback.region_clients(_client(plan, settings, log)),
            plan.attempts,
            plan.key,
            spec=plan.spec,
            image=plan.image,
            job_type=Job,
            wait=plan.wait,
            timeout=opts.timeout,
            follow=opts.follow,
            on_state=opts.on_state,
            log=log,
            check=opts.follow is None,
            skipped=skipped,
        )
        assert isinstance(job, Job)  # (job_type)
        return _deployed(plan, job, settings, log)


class TuningExecutor:
    """tuning: the reads, the build, then the HyperparameterTuningJob created once per key; with
    `wait`, followed."""

    def run(self, plan: SubmitPlan, settings: Settings, log: Log) -> TuningJob:
        from vertex_trainer.vertex import hptuning  # (only a tuning job loads its client)

        plan, _ = _ready(plan, settings, log)
        spec, opts = plan.spec, plan.options
        client = hptuning.TuningClient(spec.project, spec.region, settings=settings, log=log)
        assert plan.tuning is not None  # (a tuning plan has its body)
        data, adopted = hptuning.create_idempotent(client, plan.tuning, plan.key)
        tuning = hptuning.TuningJob(data, client, image=plan.image, idempotency_key=plan.key, adopted=adopted)
        if plan.wait:
            tuning.wait(timeout=opts.timeout, on_state=opts.on_state)
        return tuning


class PipelineExecutor:
    """pipeline: the reads, then the PipelineJob created once per key (docs/contract.md section 6).
    A run that has the id is adopted before anything is built or compiled; else the build, the
    registry's model and endpoint (deploy:), and the pipeline compiled from the plan's job."""

    def run(self, plan: SubmitPlan, settings: Settings, log: Log) -> PipelineRun:
        from vertex_trainer.vertex import pipelines  # (only a pipeline run loads its client)

        _reads(plan, settings, log)
        plan = _with_tensorboards(plan, settings, log)
        spec, opts, planned = plan.spec, plan.options, plan.pipeline
        assert planned is not None  # (a pipeline plan has its PipelineJob)
        client = pipelines.PipelinesClient(spec.project, spec.region, settings=settings, log=log)

        def body() -> dict:  # called only when no run has the id yet
            _build(plan, settings, log)
            return planned.compile(registry_client(spec, settings, log) if spec.deploy is not None else None)

        data, adopted = pipelines.create_idempotent(client, body, planned.run_id, plan.key)
        made = pipelines.PipelineRun(data, client, idempotency_key=plan.key, adopted=adopted)
        if plan.wait:
            made.wait(timeout=opts.timeout, on_state=opts.on_state)
        return made


class LocalExecutor:
    """local: the rendered job run on this machine (it has ended when `run` returns)."""

    def run(self, plan: SubmitPlan, settings: Settings, log: Log) -> LocalJob:
        opts = plan.options
        _check_resumed_here(plan, settings, log)
        result = local.run_local(  # the runner loads on first use (local/__init__.py)
            plan.body,
            plan.spec,
            settings=settings,
            wait=plan.wait,
            console=opts.console,
            summary=opts.summary,
            run=plan.run,
            latest=plan.resumed is None,
            adopt=plan.resumed is None,  # the same key again: its run that SUCCEEDED here
        )
        job = LocalJob(result, plan.body, plan.image, plan.key, adopted=result.adopted)
        if result.state == "JOB_STATE_CANCELLED":  # only a signal cancels a run here (no cancel event)
            raise RunInterrupted(job)  # a KeyboardInterrupt: the cell, the loop, the caller stop too
        return job


class LocalTuningExecutor:
    """local-tuning: the plan's trials run here, `parallel_trials` at a time (they have ended when
    `run` returns)."""

    def run(self, plan: SubmitPlan, settings: Settings, log: Log) -> LocalTuning:
        from vertex_trainer.tuning import tuning_run  # (only a local study loads the trial runner)

        study = tuning_run.run_trials(
            plan.spec,
            plan.body,
            key=plan.key,
            image=plan.image,
            settings=settings,
            console=plan.options.console,
            planned=[dict(t.parameters) for t in plan.trials],
            run=plan.run,
            adopt=plan.resumed is None,  # the same key again: its study that SUCCEEDED here
        )
        if study.state == "JOB_STATE_CANCELLED":  # only a signal cancels a study here, as a run
            raise RunInterrupted(study)
        return study


EXECUTORS: Mapping[Kind, Executor] = {
    "custom": CustomExecutor(),
    "fallback": FallbackExecutor(),
    "tuning": TuningExecutor(),
    "pipeline": PipelineExecutor(),
    "local": LocalExecutor(),
    "local-tuning": LocalTuningExecutor(),
}


def registry_client(spec: JobSpec, settings: Settings, log: Log | None) -> RegistryClient:
    """The Model Registry and Endpoints client a pipeline's deploy steps are resolved with.

    Args:
        spec: the job spec (its project and region).
        settings: the process settings.
        log: where the client's notes go.

    Returns:
        the RegistryClient.
    """
    from vertex_trainer.vertex.models import RegistryClient  # (only a pipeline's deploy reads it)

    if not (spec.project and spec.region):  # check() refuses such a spec first; this says why here
        raise UserError("looking up the model and endpoint needs the spec's project and region")
    return RegistryClient(spec.project, spec.region, settings=settings, log=log)


# -- the steps before any create -------------------------------------------------------------------


def _ready(plan: SubmitPlan, settings: Settings, log: Log) -> tuple[SubmitPlan, dict[int, str]]:
    """A cloud job's steps before its create: the reads (`_reads`), the build (when the spec
    builds), then the TensorBoard instances; returns the plan with their names in its bodies,
    and the attempts to skip (attempt n -> why)."""
    skipped = _reads(plan, settings, log)
    _build(plan, settings, log)
    plan = _with_tensorboards(plan, settings, log)
    run_records.hand_over(plan, settings)
    return plan, skipped


def _reads(plan: SubmitPlan, settings: Settings, log: Log) -> dict[int, str]:
    """The buckets (missing: exit 2), the data, the quota pre-flight and the persistent resource
    (docs/contract.md sections 8 and 11); returns the attempts to skip (attempt n -> why)."""
    spec, route = plan.spec, tuple(a.planned for a in plan.attempts)
    preflight.check_buckets(spec, route, settings=settings, log=log)
    preflight.check_data(plan.checks, settings=settings, log=log)  # the data is there (exit 2)
    _check_resumed(plan, settings, log)
    run_records.check_local_run(plan, settings)
    return availability.before_submit(
        spec,
        route,
        settings=settings,
        log=log,
        quota=plan.options.quota_check,
        pools=plan.body["jobSpec"]["workerPoolSpecs"],  # (the resource must fit the job as rendered)
    )


def _with_tensorboards(plan: SubmitPlan, settings: Settings, log: Log) -> SubmitPlan:
    """`tensorboard: auto`: the instance of each region of the plan found, or made when there is
    none (vertex/tensorboards.py, idempotent), after the reads and the build and before any job
    is created; returns the plan with its name in the bodies (`SubmitPlan.with_tensorboards`)."""
    if not plan.tensorboards:
        return plan
    names = {}
    for step in plan.tensorboards:
        client = TensorboardsClient(step.project, step.region, settings=settings, log=log)
        got = client.ensure(timeout=plan.options.timeout)
        log(f"tensorboard: {'created' if got.created else 'using'} {got.name}")
        names[tensorboard_pending(step.project, step.region)] = got.name
    return plan.with_tensorboards(names)


def _check_resumed(plan: SubmitPlan, settings: Settings, log: Log) -> None:
    """`--resume RUN` of a run in Cloud Storage: its folder must hold something, and the run's
    own job (its key is the folder's name after `<name>-`) and every job resumed into it (labelled
    RESUMES_LABEL with the folder) must have ended (exit 2 otherwise, before anything is built or
    created)."""
    if plan.resumed is None or not plan.resumed.startswith("gs://"):
        return
    if layout.gs_run_held(plan.resumed):  # a submit --local on this machine writes it now
        raise UserError(
            f"--resume: {plan.resumed} is still being written by a local run on this machine (submit "
            "--local): a job there would write over its checkpoints and model while it runs; nothing "
            "was sent",
            hint="wait for the local run to end (or stop it: Ctrl-C in its terminal); then resume",
        )
    if settings.offline and not settings.storage_emulator:  # Vertex AI a stand-in, no bucket to read
        return
    if not storage.holds_objects(settings, plan.resumed):
        raise UserError(
            f"--resume: {plan.resumed} holds nothing: no run to continue there",
            hint="give the name of a run below output_dir (its folder: vertex-trainer status JOB), "
            "or submit without --resume",
        )
    _refuse_running(plan, _jobs_in(plan, plan.resumed, settings, log))


def _jobs_in(plan: SubmitPlan, folder: str, settings: Settings, log: Log) -> list[dict]:
    """The Vertex AI jobs that may write the run's `folder`: the run's own job (its key is the
    folder's name after `<name>-`) and every job resumed into it since (RESUMES_LABEL)."""
    run, prefix = folder.rstrip("/").rsplit("/", 1)[-1], f"{plan.spec.name}-"
    client = _client(plan, settings, log)
    jobs = client.list(f'labels.{RESUMES_LABEL}="{folder_digest(folder)}"')
    if run.startswith(prefix) and run.removeprefix(prefix):  # (a run submitted without a key: vt-...)
        for key in keys_of_run(run.removeprefix(prefix)):
            jobs = client.list(client.key_filter(key)) + jobs
    return jobs


def _refuse_running(plan: SubmitPlan, jobs: list[dict]) -> None:
    """Exit 2 when one of `jobs` has not ended and writes the resumed folder: two jobs in one
    folder write over each other's checkpoints and model as they run."""
    resumed = str(plan.resumed).rstrip("/")
    for job in jobs:
        folder = ((job.get("jobSpec") or {}).get("baseOutputDirectory") or {}).get("outputUriPrefix")
        if job.get("state") not in TERMINAL_STATES and str(folder or "").rstrip("/") == resumed:
            name, state = job.get("name"), str(job.get("state", "")).removeprefix("JOB_STATE_")
            raise UserError(
                f"--resume: {plan.resumed} is still being written by {name} ({state}): a second job "
                "there would write over its checkpoints and model while it runs; nothing was sent",
                hint=f"wait for it to end (vertex-trainer status {name} --wait), or cancel it first "
                f"(vertex-trainer cancel {name}); then resume",
            )


def _check_resumed_here(plan: SubmitPlan, settings: Settings, log: Log) -> None:
    """`submit --local --resume RUN` of a run in Cloud Storage whose spec names a project and a
    region: a Vertex AI job still writing its folder is exit 2 before anything runs here (a local
    run of it is refused by its lock, local/layout.py). When Vertex AI cannot be asked (no
    credentials, no network: a run kept local), one line says so and the run goes on."""
    if (
        plan.resumed is None
        or not plan.resumed.startswith("gs://")
        or not (plan.spec.project and plan.spec.region)
    ):
        return
    try:
        jobs = _jobs_in(plan, plan.resumed, settings, log)
    except VertexTrainerError as exc:
        log(f"note: could not ask Vertex AI whether a job still writes {plan.resumed} ({exc.message})")
        return
    _refuse_running(plan, jobs)


def _build(plan: SubmitPlan, settings: Settings, log: Log) -> None:
    """The image build or code upload the plan needs (none: nothing to do)."""
    if plan.package is not None:
        built = package(plan.spec, builder=plan.options.builder, log=log, settings=settings)
        if built.artifact != plan.artifact:  # the content hash moved between plan and build
            raise RuntimeError(f"the build made {built.artifact}, the plan rendered {plan.artifact}")


def _client(plan: SubmitPlan, settings: Settings, log: Log) -> JobsClient:
    spec = plan.spec
    return plan.options.client or JobsClient(spec.project, spec.region, settings=settings, log=log)


def _deployed(plan: SubmitPlan, job: Job, settings: Settings, log: Log) -> Job:
    """`submit(deploy=True)`: once the job SUCCEEDED, its model registered and served (the
    Deployment is `job.deployment`); returns the job."""
    if plan.deploy_after and job.succeeded:
        try:
            deployed = deploy_job(plan.spec, job=job.name, log=log, settings=settings)
        except VertexTrainerError as e:
            # The training is done and paid for: a new submit would train (and bill) it again.
            e.job = job.name
            log(
                f"the training job {job.name} SUCCEEDED; only its deploy failed (below). Deploy it "
                f"without training again: vertex-trainer deploy SPEC --job {job.name}"
            )
            raise
        job.deployment = deployed if not isinstance(deployed, dict) else None
    return job
