"""JobSpec -> CustomJob (or HyperparameterTuningJob), and the printed forms. Pure: same spec in,
same bytes out.

The dict built here is the CustomJob exactly as the Vertex AI REST API receives it (camelCase keys,
enum names, int64 as strings, durations as "3600s"). `submit` sends it, `--local` runs it, and
`render` prints it: one object for all three.
"""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any

import yaml

from vertex_trainer import hardware as hardware_catalog
from vertex_trainer.contract import (
    ATTEMPT_LABEL,
    KEY_LABEL,
    LOCAL_IMAGE,
    RESUMES_LABEL,
    SPEC_LABEL,
    STRATEGIES,
    Artifact,
    folder_digest,
    run_folder,
    run_name,
)
from vertex_trainer.spec import JobSpec, scaling, spec_hash
from vertex_trainer.spec.attempts import PlannedAttempt, attempts
from vertex_trainer.spec.factory import trainer_args
from vertex_trainer.spec.model import HardwareSpec
from vertex_trainer.spec.tune import PARAMS_LABEL, VERBATIM, category, own_args
from vertex_trainer.spec.tune import parameter_id as tuned_id


def default_artifact(spec: JobSpec) -> Artifact:
    """The artifact of a spec that names its image (`image.uri`); builds need packaging.plan_artifact."""
    if spec.image is None:
        return Artifact(LOCAL_IMAGE)
    if spec.image.uri:
        return Artifact(spec.image.uri)
    raise ValueError(
        "this spec builds its image: pass packaging.plan_artifact(spec) or ensure_artifact(spec)"
    )


RESERVATION_KEY = "compute.googleapis.com/reservation-name"


def machine_spec(spec: JobSpec, attempt: PlannedAttempt | None = None) -> dict[str, Any]:
    """The MachineSpec of `attempt` (default: the spec's own, attempt 1): its hardware and, with a
    reservation, its reservationAffinity (docs/contract.md section 11)."""
    attempt = attempt or attempts(spec)[0]
    h = attempt.hardware
    out: dict[str, Any] = {"machineType": h.machine_type}
    if h.accelerator_type:
        out["acceleratorType"] = h.accelerator_type
        out["acceleratorCount"] = h.accelerator_count
    if h.tpu_topology:
        out["tpuTopology"] = h.tpu_topology
    if attempt.reservation == "any":
        out["reservationAffinity"] = {"reservationAffinityType": "ANY_RESERVATION"}
    elif attempt.reservation:
        out["reservationAffinity"] = {
            "reservationAffinityType": "SPECIFIC_RESERVATION",
            "key": RESERVATION_KEY,
            "values": [attempt.reservation],
        }
    return out


def disk_spec(spec: JobSpec, hardware: HardwareSpec | None = None) -> dict[str, Any]:
    """The DiskSpec of every pool: boot_disk, its type defaulting to what the machine boots from."""
    machine_type = (hardware or spec.hardware).machine_type
    disk_type = spec.boot_disk.type or (
        "hyperdisk-balanced" if hardware_catalog.boots_from_hyperdisk(machine_type) else "pd-ssd"
    )
    return {"bootDiskType": disk_type, "bootDiskSizeGb": spec.boot_disk.size_gb}


def job_args(spec: JobSpec) -> list[str]:
    """The arguments every replica gets: the bundled trainer's flags (trainer:), or the job's own
    `args:` (a script job, or an image of your own)."""
    return trainer_args(spec) if spec.trainer is not None else list(spec.args)


def _code(spec: JobSpec, artifact: Artifact) -> tuple[str, dict[str, Any]]:
    args = job_args(spec)
    env = [{"name": k, "value": v} for k, v in spec.env.items()]
    body: dict[str, Any]
    if artifact.package_uris:
        body = {
            "executorImageUri": artifact.image_uri,
            "packageUris": list(artifact.package_uris),
            "pythonModule": artifact.python_module,
            "args": args,
        }
        key = "pythonPackageSpec"
    else:
        body = {"imageUri": artifact.image_uri}
        if spec.command:  # replaces the image's ENTRYPOINT, as on Vertex AI
            body["command"] = list(spec.command)
        body["args"] = args
        key = "containerSpec"
    if env:
        body["env"] = env
    return key, body


def worker_pools(
    spec: JobSpec, artifact: Artifact, attempt: PlannedAttempt | None = None
) -> list[dict[str, Any]]:
    """replicas 1 -> [chief]; N -> [chief x1, workers x(N-1)], all on the same machine (the
    attempt's, default attempt 1) and code; with scaling.reduction_server, the reducers third."""
    code_key, code = _code(spec, artifact)
    attempt = attempt or attempts(spec)[0]

    def pool(count: int) -> dict[str, Any]:
        # Each pool owns its objects: a caller editing one pool must never change the other.
        return {
            "machineSpec": machine_spec(spec, attempt),
            "replicaCount": str(count),
            "diskSpec": disk_spec(spec, attempt.hardware),
            code_key: copy.deepcopy(code),
        }

    pools = [pool(1)]
    if spec.replicas > 1:
        pools.append(pool(spec.replicas - 1))
    reducer = reducer_pool(spec)
    if reducer is not None:
        pools.append(reducer)
    return pools


