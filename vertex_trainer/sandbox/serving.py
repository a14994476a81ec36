"""Deployed models that answer: the fake Vertex AI's predictor hook.

When a deployModel completes, `deployed()` starts the Model's serving container command on a free
loopback port (for `serving_image: auto` that is `python -m trainer.serve`, the server the job's
own image runs on Vertex AI, docs/serving.md), with the variables Vertex AI gives a custom
container: AIP_HTTP_PORT, AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE, AIP_STORAGE_URI (the Model's
artifactUri, here a gs:// path the server reads through the sandbox's Cloud Storage route),
AIP_DEPLOYED_MODEL_ID, ... . `predict()` waits until the health route answers 200 (as Vertex AI
routes no traffic before), then forwards the request body to the predict route and hands the
answer back to the fake endpoint, which adds deployedModelId, model and modelVersionId.

When an undeployModel completes, `undeployed()` stops that deployed model's server (Vertex AI
releases its nodes) and returns once the process is gone, so the operation is done only then.

Servers are processes of their own session that die with the sandbox (local.Supervisor), bound
to 127.0.0.1 only; `stop()` ends them all.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vertex_trainer.contract import SERVE_MODULE
from vertex_trainer.log import Log

LOAD_TIMEOUT_S = 300.0  # TensorFlow's import and the model's load, on a busy laptop
FORWARD_TIMEOUT_S = 300.0  # one predict request, once the model is ready
HEALTH_INTERVAL_S = 0.25


@dataclass(eq=False)
class _Server:
    deployed_id: str
    url: str
    health_route: str
    predict_route: str
    supervisor: Any
    ready: threading.Event = field(default_factory=threading.Event)
    error: str | None = None


class ModelServers:
    """The predictor hook of FakeVertex: one server process per deployed model."""

    def __init__(
        self, *, environ: Mapping[str, str], echo: Log | None = None, load_timeout: float = LOAD_TIMEOUT_S
    ):
        self.environ = dict(environ)
        self.echo = echo if echo is not None else (lambda text: None)
        self.load_timeout = load_timeout
        self._servers: dict[str, _Server] = {}
        self._undeployed: set[str] = set()  # deployed model ids whose server was stopped for good
        self._lock = threading.Lock()
        self._closed = False

    # -- the hook ---------------------------------------------------------------------------
    def deployed(self, endpoint: str, deployed_model: dict[str, Any], model: dict[str, Any]) -> None:
        """A deployModel completed: start serving it now (returns at once; it loads meanwhile)."""
        self._ensure(endpoint, deployed_model, model)

    def predict(
        self, endpoint: str, deployed_model: dict[str, Any], model: dict[str, Any], body: Any
    ) -> tuple[int, Any]:
        """Forward `body` to the deployed model's server; (HTTP status, JSON answer)."""
        server = self._ensure(endpoint, deployed_model, model)
        if server is None:
            gone = str(deployed_model["id"]) in self._undeployed
            return 503, {"error": "the model was undeployed" if gone else "the sandbox is shutting down"}
        if not server.ready.wait(self.load_timeout):
            return 503, {"error": f"the model did not become ready within {self.load_timeout:.0f} s"}
        if server.error:
            return 500, {"error": server.error}
        request = urllib.request.Request(
            server.url + server.predict_route,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with _opener().open(request, timeout=FORWARD_TIMEOUT_S) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, {"error": raw.decode("utf-8", "replace")[:500]}
        except OSError as exc:
            return 503, {"error": f"the model server did not answer: {exc}"}

    def undeployed(self, endpoint: str, deployed_model_id: str) -> None:
        """An undeployModel completed: stop that deployed model's server (SIGTERM, then SIGKILL)
        and return once its process is gone."""
        with self._lock:  # _watch starts a process under this lock: it sees the id, or we see it
            self._undeployed.add(str(deployed_model_id))
            server = self._servers.pop(str(deployed_model_id), None)
            if server is None:
                return
        server.supervisor.stop()
        server.error = server.error or "the model was undeployed"
        server.ready.set()
        self.echo(f"[model {deployed_model_id}] undeployed from {endpoint}: its server stopped")

    # -- the sandbox ------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop every server (SIGTERM, then SIGKILL) and wait until they are gone."""
        with self._lock:
            self._closed = True
            servers = list(self._servers.values())
        for server in servers:
            server.supervisor.stop()
            server.ready.set()

    @property
    def servers(self) -> dict[str, str]:
        """deployed model id -> the URL its server listens on."""
        with self._lock:
            return {k: s.url for k, s in self._servers.items()}

    # -- one server -------------------------------------------------------------------------
    def _ensure(self, endpoint: str, deployed_model: dict[str, Any], model: dict[str, Any]) -> _Server | None:
        from vertex_trainer.local import Replica, Supervisor, command_of
        from vertex_trainer.local.cluster import free_ports

        deployed_id = str(deployed_model["id"])
        with self._lock:
            if self._closed or deployed_id in self._undeployed:
                return None
            if deployed_id in self._servers:
                return self._servers[deployed_id]
            spec = model.get("containerSpec") or {}
            endpoint_id = endpoint.rsplit("/", 1)[-1]
            # Vertex AI's defaults when the Model names no routes.
            predict_route = (
                spec.get("predictRoute")
                or f"/v1/endpoints/{endpoint_id}/deployedModels/{deployed_id}:predict"
            )
            health_route = (
                spec.get("healthRoute") or f"/v1/endpoints/{endpoint_id}/deployedModels/{deployed_id}"
            )
            port = free_ports(1)[0]
            if spec.get("command"):
                argv = command_of({"containerSpec": spec})
            else:  # the image's own entrypoint is not known here: the bundled server stands in
                argv = [sys.executable, "-m", SERVE_MODULE, *map(str, spec.get("args") or [])]
            if SERVE_MODULE in argv:
                argv += ["--host", "127.0.0.1"]  # the container listens on 0.0.0.0; here loopback only
            env = {
                **self.environ,
                **{str(e["name"]): str(e.get("value", "")) for e in spec.get("env") or []},
                "AIP_HTTP_PORT": str(port),
                "AIP_HEALTH_ROUTE": health_route,
                "AIP_PREDICT_ROUTE": predict_route,
                "AIP_STORAGE_URI": model.get("artifactUri", ""),
                "AIP_DEPLOYED_MODEL_ID": deployed_id,
                "AIP_ENDPOINT_ID": endpoint_id,
                "AIP_MODEL_NAME": model.get("name", "").rsplit("/", 1)[-1],
                "AIP_VERSION_NAME": str(model.get("versionId", "")),
                "AIP_MACHINE_TYPE": (
                    (deployed_model.get("dedicatedResources") or {}).get("machineSpec") or {}
                ).get("machineType", ""),
                "AIP_FRAMEWORK": "CUSTOM_CONTAINER",
                "AIP_MODE": "PREDICTION",
                "AIP_MODE_VERSION": "1.0.0",
                "PYTHONUNBUFFERED": "1",
            }
            replica = Replica(pool=0, index=0, address=f"127.0.0.1:{port}", argv=tuple(argv), env=env)
            server = _Server(
                deployed_id, f"http://127.0.0.1:{port}", health_route, predict_route, Supervisor([replica])
            )
            self._servers[deployed_id] = server
        self.echo(
            f"[model {deployed_id}] serving {model.get('artifactUri', '')} on {server.url}: "
            f"{' '.join(argv[1:])}"
        )
        # The process is started by the thread that watches it, for as long as it runs: a
        # child's PR_SET_PDEATHSIG fires when the *thread* that forked it ends (here that would
        # be the HTTP request's), not only when the sandbox does.
        threading.Thread(target=self._watch, args=(server,), daemon=True, name=f"serve-{deployed_id}").start()
        return server

    def _watch(self, server: _Server) -> None:
        """Start the server; echo its lines; mark it ready once its health route answers 200."""
        with self._lock:  # stop() either sees this process or keeps it from starting
            try:
                if self._closed:
                    raise RuntimeError("the sandbox is shutting down")
                if server.deployed_id in self._undeployed:
                    raise RuntimeError("the model was undeployed")
                server.supervisor.start()
            except Exception as exc:
                server.error = f"the serving container cannot start: {exc}"
                server.ready.set()
                return
        process = server.supervisor.processes[0]
        deadline = time.monotonic() + self.load_timeout
        while True:
            for _, line in server.supervisor.lines(timeout=HEALTH_INTERVAL_S):
                self.echo(f"[model {server.deployed_id}] {line}")
            if process.ended is not None:
                if not server.ready.is_set():
                    last = [t for t in process.tail if t.strip()]
                    server.error = f"the model server exited with status {process.returncode}" + (
                        f": {last[-1].strip()}" if last else ""
                    )
                    server.ready.set()
                for _, line in server.supervisor.lines(timeout=0):
                    self.echo(f"[model {server.deployed_id}] {line}")
                return
            if not server.ready.is_set():
                if _healthy(server.url + server.health_route):
                    server.ready.set()
                elif time.monotonic() > deadline:
                    server.error = f"the model did not become ready within {self.load_timeout:.0f} s"
                    server.ready.set()


def _healthy(url: str) -> bool:
    try:
        with _opener().open(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


def _opener() -> urllib.request.OpenerDirector:
    # Loopback only: never through a proxy from the environment.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))
