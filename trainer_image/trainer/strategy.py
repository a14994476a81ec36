"""Pick the tf.distribute strategy from the environment Vertex AI (or the local runner) sets.

TPU VM -> TPUStrategy (a multi-host slice: every host joins, trainer/tpu_slice.py); several
workers in CLUSTER_SPEC/TF_CONFIG -> MultiWorkerMirroredStrategy;
several GPUs (or --cpu-replicas > 1) -> MirroredStrategy; else the default strategy.
Strategies must be created before TensorFlow initialises its runtime, so call `create` first.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from collections.abc import Mapping
from typing import Any

from trainer import tpu_slice
from trainer.flags import STRATEGIES  # the one list of strategies (the --strategy flag)

# Vertex AI worker pools in CLUSTER_SPEC -> TF_CONFIG task types.
WORKERPOOL_TO_TF = {
    "workerpool0": "chief",
    "workerpool1": "worker",
    "workerpool2": "ps",
    "workerpool3": "evaluator",
}


class ClusterError(Exception):
    """The cluster description in the environment cannot be used (exit 2)."""


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The TF_CONFIG-shaped view of this job: which tasks exist and which one we are."""

    spec: Mapping[str, list[str]]
    task_type: str
    task_index: int

    @property
    def num_workers(self) -> int:
        return len(self.spec.get("chief", [])) + len(self.spec.get("worker", []))

    @property
    def is_chief(self) -> bool:
        if self.task_type == "chief":
            return True
        return self.task_type == "worker" and self.task_index == 0 and not self.spec.get("chief")

    def tf_config(self) -> str:
        return json.dumps(
            {"cluster": dict(self.spec), "task": {"type": self.task_type, "index": self.task_index}}
        )


def cluster_from_env(environ: Mapping[str, str] | None = None) -> Cluster | None:
    """Read CLUSTER_SPEC first (Vertex AI's own variable), else TF_CONFIG; None if neither."""
    env = os.environ if environ is None else environ
    if env.get("CLUSTER_SPEC"):
        raw = _load_json("CLUSTER_SPEC", env["CLUSTER_SPEC"])
        spec: dict[str, list[str]] = {}
        for pool, addresses in (raw.get("cluster") or {}).items():
            if pool not in WORKERPOOL_TO_TF:
                raise ClusterError(f"CLUSTER_SPEC: unknown worker pool {pool!r}")
            if addresses:
                spec[WORKERPOOL_TO_TF[pool]] = list(addresses)
        task = raw.get("task") or {}
        pool = task.get("type", "workerpool0")
        if pool not in WORKERPOOL_TO_TF:
            raise ClusterError(f"CLUSTER_SPEC: unknown task type {pool!r}")
        return _checked(Cluster(spec, WORKERPOOL_TO_TF[pool], int(task.get("index", 0))), "CLUSTER_SPEC")
    if env.get("TF_CONFIG"):
        raw = _load_json("TF_CONFIG", env["TF_CONFIG"])
        task = raw.get("task") or {}
        spec = {k: list(v) for k, v in (raw.get("cluster") or {}).items() if v}
        if not spec:
            return None
        return _checked(
            Cluster(
                spec, task.get("type", "chief" if "chief" in spec else "worker"), int(task.get("index", 0))
            ),
            "TF_CONFIG",
        )
    return None