def reducer_pool(spec: JobSpec) -> dict[str, Any] | None:
    """workerPoolSpecs[2] with scaling.reduction_server (docs/scaling.md): the reducers, CPU
    machines running Google's reductionserver image (it takes no arguments), sized by
    spec/scaling.py; None without it."""
    r = scaling.reducers(spec)
    if r is None:
        return None
    return {
        "machineSpec": {"machineType": r.machine_type},
        "replicaCount": str(r.count),
        "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
        "containerSpec": {"imageUri": r.image},
    }


def strategies(spec: JobSpec) -> tuple[str, ...]:
    """The strategy of each attempt of the plan (spec/attempts.py; attempt n is the n-th, from 1)."""
    return tuple(a.strategy for a in attempts(spec))


def scheduling(spec: JobSpec, strategy: str | None = None) -> dict[str, Any]:
    """The Scheduling of the job, with `strategy` (default scheduling.strategy); max_wait only
    with FLEX_START."""
    s = spec.scheduling
    strategy = strategy or s.strategy
    out: dict[str, Any] = {"strategy": STRATEGIES[strategy]}
    if s.timeout is not None:
        out["timeout"] = f"{s.timeout}s"
    if s.max_wait is not None and strategy == "flex-start":
        out["maxWaitDuration"] = f"{s.max_wait}s"
    if s.restart_on_worker_restart:
        out["restartJobOnWorkerRestart"] = True
    if s.disable_retries:
        out["disableRetries"] = True
    return out


def labels(
    spec: JobSpec, idempotency_key: str | None = None, attempt: int | None = None, resumes: str | None = None
) -> dict[str, str]:
    out = dict(spec.labels)
    out[SPEC_LABEL] = spec_hash(spec)
    if idempotency_key:
        out[KEY_LABEL] = idempotency_key
    if spec.scheduling.fallback:  # which strategy of the plan (docs/contract.md section 8)
        out[ATTEMPT_LABEL] = str(attempt or 1)
    if resumes:  # the folder of the run this job continues (submit --resume)
        out[RESUMES_LABEL] = folder_digest(resumes)
    return out


_PENDING = "(found or created at submit: projects/{project}/locations/{region}/tensorboards/<id>)"


def tensorboard_pending(project: str, region: str) -> str:
    """What a body holds as its jobSpec.tensorboard for `tensorboard: auto` until the submit has
    found or made the region's instance (api/execute.py puts its name there); a dry run and
    `render` show it as it is."""
    return _PENDING.format(project=project, region=region)


