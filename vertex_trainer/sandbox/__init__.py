"""The offline sandbox: the whole cloud path, build to prediction, on one machine (docs/sandbox.md).

`vertex-trainer dev sandbox` starts every stand-in in one process (`services.Sandbox`): the fake
Vertex AI, Cloud Storage with TensorFlow's route, Cloud Build, the registry and Cloud Logging.
What the stand-ins alone only pretend, this package makes real, through the fake Vertex AI's
hooks: a created CustomJob runs on this machine through the local runner (`jobs.JobRunner`), its
state following the processes and its lines becoming Cloud Logging entries; a deployed model is
served by its serving container's command and answers the endpoint's `:predict`
(`serving.ModelServers`). A created PipelineJob runs its tasks (`pipelines.PipelineRunner`:
GCPC's own launchers as local processes, their Vertex AI reached through `gateway.Gateway`), a
HyperparameterTuningJob its trials (`tuning.TuningRunner`); the three runners share one base
(`runner.Runner`). With `--function DIR` every object finalized in the function's bucket is a
CloudEvent delivered to it (`events.FunctionHost`).

A layer of its own just below the CLI: it composes the emulators (which must not import the
clients) with `local` (the runner); nothing below imports it.
"""

from vertex_trainer.sandbox.job_runs import JobRunner, replica_error
from vertex_trainer.sandbox.services import (
    READY,
    Sandbox,
    env_file_lines,
    export_lines,
    serve,
)
from vertex_trainer.sandbox.serving import ModelServers

__all__ = [
    "READY",
    "JobRunner",
    "ModelServers",
    "Sandbox",
    "env_file_lines",
    "export_lines",
    "replica_error",
    "serve",
]
