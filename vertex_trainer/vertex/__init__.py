"""Vertex AI over the one HTTP layer (vertex_trainer.gcp), a module per resource on one base:
`stateful.StatefulResource` (Job, TuningJob, PipelineRun: state, refresh, wait, cancel, to_dict,
to_sdk) and `service.CollectionClient` (get, cancel, list through the one pager), with the
collection's own idempotent create (jobs, hptuning, pipelines, resources); models and endpoints,
deploy, logs, quotas and billing beside them (docs/architecture.md).
"""

from vertex_trainer.vertex.custom_jobs import (
    Job,
    JobsClient,
    check_key,
    console_url,
    create_idempotent,
    job_name,
    new_key,
    parse_label,
    split_name,
)

__all__ = [
    "Job",
    "JobsClient",
    "check_key",
    "console_url",
    "create_idempotent",
    "job_name",
    "new_key",
    "parse_label",
    "split_name",
]
