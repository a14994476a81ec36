"""The fake Vertex AI PipelineService (REST, v1), mounted in FakeVertex beside the models.

- ``POST /v1/{parent}/pipelineJobs?pipelineJobId=ID``   create (PipelineJob); a reused id is 409
- ``GET  /v1/{parent}/pipelineJobs``                    list (``filter`` on labels / display_name)
- ``GET  /v1/{parent}/pipelineJobs/ID``                 get (advances the run one state)
- ``POST /v1/{parent}/pipelineJobs/ID:cancel``          cancel

Bodies are parsed strictly with the real ``aiplatform_v1.PipelineJob``; the run needs a compiled
pipeline (``pipelineSpec`` with a ``root``) and a root (``runtimeConfig.gcsOutputDirectory``), as
the service does. Runs advance along a script of states, one step per GET, like CustomJobs
(default PENDING -> RUNNING -> SUCCEEDED). Nothing is executed, unless a `runner` is plugged in
(the sandbox's, vertex_trainer/sandbox/pipelines.py): it is handed every created run
(``start(run)``) and every cancel (``cancel(name)``), and moves the run along with
:meth:`PipelineService.report` (state, error, ``jobDetail.taskDetails``).
"""

from __future__ import annotations

import itertools
import re
import threading
from datetime import datetime, timezone
from typing import Any

from vertex_trainer.emulators._http import Collection, collection_routes
from vertex_trainer.emulators.vertex_models import ServiceError, _filter, _parse

_ID = re.compile(r"^[a-z][a-z0-9-]{0,127}$")
DEFAULT_SCRIPT = ("PIPELINE_STATE_PENDING", "PIPELINE_STATE_RUNNING", "PIPELINE_STATE_SUCCEEDED")
TERMINAL = frozenset({"PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED"})
_OUTPUT_ONLY = (
    "name",
    "state",
    "createTime",
    "startTime",
    "endTime",
    "updateTime",
    "error",
    "jobDetail",
    "scheduleName",
)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


class PipelineService(Collection):
    """The routes above over one dict of runs; FakeVertex calls `route()` then the handler.

    Tests read ``runs`` (name -> PipelineJob, as last answered) and set ``script``."""

    ROUTES = collection_routes("pipelineJobs", "pipeline")

    def __init__(
        self,
        lock: threading.RLock,
        script: tuple[str, ...] = DEFAULT_SCRIPT,
        error_message: str = "The DAG failed because some tasks failed.",
    ):
        super().__init__(lock)
        self.script = list(script)
        self.error_message = error_message
        self.runs: dict[str, dict[str, Any]] = {}
        self._pos: dict[str, tuple[list[str], int]] = {}
        self._ids = itertools.count(1)

    # -- test controls -------------------------------------------------------------------------
    def set_script(self, states: list[str] | tuple[str, ...]) -> None:
        """The state sequence of runs created from now on (the first one is the create answer)."""
        with self._lock:
            self.script = list(states)

    # -- the service ---------------------------------------------------------------------------
    def _create(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        run = _parse("PipelineJob", body)
        for field in _OUTPUT_ONLY:
            run.pop(field, None)
        if not (run.get("pipelineSpec") or {}).get("root"):
            raise ServiceError(
                400,
                "List of found errors:\t1.Field: pipeline_job.pipeline_spec; "
                "Message: A compiled pipeline (with a root DAG) is required.\t",
            )
        if not (run.get("runtimeConfig") or {}).get("gcsOutputDirectory") and not run["pipelineSpec"].get(
            "defaultPipelineRoot"
        ):
            raise ServiceError(
                400, "Pipeline root is not specified: set runtime_config.gcs_output_directory."
            )
        for key, value in (run.get("labels") or {}).items():
            if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key) or not re.fullmatch(
                r"[a-z0-9_-]{0,63}", value
            ):
                raise ServiceError(400, f"Label '{key}={value}' is invalid.")
        job_id = query.get("pipelineJobId") or f"{run.get('displayName') or 'pipeline'}-{next(self._ids)}"
        if not _ID.match(job_id):
            raise ServiceError(
                400, f"Invalid pipeline_job_id {job_id!r}: it must match [a-z][-a-z0-9]{{0,127}}."
            )
        name = f"{parent}/pipelineJobs/{job_id}"
        with self._lock:
            if name in self.runs:
                raise ServiceError(409, f'PipelineJob "{name}" already exists.')
            now = _now()
            run.update(name=name, createTime=now, updateTime=now)
            self.runs[name] = run
            runner = self._claim(name)
            script = ["PIPELINE_STATE_PENDING"] if runner is not None else self.script
            self._pos[name] = (list(script) or ["PIPELINE_STATE_PENDING"], 0)
            self._apply(name)
            answer = dict(run)
        return self._hand_over(runner, answer)

    def report(
        self,
        name: str,
        state: str,
        *,
        error: dict[str, Any] | None = None,
        job_detail: dict[str, Any] | None = None,
    ) -> bool:
        """For a runner: run `name` is now in `state` (with `error` and `jobDetail`). An ended run
        stays as it is; a cancelling one only moves on to an end. False when ignored."""
        with self._lock:
            run = self.runs.get(name)
            current = run.get("state") if run is not None else None
            if run is None:
                return False
            if job_detail is not None:
                run["jobDetail"] = job_detail
            if current in TERMINAL or (current == "PIPELINE_STATE_CANCELLING" and state not in TERMINAL):
                return False
            self._pos[name] = ([state], 0)
            self._apply(name)
            if error is not None and state in TERMINAL:
                run["error"] = dict(error)
            return True

    def _apply(self, name: str) -> None:
        script, pos = self._pos[name]
        run, state = self.runs[name], script[pos]
        if run.get("state") == state:
            return
        run["state"] = state
        run["updateTime"] = _now()
        if state != "PIPELINE_STATE_PENDING":
            run.setdefault("startTime", run["updateTime"])
        if state in TERMINAL:
            run["endTime"] = run["updateTime"]
        if state == "PIPELINE_STATE_FAILED":
            run["error"] = {"code": 9, "message": self.error_message}
        elif state == "PIPELINE_STATE_CANCELLED":
            run["error"] = {"code": 1, "message": "CANCELLED"}

    def _get(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            if name not in self.runs:
                raise ServiceError(404, f'The PipelineJob "{name}" does not exist.')
            script, pos = self._pos[name]
            if pos < len(script) - 1:
                self._pos[name] = (script, pos + 1)
                self._apply(name)
            return dict(self.runs[name])

    def _list(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        keep = _filter(query.get("filter", ""))
        with self._lock:
            found = [dict(r) for n, r in self.runs.items() if n.startswith(parent + "/") and keep(r)]
        found.sort(key=lambda r: r["createTime"], reverse=True)
        return {"pipelineJobs": found} if found else {}

    def _cancel(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            run = self.runs.get(name)
            if run is None:
                raise ServiceError(404, f'The PipelineJob "{name}" does not exist.')
            if run["state"] in TERMINAL:
                raise ServiceError(400, f"Cannot cancel PipelineJob {name} in state {run['state']}.")
            by_runner = name in self._run_by_runner
            self._pos[name] = (
                ["PIPELINE_STATE_CANCELLING"]
                if by_runner
                else ["PIPELINE_STATE_CANCELLING", "PIPELINE_STATE_CANCELLED"],
                0,
            )
            self._apply(name)
        if by_runner:  # CANCELLED once the runner has stopped the running task
            self.runner.cancel(name)
        return {}