def resolve_tensorboards(value: Any, names: dict[str, str]) -> Any:
    """A copy of `value` (a body, a request, a list of them) with each `tensorboard_pending`
    placeholder replaced by its instance's name (`names`: placeholder -> name)."""
    if isinstance(value, dict):
        return {k: resolve_tensorboards(v, names) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(resolve_tensorboards(v, names) for v in value)
    return names.get(value, value) if isinstance(value, str) else value


def run_dir(spec: JobSpec, idempotency_key: str | None) -> str | None:
    """The submission's own folder, its baseOutputDirectory (docs/contract.md section 15):
    `<output_dir>/<name>-<key>` (contract.run_name), or output_dir itself with
    fixed_output_dir: true or without a key (a body that is no submission's); None without
    output_dir."""
    if not spec.output_dir:
        return None
    if spec.fixed_output_dir or not idempotency_key:
        return spec.output_dir.rstrip("/")
    return run_folder(spec.output_dir, run_name(spec.name, idempotency_key))


def custom_job(
    spec: JobSpec,
    artifact: Artifact | None = None,
    idempotency_key: str | None = None,
    attempt: int | PlannedAttempt | None = None,
    *,
    output: str | None = None,
    resumed: bool = False,
) -> dict[str, Any]:
    """The CustomJob REST body for `spec` (what submit POSTs to .../customJobs). With
    scheduling.fallback, `attempt` (default 1) is the job of one attempt of the plan (its
    strategy, hardware and reservation; spec/attempts.py), labelled vertex-trainer-attempt=n:
    the plan's PlannedAttempt itself (nothing is planned again), or its number n.
    Its baseOutputDirectory is `output` (a resumed run's folder) or the key's own folder
    (`run_dir`); a `resumed` run's job is labelled with its folder (RESUMES_LABEL)."""
    artifact = artifact or default_artifact(spec)
    chosen = attempt if isinstance(attempt, PlannedAttempt) else _nth_attempt(spec, attempt or 1)
    n = chosen.n
    job_spec: dict[str, Any] = {
        "workerPoolSpecs": worker_pools(spec, artifact, chosen),
        "scheduling": scheduling(spec, chosen.strategy),
    }
    if spec.persistent_resource:  # an id, or the full name (its last part is the id)
        job_spec["persistentResourceId"] = spec.persistent_resource.rsplit("/", 1)[-1]
    if spec.enable_web_access:
        job_spec["enableWebAccess"] = True
    if spec.enable_dashboard_access:
        job_spec["enableDashboardAccess"] = True
    if spec.service_account:
        job_spec["serviceAccount"] = spec.service_account
    if spec.network:
        job_spec["network"] = spec.network
    base = output or run_dir(spec, idempotency_key)
    if base:
        job_spec["baseOutputDirectory"] = {"outputUriPrefix": base}
    if spec.tensorboard == "auto":  # the instance of the attempt's region, found or made at submit
        region = chosen.region or spec.region or "REGION"
        job_spec["tensorboard"] = tensorboard_pending(spec.project or "PROJECT", region)
    elif spec.tensorboard:
        job_spec["tensorboard"] = spec.tensorboard
    job: dict[str, Any] = {
        "displayName": spec.name,
        "labels": labels(spec, idempotency_key, n, resumes=base if resumed else None),
        "jobSpec": job_spec,
    }
    if spec.encryption_key:
        job["encryptionSpec"] = {"kmsKeyName": spec.encryption_key}
    return job


def _nth_attempt(spec: JobSpec, n: int) -> PlannedAttempt:
    """Attempt n (from 1) of the spec's plan; ValueError past its end."""
    plan = attempts(spec)
    if not 1 <= n <= len(plan):
        raise ValueError(f"attempt {n}: the spec's plan has {len(plan)} attempt{'s' * (len(plan) > 1)}")
    return plan[n - 1]


# -- hyperparameter tuning (docs/contract.md section 10) -------------------------------------------------

ALGORITHMS = {"auto": "ALGORITHM_UNSPECIFIED", "grid": "GRID_SEARCH", "random": "RANDOM_SEARCH"}
GOALS = {"maximize": "MAXIMIZE", "minimize": "MINIMIZE"}
SCALES = {"linear": "UNIT_LINEAR_SCALE", "log": "UNIT_LOG_SCALE", "reverse_log": "UNIT_REVERSE_LOG_SCALE"}


def parameter_id(field: str) -> str:
    """The StudySpec parameterId of a trainer field: Vertex AI passes `--<id>=<value>` to each
    trial, so the id is the trainer's own flag spelling (learning_rate -> --learning-rate)."""
    return field.replace("_", "-")


def study_spec(spec: JobSpec) -> dict[str, Any]:
    """The StudySpec of the spec's `tune:` block (metric, parameters, algorithm)."""
    tune = spec.tune
    if tune is None:
        raise ValueError("the spec has no tune: block")
    parameters = []
    for name, p in tune.parameters.items():
        kind = tune.kind(name, trainer=not own_args(spec))
        out: dict[str, Any] = {"parameterId": tuned_id(spec, name)}
        if kind == "double":
            out["doubleValueSpec"] = {"minValue": float(p.bounds[0]), "maxValue": float(p.bounds[1])}
        elif kind == "integer":  # int64: a string on the wire
            out["integerValueSpec"] = {"minValue": str(int(p.bounds[0])), "maxValue": str(int(p.bounds[1]))}
        elif kind == "discrete":  # the service wants them increasing
            out["discreteValueSpec"] = {"values": sorted(float(v) for v in p.listed)}
        else:
            out["categoricalValueSpec"] = {"values": [category(v) for v in p.listed]}
        if kind != "categorical":
            out["scaleType"] = SCALES[p.scale or "linear"]
        parameters.append(out)
    return {
        "metrics": [{"metricId": tune.metric, "goal": GOALS[tune.goal]}],
        "parameters": parameters,
        "algorithm": ALGORITHMS[tune.algorithm],
    }


def tuning_job(spec: JobSpec, job: dict[str, Any]) -> dict[str, Any]:
    """The HyperparameterTuningJob REST body for `spec`: every trial runs `job` (the rendered
    CustomJob, `custom_job(...)`: the bundled trainer's, or your code's pool with its args) with
    the trial's flags appended; its name, labels and key too. A job without trainer: also carries
    `vertex-trainer-params: verbatim` (its parameter ids are its code's own argument names)."""
    if spec.tune is None:
        raise ValueError("the spec has no tune: block")
    tune = spec.tune
    body: dict[str, Any] = {
        "displayName": job["displayName"],
        "studySpec": study_spec(spec),
        "maxTrialCount": tune.max_trials,
        "parallelTrialCount": tune.parallel_trials,
        "maxFailedTrialCount": tune.max_failed_trials,
        "trialJobSpec": copy.deepcopy(job["jobSpec"]),
        "labels": dict(job.get("labels") or {}),
    }
    if own_args(spec):
        body["labels"][PARAMS_LABEL] = VERBATIM
    if job.get("encryptionSpec"):
        body["encryptionSpec"] = dict(job["encryptionSpec"])
    return body


def to_json(job: dict[str, Any]) -> str:
    return json.dumps(job, indent=2) + "\n"


def to_yaml(job: dict[str, Any]) -> str:
    return yaml.safe_dump(job, sort_keys=False, default_flow_style=False)


def _ints_for_gcloud(node: Any) -> Any:
    # gcloud reads the file into apitools messages, which want int64 fields as YAML integers.
    if isinstance(node, dict):
        return {k: (int(v) if k == "replicaCount" else _ints_for_gcloud(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_ints_for_gcloud(v) for v in node]
    return node


def _gcloud_create(group: str, spec: JobSpec, body: dict[str, Any], region: str, *flags: str) -> list[str]:
    """`gcloud ai GROUP create` for `body` (a CustomJob or HyperparameterTuningJob): the project,
    `region`, display name and `flags`, then the labels and the KMS key the body carries."""
    cmd = [
        "gcloud",
        "ai",
        group,
        "create",
        f"--region={region}",
        f"--display-name={body['displayName']}",
        *flags,
    ]
    if spec.project:
        cmd.insert(4, f"--project={spec.project}")
    if body.get("labels"):
        cmd.append("--labels=" + ",".join(f"{k}={v}" for k, v in body["labels"].items()))
    if body.get("encryptionSpec"):
        cmd.append(f"--kms-key={body['encryptionSpec']['kmsKeyName']}")
    return cmd


def gcloud_command(spec: JobSpec, job: dict[str, Any], config_path: str = "job.yaml") -> list[str]:
    """The gcloud command line that creates the same CustomJob from the `--format gcloud` file.

    `spec` gives the project and region, `job` is the rendered CustomJob, `config_path` the file
    `--config` names. Returns the command as a list of arguments."""
    return _gcloud_create("custom-jobs", spec, job, spec.region or "REGION", f"--config={config_path}")


def to_gcloud_config(spec: JobSpec, job: dict[str, Any]) -> str:
    """A CustomJobSpec YAML for `gcloud ai custom-jobs create --config`, headed by the command to run.

    The display name, labels and key live outside CustomJobSpec, so they travel as flags.
    """
    if "studySpec" in job:  # a HyperparameterTuningJob (tuning_job)
        return to_gcloud_tuning_config(spec, job)
    command = " ".join(shlex.quote(a) for a in gcloud_command(spec, job))
    header = (
        "# CustomJobSpec for the Google Cloud CLI, rendered by vertex-trainer. Create the job with:\n"
        f"#   {command}\n"
    )
    return header + yaml.safe_dump(
        _ints_for_gcloud(job["jobSpec"]), sort_keys=False, default_flow_style=False
    )


def to_gcloud_tuning_config(spec: JobSpec, body: dict[str, Any]) -> str:
    """A HyperparameterTuningSpec YAML for `gcloud ai hp-tuning-jobs create --config`, headed by
    the command to run (display name, labels, key and the trial counts travel as flags)."""
    cmd = _gcloud_create(
        "hp-tuning-jobs",
        spec,
        body,
        spec.region or "REGION",
        "--config=tuning.yaml",
        f"--max-trial-count={body['maxTrialCount']}",
        f"--parallel-trial-count={body['parallelTrialCount']}",
    )
    study = copy.deepcopy(body["studySpec"])
    for p in study["parameters"]:  # int64 as YAML integers, as for replicaCount
        if "integerValueSpec" in p:
            p["integerValueSpec"] = {k: int(v) for k, v in p["integerValueSpec"].items()}
    config = {
        "studySpec": study,
        "maxTrialCount": body["maxTrialCount"],
        "parallelTrialCount": body["parallelTrialCount"],
        "maxFailedTrialCount": body["maxFailedTrialCount"],
        "trialJobSpec": _ints_for_gcloud(body["trialJobSpec"]),
    }
    command = " ".join(shlex.quote(a) for a in cmd)
    header = (
        "# HyperparameterTuningSpec for the Google Cloud CLI, rendered by vertex-trainer. Create "
        f"the job with:\n#   {command}\n"
    )
    return header + yaml.safe_dump(config, sort_keys=False, default_flow_style=False)
