"""The handle of a Vertex AI CustomJob as the API returns it (`submit` of a custom job or a
fallback plan, `status`, `list_jobs`): the vertex/ Job with the spec it was made from and, after
``submit(deploy=True)``, its deployment. (A tuning job's handle is vertex/hptuning's TuningJob; a
run here is results.LocalJob.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vertex_trainer.api.core import settings_from_env
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.jobs import Job as _VertexJob
from vertex_trainer.vertex.service import CollectionClient

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.spec import JobSpec
    from vertex_trainer.vertex.deploy import Deployment

__all__ = ["Job"]


class Job(_VertexJob):
    """A Vertex AI CustomJob (see vertex_trainer.vertex.jobs.Job). `Job.get(name)` reads the
    settings from the environment when none are given, like every API entry point."""

    @classmethod
    def get(
        cls,
        job: str,
        *,
        project: str | None = None,
        region: str | None = None,
        settings: Settings | None = None,
        client: CollectionClient | None = None,
    ) -> Job:
        """A CustomJob, fetched now.

        Args:
            job: a resource name, or an id with project and region.
            project: the project of an id (default: the settings').
            region: the region of an id (default: the settings').
            settings: the process settings (default: read from the environment).
            client: the JobsClient to read with (default: a new one).

        Returns:
            the Job.
        """
        settings = settings or (client.settings if client else settings_from_env())
        return super().get(job, project=project, region=region, settings=settings, client=client)

    spec: JobSpec | None  # the spec submit() made it from (a constructor argument), or None
    deployment: Deployment | None = None  # set by submit(deploy=True) once the model serves

    def to_dict(self) -> dict:
        """The docs/contract.md section 2 submit object (with "deploy" after submit(deploy=True))."""
        out = super().to_dict()
        if self.deployment is not None:
            out["deploy"] = self.deployment.to_dict()
        return out

    def deploy(self, spec: JobSpec | None = None, **kwargs: Any) -> Deployment | dict:
        """Register this job's model and serve it (see :func:`deploy`).

        Args:
            spec: the spec whose ``deploy:`` block applies (default: the one this job was
                submitted from).
            **kwargs: passed to :func:`deploy` (``dry_run``, ``timeout``, ``log``).

        Returns:
            the Deployment (model, version, endpoint, traffic split); with ``dry_run=True`` the
            requests it would send, as a dict.
        """
        spec = spec or self.spec
        if spec is None:
            from vertex_trainer.errors import UserError

            raise UserError("Job.deploy needs the spec (its deploy: block): job.deploy(spec)")
        from vertex_trainer.api.deploy import deploy

        return deploy(spec, job=self.name, settings=self.client.settings, **kwargs)

    def report(self, path: str | None = None, *, fmt: str = "html") -> str:
        """Write this job's report (see :func:`report`): one HTML page, or its plots as a PNG.

        Args:
            path: the file to write (default: report-<id>.<fmt> in the working directory).
            fmt: "html" or "png".

        Returns:
            the path written (in a notebook: ``IPython.display.IFrame(path, 900, 600)``).
        """
        from vertex_trainer.api.report import report

        return report(self, path, fmt=fmt, settings=self.client.settings)
