"""What `submit` returns, whatever the plan's kind: a :class:`Handle` (a protocol: name, state,
console_url, output_dir, refresh, wait, cancel, to_dict), so that ``vt.submit(spec).wait()`` holds
for a custom job, a fallback plan, a tuning job, a pipeline run, a run here or a local study. The
types that implement it:

    Job          a Vertex AI CustomJob (a custom job, a fallback plan's last attempt): here
    TuningJob    a HyperparameterTuningJob (vertex/hptuning.py)
    PipelineRun  a PipelineJob (vertex/pipelines.py; `pipeline_submit`)
    LocalJob     a job run on this machine (api/results.py)
    LocalTuning  a tuning study run on this machine (tuning/tuning_run.py)

`Job` is the vertex/ Job with the spec it was made from and, after ``submit(deploy=True)``, its
deployment (`submit`, `status`, `list_jobs` return it)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, Protocol

from vertex_trainer.api.core import settings_from_env
from vertex_trainer.api.deploy import deploy as deploy_job
from vertex_trainer.api.report import report as write_report
from vertex_trainer.contract import Failure, JobEvent, LogEntry
from vertex_trainer.errors import JobFailed, UserError
from vertex_trainer.local.display import is_banner
from vertex_trainer.settings import PollPolicy, Settings
from vertex_trainer.vertex.custom_jobs import Job as _VertexJob
from vertex_trainer.vertex.job_logs import LogsClient
from vertex_trainer.vertex.service import CollectionClient
from vertex_trainer.vertex.stateful import StatePrinter

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.spec import JobSpec
    from vertex_trainer.vertex.model_deploy import Deployment

__all__ = ["Handle", "Job"]


class Handle(Protocol):
    """What `submit` returns whatever the kind (the module doc names the types): the same core
    surface, so a notebook writes ``vt.submit(spec).wait()`` and the CLI prints ``to_dict()``.

    A cloud handle's `state` is current when read (a get when the answer held is old); a run
    here has ended when `submit` returns, so its `refresh`, `wait` and `cancel` only say so.
    """

    @property
    def name(self) -> str:
        """The resource name (projects/P/locations/R/...), or a run here's own name."""
        ...

    @property
    def state(self) -> str:
        """The state, a JOB_STATE_* (a pipeline run: PIPELINE_STATE_*) name."""
        ...

    @property
    def done(self) -> bool:
        """True once the state is a terminal one."""
        ...

    @property
    def succeeded(self) -> bool:
        """True when it ended SUCCEEDED."""
        ...

    @property
    def console_url(self) -> str | None:
        """Its page in the Google Cloud console (None: a run here)."""
        ...

    @property
    def output_dir(self) -> str | None:
        """Where it writes: its own folder (model/, checkpoints/, logs/, metrics.json; a tuning
        job's trials below it; a pipeline's root), or None when it has none."""
        ...

    @property
    def idempotency_key(self) -> str | None:
        """The key it was created with (a re-run with it adopts it)."""
        ...

    @property
    def adopted(self) -> bool:
        """True when the submit found it (same key) instead of creating it."""
        ...

    def refresh(self) -> Handle:
        """Read its state again.

        Returns:
            the handle, current.
        """
        ...

    def wait(self, timeout: float | None = None, *, check: bool = True) -> Handle:
        """Follow it until it ends.

        Args:
            timeout: seconds before TimeoutError (None: no limit).
            check: raise JobFailed (exit 1) unless it SUCCEEDED.

        Returns:
            the handle, ended.
        """
        ...

    def cancel(self) -> Handle:
        """Ask for its cancellation (nothing is sent for one that has ended).

        Returns:
            the handle, refreshed.
        """
        ...

    def failure_message(self) -> str:
        """Why it did not succeed, for an error message.

        Returns:
            its kind, name, how it ended and the error.
        """
        ...

    def to_dict(self) -> dict[str, Any]:
        """The submit object of docs/contract.md section 2 (`--output json`)."""
        ...


