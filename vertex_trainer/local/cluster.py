"""From a rendered CustomJob to the replicas that run it here: argv and complete environment.

Vertex AI documents what each replica sees:

* AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR = <base>/model/, <base>/checkpoints/,
  <base>/logs/ where <base> is jobSpec.baseOutputDirectory.outputUriPrefix (the CustomJobSpec
  reference, https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec).
* CLUSTER_SPEC ({"cluster": {"workerpool0": [...], ...}, "environment": "cloud", "task": {...},
  "job": <CustomJobSpec>}) and TF_CONFIG (the same cluster as chief/worker/ps; evaluators get a
  task but are not in the cluster), https://cloud.google.com/vertex-ai/docs/training/distributed-training.
  Vertex sets both even for a single replica.
* CLOUD_ML_JOB_ID, CLOUD_ML_PROJECT_ID, CLOUD_ML_REGION and the pool's env list. Vertex's own
  variables win over a spec variable of the same name (on Vertex they are reserved).

Hosts are 127.0.0.1 with a free port per replica (Vertex uses each VM's hostname and port 2222);
their servers bind every interface whatever the host, so a cluster runs in a private network
(local/netns.py).
Everything here is pure except `free_ports` (binds sockets, reads the kernel's ephemeral port
range) and `check_gcs_route` (reads the credential files the environment names). The environment
is always a mapping passed in: nothing here reads the process environment.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import random
import re
import socket
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vertex_trainer import lazy
from vertex_trainer.contract import AIP_DIRS, TRAINER_MODULE
from vertex_trainer.errors import UserError

if TYPE_CHECKING:  # the spec's models are named for the type checker: the runner is given one
    from vertex_trainer.spec import JobSpec

# CLUSTER_SPEC pool index -> TF_CONFIG task type (Vertex distributed-training docs).
TF_TYPES = {0: "chief", 1: "worker", 2: "ps", 3: "evaluator"}
LOOPBACK = ("localhost", "127.0.0.1", "::1")
_PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "grpc_proxy")
# What TensorFlow's gs:// filesystem needs besides STORAGE_EMULATOR_HOST to reach the emulator
# (emulators/gcs.py `emulator_env`): it has no emulator switch of its own.
TF_ROUTE_VARS = ("https_proxy", "CURL_CA_BUNDLE", "GOOGLE_AUTH_TOKEN_FOR_TESTING")


@dataclass(frozen=True)
class Replica:
    """One process of the cluster, `workerpool<pool>-<index>`: what to run and with what."""

    pool: int
    index: int
    address: str
    argv: tuple[str, ...]
    env: Mapping[str, str]

    @property
    def name(self) -> str:
        return f"workerpool{self.pool}-{self.index}"


def job_spec_of(job: dict[str, Any]) -> dict[str, Any]:
    """The CustomJobSpec of a rendered CustomJob; UserError when it has no worker pools."""
    spec = job.get("jobSpec") or job.get("job_spec")
    if not isinstance(spec, dict) or not spec.get("workerPoolSpecs"):
        raise UserError("the rendered job has no jobSpec.workerPoolSpecs; nothing to run locally")
    return spec


REDUCER_IMAGE = "docker.pkg.dev/vertex-ai-restricted/training/reductionserver:"


def without_reducers(job: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The job without its Reduction Server pool (scaling.reduction_server, docs/scaling.md), and
    the one line saying so (None when it has none): the reducers' image is Google's, restricted
    to Vertex AI, and local replicas all-reduce among themselves without them."""
    pools = job_spec_of(job)["workerPoolSpecs"]
    image = ((pools[2] if len(pools) > 2 else {}) or {}).get("containerSpec", {}).get("imageUri", "")
    if REDUCER_IMAGE not in image:
        return job, None
    rest = [{}, *pools[3:]] if len(pools) > 3 else []  # an evaluator pool keeps its index 3
    kept = {**job, "jobSpec": {**job["jobSpec"], "workerPoolSpecs": [*pools[:2], *rest]}}
    count = pools[2].get("replicaCount", "?")
    return kept, f"reducers: {count} Reduction Server replicas skipped (they run on Vertex AI only)"


