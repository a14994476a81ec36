"""The Vertex AI Pipelines (KFP v2) form of a job: train, then register and deploy, then undeploy
the endpoint's other models left at 0% (docs/contract.md section 6, docs/serving.md).

    steps.py     pure: each GCPC step's inputs from the rendered CustomJob and the DeployRequest
    compiler.py  the kfp pipeline (kfp and GCPC imported inside `compile_ir` only)
    job.py       the PipelineJob REST body, the pipeline root, and the registry look-ups that
                 decide between a new model or a new version, a new endpoint or an existing one,
                 and which deployed models the pipeline undeploys
    build.py     spec -> the one rendered CustomJob + workflows.deployment's DeployRequest -> IR and body

Layering: below the orchestrator (api) and the trigger, above `workflows.deployment` (whose DeployRequest
it compiles) and the Vertex clients and `render`: one render serves every output.
"""

from vertex_trainer.pipeline.build import check_pipeline, pipeline_body, pipeline_ir, run_root
from vertex_trainer.pipeline.compiler import compile_ir, to_yaml
from vertex_trainer.pipeline.job import default_root, first_deploy, pipeline_job, resolve_target
from vertex_trainer.pipeline.steps import DeployTarget, Previous

__all__ = [
    "DeployTarget",
    "Previous",
    "check_pipeline",
    "compile_ir",
    "default_root",
    "first_deploy",
    "pipeline_body",
    "pipeline_ir",
    "pipeline_job",
    "resolve_target",
    "run_root",
    "to_yaml",
]
