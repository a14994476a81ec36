"""Vertex AI over the one HTTP layer (vertex_trainer.gcp), a module per resource on one base:
`stateful.StatefulResource` (Job, TuningJob, PipelineRun: state, refresh, wait, cancel, to_dict,
to_sdk) and `service.CollectionClient` (get, cancel, list through the one pager), with the
collection's own idempotent create (jobs, hptuning, pipelines, resources); models and endpoints,
deploy, logs, quotas and billing beside them (docs/architecture.md).
"""

from vertex_trainer.vertex import custom_jobs
from vertex_trainer.vertex.custom_jobs import *  # noqa: F403  (the names its __all__ lists, once)

__all__ = list(custom_jobs.__all__)