class Job(_VertexJob):
    """A Vertex AI CustomJob (see vertex_trainer.vertex.custom_jobs.Job). `Job.get(name)` reads the
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

    def wait(
        self,
        timeout: float | None = None,
        *,
        on_state: Callable[[Any], None] | None = None,
        poll: PollPolicy | None = None,
        check: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        quiet: bool = False,
        stream: IO[str] | None = None,
        logs: bool = True,
    ) -> Job:
        """Follow the job until it ends, showing on `stream` what `--wait` shows in a terminal:
        each state change (the time and the state), the job's log lines as they come, prefixed
        by replica (Cloud Logging, read as `logs --follow` reads it: docs/logs.md), and, for a
        job that failed, the failing replica's last lines.

        Args:
            timeout: seconds before TimeoutError (None: no limit).
            on_state: called with the job once at the start and at every state change; given,
                it replaces what is shown (the caller shows the states; nothing is read from
                Cloud Logging).
            poll: the polling intervals (default: the client's settings).
            check: raise JobFailed (exit 1, with the error and advice) unless it SUCCEEDED.
            sleep: how to wait between looks.
            quiet: show nothing (and read no logs).
            stream: where the lines go (default: sys.stderr; a notebook shows it under the cell).
            logs: False shows the state changes only (no Cloud Logging reads).

        Returns:
            self, ended.
        """
        if on_state is not None or quiet or not logs:
            super().wait(
                timeout, on_state=on_state, poll=poll, check=check, sleep=sleep, quiet=quiet, stream=stream
            )
            return self
        return self._follow(timeout, poll=poll, check=check, sleep=sleep, stream=stream)

    def _follow(
        self,
        timeout: float | None,
        *,
        poll: PollPolicy | None,
        check: bool,
        sleep: Callable[[float], None],
        stream: IO[str] | None,
    ) -> Job:
        """wait()'s display: the job's states and log lines from vertex.logs' follow."""
        printer = StatePrinter(stream)
        settings = self.client.settings
        if poll is not None:
            settings = dataclasses.replace(settings, poll=poll)
        client = LogsClient(self.client.project, settings=settings, log=printer.write, sleep=sleep)
        if client.offline:
            printer.write(
                "note: Vertex AI is an emulator and Cloud Logging is not "
                "($VERTEX_TRAINER_LOGGING_ENDPOINT): following the job's state only"
            )
        width = len("workerpool0-0")
        failure: Failure | None = None
        for item in client.follow(self, timeout=timeout):
            if isinstance(item, JobEvent):
                if item.changed:
                    printer(self, note=item.note)
            elif isinstance(item, LogEntry):
                width = max(width, len(item.replica))
                for line in item.message.split("\n"):
                    if not is_banner(line):
                        printer.write(f"{item.replica:<{width}} | {line}")
            elif isinstance(item, Failure):
                failure = item
        if failure is not None and failure.lines:
            printer.write(f"{failure.replica or 'the job'}: its last lines:")
            for line in failure.lines:
                printer.write(f"  {line}")
        if check and not self.succeeded:
            if failure is None:
                raise JobFailed(self.failure_message())
            raise JobFailed(failure.message, hint=failure.advice)
        return self

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
            raise UserError("Job.deploy needs the spec (its deploy: block): job.deploy(spec)")
        return deploy_job(spec, job=self.name, settings=self.client.settings, **kwargs)

    def report(self, path: str | None = None, *, fmt: str | None = None) -> str:
        """Write this job's report (see :func:`report`): one HTML page, or its plots as a PNG.

        Args:
            path: the file to write (default: report-<id>.<fmt> in the working directory).
            fmt: "html" or "png" (default: the suffix of `path`, else html).

        Returns:
            the path written (in a notebook: ``IPython.display.IFrame(path, 900, 600)``).
        """
        return write_report(self, path, fmt=fmt, settings=self.client.settings)