def _load_json(name: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ClusterError(f"{name} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise ClusterError(f"{name} must be a JSON object")
    return value


def _checked(cluster: Cluster, source: str) -> Cluster:
    members = cluster.spec.get(cluster.task_type, [])
    if not 0 <= cluster.task_index < len(members):
        raise ClusterError(
            f"{source}: task {cluster.task_type}:{cluster.task_index} is not in "
            f"the cluster {dict(cluster.spec)}"
        )
    return cluster


def tpu_present(environ: Mapping[str, str] | None = None) -> bool:
    """Cheap hints of a TPU VM, checked before paying for a TPUClusterResolver."""
    env = os.environ if environ is None else environ
    if env.get("TPU_NAME") or env.get("TPU_ACCELERATOR_TYPE") or env.get("TPU_WORKER_ID"):
        return True
    return bool(glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*"))


def slice_host(requested: str, environ: Mapping[str, str]) -> tpu_slice.SliceHost | None:
    """This host of a multi-host TPU slice when the run uses TPUStrategy on one; else None
    (one host, or not a TPU). Pure: task.run decides each host's part from it before TensorFlow
    starts (host 0 trains, the others serve their TPU)."""
    if requested == "tpu" or (requested == "auto" and tpu_present(environ)):
        host = tpu_slice.from_env(environ)
        return host if host.multi_host else None
    return None


@dataclasses.dataclass(frozen=True)
class StrategyInfo:
    kind: str  # tpu | multi-worker | mirrored | default
    replicas: int  # replicas in sync (all workers)
    workers: int
    is_chief: bool
    task_type: str
    task_index: int
    device: str  # tpu | gpu | cpu


def create(
    requested: str = "auto", *, cpu_replicas: int = 1, environ: Mapping[str, str] | None = None
) -> tuple[Any, StrategyInfo]:
    """(strategy, StrategyInfo). Call before any other TensorFlow work."""
    import tensorflow as tf

    env = os.environ if environ is None else environ
    cluster = cluster_from_env(env)
    kind = requested
    if kind == "auto":
        if tpu_present(env):
            kind = "tpu"
        elif cluster is not None and cluster.num_workers > 1:
            kind = "multi-worker"
        elif cpu_replicas > 1 or len(tf.config.list_physical_devices("GPU")) > 1:
            kind = "mirrored"
        else:
            kind = "default"
    gpus = tf.config.list_physical_devices("GPU")
    device = "tpu" if kind == "tpu" else ("gpu" if gpus else "cpu")
    task_type, task_index, is_chief = "chief", 0, True

    if kind == "tpu":
        # One host: tpu="local" (or TPU_NAME); host 0 of a multi-host slice: every host's server
        # as grpc:// addresses (trainer/tpu_slice.py), whose TPUs TPUStrategy then drives.
        host = tpu_slice.from_env(env)
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(**host.resolver_kwargs())
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
        workers = host.hosts if host.multi_host else int(getattr(strategy.extended, "num_hosts", 1))
    elif kind == "multi-worker":
        if cluster is None:
            raise ClusterError("--strategy=multi-worker needs CLUSTER_SPEC or TF_CONFIG")
        if cluster.task_type not in ("chief", "worker"):
            raise ClusterError(
                f"task type {cluster.task_type!r} is not used by "
                "MultiWorkerMirroredStrategy; run only chief and worker pools"
            )
        # MultiWorkerMirroredStrategy reads TF_CONFIG; give it the translated CLUSTER_SPEC.
        os.environ["TF_CONFIG"] = cluster.tf_config()
        implementation = (
            tf.distribute.experimental.CommunicationImplementation.NCCL
            if gpus
            else tf.distribute.experimental.CommunicationImplementation.RING
        )
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=implementation
            )
        )
        workers = cluster.num_workers
        task_type, task_index, is_chief = cluster.task_type, cluster.task_index, cluster.is_chief
    elif kind == "mirrored":
        if gpus:
            strategy = tf.distribute.MirroredStrategy()
        else:
            devices = [d.name for d in tf.config.list_logical_devices("CPU")][: max(cpu_replicas, 1)]
            strategy = tf.distribute.MirroredStrategy(devices=devices)
        workers = 1
    elif kind == "default":
        strategy = tf.distribute.get_strategy()
        workers = 1
    else:
        raise ClusterError(f"unknown strategy {requested!r}; choose one of {', '.join(STRATEGIES)}")
    return strategy, StrategyInfo(
        kind=kind,
        replicas=strategy.num_replicas_in_sync,
        workers=workers,
        is_chief=is_chief,
        task_type=task_type,
        task_index=task_index,
        device=device,
    )


def split_cpu(replicas: int) -> None:
    """Make `replicas` logical CPU devices (tests and demos of MirroredStrategy on a laptop)."""
    import tensorflow as tf

    if replicas > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
        )
