"""Every stand-in in one process, wired together: `Sandbox`, and `serve` for `dev sandbox`.

Each stand-in, with the variables that point the clients at it, and what it is:

  Vertex AI (VERTEX_TRAINER_API_ENDPOINT): emulators.vertex.FakeVertex (jobs, models, endpoints,
      pipelines, tuning) with this package's runner (jobs really run) and model servers (endpoints
      answer)
  Cloud Storage (STORAGE_EMULATOR_HOST, https_proxy, CURL_CA_BUNDLE, ...): gcp-storage-emulator +
      the TLS proxy for TensorFlow (emulators.gcs)
  Cloud Build (VERTEX_TRAINER_CLOUDBUILD_ENDPOINT): emulators.cloudbuild.FakeCloudBuild: fetches
      the staged context from the emulated bucket, "pushes" to the registry
  Artifact Registry (VERTEX_TRAINER_REGISTRY_ENDPOINT): emulators.registry.FakeRegistry (the
      content-hash tag check)
  Cloud Logging (VERTEX_TRAINER_LOGGING_ENDPOINT): emulators.logging.FakeLogging: every job's lines
  Cloud Monitoring (VERTEX_TRAINER_MONITORING_ENDPOINT): emulators.monitoring.FakeMonitoring: each
      job's utilization series, from what its local run measured (utilization.py)
  Cloud Quotas (VERTEX_TRAINER_QUOTAS_ENDPOINT): emulators.quotas.FakeQuotas: the quota
      pre-flight's answers (`sandbox.quotas.set(...)`)
  Vertex AI Pipelines, tuning (the tasks' own proxy, CA and metadata server): the fake's
      pipelineJobs and tuning jobs with this package's runners (pipelines.py, tuning.py); pipeline
      tasks reach Vertex AI through gateway.py, whose gRPC face's process starts with the first
      pipeline run
  Eventarc, Cloud Run functions (the function gets the variables): events.FunctionHost: a rendered
      function under functions-framework, a CloudEvent per finalized object (`function=DIR`)
  Cloud Billing Catalog (VERTEX_TRAINER_BILLING_ENDPOINT): emulators.billing.FakeBilling: Vertex
      AI's SKUs in pages (`cost --live-prices`, `dev refresh-prices`)
  Service Usage (VERTEX_TRAINER_SERVICEUSAGE_ENDPOINT): emulators.serviceusage.FakeServiceUsage:
      every API enabled but those of `disable_apis` (`dev sandbox --disable-api NAME`); while
      aiplatform.googleapis.com is disabled the fake Vertex AI refuses every request as Google does
  Resource Manager, IAM, Artifact Registry (VERTEX_TRAINER_IAM_ENDPOINT): emulators.iam.FakeIam:
      testIamPermissions grants all but `deny` (`dev sandbox --deny PERMISSION`), IAM policies,
      repositories (`check`, `setup`, docs/check.md)

Capacity and quota faults are the fake Vertex AI's own (`sandbox.vertex.no_capacity("FLEX_START")`,
`no_quota("SPOT")`): a job whose strategy is scripted so plays its script instead of running.

All on 127.0.0.1, in memory: stopping the sandbox loses everything, and leaves no process and no
port behind. Only its user can drive it (docs/security-notes/listening.md): every stand-in
requires the sandbox's own random token as `Authorization: Bearer` (VERTEX_TRAINER_EMULATOR_TOKEN
in `env()`; TensorFlow's GOOGLE_AUTH_TOKEN_FOR_TESTING, the pipelines' metadata server and the
served function's events carry it), refuses a foreign Host or Origin, and JSON methods take only
JSON (emulators/_http.py `Guard`).

The environment is data here as everywhere below the edge: the CLI passes its own (`environ`),
which becomes, with the Cloud Storage route, the base environment of every replica and model
server.
"""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any

from vertex_trainer import lazy
from vertex_trainer.log import Log
from vertex_trainer.sandbox.job_runs import JobRunner
from vertex_trainer.sandbox.serving import ModelServers
from vertex_trainer.settings import (
    BILLING_ENV,
    CLOUDBUILD_ENV,
    EMULATOR_TOKEN_ENV,
    ENDPOINT_ENV,
    IAM_ENV,
    LOGGING_ENV,
    MONITORING_ENV,
    POLL_ENV,
    QUOTAS_ENV,
    REGISTRY_ENV,
    SERVICEUSAGE_ENV,
)

DEFAULT_PROJECT, DEFAULT_REGION = "sandbox", "us-central1"
READY = "# ready"
# Poll every second: the stand-ins answer at once, and logs then lag one second, not five.
POLL_INTERVAL = "1"
# What a replica or model server must not inherit from the shell that started the sandbox: the
# tool's own endpoints (they are not on a Vertex AI VM) and another job's Vertex variables.
_NOT_INHERITED = ("VERTEX_TRAINER_", "AIP_", "CLUSTER_SPEC", "TF_CONFIG", "CLOUD_ML_")


