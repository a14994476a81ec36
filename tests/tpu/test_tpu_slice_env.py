"""A multi-host TPU slice as each host's environment presents it (trainer/tpu_slice.py): the
pure parsing every host of a simulated 4-host v5e-16 slice runs, and what it decides (no
TensorFlow here; tests/tpu/test_tpu_slice_tf.py runs the parts that need it)."""

from __future__ import annotations

import pytest

from trainer import strategy, tpu_slice
from trainer.tpu_slice import SliceError, SliceHost

HOSTS = ["t1v-n-0", "t1v-n-1", "t1v-n-2", "t1v-n-3"]
ADDRESSES = [f"{h}:8470" for h in HOSTS]


def slice_env(index: int, hostnames=HOSTS, accelerator: str = "v5litepod-16") -> dict[str, str]:
    """What the TPU VM runtime sets on host `index` of the slice."""
    return {
        "TPU_WORKER_ID": str(index),
        "TPU_WORKER_HOSTNAMES": ",".join(hostnames),
        "TPU_ACCELERATOR_TYPE": accelerator,
    }


@pytest.mark.parametrize("index", range(4))
def test_every_host_of_a_v5e_16_slice_joins_with_its_index(index):
    host = strategy.slice_host("auto", slice_env(index))  # auto: the TPU_* variables say TPU
    assert host is not None and host.multi_host and host.hosts == 4
    assert host.index == index and host.is_chief == (index == 0)
    # Its own TPU server: task `index` of job "worker", the cluster every host's address.
    assert host.server_def() == {"cluster": {"worker": ADDRESSES}, "job_name": "worker", "task_index": index}
    # Its input pipeline: TPUStrategy calls the dataset function once per host with this context.
    assert host.input_context() == {"num_input_pipelines": 4, "input_pipeline_id": index}
    # The client (host 0) resolves the slice from the addresses, no Cloud TPU API call.
    assert host.resolver_kwargs() == {
        "tpu": ",".join(f"grpc://{a}" for a in ADDRESSES),
        "job_name": "worker",
    }


def test_one_host_keeps_the_local_resolver():
    one = {"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "t1v-n-0", "TPU_ACCELERATOR_TYPE": "v5litepod-8"}
    assert strategy.slice_host("auto", one) is None  # single-host path: strategy.create as before
    assert tpu_slice.from_env(one).resolver_kwargs() == {"tpu": "local"}
    assert tpu_slice.from_env({}).resolver_kwargs() == {"tpu": "local"}
    assert tpu_slice.from_env({"TPU_NAME": "my-tpu"}).resolver_kwargs() == {"tpu": "my-tpu"}
    assert tpu_slice.from_env({"TPU_NAME": "local"}).resolver_kwargs() == {"tpu": "local"}


def test_a_slice_is_ignored_when_the_run_asks_for_another_strategy():
    assert strategy.slice_host("mirrored", slice_env(1)) is None
    assert strategy.slice_host("tpu", slice_env(1)) == SliceHost(1, tuple(HOSTS), "v5litepod-16")
    assert strategy.slice_host("auto", {"CLUSTER_SPEC": "{}"}) is None  # not a TPU VM


def test_a_host_list_with_ports_is_a_slice_simulated_on_one_machine():
    host = tpu_slice.from_env(slice_env(1, ["localhost:9001", "localhost:9002"], accelerator=""))
    assert host.addresses == ("localhost:9001", "localhost:9002") and host.index == 1


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (slice_env(4), "TPU_WORKER_ID=4 is not one of the 4 hosts of TPU_WORKER_HOSTNAMES"),
        (
            slice_env(0, HOSTS[:2]),
            "TPU_WORKER_HOSTNAMES lists 2 hosts but TPU_ACCELERATOR_TYPE=v5litepod-16 has 4",
        ),
        (
            {"TPU_WORKER_ID": "0", "TPU_ACCELERATOR_TYPE": "v5litepod-16"},
            "TPU_ACCELERATOR_TYPE=v5litepod-16 is a 4-host slice but TPU_WORKER_HOSTNAMES does not list",
        ),
        ({"TPU_WORKER_ID": "x", "TPU_WORKER_HOSTNAMES": "a,b"}, "TPU_WORKER_ID='x' is not a host index"),
        (
            {"TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "a"},
            "TPU_WORKER_ID=1 but TPU_WORKER_HOSTNAMES lists one",
        ),
    ],
)
def test_an_inconsistent_slice_environment_is_named(env, message):
    with pytest.raises(SliceError) as e:
        tpu_slice.from_env(env)
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("accelerator", "hosts"),
    [
        ("v5litepod-16", 4),
        ("v5litepod-256", 64),
        ("v5litepod-8", None),  # one 8-chip host (ct5lp-hightpu-8t) or two of 4: the list decides
        ("v6e-32", 8),
        ("v4-32", 4),  # v4 names TensorCores: 16 chips, 4 per host
        ("v5p-16", 2),
        ("v3-8", None),
        ("", None),
    ],
)
def test_hosts_of_an_accelerator_type(accelerator, hosts):
    assert tpu_slice.hosts_of(accelerator) == hosts


def test_the_done_file_is_under_the_runs_output():
    assert tpu_slice.done_path("gs://b/runs/x") == "gs://b/runs/x/tpu-slice-done"
