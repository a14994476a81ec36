"""CustomJobs that really run: the fake Vertex AI's runner hook, over the local runner.

`FakeVertex(runner=JobRunner(...))` hands every created job to `start(job)`. Each job runs on
its own thread through `local.run_local` (the very runner of `submit --local`: every replica a
process with AIP_* directories, CLUSTER_SPEC and TF_CONFIG; the sandbox's Cloud Storage route in
its environment, so TensorFlow reads and writes gs:// in the emulator), with the job's numeric id
as CLOUD_ML_JOB_ID. The job's state follows the processes (PENDING until they start, RUNNING,
then SUCCEEDED, FAILED with the failing replica's exit status and last line, or CANCELLED once a
cancel has stopped every process), and every replica line becomes a Cloud Logging entry of the
job (resource.type ml_job, labels job_id and task_name), as on Vertex AI. The service's own
lines (provisioning, running, the end) are entries of task "service".

The sandbox also echoes each job's lines (`echo`, its stderr), unless a client is following that
job's log (`FakeLogging.followed`: `submit --wait` in the same terminal shows them already, and
each line should appear once). The first `ECHO_GRACE_S` of a job's lines wait for that client's
first read before they are echoed.

The command each replica runs is the installed one (`python -m trainer.task` for the bundled
trainer image, the code that image is built from): no container is pulled or started. An image
the sandbox's registry has not seen is run the same way, with a warning in the job's log.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertex_trainer.contract import SUCCEEDED
from vertex_trainer.errors import VertexTrainerError
from vertex_trainer.gcp.auth import emulator_headers
from vertex_trainer.local.failure import exception_line
from vertex_trainer.log import Log
from vertex_trainer.sandbox import utilization
from vertex_trainer.sandbox.runner import Run, Runner, internal_error
from vertex_trainer.settings import Settings

RUNNING = "JOB_STATE_RUNNING"
FAILED, CANCELLED = "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"
SERVICE = "service"  # the task_name of the service's own log lines
STOP_TIMEOUT_S = 30.0  # run_local's stop: SIGTERM, 5 s, SIGKILL, then every group empty
ECHO_GRACE_S = 3.0  # a client that follows the log reads it within its first poll


@dataclass(eq=False)
class _Run(Run):
    started: float = field(default_factory=time.monotonic)
    unechoed: list[str] = field(default_factory=list)  # lines held for ECHO_GRACE_S


class JobRunner(Runner[_Run]):
    """The runner hook of FakeVertex (`start`, `cancel`); `vertex` is set once the fake exists.

    `environ` is the replicas' base environment (the sandbox's, with its Cloud Storage route);
    `storage_emulator` reads a gs:// metrics.json back; `logging` (a FakeLogging) receives the
    log entries; `registry` (a FakeRegistry, optional) says which images were pushed; `token` is
    the sandbox's, which its storage emulator requires.
    """

    kind = "job"
    stop_timeout_s = STOP_TIMEOUT_S

    def __init__(
        self,
        *,
        environ: Mapping[str, str],
        storage_emulator: str | None,
        logging: Any,
        registry: Any = None,
        echo: Log | None = None,
        cloudbuild: Any = None,
        token: str | None = None,
        monitoring: Any = None,
    ):
        super().__init__(echo=echo)
        self.monitoring = monitoring  # a FakeMonitoring: each run's utilization series (utilization.py)
        self.token = token
        self.environ = dict(environ)
        self.storage_emulator = storage_emulator
        self.logging = logging
        self.registry = registry
        self.cloudbuild = cloudbuild  # script jobs (issue 32): the contexts it built
        self.vertex: Any = None

    def _new(self, body: dict[str, Any]) -> _Run:
        return _Run(body["name"], body)

    def _refuse(self, run: _Run) -> None:
        self._report(run.name, FAILED, "The sandbox is shutting down.")

    # -- one job ----------------------------------------------------------------------------
    def _run(self, run: _Run) -> None:
        try:
            self._service(run, "Waiting for job to be provisioned.")
            for image in _images(run.body):
                if self.registry is not None and not self.registry.has(image):
                    self._service(
                        run,
                        f"Image {image} was not pushed to the sandbox's registry; "
                        "running the installed code in its place.",
                        "WARNING",
                    )
            if run.cancel.is_set() or not self._report(run.name, RUNNING):
                self._end(run, CANCELLED, None)
                return
            self._service(run, "Job is running.")
            state, error = self._execute(run)
            self._end(run, state, error)
        except Exception as exc:
            self._end(run, FAILED, internal_error(exc))

    def _execute(self, run: _Run) -> tuple[str, str | None]:
        from rich.console import Console

        from vertex_trainer.local import run_local

        settings = Settings(
            project=run.project,
            region=run.location,
            storage_emulator=self.storage_emulator,
            emulator_token=self.token,
            environ=self.environ,
        )
        scratch = tempfile.mkdtemp(prefix="vertex-trainer-code-")
        try:
            result = run_local(
                run.body,
                None,
                settings=settings,
                wait=False,
                console=Console(quiet=True),
                cancel=run.cancel,
                job_id=run.job_id,
                on_lines=lambda items: self._lines(run, items),
                code=built_code(run.body, self.cloudbuild, self.storage_emulator, Path(scratch), self.token),
            )
        except VertexTrainerError as exc:  # the job cannot start here (e.g. a module not installed)
            return FAILED, exc.message + (f" ({exc.hint})" if exc.hint else "")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if self.monitoring is not None:  # before the end is reported: a finished job has its series
            utilization.record(self.monitoring, run.project, run.job_id, result)
        if result.state == SUCCEEDED:
            return SUCCEEDED, None
        if result.state == CANCELLED:
            return CANCELLED, None
        return FAILED, replica_error(result.failed_replica, result.failed_exit_code, result.log_tail)

    def _lines(self, run: _Run, items: list[tuple[str, str]]) -> None:
        for replica, line in items:
            self.logging.add(run.job_id, line, replica=replica, project=run.project)
            self._echo(run, f"[job {run.job_id}] {replica} | {line}")

    def _service(self, run: _Run, message: str, severity: str = "INFO") -> None:
        self.logging.add(run.job_id, message, replica=SERVICE, project=run.project, severity=severity)
        self._echo(run, f"[job {run.job_id}] {message}")

    def _echo(self, run: _Run, text: str | None, *, last: bool = False) -> None:
        """Echo a job line, once: not when a client follows the job's log (it shows them)."""
        if self.logging.followed(run.job_id):
            run.unechoed.clear()
            return
        if text is not None:
            run.unechoed.append(text)
        if last or time.monotonic() - run.started >= ECHO_GRACE_S:
            for held in run.unechoed:
                self.echo(held)
            run.unechoed.clear()

    def _end(self, run: _Run, state: str, error: str | None) -> None:
        text = {SUCCEEDED: "Job completed successfully.", CANCELLED: "Job was cancelled."}.get(
            state, f"Job failed. {error or ''}".strip()
        )
        self._service(run, text, "INFO" if state != FAILED else "ERROR")
        self._echo(run, None, last=True)
        self._report(run.name, state, error)

    def _report(self, name: str, state: str, error: str | None = None) -> bool:
        return bool(self.vertex.report(name, state, error)) if self.vertex is not None else False


