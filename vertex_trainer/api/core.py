"""The core of the Python API (vertex_trainer.api re-exports it; its docstring has the example):
reading the settings at the edge, loading and checking a spec, the artifact it runs and the
CustomJob it renders, all without a network call. The submit plan is built from these
(plan.py) and run by the executors (execute.py); handles.py holds the Job, package.py and
deploy.py the other two steps. This package and the CLI are the edge: the environment is read
once (`Settings.from_environ`) and passed down as `settings`.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from vertex_trainer.contract import LOCAL_IMAGE, Artifact
from vertex_trainer.errors import SpecError, UserError
from vertex_trainer.gcp import auth
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import check_key
from vertex_trainer.vertex.names import new_key

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.spec import JobSpec

# Every command loads this module (settings_from_env). The spec's pydantic models (vertex_trainer.spec,
# and render, packaging and local.owncode, which import them) are imported inside the functions that
# take a spec, so that `list`, `status`, `logs`, `endpoints` or `resources` load none of them.

__all__ = ["check", "load_spec", "plan_artifact", "render_job", "render_text", "settings_from_env"]


def settings_from_env() -> Settings:
    """The settings of this process, read from its environment (the edge); their identity (a
    service account to impersonate) is the one every request goes as from now on.

    Returns:
        a Settings (project, region, endpoints, retry and poll policies) from ``os.environ``.
    """
    settings = Settings.from_environ(os.environ)
    use_identity(settings)
    return settings


def use_identity(settings: Settings) -> None:
    """Send every request from now on as `settings` says: as
    `settings.impersonate_service_account` (google-auth's impersonated credentials over the
    Application Default Credentials), or as the ADC themselves (docs/check.md).

    Args:
        settings: the settings whose identity to use.

    Returns:
        None; every session, storage client and token made afterwards carries that identity.
    """
    auth.use(settings)


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
        set: overrides, each ``"a.b=c"`` (as ``--set``; one string is one override); they win
            over the file.
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
    from vertex_trainer import spec as _spec  # spec models (top note)

    if not isinstance(path, (str, os.PathLike)):  # a notebook's dict (or a JobSpec) as the path
        kind = "None" if path is None else type(path).__name__  # (not its value: an env secret)
        raise UserError(
            f"load_spec: path must be a YAML file's path (a str or a Path), not {kind}",
            hint="write the spec to a .yaml file and give its path, e.g. "
            "vt.load_spec('job_specs/my-job.yaml'); set=['trainer.epochs=3', ...] overrides its values",
        )
    settings = settings or settings_from_env()
    loaded = _spec.load_spec(
        path,
        sets=(set,) if isinstance(set, str) else tuple(set),  # set="a=b": one override, not 3 letters
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


def require_spec(spec: object, call: str) -> None:
    """A notebook's `vt.submit("spec.yaml")` (a path where the loaded spec goes) is one UserError
    naming the call, the value and the fix, not an AttributeError from deep inside.

    Args:
        spec: what the caller passed as the spec.
        call: the API function, e.g. "submit", named in the message.

    Raises:
        UserError: spec is not a JobSpec (exit 2).
    """
    from vertex_trainer.spec import JobSpec as _JobSpec  # spec models (top note)

    if isinstance(spec, _JobSpec):
        return
    if isinstance(spec, (str, os.PathLike)):
        fix = f"load it first: spec = vt.load_spec({os.fspath(spec)!r}); vt.{call}(spec)"
    else:
        fix = f"vt.load_spec(PATH) makes one from a YAML file: vt.{call}(vt.load_spec(PATH))"
    shown = repr(spec) if len(repr(spec)) <= 80 else repr(spec)[:77] + "..."
    raise UserError(f"{call}: spec must be a JobSpec, not {type(spec).__name__} {shown}", hint=fix)


def check(spec: JobSpec, *, local: bool = False) -> None:
    """The checks made before anything is built, sent or run (exit 2 on failure).

    A cloud job must have a project and cloud paths. A local run runs the bundled trainer, whose
    args must pass the trainer's parser whatever the spec's image and whose local data must
    exist, or a script job's own code, whose directory, entry and requirements must be there;
    an image built elsewhere with no trainer: block cannot run here, nor one whose model
    factory (trainer.model: package.module:function) cannot be imported here.

    Args:
        spec: the job spec, from :func:`load_spec`.
        local: check for a run on this machine instead of a Vertex AI submit.

    Returns:
        None; raises SpecError (every problem found, exit 2) when the spec cannot go.
    """
    from vertex_trainer.spec import check_trainer_flags, cloud_problems  # spec models (top note)

    require_spec(spec, "check")

    if not local:
        cloud_problems(spec)
    if local and spec.trainer is None and not spec.is_script_job:
        # Without trainer: an image built elsewhere runs its own command, and this machine runs
        # no container: what would run here is not the job (docs/local.md).
        raise SpecError(
            "trainer",
            "is required for --local when the job runs an image built elsewhere (image.uri): "
            "a local run runs the bundled trainer, or your own code from image.code, not a container",
            has_value=False,
            hint="add a trainer: block to run the bundled trainer here, or give image.code with "
            "image.script (docs/own-code.md)",
        )
    if local or spec.runs_bundled_trainer:
        check_trainer_flags(spec)
    if local:
        _local_output(spec)
        _local_data(spec)


def _local_output(spec: JobSpec) -> None:
    """A local output_dir must be a folder, or a path where one can be made: a file in the way is
    exit 2 now, naming it, not a traceback once the run's folder is made."""
    value = spec.output_dir
    if not value or value.startswith(("gs://", "/gcs/")):
        return  # (none: the temp dir; gs:// is the trainer's, /gcs/ refused by the runner)
    path = Path(os.path.abspath(os.path.expanduser(value.removeprefix("file://"))))
    for there in (path, *path.parents):
        if there.is_dir():
            return
        if there.exists() or there.is_symlink():
            what = "a broken link" if not there.exists() else "a file, not a folder"
            raise SpecError(
                "output_dir",
                f"{there} is {what}: the run's folder cannot be made below it",
                value=value,
                hint="point output_dir at a folder (or a path where one can be made), e.g. runs/NAME",
            )


