"""Event-driven runs: a dataset lands in Cloud Storage and a run starts, exactly once per dataset
(a Cloud Run function on an Eventarc trigger), as a Vertex AI Pipelines run of train -> register
-> deploy (docs/events.md; docs/contract.md section 6).

The pipeline (KFP v2):
    pipeline_steps.py     pure: each GCPC step's inputs from the rendered CustomJob and the DeployRequest
    pipeline_compiler.py  the kfp pipeline (kfp and GCPC imported inside `compile_ir` only)
    pipeline_rest.py      the PipelineJob REST body, the pipeline root, and the registry look-ups that
                          decide between a new model or a new version, a new endpoint or an existing
                          one, and which deployed models the pipeline undeploys
    pipeline_build.py     spec -> the one rendered CustomJob + the deploy capability's DeployRequest
                          -> IR and body
The storage trigger:
    storage_events.py     pure: which finalized objects start a run (`<prefix><folder>/<marker>`), the
                          idempotency key of an object generation, the `{{ trigger.* }}` variables
    function_prepare.py   from a spec file and the trigger flags to what the function will run
    function_bundle.py    the deployable Cloud Run function directory (`trigger render`)
    render_manifest.py    a rendered directory written without deleting what the render did not write
    gcloud_commands.py    the gcloud commands and IAM bindings that deploy it (`trigger deploy`)
    function_deploy.py    `trigger render` and `trigger deploy`
    event_runs.py         what the function does with one event: triage, the run, its state

The function itself (main.py, rendered from templates/trigger_main.py.j2) is an edge like the
CLI: it reads its environment and calls `api.on_object_finalized`, which decides with
storage_events.py and starts the run through the same submit paths as the CLI.
"""

from typing import TYPE_CHECKING

from vertex_trainer import interface

if TYPE_CHECKING:
    from vertex_trainer.automation.pipeline_build import check_pipeline, pipeline_body, pipeline_ir, run_root
    from vertex_trainer.automation.pipeline_compiler import compile_ir, to_yaml
    from vertex_trainer.automation.pipeline_rest import (
        default_root,
        first_deploy,
        pipeline_job,
        resolve_target,
    )
    from vertex_trainer.automation.pipeline_steps import DeployTarget, Previous
    from vertex_trainer.automation.storage_events import (
        FINALIZED,
        BadEvent,
        Decision,
        ObjectEvent,
        TriggerConfig,
        check_trigger_args,
        decide,
        event_key,
        sample_vars,
        trigger_vars,
    )

__all__ = [
    "FINALIZED",
    "BadEvent",
    "Decision",
    "DeployTarget",
    "ObjectEvent",
    "Previous",
    "TriggerConfig",
    "check_pipeline",
    "check_trigger_args",
    "compile_ir",
    "decide",
    "default_root",
    "event_key",
    "first_deploy",
    "pipeline_body",
    "pipeline_ir",
    "pipeline_job",
    "resolve_target",
    "run_root",
    "sample_vars",
    "to_yaml",
    "trigger_vars",
]
if not TYPE_CHECKING:  # mypy sees the imports above; the names resolve on first use
    __getattr__, __dir__ = interface.exports(
        __name__,
        {
            "BadEvent": "storage_events",
            "Decision": "storage_events",
            "DeployTarget": "pipeline_steps",
            "FINALIZED": "storage_events",
            "ObjectEvent": "storage_events",
            "Previous": "pipeline_steps",
            "TriggerConfig": "storage_events",
            "check_pipeline": "pipeline_build",
            "check_trigger_args": "storage_events",
            "compile_ir": "pipeline_compiler",
            "decide": "storage_events",
            "default_root": "pipeline_rest",
            "event_key": "storage_events",
            "first_deploy": "pipeline_rest",
            "pipeline_body": "pipeline_build",
            "pipeline_ir": "pipeline_build",
            "pipeline_job": "pipeline_rest",
            "resolve_target": "pipeline_rest",
            "run_root": "pipeline_build",
            "sample_vars": "storage_events",
            "to_yaml": "pipeline_compiler",
            "trigger_vars": "storage_events",
        },
    )