def built_code(
    job: dict[str, Any], cloudbuild: Any, storage: str | None, scratch: Path, token: str | None = None
) -> Any:
    """Script jobs (issue 32): the code a job's image or package holds, as it was built (the
    fake Cloud Build's context, the staged sdist), extracted under `scratch`; None for the
    bundled trainer or an image the sandbox did not build (the installed code runs then).
    `token`: the storage emulator's."""
    from vertex_trainer.local import owncode

    pools = [p for p in (job.get("jobSpec") or {}).get("workerPoolSpecs") or [] if p]
    if not pools:
        return None
    package = pools[0].get("pythonPackageSpec") or {}
    for uri in package.get("packageUris") or []:
        if storage and "/vertex_trainer_code-" in uri:
            return owncode.code_in_sdist(
                _object(storage, uri, token), scratch, package.get("pythonModule") or ""
            )
        if storage and "/vertex_trainer_task-" in uri:  # the trainer's, maybe with a factory's code
            try:
                archive = _object(storage, uri, token)
            except urllib.error.HTTPError:  # not staged here: the installed trainer runs
                return None
            return owncode.factory_in_sdist(archive, scratch)
        if storage and uri.endswith(".tar.gz"):  # a package folder's own sdist (setup.py)
            try:
                archive = _object(storage, uri, token)
            except urllib.error.HTTPError:  # not staged here
                continue
            return owncode.code_in_sdist(archive, scratch, package.get("pythonModule") or "")
    image = (pools[0].get("containerSpec") or {}).get("imageUri")
    builds = getattr(cloudbuild, "builds", {})
    for build_id, build in list(builds.items()):
        source = cloudbuild.sources.get(build_id)
        if image in (build.get("images") or []) and source is not None:
            return owncode.code_in_image_context(source, scratch)
    return None


def _object(storage: str, uri: str, token: str | None) -> bytes:
    """The bytes of gs://BUCKET/OBJECT in the storage emulator (`token`: the one it requires)."""
    bucket, obj = uri[len("gs://") :].split("/", 1)
    url = f"{storage.rstrip('/')}/storage/v1/b/{bucket}/o/{urllib.parse.quote(obj, safe='')}?alt=media"
    request = urllib.request.Request(url, headers=emulator_headers(token))
    with urllib.request.urlopen(request, timeout=60) as resp:
        data: bytes = resp.read()
    return data


def replica_error(replica: str | None, code: int | None, tail: list[str]) -> str:
    """Vertex AI's words for a replica that failed, plus its last line (the error, usually)."""
    if code is not None and code < 0:  # killed by a signal: the container runtime's 128 + N
        reason, code = f"Signal {_signal_name(-code)}", 128 - code
    else:
        reason = "Error"
    text = (
        f"The replica {replica or 'workerpool0-0'} exited with a non-zero status of {code}. "
        f"Termination reason: {reason}."
    )
    raised = exception_line(tail)  # the exception it died of, else its last line
    last = [line.strip() for line in tail if line.strip()]
    return text + (f" Error: {raised}" if raised else f" Last line: {last[-1]}" if last else "")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _images(job: dict[str, Any]) -> list[str]:
    pools = (job.get("jobSpec") or {}).get("workerPoolSpecs") or []
    found = [(p.get("containerSpec") or {}).get("imageUri") for p in pools if p]
    return sorted({image for image in found if image})