def pools_of(job: dict[str, Any]) -> list[tuple[int, dict[str, Any], int]]:
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
        raise UserError(
            f"workerPoolSpecs[0].replicaCount must be 1 (got {out[0][2]})",
            hint="put additional machines in workerPoolSpecs[1]",
        )
    return out


def command_of(pool: dict[str, Any], python: str = sys.executable) -> list[str]:
    """The argv a pool's replicas run locally.

    containerSpec: the image's entrypoint is `python -m trainer.task` (trainer_image/Dockerfile);
    containerSpec.command, when set, replaces it, as it replaces ENTRYPOINT on Vertex.
    pythonPackageSpec: `python -m <pythonModule> <args>`, as the prebuilt executor images run it.
    A leading `python`/`python3` means this interpreter (the image's Python is the local one).
    """
    if "containerSpec" in pool:
        cs = pool["containerSpec"]
        command = list(cs.get("command") or [python, "-m", TRAINER_MODULE])
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


def _task_of(pool: dict[str, Any]) -> dict[str, Any]:
    return (pool or {}).get("containerSpec") or (pool or {}).get("pythonPackageSpec") or {}


def pool_env(pool: dict[str, Any]) -> dict[str, str]:
    """The pool's env list (containerSpec.env / pythonPackageSpec.env) as a mapping."""
    return {str(e["name"]): str(e.get("value", "")) for e in _task_of(pool).get("env") or []}


EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
# Where the range cannot be read (not Linux): Linux's default low end and macOS's high end.
_DEFAULT_EPHEMERAL = (32768, 65535)
_LOWEST_PORT = 10000  # below: well-known services' usual ports
_TRIES = 200


def ephemeral_range(path: str = EPHEMERAL_RANGE) -> tuple[int, int]:
    """The ports the kernel hands out to bind(port 0) and to outgoing connections."""
    try:
        with open(path) as f:
            low, high = (int(v) for v in f.read().split())
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL
    return low, high


def free_ports(n: int, host: str = "127.0.0.1", *, ephemeral: tuple[int, int] | None = None) -> list[int]:
    """n distinct free TCP ports for servers that start later (a replica's gRPC server, once
    TensorFlow has loaded; a model server process).

    The ports come from outside the kernel's ephemeral range where it leaves room: a port that
    bind(0) handed out and this released could be handed out again, to any connection or bind(0)
    on the machine, in the seconds before the server binds it ("Could not start gRPC server");
    the kernel never hands out a port outside the range. Each is checked free by binding it, all
    held at once so they differ, then released. With no room outside the range (or no free port
    among 200 tried), the rest are the kernel's choice, as before.
    """
    low, high = ephemeral or ephemeral_range()
    outside = [r for r in (range(_LOWEST_PORT, low), range(high + 1, 65536)) if len(r) > 0]
    rng = random.SystemRandom()
    socks: list[socket.socket] = []
    try:
        for _ in range(_TRIES if outside else 0):
            if len(socks) == n:
                break
            port = rng.choice(rng.choice(outside))
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, port))
            except OSError:  # in use (or held by another run's socket): another one
                s.close()
                continue
            socks.append(s)
        while len(socks) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def output_dirs(base: str) -> dict[str, str]:
    """AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR under the base output directory."""
    base = base.rstrip("/")
    return {name: f"{base}/{sub}/" for name, sub in AIP_DIRS.items()}


