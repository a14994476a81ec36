"""The Python API and the one orchestrator: the CLI and notebooks call it; it never calls the CLI.

    import vertex_trainer as vt
    spec = vt.load_spec("job_specs/resnet50.yaml", set=["trainer.epochs=1"])
    job = vt.submit(spec)                # -> Job (name, state, console_url, refresh/wait/cancel)
    job.wait()

`submit()` is the one path: pre-submit checks -> artifact (plan, or build when needed) -> render
-> create (idempotent) | run locally | describe the requests (dry run). Everything it sends or
runs is made from the same rendered CustomJob dict. This package and the CLI are the edge: the
environment is read here once (`Settings.from_environ`) and passed down as `settings`.

    core.py     load, check, plan, render, package, submit (SubmitOptions), deploy; the API's Job
    results.py  what submit returns otherwise: DryRun, LocalJob
    jobs.py     jobs by name: status, tuning_job, cancel, list_jobs, logs
    events.py   pipelines (compile, submit, status) and storage triggers (render, deploy, the function)
    bench.py    bench: the job on synthetic, then real data
    capacity.py the capacity plan, persistent resources, a shell on a replica (web access)
    cost.py     cost: prices, the estimate, the comparison, refresh-prices
    data.py     data convert: images -> TFRecords (Beam here or on Dataflow)
    inputs.py   what a person types, checked: KEY=VALUE lists, idempotency keys, label selectors
"""

from vertex_trainer.api.bench import bench
from vertex_trainer.api.capacity import (
    create_resource,
    delete_resource,
    list_resources,
    plan,
    resource_request,
    web_access,
)
from vertex_trainer.api.core import (
    Job,
    SubmitOptions,
    check,
    deploy,
    load_spec,
    package,
    plan_artifact,
    render_job,
    settings_from_env,
    submit,
)
from vertex_trainer.api.cost import cost, job_cost, prices, refresh_prices
from vertex_trainer.api.data import convert_data
from vertex_trainer.api.events import (
    compile_pipeline,
    on_object_finalized,
    pipeline_status,
    pipeline_submit,
    pipeline_yaml,
    trigger_deploy,
    trigger_render,
)
from vertex_trainer.api.inputs import check_key, parse_assignments, parse_label
from vertex_trainer.api.jobs import cancel, find_local_run, list_jobs, logs, status, tuning_job
from vertex_trainer.api.results import DryRun, LocalJob

__all__ = [
    "DryRun",
    "Job",
    "LocalJob",
    "SubmitOptions",
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
    "job_cost",
    "list_jobs",
    "list_resources",
    "load_spec",
    "logs",
    "on_object_finalized",
    "package",
    "parse_assignments",
    "parse_label",
    "pipeline_status",
    "pipeline_submit",
    "pipeline_yaml",
    "plan",
    "plan_artifact",
    "prices",
    "refresh_prices",
    "render_job",
    "resource_request",
    "settings_from_env",
    "status",
    "submit",
    "trigger_deploy",
    "trigger_render",
    "tuning_job",
    "web_access",
]