def _local_data(spec: JobSpec) -> None:
    """A local run's local data must exist: a pattern that matches nothing is exit 2 now, not a
    replica's failure seconds later. (gs:// and /gcs/ paths are the trainer's to open.)"""
    from vertex_trainer.spec.rules import split_patterns  # spec models (top note)

    if spec.trainer is None:  # script jobs (issue 32): the code, its entry and requirements instead
        if spec.is_script_job:
            from vertex_trainer.local.owncode import preflight  # spec models (top note)

            preflight(spec)
        return
    from vertex_trainer.spec.factory import is_factory, runs_factory  # spec models (top note)

    if is_factory(spec.trainer.model) and not runs_factory(spec):  # image.uri holds the factory
        from vertex_trainer.local.owncode import check_factory_here  # spec models (top note)

        check_factory_here(spec)
    elif runs_factory(spec):  # your model factory's requirements, in this interpreter (as run_local)
        from vertex_trainer.local.owncode import check_requirements, factory_code  # spec models (top note)

        check_requirements(factory_code(spec))
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
    if not spec.image.builds and spec.image.uri is not None:  # (exactly one of uri, repository, package)
        return Artifact(spec.image.uri)
    from vertex_trainer import packaging  # spec models (top note)

    return packaging.plan_artifact(spec)