def build_replicas(
    job: dict[str, Any],
    base_output: str,
    *,
    job_id: str,
    base_env: Mapping[str, str],
    project: str | None = None,
    region: str | None = None,
    host: str = "127.0.0.1",
    python: str = sys.executable,
) -> list[Replica]:
    """Every replica of the job, with its argv and complete environment.

    `base_env` is what every replica inherits (the edge's environment, `Settings.environ`); the
    pool's env list and then the Vertex variables are laid over it.
    """
    pools = pools_of(job)
    spec = job_spec_of(job)
    ports = iter(free_ports(sum(count for _, _, count in pools), host))
    addresses = {i: [f"{host}:{next(ports)}" for _ in range(count)] for i, _, count in pools}

    cluster_spec_cluster = {f"workerpool{i}": addrs for i, addrs in addresses.items()}
    # Evaluators run beside the cluster, not in it (TF_CONFIG docs; TF rejects them otherwise).
    tf_cluster = {TF_TYPES[i]: addrs for i, addrs in addresses.items() if i in (0, 1, 2)}
    compact: dict[str, Any] = {"separators": (",", ":")}

    replicas = []
    for i, pool, count in pools:
        argv = tuple(command_of(pool, python))
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
                "task": {"type": TF_TYPES.get(i, f"workerpool{i}"), "index": r, "trial": ""},
                "job": spec,
            }
            env = dict(base_env)
            env.update(pool_env(pool))
            env.update(output_dirs(base_output))
            env.update(
                {
                    "CLUSTER_SPEC": json.dumps(cluster_spec, **compact),
                    "TF_CONFIG": json.dumps(tf_config, **compact),
                    "CLOUD_ML_JOB_ID": job_id,
                    # Output reaches us line by line, not in 8 KB blocks at exit.
                    "PYTHONUNBUFFERED": "1",
                }
            )
            if project:
                env["CLOUD_ML_PROJECT_ID"] = project
            if region:
                env["CLOUD_ML_REGION"] = region
            keep_loopback_off_proxies(env)
            replicas.append(Replica(pool=i, index=r, address=addresses[i][r], argv=argv, env=env))
    return replicas


def keep_loopback_off_proxies(env: dict[str, str]) -> None:
    """gRPC (TF's collectives between replicas) honours http(s)_proxy; loopback must bypass it."""
    if not any(env.get(k) for k in _PROXY_VARS):
        return
    current = [h for h in (env.get("no_proxy") or env.get("NO_PROXY") or "").split(",") if h]
    current += [h for h in LOOPBACK if h not in current]
    env["no_proxy"] = env["NO_PROXY"] = ",".join(current)


def check_importable(replicas: list[Replica], python: str = sys.executable) -> None:
    """Fail fast, before starting processes, when `python -m X` cannot find X, or X is the bundled
    trainer and TensorFlow or tf-keras is not installed (lazy's message: the extra, or tf-keras'
    own command)."""
    for rep in replicas:
        argv = rep.argv
        if len(argv) >= 3 and argv[0] == python and argv[1] == "-m":
            module = argv[2]
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                raise UserError(
                    f"{rep.name}: module {module!r} is not importable in this environment ({python})",
                    hint=(
                        lazy.LIBRARIES["tensorflow"].install
                        if module.startswith("trainer")
                        else f"install {module} here"
                    )
                    + " (local runs use the local environment, "
                    "not the image)",
                )
            if module.split(".")[0] == "trainer":
                # The trainer imports TensorFlow and tf-keras first: without them a replica would
                # only print a traceback. Looked up, not imported (seconds of start-up).
                for library in ("tensorflow", "tf_keras"):
                    if not lazy.available(library):
                        raise lazy.missing(library)


# ---------------------------------------------------------------------------------------------
# Cloud Storage: is there a route for the replicas?
# ---------------------------------------------------------------------------------------------


def references_gcs(job: dict[str, Any]) -> bool:
    """Does what the replicas get (output directory, args, command, env) name gs:// paths?

    pythonPackageSpec.packageUris do not count: locally the package is the installed one.
    """
    spec = job_spec_of(job)
    seen = [(spec.get("baseOutputDirectory") or {}).get("outputUriPrefix", "")]
    for pool in spec["workerPoolSpecs"]:
        task = _task_of(pool)
        seen += [str(a) for a in (task.get("args") or []) + (task.get("command") or [])]
        seen += [str(e.get("value", "")) for e in task.get("env") or []]
    return any("gs://" in s for s in seen)


def check_gcs_route(env: Mapping[str, str]) -> str:
    """'emulator' or 'credentials' when the replicas, given `env`, can reach gs:// paths.

    1. STORAGE_EMULATOR_HOST plus TensorFlow's TLS-proxy route (`vertex-trainer dev gcs-emulator`);
    2. Application Default Credentials as the replicas would find them from `env`.
    Otherwise UserError (exit 2) naming both ways out.
    """
    if env.get("STORAGE_EMULATOR_HOST"):
        missing = [k for k in TF_ROUTE_VARS if not (env.get(k) or env.get(k.upper()))]
        if missing:
            raise UserError(
                "STORAGE_EMULATOR_HOST is set, but TensorFlow's gs:// filesystem has no emulator "
                f"switch and the TLS-proxy route is incomplete (missing: {', '.join(missing)})",
                hint="start `vertex-trainer dev gcs-emulator` and export every variable it prints",
            )
        return "emulator"
    problem = _adc_problem(env)
    if problem is None:
        return "credentials"
    raise UserError(
        "the job reads or writes gs:// paths, and there is neither a Cloud Storage emulator "
        f"in the environment nor Application Default Credentials ({problem})",
        hint="for a run with no cloud account: `vertex-trainer dev gcs-emulator` and export "
        "what it prints; or use local paths (output_dir, trainer.train_data); or "
        "`gcloud auth application-default login`",
    )