VERTEX_API = "aiplatform.googleapis.com"


def _service_name(api: str) -> str:
    """ "aiplatform" or "aiplatform.googleapis.com" -> the Service Usage name."""
    return api if "." in api else f"{api}.googleapis.com"


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Sandbox:
    """The stand-ins of every Google API the tool uses, started together; `with Sandbox(...)`.

    `environ`: the environment replicas and model servers start from (the CLI's). `buckets` are
    created at start. `echo` receives the jobs' and servers' lines and the service's notes.
    """

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        buckets: Sequence[str] = (),
        project: str = DEFAULT_PROJECT,
        region: str = DEFAULT_REGION,
        host: str = "127.0.0.1",
        echo: Log | None = None,
        function: str | None = None,
        redeliver: int = 1,
        deny: Sequence[str] = (),
        disable_apis: Sequence[str] = (),
    ):
        self.function_dir, self.redeliver = function, redeliver
        # What every client must send as its Bearer token: this sandbox's own, random.
        self.token = secrets.token_urlsafe(32)
        self.function: Any = None  # sandbox.events.FunctionHost (with `function`)
        self.parent_environ = dict(environ)
        self.environ = {k: v for k, v in environ.items() if not k.startswith(_NOT_INHERITED)}
        self.buckets = tuple(buckets)
        self.project, self.region, self.host = project, region, host
        self.echo = echo if echo is not None else (lambda text: None)
        # The stand-ins, set by start() (imported there: the sandbox's own dependencies).
        self.gcs: Any = None
        self.registry: Any = None
        self.cloudbuild: Any = None
        self.logging: Any = None
        self.quotas: Any = None
        self.monitoring: Any = None  # emulators.monitoring.FakeMonitoring
        self.vertex: Any = None
        self.billing: Any = None
        self.deny, self.disable_apis = tuple(deny), tuple(_service_name(a) for a in disable_apis)
        self.serviceusage: Any = None  # emulators.serviceusage.FakeServiceUsage
        self.iam: Any = None  # emulators.iam.FakeIam
        self._disabled_vertex: Any = None  # the fake Vertex AI's standing refusal while disabled
        self.jobs: JobRunner | None = None
        self.models: ModelServers | None = None
        self.pipelines: Any = None  # sandbox.pipelines.PipelineRunner
        self.tuning: Any = None  # sandbox.tuning.TuningRunner
        self.gateway: Any = None  # sandbox.gateway.Gateway

    def start(self) -> Sandbox:
        from vertex_trainer.emulators.billing import FakeBilling
        from vertex_trainer.emulators.cloudbuild import FakeCloudBuild
        from vertex_trainer.emulators.gcs import GcsEmulator
        from vertex_trainer.emulators.logging import FakeLogging
        from vertex_trainer.emulators.monitoring import FakeMonitoring
        from vertex_trainer.emulators.quotas import FakeQuotas
        from vertex_trainer.emulators.registry import FakeRegistry
        from vertex_trainer.emulators.vertex import FakeVertex

        lazy.require("gcp_storage_emulator")  # the sandbox extra: its one message, not a traceback
        try:
            self.gcs = GcsEmulator(host=self.host, project=self.project, token=self.token).start()
            for bucket in self.buckets:
                self.gcs.create_bucket(bucket)
            # The registry's own protocol: the token exchanged for itself (Basic oauth2accesstoken).
            self.registry = FakeRegistry(host=self.host, token=self.token, access_token=self.token).start()
            self.cloudbuild = (
                FakeCloudBuild(host=self.host, storage_host=self.gcs.endpoint, registry=self.registry)
                .require(self.token)
                .start()
            )
            self.logging = FakeLogging(host=self.host, project=self.project).require(self.token).start()
            self.quotas = FakeQuotas(host=self.host).require(self.token).start()
            self.monitoring = FakeMonitoring(host=self.host).require(self.token).start()
            self.billing = FakeBilling(host=self.host).require(self.token).start()
            base = {**self.environ, **self.gcs.env()}
            self.jobs = JobRunner(
                environ=base,
                storage_emulator=self.gcs.endpoint,
                logging=self.logging,
                registry=self.registry,
                echo=self.echo,
                cloudbuild=self.cloudbuild,  # script jobs (issue 32): run what it built
                token=self.token,
                monitoring=self.monitoring,
            )
            self.models = ModelServers(environ=base, echo=self.echo)
            # Jobs stay PENDING until the runner reports; no script advances them.
            self.vertex = (
                FakeVertex(
                    self.host, 0, script=("JOB_STATE_PENDING",), runner=self.jobs, predictor=self.models
                )
                .require(self.token)
                .start()
            )
            self.jobs.vertex = self.vertex
            self._say_network()
            self._start_access()
            self._start_pipelines()
            if self.function_dir:
                self._start_function()
        except BaseException:
            self.stop()
            raise
        return self

    def _say_network(self) -> None:
        """Where a job's replicas cannot have a private network, say so once, at start."""
        from vertex_trainer.local import netns

        why = netns.unavailable()
        if why is not None:
            self.echo(
                "warning: a job's replicas, when more than one, run on this machine's network: their "
                f"TensorFlow servers listen on every interface ({why}; docs/local.md)"
            )

    def _start_access(self) -> None:
        """Service Usage and the IAM side (issue 33); a disabled Vertex AI API refuses requests."""
        from vertex_trainer.emulators.iam import FakeIam
        from vertex_trainer.emulators.serviceusage import FakeServiceUsage

        self.iam = FakeIam(host=self.host, denied=set(self.deny)).require(self.token).start()
        self.serviceusage = (
            FakeServiceUsage(host=self.host, on_change=self._api_changed).require(self.token).start()
        )
        for api in self.disable_apis:
            self.serviceusage.disable(api)

    def _api_changed(self, service: str, enabled: bool) -> None:
        if service != VERTEX_API or self.vertex is None:
            return
        if not enabled and self._disabled_vertex is None:
            self._disabled_vertex = self.vertex.fail(
                "any",
                403,
                times=2**62,
                message=f"Vertex AI API has not been used in project {self.project} before or it is "
                "disabled. Enable it by visiting https://console.developers.google.com/apis/api/"
                f"{VERTEX_API}/overview?project={self.project} then retry. (SERVICE_DISABLED)",
            )
        elif enabled and self._disabled_vertex is not None:
            self._disabled_vertex.times = 0
            self._disabled_vertex = None

    def _start_pipelines(self) -> None:
        """PipelineJobs run for real (their tasks reach this fake Vertex AI through the gateway),
        and tuning jobs their trials. The gateway's proxy and metadata server start now (their
        addresses are in the tasks' environment); its gRPC face's process, which only pipeline
        tasks use, when the first pipeline run begins (`Gateway.start_grpc`)."""
        from vertex_trainer.sandbox.gateway import Gateway
        from vertex_trainer.sandbox.pipelines import PipelineRunner
        from vertex_trainer.sandbox.tuning import TuningRunner

        self.gateway = Gateway(
            self.vertex.url,
            project=self.project,
            upstream_proxy=self.gcs.proxy_url.split("://", 1)[-1],
            environ=self.environ,
            token=self.token,
        ).start()
        self.pipelines = PipelineRunner(
            environ=self.gateway.task_env(self.environ),
            vertex_url=self.vertex.url,
            echo=self.echo,
            launcher_poll_s=float(POLL_INTERVAL),
            token=self.token,
            before_run=self.gateway.start_grpc,
        )
        self.pipelines.service = self.vertex.pipelines
        self.vertex.pipelines.runner = self.pipelines
        self.tuning = TuningRunner(
            vertex_url=self.vertex.url, jobs=self.jobs, echo=self.echo, token=self.token
        )
        self.tuning.service = self.vertex.tuning
        self.vertex.tuning.runner = self.tuning

    def _start_function(self) -> None:
        """The rendered function under functions-framework, and its bucket's events."""
        from vertex_trainer.sandbox.events import FunctionHost

        assert self.function_dir is not None  # start() starts a function only with one
        host = FunctionHost(
            self.function_dir,
            environ={**self.environ, **self.env()},
            storage=self.gcs.endpoint,
            redeliver=self.redeliver,
            echo=self.echo,
        )
        if host.bucket not in self.buckets:  # the bucket the function watches exists from the start
            self.gcs.create_bucket(host.bucket)
        self.function = host.start()

    def env(self) -> dict[str, str]:
        """The variables that point vertex-trainer, google-cloud-storage and TensorFlow here, with
        the token every stand-in requires (docs/sandbox.md, "Only you can drive it")."""
        return {
            EMULATOR_TOKEN_ENV: self.token,
            ENDPOINT_ENV: self.vertex.url,
            CLOUDBUILD_ENV: self.cloudbuild.url,
            REGISTRY_ENV: self.registry.url,
            LOGGING_ENV: self.logging.url,
            QUOTAS_ENV: self.quotas.url,
            MONITORING_ENV: self.monitoring.url,
            BILLING_ENV: self.billing.url,
            SERVICEUSAGE_ENV: self.serviceusage.url,
            IAM_ENV: self.iam.url,
            POLL_ENV: POLL_INTERVAL,
            **self.gcs.env(),  # STORAGE_EMULATOR_HOST, the TF route, project
            "GOOGLE_CLOUD_PROJECT": self.project,
            "CLOUDSDK_AI_REGION": self.region,  # the default region of status/list/logs
        }

    def stop(self) -> None:
        """Stop the jobs (their processes gone), the model servers, then every server."""
        if self.function is not None:  # no new events, then no new runs
            self.function.stop()
            self.function = None
        if self.pipelines is not None:  # their tasks still talk to Vertex AI while they stop
            self.pipelines.stop()
        if self.tuning is not None:
            self.tuning.stop()
        if self.vertex is not None:
            self.vertex.stop()  # no new requests
        if self.gateway is not None:
            self.gateway.stop()
        self.pipelines = self.gateway = self.tuning = None
        if self.jobs is not None:
            self.jobs.stop()
        if self.models is not None:
            self.models.stop()
        for server in (
            self.cloudbuild,
            self.registry,
            self.logging,
            self.quotas,
            self.monitoring,
            self.billing,
            self.serviceusage,
            self.iam,
            self.gcs,
        ):
            if server is not None:
                server.stop()
        self.vertex = self.cloudbuild = self.registry = self.logging = self.quotas = self.gcs = None
        self.billing = self.serviceusage = self.iam = self._disabled_vertex = self.monitoring = None

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def export_lines(env: Mapping[str, str]) -> str:
    """`export NAME=value` lines, shell-quoted: `eval "$(...)"` or `source` them."""
    return "\n".join(f"export {k}={shlex.quote(v)}" for k, v in env.items())


