"""PipelineJobs that really run: the fake Vertex AI Pipelines' runner hook (docs/sandbox.md).

`PipelineService.runner = PipelineRunner(...)` hands every created run to `start(run)`. The run's
PipelineSpec is executed here as the Vertex AI Pipelines backend executes it: each of the root DAG's
tasks starts, on a thread of its own, once every task it depends on (`dependentTasks` and the
producers of its inputs) has succeeded, so independent branches run at the same time; each
task's inputs from constants, the run's parameters and its producers' outputs, optional inputs
from their defaults, `{{$.pipeline_*}}` values filled in.

- An importer task outputs its artifact (`artifactUri`, `typeSchema`, `metadata`) at once.
- A container task runs its executor's command and args, filled as the backend fills them
  (placeholders.py), as a local process: for GCPC, `python3 -u -m
  google_cloud_pipeline_components.container.v1.<...>.launcher`, the installed code in place of
  the image, polling every second instead of every 20 s (launcher.py). The launchers talk to
  "https://{location}-aiplatform.googleapis.com" and the metadata server, which gateway.py puts
  on loopback: so the custom-job task creates a CustomJob here that trains for real, the upload
  task registers the model, the endpoint tasks create and deploy. Its outputs: the files named
  by `{{$.outputs.parameters[...].output_file}}` and the executor output file
  (`outputs.outputFile`), as the backend reads them.

`pipelineJobs.get` shows `jobDetail.taskDetails` (one per task, plus the root), each with its
state, times, inputs and outputs (`execution.metadata` "input:"/"output:" keys, artifacts) and
error. A task that fails fails the run, with its error (the CustomJob's, when it named one); the
tasks after it do not start, and the tasks already running go on to their end. What else starts
follows `runtimeConfig.failurePolicy`, as on Vertex AI: by default (FAIL_SLOW) every task that
does not depend on a failed one still runs; with PIPELINE_FAILURE_POLICY_FAIL_FAST no task starts
after a failure. A cancel stops every running task as the backend does (SIGTERM: GCPC cancels its
CustomJob), then cancels what each created if it is still running; no other task starts.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from vertex_trainer.log import Log
from vertex_trainer.sandbox import launcher, placeholders
from vertex_trainer.sandbox.runner import Run, Runner, call, internal_error
from vertex_trainer.sandbox.runner import now as _now

RUNNING, SUCCEEDED = "PIPELINE_STATE_RUNNING", "PIPELINE_STATE_SUCCEEDED"
FAILED, CANCELLED = "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED"
FAIL_FAST = "PIPELINE_FAILURE_POLICY_FAIL_FAST"
PROJECT_NUMBER = "123456789012"  # the metadata server's numeric-project-id (gateway.py)
CANCEL_GRACE_S = 30.0  # SIGTERM -> SIGKILL: GCPC's handler sends the job's cancel first
_PYTHONS = ("python", "python3")


class TaskError(Exception):
    """A task that cannot run here, or ended badly (its message is the task's error)."""


@dataclass(eq=False)
class _Run(Run):
    details: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # task key -> parameters, artifacts
    lock: threading.RLock = field(default_factory=threading.RLock)  # details change on task threads


class PipelineRunner(Runner[_Run]):
    """The runner hook of PipelineService (`start`, `cancel`); `service` is set by the sandbox.

    `environ`: the task processes' environment (the gateway's variables included); `vertex_url`:
    the fake Vertex AI (to read and cancel what a task created); `echo`: the tasks' lines;
    `launcher_poll_s`: how often GCPC's launchers look at their job or operation (launcher.py;
    20 s on Google Cloud); `before_run`: called as each run begins, before its first task (the
    sandbox's: `Gateway.start_grpc`, the gateway's gRPC face started by the first run)."""

    kind = "pipeline"

    def __init__(
        self,
        *,
        environ: Mapping[str, str],
        vertex_url: str,
        echo: Log | None = None,
        launcher_poll_s: float = 1.0,
        token: str | None = None,
        before_run: Callable[[], object] | None = None,
    ):
        super().__init__(echo=echo)
        self.before_run = before_run
        self.token = token  # the sandbox's, which its Vertex AI requires
        self.launcher_poll_s = launcher_poll_s
        self.environ = dict(environ)
        self.vertex_url = vertex_url.rstrip("/")
        self.service: Any = None
        self._task_ids = itertools.count(1001)
        self._dir = tempfile.mkdtemp(prefix="vertex-trainer-pipelines-")

    def _new(self, body: dict[str, Any]) -> _Run:
        return _Run(body["name"], body)

    def _refuse(self, entry: _Run) -> None:
        self._report(entry, FAILED, {"code": 14, "message": "The sandbox is shutting down."})

    def _stopped(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- one run ----------------------------------------------------------------------------
    def _run(self, entry: _Run) -> None:
        spec = entry.body.get("pipelineSpec") or {}
        root_detail = self._detail(entry, spec.get("pipelineInfo", {}).get("name") or entry.job_id)
        try:
            self._report(entry, RUNNING)
            if self.before_run is not None:
                self.before_run()
            state, error = self._execute(entry, spec)
        except Exception as exc:
            state, error = FAILED, {"code": 13, "message": internal_error(exc)}
        with entry.lock:
            root_detail.update(state=state.replace("PIPELINE_STATE_", ""), endTime=_now())
            if error:
                root_detail["error"] = error
        self.echo(
            f"[pipeline {entry.job_id}] {state.replace('PIPELINE_STATE_', '')}"  # (as the CLI says it)
            + (f": {error['message']}" if error else "")
        )
        self._report(entry, state, error)

    def _execute(self, entry: _Run, spec: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """The DAG: a task starts once all its upstream tasks succeeded (ties by key), each on a
        thread of its own; this thread records each end and starts what it lets start."""
        root = spec.get("root") or {}
        tasks = (root.get("dag") or {}).get("tasks") or {}
        run_inputs = _defaults(root.get("inputDefinitions") or {})
        run_inputs.update((entry.body.get("runtimeConfig") or {}).get("parameterValues") or {})
        upstream = {key: _upstream(task) for key, task in tasks.items()}
        waiting = _order(upstream)
        fail_fast = (entry.body.get("runtimeConfig") or {}).get("failurePolicy") == FAIL_FAST
        ended: queue.Queue[Any] = queue.Queue()  # (key, outputs or the task's error or a bug)
        running: dict[str, dict[str, Any]] = {}  # key -> its detail
        succeeded: set[str] = set()
        failed: list[tuple[str, str]] = []  # (task name, error)
        bug: Exception | None = None
        while True:
            if not (entry.cancel.is_set() or bug or (failed and fail_fast)):
                for key in [k for k in waiting if upstream[k] <= succeeded]:
                    waiting.remove(key)
                    run = partial(self._task, entry, spec, key, tasks[key], run_inputs)
                    running[key] = self._begin(entry, key, tasks[key], ended, run)
            if not running:
                break
            key, result = ended.get()
            detail = running.pop(key)
            if isinstance(result, TaskError):
                if entry.cancel.is_set():
                    self._update(entry, detail, state="CANCELLED", endTime=_now())
                    continue
                self._update(
                    entry, detail, state="FAILED", endTime=_now(), error={"code": 9, "message": str(result)}
                )
                failed.append((detail["taskName"], str(result)))
            elif isinstance(result, Exception):
                bug = bug or result
                self._update(
                    entry,
                    detail,
                    state="FAILED",
                    endTime=_now(),
                    error={"code": 13, "message": internal_error(result)},
                )
            else:
                entry.outputs[key] = result
                succeeded.add(key)
                artifacts = {
                    k: {"artifacts": [_api_artifact(a) for a in v]} for k, v in result["artifacts"].items()
                }
                self._update(
                    entry,
                    detail,
                    state="SUCCEEDED",
                    endTime=_now(),
                    **({"outputs": artifacts} if artifacts else {}),
                )
                with entry.lock:
                    detail["execution"]["metadata"].update(
                        {f"output:{k}": v for k, v in result["parameters"].items()}
                    )
            self._report(entry, RUNNING)
        if entry.cancel.is_set():
            return CANCELLED, {"code": 1, "message": "CANCELLED"}
        if bug is not None:
            return FAILED, {"code": 13, "message": internal_error(bug)}
        if failed:
            return FAILED, {
                "code": 9,
                "message": "The DAG failed because some tasks failed. The failed "
                f"tasks are: [{', '.join(n for n, _ in failed)}].; " + "; ".join(e for _, e in failed),
            }
        return SUCCEEDED, None

    def _begin(
        self,
        entry: _Run,
        key: str,
        task: dict[str, Any],
        ended: queue.Queue[Any],
        run: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> dict[str, Any]:
        """Start task `key` on a thread of its own, `run(its detail)`, which puts (key, its outputs
        or its error) in `ended` when it is over; returns the task's detail."""
        name = (task.get("taskInfo") or {}).get("name") or key
        detail = self._detail(entry, name, parent=entry.details[0]["taskId"])

        def work() -> None:
            try:
                result: Any = run(detail)
            except Exception as exc:
                result = exc
            ended.put((key, result))

        threading.Thread(target=work, daemon=True, name=f"pipeline-{entry.job_id}-{key}").start()
        return detail

    def _task(
        self,
        entry: _Run,
        spec: dict[str, Any],
        key: str,
        task: dict[str, Any],
        run_inputs: dict[str, Any],
        detail: dict[str, Any],
    ) -> dict[str, Any]:
        for unsupported in ("triggerPolicy", "iteratorPolicy", "parameterIterator", "artifactIterator"):
            if task.get(unsupported):
                raise TaskError(f"task {key}: {unsupported} is not run by the sandbox")
        component = (spec.get("components") or {}).get((task.get("componentRef") or {}).get("name", ""))
        if component is None or "dag" in component:
            raise TaskError(
                f"task {key}: only container and importer components run in the sandbox (no sub-DAGs)"
            )
        executor = ((spec.get("deploymentSpec") or {}).get("executors") or {}).get(
            component.get("executorLabel", ""), {}
        )
        context = self._context(entry, detail)
        params, artifacts = self._inputs(entry, task, component, run_inputs, context)
        with entry.lock:
            detail["execution"]["metadata"].update({f"input:{k}": v for k, v in params.items()})
            if artifacts:
                detail["inputs"] = {
                    k: {"artifacts": [_api_artifact(a) for a in v]} for k, v in artifacts.items()
                }
            detail.update(state="RUNNING", startTime=_now())
        self._report(entry, RUNNING)
        if "importer" in executor:
            return {
                "parameters": {},
                "artifacts": {"artifact": [self._imported(executor["importer"], params, context)]},
            }
        if "container" not in executor:
            raise TaskError(
                f"task {key}: executor {component.get('executorLabel')!r} is neither a "
                "container nor an importer"
            )
        return self._container(
            entry, key, executor["container"], component, params, artifacts, context, detail
        )

    def _inputs(
        self,
        entry: _Run,
        task: dict[str, Any],
        component: dict[str, Any],
        run_inputs: dict[str, Any],
        context: Mapping[str, str],
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        declared = component.get("inputDefinitions") or {}
        params = {k: _fill(v, context) for k, v in _defaults(declared).items()}
        for name, source in ((task.get("inputs") or {}).get("parameters") or {}).items():
            if "runtimeValue" in source:
                params[name] = _fill(source["runtimeValue"].get("constant"), context)
            elif "componentInputParameter" in source:
                params[name] = run_inputs.get(source["componentInputParameter"])
            elif "taskOutputParameter" in source:
                ref = source["taskOutputParameter"]
                params[name] = entry.outputs[ref["producerTask"]]["parameters"].get(ref["outputParameterKey"])
            else:
                raise TaskError(f"input parameter {name}: {sorted(source)} is not run by the sandbox")
        artifacts: dict[str, list[dict[str, Any]]] = {}
        for name, source in ((task.get("inputs") or {}).get("artifacts") or {}).items():
            if "taskOutputArtifact" not in source:
                raise TaskError(f"input artifact {name}: {sorted(source)} is not run by the sandbox")
            ref = source["taskOutputArtifact"]
            artifacts[name] = entry.outputs[ref["producerTask"]]["artifacts"][ref["outputArtifactKey"]]
        return {k: v for k, v in params.items() if v is not None}, artifacts

    def _imported(
        self, importer: dict[str, Any], params: dict[str, Any], context: Mapping[str, str]
    ) -> dict[str, Any]:
        uri_spec = importer.get("artifactUri") or {}
        if "runtimeParameter" in uri_spec:
            uri = params.get(uri_spec["runtimeParameter"], "")
        else:
            uri = uri_spec.get("constant", "")
        return {
            "name": f"projects/{context['pipeline_google_cloud_project_id']}/locations/"
            f"{context['pipeline_google_cloud_location']}/metadataStores/default/"
            f"artifacts/{next(self._task_ids)}",
            "type": importer.get("typeSchema") or {},
            "uri": _fill(uri, context),
            "metadata": placeholders.whole(_fill(importer.get("metadata") or {}, context)),
        }

    # -- a container task -------------------------------------------------------------------
    def _container(
        self,
        entry: _Run,
        key: str,
        container: dict[str, Any],
        component: dict[str, Any],
        params: dict[str, Any],
        artifacts: dict[str, Any],
        context: Mapping[str, str],
        detail: dict[str, Any],
    ) -> dict[str, Any]:
        from vertex_trainer.local import Replica, Supervisor

        task_dir = tempfile.mkdtemp(prefix=f"{key}-", dir=self._dir)
        declared = component.get("outputDefinitions") or {}
        out_root = (
            f"{context['pipeline_root'].rstrip('/')}/{PROJECT_NUMBER}/{entry.job_id}/{key}_{detail['taskId']}"
        )
        executor_input = {
            "inputs": {
                "parameterValues": params,
                "artifacts": {k: {"artifacts": v} for k, v in artifacts.items()},
            },
            "outputs": {
                "parameters": {
                    k: {"outputFile": os.path.join(task_dir, "parameters", k)}
                    for k in declared.get("parameters") or {}
                },
                "artifacts": {
                    k: {
                        "artifacts": [
                            {
                                "name": f"{out_root}/{k}",
                                "type": v.get("artifactType") or {},
                                "uri": f"{out_root}/{k}",
                                "metadata": {},
                            }
                        ]
                    }
                    for k, v in (declared.get("artifacts") or {}).items()
                },
                "outputFile": os.path.join(task_dir, "executor_output.json"),
            },
        }
        executor_input = placeholders.whole(executor_input)
        argv = placeholders.resolve_args(
            list(container.get("command") or []), executor_input, context
        ) + placeholders.resolve_args(list(container.get("args") or []), executor_input, context)
        if not argv:
            raise TaskError(
                f"task {key}: the container has no command (the image's entrypoint is not known here)"
            )
        run = argv  # what runs; the log line shows the command as the spec has it
        if argv[0] in _PYTHONS:  # the image's Python: the installed one, which has GCPC
            argv[0] = sys.executable
            run = launcher.wrap(argv, self.launcher_poll_s)  # GCPC's polls at the sandbox's pace
            run = launcher.hide_args(run, task_dir)  # its --payload (env values) not in `ps`
        os.makedirs(os.path.join(task_dir, "parameters"), exist_ok=True)
        env = {
            **self.environ,
            **{e["name"]: str(e.get("value", "")) for e in container.get("env") or []},
            "PYTHONUNBUFFERED": "1",
        }
        supervisor = Supervisor(
            [Replica(pool=0, index=0, address="", argv=tuple(run), env=env)], cwd=task_dir
        )
        name = detail["taskName"]
        self.echo(f"[pipeline {entry.job_id}] {name}: {' '.join(argv[1:4])} ...")
        try:
            supervisor.start()
        except Exception as exc:
            raise TaskError(f"task {name}: {exc}") from None
        process = supervisor.processes[0]
        stopped = False
        while process.ended is None or not supervisor.all_ended():
            for _, line in supervisor.lines(timeout=0.5):
                self.echo(f"[pipeline {entry.job_id}] {name} | {line}")
            if entry.cancel.is_set() and not stopped:
                stopped = True
                threading.Thread(
                    target=supervisor.stop, kwargs={"grace_s": CANCEL_GRACE_S}, daemon=True
                ).start()
        if process.reader is not None:
            process.reader.join(timeout=5)
        for _, line in supervisor.lines(timeout=0):
            self.echo(f"[pipeline {entry.job_id}] {name} | {line}")
        resource = _gcp_resource(executor_input)
        if resource:
            with entry.lock:
                detail.setdefault("executorDetail", {"containerDetail": {}})
                if "/customJobs/" in resource:
                    detail["executorDetail"] = {"customJobDetail": {"job": resource}}
        if entry.cancel.is_set():
            if resource and "/customJobs/" in resource:
                self._call("POST", f"/v1/{resource}:cancel", {})  # a no-op if GCPC already did
            raise TaskError("cancelled")
        if process.returncode != 0:
            raise TaskError(self._failure(name, process, resource))
        return _outputs(executor_input, declared)

    def _failure(self, name: str, process: Any, resource: str | None) -> str:
        if resource and "/customJobs/" in resource:
            status, job = self._call("GET", f"/v1/{resource}")
            if status == 200 and isinstance(job, dict) and job.get("error", {}).get("message"):
                return (
                    f"Task {name}: the CustomJob {resource} ended {job.get('state')}: "
                    f"{job['error']['message']}"
                )
        last = [line.strip() for line in process.tail if line.strip()]
        return f"Task {name}: the container exited with status {process.returncode}" + (
            f". Last line: {last[-1]}" if last else "."
        )

    # -- helpers ----------------------------------------------------------------------------
    def _detail(self, entry: _Run, name: str, parent: str | None = None) -> dict[str, Any]:
        now = _now()
        detail = {
            "taskId": str(next(self._task_ids)),
            "taskName": name,
            "createTime": now,
            "startTime": now,
            "state": "PENDING" if parent else "RUNNING",
            "execution": {"displayName": name, "metadata": {}},
        }
        if parent:
            detail["parentTaskId"] = parent
        with entry.lock:
            entry.details.append(detail)
        return detail

    def _update(self, entry: _Run, detail: dict[str, Any], **changes: Any) -> None:
        with entry.lock:
            detail.update(changes)

    def _context(self, entry: _Run, detail: dict[str, Any]) -> dict[str, str]:
        root = (
            (entry.body.get("runtimeConfig") or {}).get("gcsOutputDirectory")
            or (entry.body.get("pipelineSpec") or {}).get("defaultPipelineRoot")
            or ""
        )
        return {
            "pipeline_job_name": entry.job_id,
            "pipeline_job_uuid": entry.job_id,
            "pipeline_job_resource_name": entry.name,
            "pipeline_task_name": detail["taskName"],
            "pipeline_task_uuid": detail["taskId"],
            "pipeline_google_cloud_project_id": entry.project,
            "pipeline_google_cloud_location": entry.location,
            "pipeline_root": root,
            "pipeline_persistent_resource_id": "",
            "pipeline_job_create_time_utc": entry.body.get("createTime", ""),
            "pipeline_job_schedule_time_utc": entry.body.get("createTime", ""),
        }

    def _report(self, entry: _Run, state: str, error: dict[str, Any] | None = None) -> None:
        if self.service is not None:
            with entry.lock:  # one report at a time, each with the details as they are then
                detail = {"taskDetails": json.loads(json.dumps(entry.details))}
                self.service.report(entry.name, state, error=error, job_detail=detail)

    def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call(self.vertex_url, method, path, body, timeout=30, token=self.token)


def _upstream(task: dict[str, Any]) -> set[str]:
    """The tasks `task` waits for: its `dependentTasks` and the producers of its inputs."""
    found = set(task.get("dependentTasks") or [])
    for kind in ("parameters", "artifacts"):
        for source in ((task.get("inputs") or {}).get(kind) or {}).values():
            for ref in ("taskOutputParameter", "taskOutputArtifact"):
                if ref in source:
                    found.add(source[ref]["producerTask"])
    return found


def _order(upstream: dict[str, set[str]]) -> list[str]:
    """The tasks in dependency order (ties by name), each after every task it depends on
    (`upstream`: task -> the tasks it waits for, _upstream's)."""
    waiting = dict(upstream)
    order: list[str] = []
    while waiting:
        ready = sorted(k for k, d in waiting.items() if d <= set(order))
        if not ready:
            raise TaskError(f"the DAG has a cycle or a missing task among {sorted(waiting)}")
        order.append(ready[0])
        del waiting[ready[0]]
    return order


def _defaults(definitions: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v["defaultValue"] for k, v in (definitions.get("parameters") or {}).items() if "defaultValue" in v
    }


def _fill(value: Any, context: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return placeholders.pipeline_values(value, context)
    if isinstance(value, dict):
        return {k: _fill(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, context) for v in value]
    return value


def _outputs(executor_input: dict[str, Any], declared: dict[str, Any]) -> dict[str, Any]:
    """A finished task's outputs: its parameter files, then the executor output file."""
    outputs = executor_input["outputs"]
    params: dict[str, Any] = {}
    for name, spec in (declared.get("parameters") or {}).items():
        path = outputs["parameters"][name]["outputFile"]
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                raw = f.read()
            params[name] = raw if spec.get("parameterType") == "STRING" else json.loads(raw)
    artifacts = {k: v["artifacts"] for k, v in outputs["artifacts"].items()}
    if os.path.exists(outputs["outputFile"]):
        with open(outputs["outputFile"], encoding="utf-8") as f:
            written = json.load(f)
        params.update(written.get("parameterValues") or {})
        for name, value in (written.get("artifacts") or {}).items():
            if value and value.get("artifacts"):
                artifacts[name] = value["artifacts"]
    return {"parameters": params, "artifacts": artifacts}


def _gcp_resource(executor_input: dict[str, Any]) -> str | None:
    """The resource a GCPC task wrote in its gcp_resources output (e.g. its CustomJob's name)."""
    spec = executor_input["outputs"]["parameters"].get("gcp_resources")
    if not spec or not os.path.exists(spec["outputFile"]):
        return None
    try:
        with open(spec["outputFile"], encoding="utf-8") as f:
            uri = json.load(f)["resources"][0]["resourceUri"]
    except (ValueError, KeyError, IndexError, OSError):
        return None
    return str(uri).split("/v1/", 1)[-1]


def _api_artifact(artifact: dict[str, Any]) -> dict[str, Any]:
    """A RuntimeArtifact as PipelineTaskDetail shows it (an aiplatform_v1 Artifact)."""
    kind = artifact.get("type") or {}
    out = {
        "name": artifact.get("name", ""),
        "uri": artifact.get("uri", ""),
        "metadata": artifact.get("metadata") or {},
        "schemaTitle": kind.get("schemaTitle", ""),
        "schemaVersion": kind.get("schemaVersion", ""),
    }
    return {k: v for k, v in out.items() if v not in ("", None)}
