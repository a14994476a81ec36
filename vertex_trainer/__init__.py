"""vertex-trainer: a YAML spec to a Vertex AI CustomJob, and the same job on this machine.

    import vertex_trainer as vt
    job = vt.submit(vt.load_spec("job_specs/resnet50.yaml"), wait=True)

The names below are loaded on first use, so `import vertex_trainer` (and the CLI's --help) stays
light: nothing heavy is imported until you call something.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Job",
    "SubmitOptions",
    "SubmitPlan",
    "bench",
    "cancel",
    "compile_pipeline",
    "create_resource",
    "delete_resource",
    "deploy",
    "list_endpoints",
    "list_jobs",
    "list_resources",
    "load_spec",
    "logs",
    "pipeline_submit",
    "plan_submit",
    "report",
    "status",
    "submit",
    "tuning_job",
    "undeploy",
    "web_access",
]

_LAZY = {
    "load_spec": "vertex_trainer.api",
    "submit": "vertex_trainer.api",
    "deploy": "vertex_trainer.api",
    "status": "vertex_trainer.api",
    "cancel": "vertex_trainer.api",
    "list_jobs": "vertex_trainer.api",
    "Job": "vertex_trainer.api",
    "compile_pipeline": "vertex_trainer.api",
    "pipeline_submit": "vertex_trainer.api",
    "tuning_job": "vertex_trainer.api",
    "logs": "vertex_trainer.api",
    "bench": "vertex_trainer.api",
    "SubmitOptions": "vertex_trainer.api",
    "SubmitPlan": "vertex_trainer.api",
    "plan_submit": "vertex_trainer.api",
    "create_resource": "vertex_trainer.api",
    "list_resources": "vertex_trainer.api",
    "delete_resource": "vertex_trainer.api",
    "web_access": "vertex_trainer.api",
    "report": "vertex_trainer.api",
    "list_endpoints": "vertex_trainer.api",
    "undeploy": "vertex_trainer.api",
}

if TYPE_CHECKING:  # pragma: no cover
    # bench and deploy from their modules: api.bench and api.deploy are modules and functions both.
    from vertex_trainer.api import (
        Job,
        SubmitOptions,
        SubmitPlan,
        cancel,
        compile_pipeline,
        create_resource,
        delete_resource,
        list_endpoints,
        list_jobs,
        list_resources,
        load_spec,
        logs,
        pipeline_submit,
        plan_submit,
        status,
        submit,
        tuning_job,
        undeploy,
        web_access,
    )
    from vertex_trainer.api.bench import bench
    from vertex_trainer.api.deploy import deploy
    from vertex_trainer.api.report import report


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'vertex_trainer' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(module_name)
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
