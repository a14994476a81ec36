"""The core of the Python API (vertex_trainer.api re-exports it; its docstring has the example):
loading and checking a spec, planning and building the artifact, `submit` (the one path to a job:
checks -> artifact -> render -> create once | run here | describe) and deploy (jobs by name: jobs.py).
This module and the CLI are the edge: the environment is read once (`Settings.from_environ`) and
passed down as `settings`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vertex_trainer.api.results import DryRun, LocalJob
from vertex_trainer.contract import LOCAL_IMAGE, Artifact
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.jobs import Job as _VertexJob
from vertex_trainer.vertex.jobs import JobsClient, check_key, create_idempotent, new_key

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.packaging import PackageResult
    from vertex_trainer.spec import JobSpec
    from vertex_trainer.vertex.deploy import Deployment
    from vertex_trainer.vertex.hptuning import TuningJob

__all__ = [
    "DryRun",
    "Job",
    "LocalJob",
    "SubmitOptions",
    "check",
    "deploy",
    "load_spec",
    "package",
    "plan_artifact",
    "render_job",
    "settings_from_env",
    "submit",
]

Log = Callable[[str], None]


def settings_from_env() -> Settings:
    """The settings of this process, read from its environment (the edge).

    Returns:
        a Settings (project, region, endpoints, retry and poll policies) from ``os.environ``.
    """
    return Settings.from_environ(os.environ)


class Job(_VertexJob):
    """A Vertex AI CustomJob (see vertex_trainer.vertex.jobs.Job). `Job.get(name)` reads the
    settings from the environment when none are given, like every API entry point."""

    @classmethod
    def get(
        cls,
        job: str,
        *,
        project: str | None = None,
        region: str | None = None,
        settings: Settings | None = None,
        client: JobsClient | None = None,
    ) -> Job:
        """A CustomJob, fetched now.

        Args:
            job: a resource name, or an id with project and region.
            project: the project of an id (default: the settings').
            region: the region of an id (default: the settings').
            settings: the process settings (default: read from the environment).
            client: the JobsClient to read with (default: a new one).

        Returns:
            the Job.
        """
        settings = settings or (client.settings if client else settings_from_env())
        return super().get(job, project=project, region=region, settings=settings, client=client)

    spec: JobSpec | None  # the spec submit() made it from (a constructor argument), or None
    deployment: Deployment | None = None  # set by submit(deploy=True) once the model serves

    def to_dict(self) -> dict:
        """The docs/contract.md section 2 submit object (with "deploy" after submit(deploy=True))."""
        out = super().to_dict()
        if self.deployment is not None:
            out["deploy"] = self.deployment.to_dict()
        return out

    def deploy(self, spec: JobSpec | None = None, **kwargs: Any) -> Deployment:
        """Register this job's model and serve it (see :func:`deploy`).

        Args:
            spec: the spec whose ``deploy:`` block applies (default: the one this job was
                submitted from).
            **kwargs: passed to :func:`deploy` (``dry_run``, ``timeout``, ``log``).

        Returns:
            the Deployment (model, version, endpoint, traffic split).
        """
        spec = spec or self.spec
        if spec is None:
            from vertex_trainer.errors import UserError

            raise UserError("Job.deploy needs the spec (its deploy: block): job.deploy(spec)")
        return deploy(spec, job=self.name, settings=self.client.settings, **kwargs)


def load_spec(
    path,
    set: Iterable[str] = (),
    vars: Mapping[str, str] | None = None,
    project: str | None = None,
    region: str | None = None,
    *,
    settings: Settings | None = None,
) -> JobSpec:
    """Load, template, override and validate a job spec (docs/contract.md section 1).

    A spec that runs the bundled trainer also has its trainer args checked by the trainer's own
    parser, so a misspelt model or flag fails here (exit 2).

    Args:
        path: the YAML file.
        set: overrides, each ``"a.b=c"`` (as ``--set``); they win over the file.
        vars: values for the spec's ``{{ NAME }}`` template variables (as ``--var``).
        project: the Google Cloud project; wins over the spec's.
        region: the Vertex AI region; wins over the spec's.
        settings: the process settings (default: read from the environment); their project and
            region fill what the spec leaves out.

    Returns:
        the validated JobSpec.

    Raises:
        SpecError: a field is wrong (its dotted name, the value and the fix; exit 2).
    """
    from vertex_trainer import spec as _spec

    settings = settings or settings_from_env()
    loaded = _spec.load_spec(
        path,
        sets=tuple(set),
        vars=dict(vars or {}),
        project=project,
        region=region,
        environ=settings.environ,
        default_project=settings.project,
        default_region=settings.region,
    )
    if loaded.runs_bundled_trainer:
        _spec.check_trainer_flags(loaded)
    return loaded


def check(spec: JobSpec, *, local: bool = False) -> None:
    """The checks made before anything is built, sent or run (exit 2 on failure).

    A cloud job must have a project and cloud paths; a local run always runs the bundled trainer,
    so its args must pass the trainer's parser whatever the spec's image, and its local data
    must exist.

    Args:
        spec: the job spec, from :func:`load_spec`.
        local: check for a run on this machine instead of a Vertex AI submit.

    Returns:
        None; raises SpecError (every problem found, exit 2) when the spec cannot go.
    """
    from vertex_trainer.spec import check_trainer_flags, cloud_problems

    if not local:
        cloud_problems(spec)
    if local or spec.runs_bundled_trainer:
        check_trainer_flags(spec)
    if local:
        _local_data(spec)


def _local_data(spec: JobSpec) -> None:
    """A local run's local data must exist: a pattern that matches nothing is exit 2 now, not a
    replica's failure seconds later. (gs:// and /gcs/ paths are the trainer's to open.)"""
    import glob

    from vertex_trainer.errors import SpecError
    from vertex_trainer.spec.rules import split_patterns

    for field in ("train_data", "eval_data"):
        value = getattr(spec.trainer, field)
        for pattern in split_patterns(value or ""):
            if pattern.startswith(("gs://", "/gcs/")) or glob.glob(pattern):
                continue
            raise SpecError(
                f"trainer.{field}",
                f"no files match {pattern!r} on this machine",
                has_value=False,
                hint="make the data first, e.g. `vertex-trainer data synth DIR`, or fix "
                "the path (relative paths are from the current directory)",
            )


def plan_artifact(spec: JobSpec) -> Artifact:
    """The artifact a job runs, without any network call (the one planner behind render,
    --local and dry runs).

    Args:
        spec: the job spec.

    Returns:
        an Artifact: ``image.uri`` as is, or the content-hash tag the packager would build; a
        spec without ``image:`` (local runs only) names the installed trainer.
    """
    if spec.image is None:
        return Artifact(LOCAL_IMAGE)
    if not spec.image.builds:
        return Artifact(spec.image.uri)
    from vertex_trainer import packaging

    return packaging.plan_artifact(spec)


def render_job(spec: JobSpec, idempotency_key: str | None = None) -> dict:
    """The CustomJob REST body `submit` would send (no network; docs/contract.md section 2).

    Args:
        spec: the job spec.
        idempotency_key: the key whose label the body carries (None: no key label).

    Returns:
        the CustomJob as a dict, exactly as the REST API receives it (camelCase, enum names).
    """
    from vertex_trainer import render

    if idempotency_key is not None:
        check_key(idempotency_key)
    return render.custom_job(spec, plan_artifact(spec), idempotency_key=idempotency_key)


def package(
    spec: JobSpec,
    *,
    builder: str | None = None,
    dry_run: bool = False,
    log: Log | None = None,
    settings: Settings | None = None,
) -> PackageResult:
    """Build and push the image once per content hash, or stage the Python package
    (docs/contract.md section 4).

    Args:
        spec: a job spec with ``image:`` (``repository`` to build, or ``python_package``).
        builder: ``docker`` or ``cloud-build`` (default: the packager's choice).
        dry_run: plan only: the hash, tag and builder; nothing is touched.
        log: where progress lines go (default: stderr).
        settings: the process settings (default: read from the environment).

    Returns:
        a PackageResult: the artifact, the image, whether it was built, and the plan.
    """
    from vertex_trainer import packaging
    from vertex_trainer.workflows.preflight import check_stand_ins

    if spec.image is None:
        from vertex_trainer.errors import SpecError

        raise SpecError(
            "image",
            "is required to package: the spec names no image",
            has_value=False,
            hint="image.repository: REGION-docker.pkg.dev/PROJECT/REPO/trainer builds the bundled trainer",
        )
    settings = settings or settings_from_env()
    if not dry_run:
        check_stand_ins(spec, settings, builder=builder)
    return packaging.ensure_artifact(spec, settings=settings, builder=builder, dry_run=dry_run, log=log)


@dataclass(frozen=True)
class SubmitOptions:
    """The less common knobs of :func:`submit`, in one object so its signature stays small.

    Every field can also be given to ``submit`` as a keyword: ``submit(spec, timeout=600)`` is
    ``submit(spec, options=SubmitOptions(timeout=600))``.

    Attributes:
        timeout: with ``wait``, seconds to follow the job before giving up (None: until it ends).
        quota_check: read the project's quota for the accelerator before creating
            (vertex_trainer.workflows.capacity); a dry run never reads it.
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
            plan whose worst case (timeout x hourly list price) exceeds it is refused (exit 2)
            before anything is built or sent (docs/contract.md section 12).
    """

    timeout: float | None = None
    quota_check: bool = True
    builder: str | None = None
    on_state: Callable[[Job], None] | None = None
    follow: Callable[[Job, Any], Any] | None = None
    console: Any = None
    summary: bool = True
    client: JobsClient | None = None
    max_cost: float | None = None


def submit(
    spec: JobSpec,
    wait: bool = False,
    idempotency_key: str | None = None,
    *,
    local: bool = False,
    dry_run: bool = False,
    deploy: bool = False,
    options: SubmitOptions | None = None,
    settings: Settings | None = None,
    log: Log | None = None,
    **option: Any,
) -> Job | LocalJob | DryRun | TuningJob:
    """Submit a resolved spec as a Vertex AI CustomJob, at most once per idempotency key.

    The one path (docs/contract.md section 2): pre-submit checks -> artifact (planned, or built
    when the spec builds) -> render -> create (idempotent) | run here | describe (dry run). A spec
    with ``tune:`` becomes a HyperparameterTuningJob (section 10); one with
    ``scheduling.fallback`` tries its strategies in turn (section 8).

    Args:
        spec: the job spec, from :func:`load_spec`.
        wait: follow the job to its end; raises JobFailed unless it SUCCEEDED (see
            ``SubmitOptions.follow``).
        idempotency_key: reuse it when retrying (CI: the run id) and no second job is created;
            None picks a random key.
        local: run the same rendered job on this machine instead (vertex_trainer.local).
        dry_run: describe the requests and return a :class:`DryRun`; nothing is sent, built or run.
        deploy: when the job SUCCEEDED, register its model and deploy it (the spec's ``deploy:``
            block, section 5); implies ``wait``. The Deployment is ``job.deployment`` (a dry run:
            ``DryRun.deploy``, the requests it would send).
        options: the less common knobs (:class:`SubmitOptions`).
        settings: the process settings (default: read from the environment).
        log: where progress lines go (default: stderr).
        **option: any :class:`SubmitOptions` field by name (``timeout=600``, ``client=...``).

    Returns:
        the :class:`Job` (a ``TuningJob`` for a ``tune:`` spec), a :class:`LocalJob` with
        ``local=True``, or a :class:`DryRun` with ``dry_run=True``.

    Raises:
        UserError, SpecError: bad input (exit 2), before anything is built, sent or run.
        JobFailed: ``wait`` and the job did not succeed (unless ``options.follow`` is given).
    """
    opts = _options(options, option)
    settings = settings or (opts.client.settings if opts.client else settings_from_env())
    log = log or _stderr
    key = check_key(idempotency_key) if idempotency_key is not None else new_key()
    _check_deploy(spec, deploy=deploy, local=local)
    wait = wait or deploy
    check(spec, local=local)  # exit 2 before anything is built, sent or run
    if not local and spec.tune is None:  # over budget (scheduling.max_cost, --max-cost): exit 2, nothing sent
        from vertex_trainer.workflows.cost import enforce_budget

        enforce_budget(spec, max_cost=opts.max_cost)
    skipped = (
        {} if local else _preflight(spec, settings=settings, log=log, dry_run=dry_run, quota=opts.quota_check)
    )
    artifact, image, plan = _artifact(
        spec, dry_run=dry_run, local=local, builder=opts.builder, log=log, settings=settings
    )
    from vertex_trainer import render

    body = render.custom_job(spec, artifact=artifact, idempotency_key=key)
    if spec.tune is not None:  # a HyperparameterTuningJob whose trials run `body`
        from vertex_trainer.workflows import tuning

        return tuning.submit(
            spec,
            body,
            key=key,
            image=image,
            package=_package_step(plan),
            wait=wait,
            local=local,
            dry_run=dry_run,
            timeout=opts.timeout,
            on_state=opts.on_state,
            log=log,
            console=opts.console,
            settings=settings,
        )
    if local:
        return _run_here(spec, body, image, key, dry_run=dry_run, wait=wait, opts=opts, settings=settings)

    client = opts.client or JobsClient(spec.project, spec.region, settings=settings, log=log)
    if dry_run:
        deploying = _deploy(spec, job="JOB", dry_run=True, settings=settings) if deploy else None
        from vertex_trainer.workflows import fallback

        attempts = (
            fallback.plan_requests(fallback.region_clients(client), spec, artifact, key)
            if spec.scheduling.fallback
            else None
        )
        return DryRun(
            body,
            client.requests_for(body, key),
            image,
            key,
            package=_package_step(plan),
            deploy=deploying,
            attempts=attempts,
        )
    job = _create(
        client, spec, artifact, body, key, image=image, wait=wait, opts=opts, log=log, skipped=skipped
    )
    if deploy and job.succeeded:
        job.deployment = _deploy(spec, job=job.name, log=log, settings=settings)
    return job


def _options(options: SubmitOptions | None, option: Mapping[str, Any]) -> SubmitOptions:
    """`options` with the keyword shorthands applied (an unknown name is a TypeError, as for any
    function)."""
    import dataclasses

    options = options or SubmitOptions()
    known = {f.name for f in dataclasses.fields(SubmitOptions)}
    unknown = sorted(set(option) - known)
    if unknown:
        raise TypeError(
            f"submit() got unexpected keyword argument(s) {', '.join(unknown)} "
            f"(SubmitOptions fields: {', '.join(sorted(known))})"
        )
    return dataclasses.replace(options, **option) if option else options


def _check_deploy(spec: JobSpec, *, deploy: bool, local: bool) -> None:
    """`deploy=True` needs a CustomJob on Vertex AI (exit 2 otherwise, nothing sent)."""
    if not deploy:
        return
    from vertex_trainer.errors import UserError

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


def _preflight(spec: JobSpec, *, settings: Settings, log: Log, dry_run: bool, quota: bool) -> dict[int, str]:
    """A cloud submit's look before it builds or sends: the registry's region (a warning), the
    buckets (missing: exit 2), each attempt's region, quota and persistent resource (docs/contract.md
    sections 8 and 11). Returns the attempts to skip (attempt n -> why)."""
    from vertex_trainer.spec.rules import warnings
    from vertex_trainer.workflows import capacity, preflight

    for warning in warnings(spec):  # valid but without effect (e.g. max_wait with spot)
        log(warning)
    far = preflight.registry_far(spec)
    if far:
        log(far)
    if not dry_run:  # (the stand-ins a build needs are checked by package())
        preflight.check_buckets(spec, settings=settings, log=log)
    return capacity.before_submit(
        spec, settings=settings, log=log, quota=quota and not dry_run, remote=not dry_run
    )


def _run_here(
    spec: JobSpec,
    body: dict,
    image: str,
    key: str,
    *,
    dry_run: bool,
    wait: bool,
    opts: SubmitOptions,
    settings: Settings,
) -> LocalJob | DryRun:
    """submit(local=True): the rendered job run on this machine (or, dry, described)."""
    if dry_run:
        return DryRun(body, [{"local": True, "body": body}], image, key, local=True)
    from vertex_trainer.local import run_local

    result = run_local(body, spec, settings=settings, wait=wait, console=opts.console, summary=opts.summary)
    return LocalJob(result, body, image, key)


def _create(
    client: JobsClient,
    spec: JobSpec,
    artifact: Artifact,
    body: dict,
    key: str,
    *,
    image: str,
    wait: bool,
    opts: SubmitOptions,
    log: Log,
    skipped: Mapping[int, str] | None = None,
) -> Job:
    """Create the job once per key (each strategy of a fallback plan in turn) and, with `wait`,
    follow it: `opts.follow` when given (the caller judges the end), else Job.wait."""
    if spec.scheduling.fallback:  # capacity fallback (docs/contract.md section 8)
        from vertex_trainer.workflows import fallback

        # Each attempt in its own region: a client per region (docs/contract.md section 11).
        return fallback.submit(
            fallback.region_clients(client),
            spec,
            artifact,
            key,
            image=image,
            job_type=Job,
            wait=wait,
            timeout=opts.timeout,
            follow=opts.follow,
            on_state=opts.on_state,
            log=log,
            check=opts.follow is None,
            skipped=skipped,
        )
    data, adopted = create_idempotent(client, body, key)
    job = Job(data, client, image=image, idempotency_key=key, adopted=adopted, spec=spec)
    if wait and opts.follow is not None:
        opts.follow(job, opts.timeout)  # (a job adopted after it ended: its log and how it ended)
    elif wait:
        job.wait(timeout=opts.timeout, on_state=opts.on_state)
    return job


def _artifact(
    spec: JobSpec, *, dry_run: bool, local: bool, builder: str | None, log: Log, settings: Settings
) -> tuple[Artifact, str, Any]:
    """(artifact, image, build plan or None) for the spec.

    A plain image uri needs no packaging; a local run only needs the tag (the installed trainer
    runs); a cloud submit ensures the image exists, and a dry run plans that once (as a real
    submit would, so a missing staging location shows)."""
    if local or spec.image is None or not spec.image.builds:
        artifact = plan_artifact(spec)
        return artifact, artifact.image_uri, None
    result = package(spec, builder=builder, dry_run=dry_run, log=log, settings=settings)
    return result.artifact, result.image, result.plan


def _package_step(plan) -> dict | None:
    """What packaging a dry run skipped: the build (or upload) submit does first, if needed."""
    if plan is None:
        return None
    return {
        "kind": plan.kind,
        "target": plan.target,
        "builder": plan.builder,
        "context_hash": plan.context_hash,
        "files": len(plan.entries),
        "bytes": plan.size,
    }


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def deploy(
    spec: JobSpec,
    *,
    job: str | None = None,
    model_dir: str | None = None,
    dry_run: bool = False,
    timeout: float | None = None,
    log: Log | None = None,
    settings: Settings | None = None,
) -> Deployment | dict:
    """Register a finished job's model (or `model_dir`) in the Model Registry and deploy it to
    the spec's endpoint, at most once per job (docs/contract.md section 5).

    Args:
        spec: the job spec whose ``deploy:`` block says where and how.
        job: the training job that SUCCEEDED (its ``<output_dir>/model`` is registered).
        model_dir: a SavedModel in Cloud Storage, instead of ``job`` (exactly one of the two).
        dry_run: return the requests it would send, as a dict; nothing is sent.
        timeout: seconds to wait for the upload and the deployment (default: deploy.timeout).
        log: where progress lines go (default: stderr).
        settings: the process settings (default: read from the environment).

    Returns:
        the Deployment (model, version, endpoint, traffic split, adopted), or with ``dry_run``
        a dict ``{"requests": [...]}``.
    """
    from vertex_trainer.errors import UserError
    from vertex_trainer.spec import cloud_problems
    from vertex_trainer.vertex.deploy import deploy as run_deploy
    from vertex_trainer.vertex.models import RegistryClient
    from vertex_trainer.workflows import deployment

    if (job is None) == (model_dir is None):
        raise UserError(
            "deploy needs exactly one of --job JOB or --model-dir gs://...",
            hint="--job: a job that SUCCEEDED; --model-dir: a SavedModel in Cloud Storage",
        )
    settings = settings or settings_from_env()
    log = log or _stderr
    if not spec.project:
        cloud_problems(spec)  # names the missing project (exit 2)
    client = RegistryClient(spec.project, spec.region, settings=settings, log=log)
    if job is not None:
        if dry_run:
            artifact, label, image = f"<output_dir of {job}>/model", "JOB_ID", "<the job's image>"
        else:
            found = Job.get(job, project=spec.project, region=spec.region, settings=settings)
            artifact, label, image = deployment.from_job(spec, found.data)
    else:
        planned = plan_artifact(spec).image_uri if spec.image is not None else None
        artifact, label, image = deployment.from_model_dir(model_dir, planned)
    request = deployment.request(spec, artifact, label, image)
    if dry_run:
        return deployment.dry_run(client, request)
    deployment.check_model_dir(settings, artifact, log=log)
    return run_deploy(
        client, request, poll=settings.poll, timeout=timeout or deployment.deploy_block(spec).timeout, log=log
    )


_deploy = deploy  # (submit's `deploy` argument hides the function inside submit)
