"""The Python API and the one orchestrator: the CLI and notebooks call it; it never calls the CLI.

    import vertex_trainer as vt
    spec = vt.load_spec("job_specs/resnet50.yaml", set=["trainer.epochs=1"])
    job = vt.submit(spec)                # -> a Handle (name, state, console_url, refresh/wait/cancel)
    job.wait()

`submit()` is the one path: `plan_submit` makes the plan (every check, the budget, the artifact
planned, each attempt's CustomJob rendered once: a frozen `SubmitPlan`), then the executor of
its kind runs it (one `Executor` per kind): create (idempotent) | run locally | the tuning job |
the fallback's attempts, and returns a `Handle` whatever the kind; a dry run returns the plan.
Everything it sends or runs is the plan's. This package and the CLI are the edge: the
environment is read here once (`Settings.from_environ`) and passed down as `settings`.

    core.py     settings, load, check, plan the artifact, render (no network)
    plan.py     the submit plan: SubmitOptions, SubmitPlan, plan_submit; the quota look of validate
    execute.py  submit: the plan, then the executor of its kind (EXECUTORS: custom, fallback, tuning,
                pipeline, local, local tuning)
    handles.py  the Handle every submit returns (a protocol) and the API's Job; results.py the
                DryRun and the LocalJob
    package.py  package: the image built once per content hash (or the Python package staged)
    deploy.py   deploy: a finished job's model registered and served
    endpoints.py endpoints and undeploy: what is deployed (with its hourly price), one taken off
    jobs.py     jobs by name: status, utilization, tuning_job, cancel, list_jobs, logs
    events.py   pipelines (compile, submit, status) and storage triggers (render, deploy, the function)
    bench.py    bench: the job on synthetic, then real data
    capacity.py the capacity plan, persistent resources, a shell on a replica (web access)
    catalog.py  the hardware catalog (presets, regions, sources) and the spec's JSON Schema
    cost.py     cost: prices, the estimate, the comparison, refresh-prices
    report.py   report: a run's or job's whole story as one HTML page (or PNG)
    profile.py  profile and tensorboard: where the step time goes (the profiler trace), TensorBoard
    project.py  check and setup: is the project ready for the job (project_check, project_setup)

The names are loaded on first use (PEP 562, vertex_trainer.interface), so `from vertex_trainer
import api` is cheap: a command loads the modules it calls and nothing else (`--help` none).
Where a module and a function share a name (api.bench, api.cost, api.plan, ...), `api.NAME` is
always the function, as it was when this package imported each module eagerly (the guard is
interface.exports's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vertex_trainer import interface

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.api.bench import bench
    from vertex_trainer.api.capacity import (
        create_resource,
        delete_resource,
        list_resources,
        plan,
        resource_hourly,
        resource_request,
        web_access,
    )
    from vertex_trainer.api.catalog import AcceleratorSource, HardwareCatalog, hardware_catalog, spec_schema
    from vertex_trainer.api.core import (
        check,
        load_spec,
        plan_artifact,
        render_job,
        render_text,
        settings_from_env,
        use_identity,
    )
    from vertex_trainer.api.cost import cost, job_cost, prices, refresh_prices
    from vertex_trainer.api.data import convert_data, synthesize_data
    from vertex_trainer.api.deploy import deploy, serve_model
    from vertex_trainer.api.endpoints import list_endpoints, undeploy
    from vertex_trainer.api.events import (
        compile_pipeline,
        on_object_finalized,
        pipeline_status,
        pipeline_submit,
        pipeline_yaml,
        trigger_deploy,
        trigger_render,
    )
    from vertex_trainer.api.execute import Handle, submit
    from vertex_trainer.api.handles import Job
    from vertex_trainer.api.inputs import check_key, parse_assignments, parse_label
    from vertex_trainer.api.jobs import (
        cancel,
        find_local_run,
        list_jobs,
        logs,
        status,
        tuning_job,
        utilization,
    )
    from vertex_trainer.api.package import package
    from vertex_trainer.api.plan import (
        AttemptPlan,
        QuotaLook,
        SubmitOptions,
        SubmitPlan,
        TrialPlan,
        look_at_quota,
        plan_submit,
    )
    from vertex_trainer.api.profile import profile, tensorboard
    from vertex_trainer.api.project import ProjectCheck, project_check, project_setup
    from vertex_trainer.api.report import report
    from vertex_trainer.api.results import DryRun, LocalJob

__all__ = [
    "AcceleratorSource",
    "AttemptPlan",
    "DryRun",
    "Handle",
    "HardwareCatalog",
    "Job",
    "LocalJob",
    "ProjectCheck",
    "QuotaLook",
    "SubmitOptions",
    "SubmitPlan",
    "TrialPlan",
    "bench",
    "cancel",
    "check",
    "check_key",
    "compile_pipeline",
    "convert_data",
    "cost",
    "create_resource",
    "delete_resource",
    "deploy",
    "find_local_run",
    "hardware_catalog",
    "job_cost",
    "list_endpoints",
    "list_jobs",
    "list_resources",
    "load_spec",
    "logs",
    "look_at_quota",
    "on_object_finalized",
    "package",
    "parse_assignments",
    "parse_label",
    "pipeline_status",
    "pipeline_submit",
    "pipeline_yaml",
    "plan",
    "plan_artifact",
    "plan_submit",
    "prices",
    "profile",
    "project_check",
    "project_setup",
    "refresh_prices",
    "render_job",
    "render_text",
    "report",
    "resource_hourly",
    "resource_request",
    "serve_model",
    "settings_from_env",
    "spec_schema",
    "status",
    "submit",
    "synthesize_data",
    "tensorboard",
    "trigger_deploy",
    "trigger_render",
    "tuning_job",
    "undeploy",
    "use_identity",
    "utilization",
    "web_access",
]

_EXPORTS = {  # each public name -> the module of this package that defines it
    "bench": "bench",
    "create_resource": "capacity",
    "delete_resource": "capacity",
    "list_resources": "capacity",
    "plan": "capacity",
    "resource_hourly": "capacity",
    "resource_request": "capacity",
    "web_access": "capacity",
    "AcceleratorSource": "catalog",
    "HardwareCatalog": "catalog",
    "hardware_catalog": "catalog",
    "spec_schema": "catalog",
    "check": "core",
    "load_spec": "core",
    "plan_artifact": "core",
    "render_job": "core",
    "render_text": "core",
    "settings_from_env": "core",
    "use_identity": "core",
    "cost": "cost",
    "job_cost": "cost",
    "prices": "cost",
    "refresh_prices": "cost",
    "convert_data": "data",
    "synthesize_data": "data",
    "deploy": "deploy",
    "serve_model": "deploy",
    "list_endpoints": "endpoints",
    "undeploy": "endpoints",
    "compile_pipeline": "events",
    "on_object_finalized": "events",
    "pipeline_status": "events",
    "pipeline_submit": "events",
    "pipeline_yaml": "events",
    "trigger_deploy": "events",
    "trigger_render": "events",
    "Handle": "handles",
    "submit": "execute",
    "Job": "handles",
    "check_key": "inputs",
    "parse_assignments": "inputs",
    "parse_label": "inputs",
    "cancel": "jobs",
    "find_local_run": "jobs",
    "list_jobs": "jobs",
    "logs": "jobs",
    "status": "jobs",
    "tuning_job": "jobs",
    "utilization": "jobs",
    "package": "package",
    "AttemptPlan": "plan",
    "QuotaLook": "plan",
    "SubmitOptions": "plan",
    "SubmitPlan": "plan",
    "TrialPlan": "plan",
    "look_at_quota": "plan",
    "plan_submit": "plan",
    "profile": "profile",
    "tensorboard": "profile",
    "ProjectCheck": "project",
    "project_check": "project",
    "project_setup": "project",
    "report": "report",
    "DryRun": "results",
    "LocalJob": "results",
}


if not TYPE_CHECKING:  # mypy sees the imports above; the names resolve on first use
    __getattr__, __dir__ = interface.exports(__name__, _EXPORTS)