# ---------------------------------------------------------------------------------------------
# Cloud Storage FUSE: /gcs/BUCKET/... exists on Vertex AI, not here
# ---------------------------------------------------------------------------------------------

FUSE_ROOT = "/gcs/"
# A /gcs/ path where a value, a flag's value (after "=") or a list item (after ",") starts; not
# a "/gcs/" folder inside a gs:// URL (gs://bucket/gcs/data).
_FUSE_RE = re.compile(r"(?<![^=,\s])/gcs/[^,\s]*")


@dataclass(frozen=True)
class FuseRef:
    """One /gcs/BUCKET/... path the replicas are given: in `value` of spec field `field`."""

    field: str
    value: str
    path: str  # /gcs/BUCKET/REST as it appears in value

    @property
    def bucket(self) -> str:
        return self.path[len(FUSE_ROOT) :].split("/", 1)[0]

    @property
    def name(self) -> str:
        """The object name, or the prefix, the path stands for (REST, no trailing slash)."""
        return self.path[len(FUSE_ROOT) :].partition("/")[2].rstrip("/")


def _mounted(path: str) -> bool:
    """Is the bucket of /gcs/BUCKET/... mounted here (/gcs/BUCKET a directory, e.g. gcsfuse)?"""
    bucket = path[len(FUSE_ROOT) :].split("/", 1)[0]
    return os.path.isdir(FUSE_ROOT + bucket)


def fuse_refs(job: dict[str, Any], spec: JobSpec | None = None) -> list[FuseRef]:
    """Every /gcs/BUCKET/... path the replicas are given (args, env) whose bucket is not mounted
    here (a gcsfuse mount at /gcs/BUCKET counts as mounted), in the order of the spec.

    Vertex AI mounts every bucket at /gcs/ (Cloud Storage FUSE); a local run has no such mount,
    and a replica writing there would fill an unrelated local directory (or fail on a
    read-only root). The fields are named as the spec names them: `args[i]` or `trainer.NAME`
    (the flag's field, else trainer.extra_args) and `env.NAME`.
    """
    found: list[FuseRef] = []
    trainer = spec.trainer if spec is not None else None
    pool = job_spec_of(job)["workerPoolSpecs"][0]
    task = _task_of(pool)
    for i, arg in enumerate(str(a) for a in task.get("args") or []):
        field = f"args[{i}]"
        if trainer is not None:
            flag = arg.split("=", 1)[0].lstrip("-").replace("-", "_")
            field = f"trainer.{flag}" if flag in type(trainer).model_fields else "trainer.extra_args"
        found += [FuseRef(field, arg, m.group(0)) for m in _FUSE_RE.finditer(arg)]
    for name, value in pool_env(pool).items():
        found += [FuseRef(f"env.{name}", value, m.group(0)) for m in _FUSE_RE.finditer(value)]
    return [r for r in found if not _mounted(r.path)]


