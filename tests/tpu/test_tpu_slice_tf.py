"""A simulated 4-host TPU slice against TensorFlow itself, without a TPU: the client's resolver
from host 0's arguments, each host's input shard through the trainer's own dataset function,
and a non-chief host's trainer process joining with its index and leaving when host 0 is done.

What no test here can show (there is no TPU): TPUStrategy training across real hosts; see
docs/trainer.md ("Multi-host TPU slices")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from trainer import datagen, tpu_slice
from vertex_trainer.local.cluster import free_ports

pytestmark = pytest.mark.trainer

HOSTS = ["t1v-n-0", "t1v-n-1", "t1v-n-2", "t1v-n-3"]


def slice_env(index: int, hostnames=HOSTS) -> dict[str, str]:
    return {
        "TPU_WORKER_ID": str(index),
        "TPU_WORKER_HOSTNAMES": ",".join(hostnames),
        "TPU_ACCELERATOR_TYPE": "v5litepod-16",
    }


def test_host_0_resolves_the_slice_and_each_host_reads_its_own_shard(tmp_path):
    import numpy as np
    import tensorflow as tf

    from trainer import data, task

    hosts = [tpu_slice.from_env(slice_env(i)) for i in range(4)]
    # The client's resolver, built by TensorFlow from host 0's arguments (no Cloud TPU API call).
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(**hosts[0].resolver_kwargs())
    assert resolver.cluster_spec().as_dict() == {"worker": [f"{h}:8470" for h in HOSTS]}
    assert resolver.master() == "grpc://t1v-n-0:8470" and resolver.get_job_name() == "worker"

    # 8 shards of 40 records; each host reads its InputContext's pipeline of the trainer's input_fn.
    datagen.synthesize(
        str(tmp_path), examples=40, shards=8, image_size=8, num_classes=4, seed=2, eval_examples=0
    )
    files = data.list_files(f"{tmp_path}/train-*")
    cfg = data.PipelineConfig(image_size=8, num_classes=4, training=False)
    fn = task.input_fn(files, cfg, 16, None, repeat=False)  # global batch 16 = 16 replicas x 1
    per_host = []
    for host in hosts:
        ctx = tf.distribute.InputContext(**host.input_context(), num_replicas_in_sync=16)
        per_host.append(np.concatenate([y.numpy() for _, y in fn(ctx)]))
    shards = [set(data.shard_files(files, num_shards=4, index=h.index, seed=cfg.seed)[0]) for h in hosts]
    assert all(len(s) == 2 for s in shards) and set().union(*shards) == set(files)  # disjoint, whole
    assert sum(len(y) for y in per_host) == 40 and all(len(y) > 0 for y in per_host)
    everything = np.concatenate([y.numpy() for _, y in data.build_dataset(files, cfg, 1)])
    assert sorted(np.concatenate(per_host).tolist()) == sorted(everything.tolist())


@pytest.mark.timeout(120)
def test_a_non_chief_host_serves_its_tpu_until_host_0_is_done(tmp_path):
    ports = free_ports(2)  # for two TPU servers that bind them after TensorFlow loads
    env = {k: v for k, v in os.environ.items() if k not in ("CLUSTER_SPEC", "TF_CONFIG")}
    env.update(
        slice_env(1, [f"localhost:{p}" for p in ports]),
        TPU_ACCELERATOR_TYPE="",  # two hosts named with ports: a slice simulated on this machine
        TPU_SLICE_POLL_SECONDS="0.2",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONUNBUFFERED="1",
        CUDA_VISIBLE_DEVICES="",
    )
    model_dir = tmp_path / "run" / "model"
    for name, sub in (("MODEL", "model"), ("CHECKPOINT", "checkpoints"), ("TENSORBOARD_LOG", "logs")):
        env[f"AIP_{name}_DIR"] = f"{tmp_path}/run/{sub}/"  # as Vertex AI sets them on every host
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainer.task", "--synthetic-data", "--train-data=unused", "--num-classes=4"]
        + [f"--model-dir={model_dir}/"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # the host says it serves before it waits
            lines.append(line)
            if "serving" in line:
                break
        assert f"host 1 of 2 serving localhost:{ports[1]} (job worker, task 1)" in lines[-1], lines
        with socket.create_connection(("127.0.0.1", ports[1]), timeout=5):  # its gRPC server listens
            pass
        done = Path(tpu_slice.done_path(str(tmp_path / "run")))
        done.parent.mkdir(parents=True, exist_ok=True)
        done.write_text("done\n")  # host 0 has finished
        out = proc.stdout.read()
        assert proc.wait(timeout=60) == 0, out
        assert "host 1: host 0 has finished" in out and "done (a TPU slice host" in out
        assert not model_dir.exists()  # a non-chief host writes no model
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