def env_file_lines(env: Mapping[str, str]) -> str:
    """`NAME=value` lines: `env $(cat FILE) CMD`, `set -a; . FILE; set +a`, GitHub's $GITHUB_ENV,
    docker's --env-file. Values are written as is (none of the sandbox's has a space)."""
    return "".join(f"{k}={v}\n" for k, v in env.items())


def serve(
    sandbox: Sandbox,
    *,
    env_file: str | None = None,
    command: Sequence[str] = (),
    out: Log | None = None,
    note: Log = _stderr,
) -> int:
    """Run the sandbox in the foreground (`vertex-trainer dev sandbox`); returns the exit code.

    Without `command`: print the `export` lines and `# ready` (`out`, stdout), then serve until
    SIGINT, SIGTERM or SIGHUP. With `command`: run it with the sandbox's variables added to
    this process's environment, then stop; its exit code is returned. `env_file` gets the
    variables as NAME=value lines while the sandbox runs (it is removed on stop: it would point
    at ports nobody listens on). Everything is stopped before this returns.
    """
    out = out or (lambda text: print(text, flush=True))
    stop = threading.Event()
    previous = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, on_signal)
    proc: subprocess.Popen[Any] | None = None
    wrote = False
    try:
        sandbox.start()
        env = sandbox.env()
        if env_file:
            _write_atomically(env_file, env_file_lines(env))
            wrote = True
        if stop.is_set():
            return 130
        if not command:
            out(export_lines(env))
            out(READY)
            note(
                f"# sandbox ready (Vertex AI {sandbox.vertex.url}, Cloud Storage "
                f"{sandbox.gcs.endpoint}); Ctrl-C stops it and everything it started"
            )
            stop.wait()
            return 0
        note(f"# sandbox ready: running {shlex.join(command)}")
        try:
            proc = subprocess.Popen(list(command), env={**sandbox.parent_environ, **env})
        except OSError as exc:
            note(f"error: cannot run {command[0]!r}: {exc.strerror or exc}")
            return 127

        def watch(proc: subprocess.Popen[bytes]) -> None:
            proc.wait()
            stop.set()

        threading.Thread(target=watch, args=(proc,), daemon=True).start()
        stop.wait()
        return _end(proc)
    finally:
        if proc is not None and proc.poll() is None:
            _end(proc)
        sandbox.stop()
        if wrote and env_file:
            try:
                os.unlink(env_file)
            except OSError:
                pass
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _end(proc: subprocess.Popen[Any]) -> int:
    """The command's exit code; a command still running (the sandbox was told to stop) is
    terminated first."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    code = proc.returncode
    return 128 - code if code < 0 else code


def _write_atomically(path: str, text: str) -> None:
    """`text` to `path`, readable by this user only (it holds the sandbox's token). The file
    written first has a name of mkstemp's (new, 0600, never a link): at a name anyone can guess
    (`PATH.tmp-PID`) another user could have put a file of theirs, or a link, that gets the token."""
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(path) or ".")
    try:
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
