"""Vertex AI over the one HTTP layer (vertex_trainer.gcp): CustomJobs (idempotent create, `Job`).

Issues to come add models, endpoints, pipelines and logs here, each a module of its own.
"""

from vertex_trainer.vertex.jobs import (
    Job, JobsClient, check_key, console_url, create_idempotent, job_name, new_key, parse_label,
    split_name,
)

__all__ = ["Job", "JobsClient", "check_key", "console_url", "create_idempotent", "job_name",
           "new_key", "parse_label", "split_name"]
