"""A TPU slice's hosts, as a TPU VM's environment presents them; pure (no TensorFlow).

Every host of a multi-host slice (Vertex AI starts the job's container on each TPU VM of the
slice's topology) sees, in its environment, the variables the TPU VM runtime sets (Cloud TPU's
TPU VMs, GKE's multi-host TPU node pools):

  TPU_WORKER_ID          this host's index in the slice, 0 .. hosts-1
  TPU_WORKER_HOSTNAMES   every host's name or address, comma-separated, in index order
  TPU_ACCELERATOR_TYPE   the slice, e.g. v5litepod-16 (16 chips, 4 hosts of 4)

TensorFlow's TPUStrategy is single-client: one Python program drives the TPUs of every host,
each through a TensorFlow gRPC server on that host (job "worker", port 8470, the port Cloud
TPU's TensorFlow servers listen on and TensorFlow's TPU client defaults to). So:

- host 0 runs the training program (the client) and, beside it, a server for its own TPU;
  its TPUClusterResolver is given every host as a comma-separated list of grpc:// addresses,
  which TensorFlow's TPU client reads as the cluster without asking the Cloud TPU API
  (tensorflow/python/tpu/client/client.py, `_environment_var_to_network_endpoints`);
- hosts 1 .. n-1 run only the server (task i of job "worker") and wait for host 0 to finish
  (the done marker, `done_path`);
- the input is sharded per host by TensorFlow: `distribute_datasets_from_function` calls the
  trainer's dataset function once per host, on that host's CPU, with an InputContext of
  `input_pipeline_id` = the host's index of `num_input_pipelines` = hosts (`input_context`);
- checkpoints and the export are written by the one client, host 0 (`is_chief`).

A single host (or no TPU_WORKER_HOSTNAMES) keeps TPUClusterResolver(tpu="local"), or TPU_NAME
when it is set. What of this was verified how: docs/trainer.md ("Multi-host TPU slices").
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Mapping
from typing import Any

PORT = 8470  # a TPU host's TensorFlow server (Cloud TPU's; TensorFlow's TPU client default)
JOB = "worker"  # TPUClusterResolver's default job name: the hosts' servers are its tasks
DONE_MARKER = "tpu-slice-done"  # under the run's output base: host 0 has finished

# Chips of one TPU VM host in a multi-host slice, by TPU_ACCELERATOR_TYPE's version prefix
# (catalog/tpu_topologies.csv: ct5lp-hightpu-4t, ct4p-hightpu-4t, ct5p-hightpu-4t, ct6e-standard-4t).
# v4 and v5p count TensorCores in the type's name (2 per chip): v4-32 is 16 chips, 4 hosts.
_CHIPS_PER_HOST = {"v5litepod": 4, "v5e": 4, "v6e": 4, "v4": 4, "v5p": 4}
_CORES_PER_CHIP = {"v4": 2, "v5p": 2}
# v5e and v6e slices of up to 8 chips may be one 8-chip host (ct5lp-hightpu-8t, ct6e-standard-8t)
# or two 4-chip hosts: the type alone does not say, so only the host list decides there.
_ONE_HOST_UP_TO = {"v5litepod": 8, "v5e": 8, "v6e": 8}


class SliceError(Exception):
    """The slice's environment cannot be used as it is (the trainer exits 2 with this)."""


@dataclasses.dataclass(frozen=True)
class SliceHost:
    """This process's host of the slice, and the slice's hosts."""

    index: int
    hostnames: tuple[str, ...]
    accelerator_type: str = ""
    tpu_name: str = ""  # TPU_NAME, for a single host whose TPU is named (not "local")

    @property
    def hosts(self) -> int:
        return max(1, len(self.hostnames))

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def is_chief(self) -> bool:
        """Host 0 runs the training program, the checkpoints and the export."""
        return self.index == 0

    @property
    def addresses(self) -> tuple[str, ...]:
        """Each host's TensorFlow server, host:port, in index order (PORT unless the host list
        names a port, as a slice simulated on one machine does: tests/tpu)."""
        return tuple(name if ":" in name else f"{name}:{PORT}" for name in self.hostnames)

    def resolver_kwargs(self) -> dict[str, str]:
        """TPUClusterResolver's arguments on the client (host 0, or the one host)."""
        if not self.multi_host:
            return {"tpu": self.tpu_name or "local"}
        return {"tpu": ",".join(f"grpc://{a}" for a in self.addresses), "job_name": JOB}

    def server_def(self) -> dict[str, Any]:
        """tf.distribute.Server's arguments for this host's own TPU server."""
        return {"cluster": {JOB: list(self.addresses)}, "job_name": JOB, "task_index": self.index}

    def input_context(self) -> dict[str, int]:
        """The InputContext TPUStrategy gives this host's input pipeline (one per host)."""
        return {"num_input_pipelines": self.hosts, "input_pipeline_id": self.index}


def from_env(environ: Mapping[str, str]) -> SliceHost:
    """This host of the slice, from the TPU VM's environment (see the module's docstring).

    Raises SliceError naming the variable when the variables disagree: an index outside the
    host list, a list that does not match the accelerator type's host count, or a multi-host
    accelerator type without the host list.
    """
    accelerator = environ.get("TPU_ACCELERATOR_TYPE", "").strip()
    tpu_name = environ.get("TPU_NAME", "").strip()
    tpu_name = "" if tpu_name == "local" else tpu_name
    names = tuple(h.strip() for h in environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip())
    raw_index = environ.get("TPU_WORKER_ID", "0").strip() or "0"
    if not raw_index.isdigit():
        raise SliceError(f"TPU_WORKER_ID={raw_index!r} is not a host index (0, 1, ...)")
    index = int(raw_index)
    expected = hosts_of(accelerator)
    if len(names) <= 1:
        if expected and expected > 1:
            raise SliceError(
                f"TPU_ACCELERATOR_TYPE={accelerator} is a {expected}-host slice but "
                "TPU_WORKER_HOSTNAMES does not list its hosts (comma-separated, host 0 first)"
            )
        if index != 0:
            raise SliceError(f"TPU_WORKER_ID={index} but TPU_WORKER_HOSTNAMES lists one host")
        return SliceHost(0, names, accelerator, tpu_name)
    if index >= len(names):
        raise SliceError(
            f"TPU_WORKER_ID={index} is not one of the {len(names)} hosts of TPU_WORKER_HOSTNAMES"
        )
    if expected and expected != len(names):
        raise SliceError(
            f"TPU_WORKER_HOSTNAMES lists {len(names)} hosts but TPU_ACCELERATOR_TYPE={accelerator} "
            f"has {expected}"
        )
    return SliceHost(index, names, accelerator, tpu_name)


def hosts_of(accelerator_type: str) -> int | None:
    """The TPU VM hosts of a slice named as TPU_ACCELERATOR_TYPE names it (v5litepod-16 -> 4);
    None when the name does not say (a type this table lacks, a v5e/v6e slice of <= 8 chips):
    the host list then decides alone."""
    m = re.fullmatch(r"(v\d+[a-z]*)-(\d+)", accelerator_type)
    if not m or m.group(1) not in _CHIPS_PER_HOST:
        return None
    version, chips = m.group(1), int(m.group(2)) // _CORES_PER_CHIP.get(m.group(1), 1)
    if chips <= _ONE_HOST_UP_TO.get(version, 0):
        return None
    return max(1, -(-chips // _CHIPS_PER_HOST[version]))


def done_path(output_base: str) -> str:
    """The file host 0 writes when it has finished (the other hosts' servers then exit)."""
    return posixpath.join(output_base, DONE_MARKER)