def trainer_reads_gs(job: dict[str, Any], spec: JobSpec | None = None) -> tuple[dict[str, Any], list[str]]:
    """The job with the bundled trainer's /gcs/BUCKET/PATH flag values as gs://BUCKET/PATH, and
    a line for each.

    The trainer opens both with tf.io.gfile; here, without Vertex AI's mount, gs:// reaches the
    same object (through the Cloud Storage emulator, or Cloud Storage with your credentials), and
    its TFRecords stream as they would (no copy into a stand-in). Only pools that run the bundled
    trainer (a containerSpec without a command: the image's entrypoint) are rewritten, only their
    args (the trainer reads no /gcs/ path from its environment), and only buckets not mounted here.
    """
    refs = [r for r in fuse_refs(job, spec) if not r.field.startswith("env.")]
    pools = job_spec_of(job)["workerPoolSpecs"]
    if not refs or not all("containerSpec" in p and not p["containerSpec"].get("command") for p in pools):
        return job, []

    def as_gs(match: re.Match[str]) -> str:
        path = match.group(0)
        return path if _mounted(path) else "gs://" + path[len(FUSE_ROOT) :]

    job = copy.deepcopy(job)
    for pool in job_spec_of(job)["workerPoolSpecs"]:
        task = pool["containerSpec"]
        task["args"] = [_FUSE_RE.sub(as_gs, str(a)) for a in task.get("args") or []]
    said = dict.fromkeys((r.field, r.path) for r in refs)
    return job, [
        f"{field}: {path} is read as gs://{path[len(FUSE_ROOT) :]} here (the bundled trainer opens "
        "Cloud Storage itself; Vertex AI's /gcs/ mount is not on this machine)"
        for field, path in said
    ]


def fuse_paths(job: dict[str, Any], spec: JobSpec | None = None) -> list[tuple[str, str]]:
    """(spec field, value) of every value holding a /gcs/BUCKET/... path (fuse_refs), once each."""
    return list(dict.fromkeys((r.field, r.value) for r in fuse_refs(job, spec)))


def fetch_route(storage_emulator: str | None, env: Mapping[str, str]) -> str | None:
    """How this process can read the buckets /gcs/ paths name: 'emulator' (a Cloud Storage
    emulator is set), 'credentials' (Application Default Credentials, as found from `env`), or
    None (neither)."""
    if storage_emulator:
        return "emulator"
    return "credentials" if _adc_problem(env) is None else None


def check_fuse(job: dict[str, Any], spec: JobSpec | None = None, *, why: str | None = None) -> None:
    """UserError (exit 2), before anything starts, when the replicas would use /gcs/ paths that
    this machine does not mount (fuse_paths); `why` says why it cannot (local/gcsfuse.py)."""
    found = fuse_paths(job, spec)
    if not found:
        return
    where = "; ".join(f"{field} {value!r}" for field, value in found)
    raise UserError(
        f"{where}: /gcs/BUCKET/ is Cloud Storage FUSE, which Vertex AI mounts on its machines; "
        f"this machine cannot give the replicas such a mount ({why or 'not available'}), so a "
        "local run would read or write an unrelated local directory",
        hint="locally, use gs://BUCKET/... (the Cloud Storage emulator of `vertex-trainer dev "
        "gcs-emulator`, or your credentials) or a local path; or mount the bucket at /gcs/BUCKET "
        "with gcsfuse",
    )


_GCE_PRODUCT_FILE = "/sys/class/dmi/id/product_name"


def _adc_problem(env: Mapping[str, str]) -> str | None:
    """Why Application Default Credentials cannot be found from `env`; None when they can.

    The order google-auth and TensorFlow use: $GOOGLE_APPLICATION_CREDENTIALS (a broken one is
    an error, not a fall-through), gcloud's application_default_credentials.json, then a Compute
    Engine VM's metadata server (recognised from its DMI product name, without a network probe).
    """
    explicit = env.get("GOOGLE_APPLICATION_CREDENTIALS")
    if explicit:
        return _load_problem(explicit, "GOOGLE_APPLICATION_CREDENTIALS")
    config = env.get("CLOUDSDK_CONFIG") or (
        os.path.join(env["HOME"], ".config", "gcloud") if env.get("HOME") else ""
    )
    well_known = os.path.join(config, "application_default_credentials.json") if config else ""
    if well_known and os.path.exists(well_known):
        return _load_problem(well_known, "gcloud's application default credentials")
    try:
        with open(_GCE_PRODUCT_FILE, encoding="utf-8") as f:
            if "Google" in f.read():
                return None
    except OSError:
        pass
    return "DefaultCredentialsError"


def _load_problem(path: str, source: str) -> str | None:
    import google.auth
    from google.auth.exceptions import GoogleAuthError

    try:
        # The user's own ADC file, trusted as google.auth.default() trusts it (and, like it,
        # without the warning about credential files from external sources).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            google.auth.load_credentials_from_file(path)
    except (GoogleAuthError, OSError, ValueError) as exc:
        return f"{source} {path}: {type(exc).__name__}"
    return None