def render_job(spec: JobSpec, idempotency_key: str | None = None) -> dict:
    """The CustomJob REST body `submit` would send (no network; docs/contract.md section 2).

    Args:
        spec: the job spec.
        idempotency_key: the key whose label the body carries, and which names the run's own
            folder below output_dir (None: a fresh key, as submit makes one).

    Returns:
        the CustomJob as a dict, exactly as the REST API receives it (camelCase, enum names).
    """
    from vertex_trainer import render  # spec models (top note)

    require_spec(spec, "render_job")

    key = check_key(idempotency_key) if idempotency_key is not None else new_key()
    return render.custom_job(spec, plan_artifact(spec), idempotency_key=key)


def render_text(spec: JobSpec, format: str = "json", idempotency_key: str | None = None) -> str:
    """What `vertex-trainer render` prints: the body submit would create first (a ``tune:``
    spec's HyperparameterTuningJob, whose trials run the CustomJob), in one printed form.

    Args:
        spec: the job spec.
        format: ``json`` (the REST body), ``yaml``, or ``gcloud`` (a ``--config`` file for
            ``gcloud ai custom-jobs create``). json and gcloud are what Vertex AI is sent: a
            value that works only here (a local output_dir or data path, no image) is refused
            as :func:`check` refuses it for a cloud submit; yaml shows any spec's body.
        idempotency_key: the key whose label the body carries and which names the run's folder
            (None: a fresh key, as submit makes one).

    Returns:
        the text, ending with a newline. Raises SpecError (exit 2) for json or gcloud of a
        body that names a local path.
    """
    from vertex_trainer import render  # spec models (top note)

    if format in SENT_FORMATS:
        _sent_values(spec, format)
        within_budget(spec)
    job = render_job(spec, idempotency_key=idempotency_key)
    if spec.tune is not None:
        job = render.tuning_job(spec, job)  # submit creates this; each trial runs the CustomJob
    if format == "json":
        return render.to_json(job)
    if format == "yaml":
        return render.to_yaml(job)
    if format == "gcloud":
        return render.to_gcloud_config(spec, job)
    raise ValueError(f"render_text: unknown format {format!r} (json, yaml, gcloud)")


SENT_FORMATS = ("json", "gcloud")  # the printed forms meant for Vertex AI (REST, gcloud --config)
# The fields of cloud_problems whose value the rendered body carries (project and region are in
# the URL, not the body; the image stands for the installed trainer when the spec has none).
_IN_THE_BODY = ("output_dir", "trainer.train_data", "trainer.eval_data", "image")


def within_budget(spec: JobSpec) -> None:
    """scheduling.max_cost, checked as submit and validate check it (exit 2 with the figures),
    for what is made here to run elsewhere: `render --format json|gcloud` (for `gcloud ai
    custom-jobs create`) and a compiled pipeline, which would otherwise run a plan the spec's own
    budget refuses. Without a budget nothing is priced."""
    if spec.scheduling.max_cost is None:
        return
    from vertex_trainer import pricing
    from vertex_trainer.cost.budget import enforce_budget
    from vertex_trainer.cost.estimate import estimate

    enforce_budget(spec, estimate(spec, pricing.load_snapshot()))


def _sent_values(spec: JobSpec, format: str) -> None:
    """`render --format json|gcloud`: the body's values must work on Vertex AI, as `validate`
    requires of a cloud job (spec.cloud_problems, the same messages); exit 2 naming each."""
    from vertex_trainer.spec import cloud_problems  # spec models (top note)
    from vertex_trainer.spec.rules import raise_all  # spec models (top note)

    try:
        cloud_problems(spec)
    except SpecError as e:
        fix = (
            f"`render --format {format}` prints what Vertex AI is sent: pass --set "
            f"output_dir=gs://BUCKET/{spec.name} (the spec keeps its local path for --local; "
            "--format yaml renders it as it is)"
        )
        raise_all(
            [
                SpecError(
                    p.field,
                    p.message.removeprefix(f"{p.field}: "),
                    value=p.value,
                    hint=fix if p.field == "output_dir" else p.hint,
                )
                for p in e.problems
                if p.field in _IN_THE_BODY
            ]
        )


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
