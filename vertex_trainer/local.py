"""Run a rendered CustomJob on this machine, as Vertex AI would run it.

Input is the very object `submit` sends (the CustomJob REST body from `render.custom_job`); every
worker-pool replica becomes a local process running the container's command and args with the
environment Vertex AI sets:

* AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR = <base>/model/, <base>/checkpoints/,
  <base>/logs/ where <base> is jobSpec.baseOutputDirectory.outputUriPrefix. Source: the
  CustomJobSpec.base_output_directory reference ("The following Vertex AI environment variables
  will be passed to containers or python modules when this field is set"),
  https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec
* CLUSTER_SPEC ({"cluster": {"workerpool0": [...], "workerpool1": [...]}, "environment": "cloud",
  "task": {"type": "workerpool0", "index": 0, "trial": ""}, "job": <CustomJobSpec>}) and
  TF_CONFIG (the same cluster as chief/worker/ps; evaluators get a task but are not in the
  cluster). Source: https://cloud.google.com/vertex-ai/docs/training/distributed-training
  ("Environment variables": CLUSTER_SPEC and TF_CONFIG formats; worker pool 0 = primary/chief,
  1 = workers, 2 = parameter servers / Reduction Server, 3 = evaluators). Vertex sets both even
  for a single replica; the trainer then sees a one-task cluster and must use its default strategy.
* CLOUD_ML_JOB_ID (a local id here), CLOUD_ML_PROJECT_ID and CLOUD_ML_REGION when known, and the
  pool's env list (containerSpec.env / pythonPackageSpec.env). Vertex's own variables win over
  a spec variable of the same name, as on Vertex, where they are reserved.

Hosts are 127.0.0.1 with a free port per replica (Vertex uses each VM's hostname and port 2222).

Processes: each replica starts in its own session (its own process group), with
PR_SET_PDEATHSIG=SIGKILL so it dies with this process even on SIGKILL. If a replica exits non-zero
the others get SIGTERM (then SIGKILL after a grace period); Ctrl-C and SIGTERM do the same. The
run never returns while a replica's process group still has members.

Cloud Storage: when the output directory or the args reference gs://, the replicas need a route
to it. Either the environment already points at an emulator (STORAGE_EMULATOR_HOST plus the TF
route that `vertex-trainer dev gcs-emulator` prints: https_proxy, CURL_CA_BUNDLE, ...), or
Application Default Credentials exist (real Cloud Storage). Otherwise the run stops before
starting anything, with a UserError that says how to get one or the other.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from vertex_trainer.errors import UserError

SUCCEEDED, FAILED, CANCELLED = "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"

# CLUSTER_SPEC pool index -> TF_CONFIG task type (Vertex distributed-training docs).
_TF_TYPES = {0: "chief", 1: "worker", 2: "ps", 3: "evaluator"}

# `progress epoch=2/5 step=40/100 examples_per_sec=1234.5 loss=0.42` (the trainer's contract).
_PROGRESS = re.compile(r"^progress\s+(?P<kv>(?:\S+=\S+\s*)+)$")

_LOG_TAIL = 40          # lines kept per replica for the failure report
_STOP_GRACE_S = 5.0     # SIGTERM -> SIGKILL
_PR_SET_PDEATHSIG = 1


@dataclass
class LocalResult:
    """What a local run ended with. `state` is a Vertex JOB_STATE_* name."""

    name: str
    state: str
    output_dir: str
    model_dir: str
    metrics: dict | None
    exit_code: int
    failed_replica: str | None = None
    log_tail: list[str] = field(default_factory=list)
    job_id: str = ""
    replicas: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Replica:
    """One process of the cluster: `workerpool<pool>-<index>`."""

    pool: int
    index: int
    address: str
    argv: list[str]
    env: dict[str, str]
    proc: subprocess.Popen | None = None
    tail: deque = field(default_factory=lambda: deque(maxlen=_LOG_TAIL))
    reader: threading.Thread | None = None
    ended: float | None = None  # time.monotonic() when the process exited (set by its waiter)

    @property
    def name(self) -> str:
        return f"workerpool{self.pool}-{self.index}"


_EXITED = "\x00exited"  # queue marker from a replica's waiter thread


class _Interrupted(Exception):
    """Raised in the main thread by SIGINT/SIGTERM/SIGHUP while replicas run."""


# ---------------------------------------------------------------------------------------------
# Building the cluster (pure functions; unit-tested without starting anything)
# ---------------------------------------------------------------------------------------------

def job_spec_of(job: dict) -> dict:
    spec = job.get("jobSpec") or job.get("job_spec")
    if not isinstance(spec, dict) or not spec.get("workerPoolSpecs"):
        raise UserError("the rendered job has no jobSpec.workerPoolSpecs; nothing to run locally")
    return spec


def pools_of(job: dict) -> list[tuple[int, dict, int]]:
    """(pool index, WorkerPoolSpec, replica count) for every non-empty pool."""
    out = []
    for i, pool in enumerate(job_spec_of(job)["workerPoolSpecs"]):
        if not pool:  # Vertex allows {} placeholders to reach pool 2/3
            continue
        count = int(pool.get("replicaCount", 1) or 0)
        if count > 0:
            out.append((i, pool, count))
    if not out or out[0][0] != 0:
        raise UserError("workerPoolSpecs[0] (the primary replica) is missing or has no replicas")
    if out[0][2] != 1:
        raise UserError(f"workerPoolSpecs[0].replicaCount must be 1 (got {out[0][2]})",
                        hint="put additional machines in workerPoolSpecs[1]")
    return out


def command_of(pool: dict, python: str = sys.executable) -> list[str]:
    """The argv a pool's replicas run locally.

    containerSpec: the image's entrypoint is `python -m trainer.task` (trainer_image/Dockerfile);
    containerSpec.command, when set, replaces it, as it replaces ENTRYPOINT on Vertex.
    pythonPackageSpec: `python -m <pythonModule> <args>`, as the prebuilt executor images run it.
    A leading `python`/`python3` means this interpreter (the image's Python is the local one).
    """
    if "containerSpec" in pool:
        cs = pool["containerSpec"]
        command = list(cs.get("command") or [python, "-m", "trainer.task"])
        args = list(cs.get("args") or [])
    elif "pythonPackageSpec" in pool:
        ps = pool["pythonPackageSpec"]
        module = ps.get("pythonModule")
        if not module:
            raise UserError("pythonPackageSpec.pythonModule is empty; nothing to run")
        command = [python, "-m", module]
        args = list(ps.get("args") or [])
    else:
        raise UserError("a worker pool has neither containerSpec nor pythonPackageSpec")
    if command and os.path.basename(command[0]) in ("python", "python3"):
        command[0] = python
    return command + [str(a) for a in args]


def pool_env(pool: dict) -> dict[str, str]:
    task = pool.get("containerSpec") or pool.get("pythonPackageSpec") or {}
    return {str(e["name"]): str(e.get("value", "")) for e in task.get("env") or []}


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """n distinct free TCP ports (all held open at once so they differ, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def output_dirs(base: str) -> dict[str, str]:
    base = base.rstrip("/")
    return {
        "AIP_MODEL_DIR": f"{base}/model/",
        "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/",
    }


def build_replicas(job: dict, base_output: str, *, job_id: str, project: str | None = None,
                   region: str | None = None, host: str = "127.0.0.1",
                   base_env: dict[str, str] | None = None,
                   python: str = sys.executable) -> list[Replica]:
    """Every replica of the job, with its argv and complete environment."""
    pools = pools_of(job)
    spec = job_spec_of(job)
    total = sum(count for _, _, count in pools)
    ports = iter(free_ports(total, host))
    addresses = {i: [f"{host}:{next(ports)}" for _ in range(count)] for i, _, count in pools}

    cluster_spec_cluster = {f"workerpool{i}": addrs for i, addrs in addresses.items()}
    # Evaluators run beside the cluster, not in it (TF_CONFIG docs; TF rejects them otherwise).
    tf_cluster = {_TF_TYPES[i]: addrs for i, addrs in addresses.items() if i in (0, 1, 2)}

    replicas = []
    for i, pool, count in pools:
        argv = command_of(pool, python)
        for r in range(count):
            cluster_spec = {
                "cluster": cluster_spec_cluster,
                "environment": "cloud",
                "task": {"type": f"workerpool{i}", "index": r, "trial": ""},
                "job": spec,
            }
            tf_config = {
                "cluster": tf_cluster,
                "environment": "cloud",
                "task": {"type": _TF_TYPES.get(i, f"workerpool{i}"), "index": r, "trial": ""},
                "job": spec,
            }
            env = dict(base_env if base_env is not None else os.environ)
            env.update(pool_env(pool))
            env.update(output_dirs(base_output))
            env.update({
                "CLUSTER_SPEC": json.dumps(cluster_spec, separators=(",", ":")),
                "TF_CONFIG": json.dumps(tf_config, separators=(",", ":")),
                "CLOUD_ML_JOB_ID": job_id,
                # Output reaches us line by line, not in 8 KB blocks at exit.
                "PYTHONUNBUFFERED": "1",
            })
            if project:
                env["CLOUD_ML_PROJECT_ID"] = project
            if region:
                env["CLOUD_ML_REGION"] = region
            _keep_loopback_off_proxies(env)
            replicas.append(Replica(pool=i, index=r, address=addresses[i][r], argv=argv, env=env))
    return replicas


def _keep_loopback_off_proxies(env: dict[str, str]) -> None:
    """gRPC (TF's collectives between replicas) honours http(s)_proxy; loopback must bypass it."""
    if not any(env.get(k) for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                                    "grpc_proxy")):
        return
    current = [h for h in (env.get("no_proxy") or env.get("NO_PROXY") or "").split(",") if h]
    for h in ("localhost", "127.0.0.1", "::1"):
        if h not in current:
            current.append(h)
    env["no_proxy"] = env["NO_PROXY"] = ",".join(current)


def parse_progress(line: str) -> dict[str, str] | None:
    m = _PROGRESS.match(line.strip())
    if not m:
        return None
    return dict(kv.split("=", 1) for kv in m.group("kv").split())


# ---------------------------------------------------------------------------------------------
# Preconditions
# ---------------------------------------------------------------------------------------------

def _references_gcs(job: dict) -> bool:
    """Does what the replicas get (output directory, args, env) name gs:// paths?

    pythonPackageSpec.packageUris do not count: locally the package is the installed one.
    """
    spec = job_spec_of(job)
    seen = [(spec.get("baseOutputDirectory") or {}).get("outputUriPrefix", "")]
    for pool in spec["workerPoolSpecs"]:
        task = (pool or {}).get("containerSpec") or (pool or {}).get("pythonPackageSpec") or {}
        seen += [str(a) for a in task.get("args") or []] + [str(a) for a in task.get("command") or []]
        seen += [str(e.get("value", "")) for e in task.get("env") or []]
    return any("gs://" in s for s in seen)


def check_gcs_route(env: dict[str, str] | None = None) -> str:
    """'emulator' or 'credentials' when gs:// paths can work; UserError otherwise."""
    env = os.environ if env is None else env
    if env.get("STORAGE_EMULATOR_HOST"):
        missing = [k for k in ("https_proxy", "CURL_CA_BUNDLE", "GOOGLE_AUTH_TOKEN_FOR_TESTING")
                   if not (env.get(k) or env.get(k.upper()))]
        if missing:
            raise UserError(
                "STORAGE_EMULATOR_HOST is set, but TensorFlow's gs:// filesystem has no emulator "
                f"switch and the TLS-proxy route is incomplete (missing: {', '.join(missing)})",
                hint="start `vertex-trainer dev gcs-emulator` and export every variable it prints")
        return "emulator"
    try:
        import google.auth

        google.auth.default()
        return "credentials"
    except Exception as e:  # DefaultCredentialsError, or a transport error probing GCE
        raise UserError(
            "the job reads or writes gs:// paths, and there is neither a Cloud Storage emulator "
            f"in the environment nor Application Default Credentials ({type(e).__name__})",
            hint="for a run with no cloud account: `vertex-trainer dev gcs-emulator` and export "
                 "what it prints; or use local paths (output_dir, trainer.train_data); or "
                 "`gcloud auth application-default login`") from None


def _check_command_importable(replicas: list[Replica]) -> None:
    """Fail fast, before starting processes, when `python -m X` cannot find X."""
    import importlib.util

    for rep in replicas:
        argv = rep.argv
        if len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m":
            module = argv[2]
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                raise UserError(
                    f"{rep.name}: module {module!r} is not importable in this environment "
                    f"({sys.executable})",
                    hint="install the trainer locally: pip install -e '.[trainer]' "
                         "(local runs use the local environment, not the image)")


# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------

def _child_setup(parent_pid: int):
    """preexec_fn: die with the parent, even if it is SIGKILLed (Linux prctl)."""
    libc = None
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            libc = None

    def setup() -> None:
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return setup


def _start(rep: Replica, lines: "queue.Queue[tuple[str, str | None]]", cwd: str | None) -> None:
    try:
        rep.proc = subprocess.Popen(
            rep.argv, env=rep.env, cwd=cwd,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_child_setup(os.getpid()),
        )
    except OSError as e:
        raise UserError(f"{rep.name}: cannot start {rep.argv[0]!r}: {e.strerror or e}",
                        hint="containerSpec.command runs from the local environment") from None

    def pump() -> None:
        assert rep.proc is not None and rep.proc.stdout is not None
        for raw in iter(rep.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            rep.tail.append(line)
            lines.put((rep.name, line))
        rep.proc.stdout.close()
        lines.put((rep.name, None))

    def waiter() -> None:
        assert rep.proc is not None
        rep.proc.wait()
        rep.ended = time.monotonic()
        lines.put((rep.name, _EXITED))  # wakes the main loop at once

    rep.reader = threading.Thread(target=pump, name=f"log-{rep.name}", daemon=True)
    rep.reader.start()
    threading.Thread(target=waiter, name=f"wait-{rep.name}", daemon=True).start()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _signal_group(rep: Replica, sig: int) -> None:
    if rep.proc is None:
        return
    try:
        os.killpg(rep.proc.pid, sig)  # start_new_session: pgid == pid
    except ProcessLookupError:
        pass


def stop_all(replicas: list[Replica], grace_s: float = _STOP_GRACE_S) -> None:
    """SIGTERM every replica's process group, SIGKILL what is left after `grace_s`, reap all."""
    for rep in replicas:
        if rep.proc is not None and rep.proc.poll() is None:
            _signal_group(rep, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for rep in replicas:
        if rep.proc is None:
            continue
        try:
            rep.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for rep in replicas:
        if rep.proc is None:
            continue
        # The leader may be gone while children it started still hold the group.
        if rep.proc.poll() is None or _group_alive(rep.proc.pid):
            _signal_group(rep, signal.SIGKILL)
        rep.proc.wait()
        # Wait until the whole group is gone, so "no process left behind" holds on return.
        end = time.monotonic() + 5
        while _group_alive(rep.proc.pid) and time.monotonic() < end:
            time.sleep(0.02)


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------

_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red")


class _Display:
    """Prefixed log lines; a live progress line on a terminal, plain lines elsewhere."""

    def __init__(self, console, replicas: list[Replica], live: bool):
        from rich.text import Text

        self._Text = Text
        self.console = console
        self.width = max(len(r.name) for r in replicas)
        self.colors = {r.name: _COLORS[i % len(_COLORS)] for i, r in enumerate(replicas)}
        self.live = live and console.is_terminal
        self.progress: dict[str, dict[str, str]] = {}
        self.started = time.monotonic()
        self._status = None

    def __enter__(self):
        if self.live:
            self._status = self.console.status(self._status_text(), spinner="dots")
            self._status.__enter__()
        return self

    def __exit__(self, *exc):
        if self._status is not None:
            self._status.__exit__(*exc)
            self._status = None

    def _status_text(self) -> str:
        elapsed = time.monotonic() - self.started
        p = self.progress.get("workerpool0-0") or next(iter(self.progress.values()), None)
        if not p:
            return f"starting {len(self.colors)} replica(s)... {elapsed:,.0f}s"
        parts = [f"epoch {p.get('epoch', '?')}", f"step {p.get('step', '?')}"]
        if "examples_per_sec" in p:
            parts.append(f"{p['examples_per_sec']} examples/s")
        if "loss" in p:
            parts.append(f"loss {p['loss']}")
        return "training: " + "  ".join(parts) + f"  ({elapsed:,.0f}s)"

    def line(self, name: str, line: str) -> None:
        prog = parse_progress(line)
        if prog is not None:
            self.progress[name] = prog
            if self.live:
                self._status.update(self._status_text())
                # On a terminal the live line replaces per-step lines; keep each epoch's last.
                current, _, total = prog.get("step", "").partition("/")
                if not (total and current == total):
                    return
        text = self._Text()
        text.append(f"{name:<{self.width}} | ", style=self.colors.get(name, ""))
        text.append(line)
        self.console.print(text, soft_wrap=True, highlight=False, markup=False)

    def note(self, message: str, style: str = "bold") -> None:
        self.console.print(self._Text(message, style=style), soft_wrap=True)


def _default_console():
    from rich.console import Console

    # Replica logs, progress and the summary are diagnostics: stderr, whatever the format, so
    # stdout stays the caller's (its text summary, or the one JSON object with --output json).
    return Console(stderr=True, highlight=False)


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------

def read_metrics(base_output: str) -> dict | None:
    """metrics.json from the base output directory (local path or gs://)."""
    path = base_output.rstrip("/") + "/metrics.json"
    try:
        if path.startswith("gs://"):
            from google.cloud import storage  # lazy: 0.25 s import

            bucket, _, name = path[len("gs://"):].partition("/")
            if os.environ.get("STORAGE_EMULATOR_HOST"):
                from google.auth.credentials import AnonymousCredentials

                client = storage.Client(project=os.environ.get("GOOGLE_CLOUD_PROJECT", "local"),
                                        credentials=AnonymousCredentials())
            else:
                client = storage.Client()
            blob = client.bucket(bucket).blob(name)
            if not blob.exists():
                return None
            return json.loads(blob.download_as_bytes())
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
    except Exception:  # a storage transport error must not turn a finished run into a crash
        return None


def _resolve_output(job: dict, name: str) -> str:
    spec = job_spec_of(job)
    base = ((spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or "").strip()
    if not base:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = os.path.join(tempfile.gettempdir(), "vertex-trainer", f"{name}-{stamp}")
    if base.startswith("gs://"):
        return base.rstrip("/")
    if base.startswith("/gcs/"):
        raise UserError(f"output directory {base!r} is a Cloud Storage FUSE path, which exists "
                        "only on Vertex AI", hint="use a local path or gs:// for local runs")
    base = os.path.abspath(os.path.expanduser(base.removeprefix("file://")))
    os.makedirs(base, exist_ok=True)
    return base.rstrip("/")


RECORD_DIR = "vertex-trainer"


def _save_run_record(base: str, job: dict, spec: Any) -> None:
    """Keep what ran beside what it made: <base>/vertex-trainer/{custom_job.json,spec.yaml}.

    Local output directories only; a gs:// base is left alone (the runner has no storage client
    of its own, and a cloud job's CustomJob is kept by Vertex AI).
    """
    if base.startswith("gs://"):
        return
    record = os.path.join(base, RECORD_DIR)
    os.makedirs(record, exist_ok=True)
    with open(os.path.join(record, "custom_job.json"), "w", encoding="utf-8") as f:
        json.dump(job, f, indent=2)
        f.write("\n")
    to_yaml = getattr(spec, "to_yaml", None)
    if callable(to_yaml):
        with open(os.path.join(record, "spec.yaml"), "w", encoding="utf-8") as f:
            f.write(to_yaml())


def _local_job_id() -> str:
    # Vertex job ids are numbers; a local one says what it is and stays unique per run.
    return f"local-{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"


# ---------------------------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------------------------

def run_local(job: dict, spec: Any = None, *, wait: bool = True, console=None,
              output_format: str = "text", cwd: str | None = None) -> LocalResult:
    """Run every worker-pool replica of the rendered CustomJob `job` as a local process.

    Returns when all replicas have ended (or one failed and the rest were stopped, or the user
    interrupted): state is JOB_STATE_SUCCEEDED (exit_code 0), JOB_STATE_FAILED or
    JOB_STATE_CANCELLED (exit_code 1). Raises UserError (before starting anything) when the job
    cannot run here. `wait=False` only turns off the live progress line: a local job is never
    left running after this returns. Nothing is written to stdout (logs, progress and the
    summary go to `console`, by default stderr); `output_format` is accepted for callers that
    pass it and changes nothing else.
    """
    name = str(job.get("displayName") or getattr(spec, "name", None) or "local-job")
    project = getattr(spec, "project", None)
    region = getattr(spec, "region", None)
    console = console or _default_console()

    pools_of(job)  # validate the shape before touching the file system
    if _references_gcs(job):
        check_gcs_route()
    base = _resolve_output(job, name)
    _save_run_record(base, job, spec)
    dirs = output_dirs(base)
    job_id = _local_job_id()
    replicas = build_replicas(job, base, job_id=job_id, project=project, region=region)
    _check_command_importable(replicas)

    lines: queue.Queue = queue.Queue()
    state, failed = SUCCEEDED, None
    started = time.monotonic()
    display = _Display(console, replicas, live=wait)
    display.note(f"Running {name} locally: {len(replicas)} replica(s) "
                 f"[{', '.join(r.name for r in replicas)}], output {base}", style="bold")

    previous = _install_signal_handlers()
    try:
        with display:
            for rep in replicas:
                _start(rep, lines, cwd)
            while True:
                _drain(lines, display, timeout=0.2)
                failures = [r for r in replicas if r.ended is not None and r.proc.returncode]
                if failures:
                    # Replicas of one job often fail together (a worker's error reaches the
                    # chief through the collectives within moments): let the others settle
                    # briefly, then blame the replica that ended first.
                    settle = time.monotonic() + 1.0
                    while time.monotonic() < settle and any(r.ended is None for r in replicas):
                        _drain(lines, display, timeout=0.1)
                    failures = [r for r in replicas
                                if r.ended is not None and r.proc.returncode]
                    state, failed = FAILED, min(failures, key=lambda r: r.ended)
                    break
                if all(r.ended is not None for r in replicas):
                    break
                if display.live:
                    display._status.update(display._status_text())
    except (_Interrupted, KeyboardInterrupt):
        state = CANCELLED
        display.note("Interrupted: stopping all replicas", style="bold yellow")
    finally:
        _disarm(previous)
        stop_all(replicas)
        _restore_signal_handlers(previous)
        for rep in replicas:
            if rep.reader is not None:
                rep.reader.join(timeout=5)
        # Whatever the readers queued after the loop ended (the failing replica's last words).
        _drain(lines, display, timeout=0)

    elapsed = time.monotonic() - started
    metrics = read_metrics(base) if state == SUCCEEDED else None
    tail = list(failed.tail) if failed is not None else []
    result = LocalResult(
        name=name, state=state, output_dir=base, model_dir=dirs["AIP_MODEL_DIR"],
        metrics=metrics, exit_code=0 if state == SUCCEEDED else 1,
        failed_replica=failed.name if failed is not None else None, log_tail=tail,
        job_id=job_id, replicas=[r.name for r in replicas], elapsed_s=round(elapsed, 3),
    )
    _summary(display, result, failed)
    return result


def _drain(lines: queue.Queue, display: _Display, timeout: float) -> None:
    """Show every queued line; wait up to `timeout` for the first one."""
    try:
        item = lines.get(timeout=timeout) if timeout > 0 else lines.get_nowait()
    except queue.Empty:
        return
    while True:
        rep_name, line = item
        if line is not None and line is not _EXITED:
            display.line(rep_name, line)
        try:
            item = lines.get_nowait()
        except queue.Empty:
            return


def _summary(display: _Display, result: LocalResult, failed: Replica | None) -> None:
    c = display.console
    mins, secs = divmod(result.elapsed_s, 60)
    took = f"{int(mins)}m{secs:04.1f}s" if mins else f"{secs:.1f}s"
    style = {"JOB_STATE_SUCCEEDED": "bold green", "JOB_STATE_FAILED": "bold red"}.get(
        result.state, "bold yellow")
    display.note(f"{result.state} in {took}  ({result.name}, {result.job_id})", style=style)
    if failed is not None and failed.proc is not None:
        display.note(f"{failed.name} exited with code {failed.proc.returncode}; its last lines:",
                     style="red")
        for line in result.log_tail[-20:]:
            c.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    if result.state == SUCCEEDED:
        display.note(f"model:   {result.model_dir}", style="")
        display.note(f"output:  {result.output_dir}", style="")
        if result.metrics:
            keys = ("replicas", "epochs", "steps", "global_batch_size", "train_examples_per_sec",
                    "final_train_loss", "eval_accuracy")
            shown = {k: result.metrics[k] for k in keys if k in result.metrics}
            display.note("metrics: " + json.dumps(shown), style="")
        else:
            display.note("metrics: none (no metrics.json in the output directory)", style="yellow")


def _install_signal_handlers():
    """Ctrl-C, SIGTERM and SIGHUP stop all replicas cleanly. Only the first signal raises, so a
    second Ctrl-C cannot interrupt the clean-up itself (PDEATHSIG still covers a hard kill)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    fired = []

    def handler(signum, frame):
        if not fired:
            fired.append(signum)
            raise _Interrupted(signal.Signals(signum).name)

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    return previous, fired


def _disarm(handlers) -> None:
    """From here on the handlers swallow signals: the clean-up must run to its end."""
    if handlers is not None:
        handlers[1].append(0)


def _restore_signal_handlers(handlers) -> None:
    for sig, h in (handlers[0] if handlers else {}).items():
        try:
            signal.signal(sig, h)
        except (ValueError, OSError):
            pass
