"""`scaling:` (issue 35, docs/scaling.md): Reduction Server for multi-machine GPU jobs, and the
catalog facts it is sized from (catalog/reducers.csv, catalog/networking.csv, dated and sourced).

- `ScalingSpec`: `reduction_server: auto | N`.
- `check(spec)`: where Reduction Server cannot help it is refused, with the reason (exit 2): a TPU
  job, one machine, a CPU job, or a machine whose bandwidth the catalog lacks under `auto`.
- `reducers(spec)`: the reducer pool the job gets: image (nearest multi-region), machine type,
  count (`auto`: the reducers' total bandwidth covers the workers', Google's sizing rule).
- `warnings(spec)`: a user image whose NCCL plugin cannot be confirmed; N reducers that cover less
  bandwidth than the workers have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fnmatch import fnmatch
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from vertex_trainer import catalog
from vertex_trainer import hardware as hw
from vertex_trainer.errors import SpecError
from vertex_trainer.spec.base import Strict

if TYPE_CHECKING:  # model.py imports this module (directly or through the rules): named for the type checker
    from vertex_trainer.spec.model import HardwareSpec, JobSpec

REDUCER_POOL = 2  # workerPoolSpecs[2]: parameter servers or Reduction Server (source reduction-server)
PLUGIN = "google-reduction-server"  # the apt package with the NCCL transport plugin


class ScalingSpec(Strict):
    """How a multi-machine job scales (docs/scaling.md)."""

    reduction_server: Literal["auto"] | Annotated[int, Field(ge=1, le=1000)] | None = Field(
        None,
        description="GPU jobs on 2+ machines: Vertex AI Reduction Server reducers in worker pool 2; "
        "auto sizes them so their total bandwidth covers the workers' (n1-highcpu-16, 32 Gbps each), "
        "or give the number of reducers",
    )
    gpu_networking: Literal["auto", "gpudirect-tcpx", "gpudirect-tcpxo", "gpudirect-rdma"] | None = Field(
        None,
        description="the GPU-to-GPU network stack across machines: auto (what Vertex AI sets up; a "
        "CustomJob has no setting for GPUDirect-TCPX, TCPXO or RDMA, so asking for one is refused, "
        "docs/scaling.md)",
    )


@dataclass(frozen=True)
class Network:
    """One machine's network as the catalog has it (catalog/networking.csv)."""

    gbps: float
    gpu_networking: str  # gpudirect-tcpx, gpudirect-tcpxo, gpudirect-rdma or none
    vertex: str  # what a CustomJob can ask for ("none": nothing)
    source: str


def network(hardware: HardwareSpec) -> Network | None:
    """The catalog's network row of a GPU machine (None when it has none)."""
    for row in catalog.table("networking"):
        accs = catalog.words(row["accelerators"])
        if fnmatch(hardware.machine_type, row["machines"]) and (
            not accs or hardware.accelerator_type in accs
        ):
            return Network(float(row["gbps"]), row["gpu_networking"], row["vertex"], row["source"])
    return None


def _reducer_rows() -> dict[str, dict[str, str]]:
    return {r["kind"]: r for r in catalog.table("reducers")}


def reducer_image(region: str | None) -> str:
    """The reducer image of the multi-region nearest `region` (us when unknown)."""
    rows = _reducer_rows()
    area = (region or "us").split("-", 1)[0]
    return (rows.get(f"image-{area}") or rows["image-us"])["value"]


@dataclass(frozen=True)
class Reducers:
    """The reducer pool: `count` x `machine_type` running `image`, and the sizing behind it."""

    count: int
    machine_type: str
    image: str
    gbps_each: float
    workers_gbps: float | None  # all machines' (primary + workers) bandwidth; None: not in the catalog
    auto: bool

    @property
    def covers(self) -> float:
        return self.count * self.gbps_each

    def describe(self) -> str:
        how = "auto: " if self.auto else ""
        need = (
            f"workers {self.workers_gbps:,.0f} Gbps"
            if self.workers_gbps is not None
            else "workers' bandwidth not in the catalog"
        )
        return (
            f"{self.count} x {self.machine_type} ({how}{self.covers:,.0f} Gbps of reducers, {need}), "
            f"image {self.image}"
        )


def reducers(spec: JobSpec) -> Reducers | None:
    """The job's reducer pool, or None without scaling.reduction_server."""
    want = spec.scaling.reduction_server if spec.scaling else None
    if want is None:
        return None
    machine = _reducer_rows()["machine"]
    each = float(machine["gbps"])
    net = network(spec.hardware)
    workers = None if net is None else net.gbps * spec.replicas
    if want == "auto":
        count = max(1, math.ceil((workers or 0) / each))
    else:
        count = int(want)
    return Reducers(count, machine["value"], reducer_image(spec.region), each, workers, want == "auto")


def check(spec: JobSpec) -> None:
    """Refuse scaling.reduction_server where it cannot help, and a GPU network stack the machine or
    a Vertex AI CustomJob does not have (exit 2, nothing sent).

    Raises:
        SpecError: the field, its value, the reason and the fix."""
    _check_networking(spec)
    want = spec.scaling.reduction_server if spec.scaling else None
    if want is None:
        return
    field = "scaling.reduction_server"
    h = spec.hardware
    kind = hw.accelerator_kind(h.machine_type, h.accelerator_type)
    if kind == "tpu":
        raise SpecError(
            field,
            "applies to GPU jobs only: Reduction Server is an NCCL all-reduce for GPU workers; "
            f"{spec.hardware.describe()} is a TPU (its chips all-reduce over the TPU interconnect)",
            value=want,
            hint="remove scaling.reduction_server",
        )
    if kind == "cpu":
        raise SpecError(
            field,
            f"applies to GPU jobs only: {spec.hardware.machine_type} has no GPU, and Reduction Server "
            "reduces NCCL's GPU all-reduce",
            value=want,
            hint="remove scaling.reduction_server, or choose GPU hardware (vertex-trainer hardware)",
        )
    if spec.replicas < 2:
        raise SpecError(
            field,
            "needs 2 or more machines (replicas): on one machine the GPUs all-reduce over NVLink / "
            "PCIe, and reducers would have nothing to do",
            value=want,
            hint="set replicas: 2 or more, or remove scaling.reduction_server",
        )
    if want == "auto" and network(spec.hardware) is None:
        raise SpecError(
            field,
            f"auto cannot size the reducers: the catalog has no network bandwidth for "
            f"{spec.hardware.describe()} (catalog/networking.csv)",
            value=want,
            hint="give the number of reducers, e.g. scaling.reduction_server: 4",
        )


def _check_networking(spec: JobSpec) -> None:
    """scaling.gpu_networking: the family's stack (catalog/networking.csv), and one a CustomJob can
    ask for (the `vertex` column: none for every family read)."""
    want = spec.scaling.gpu_networking if spec.scaling else None
    if want in (None, "auto"):
        return
    field = "scaling.gpu_networking"
    net = network(spec.hardware)
    has = net.gpu_networking if net is not None else "none"
    if has != want:
        raise SpecError(
            field,
            f"{spec.hardware.describe()} has no {want}: its GPU-to-GPU network is {has} "
            "(Compute Engine's Networking and GPU machines, catalog/networking.csv)",
            value=want,
            hint="remove scaling.gpu_networking (auto)",
        )
    if net is not None and net.vertex == "none":
        raise SpecError(
            field,
            f"{want} is what {spec.hardware.machine_type} has on Compute Engine and GKE, where its daemon, "
            "NCCL plugin and extra NICs are set up by you; a Vertex AI CustomJob has no setting for it "
            "(the v1 WorkerPoolSpec names no NICs or network plugin)",
            value=want,
            hint="remove scaling.gpu_networking (auto); scaling.reduction_server is Vertex AI's way to "
            "raise all-reduce bandwidth (docs/scaling.md)",
        )


# Vertex AI's prebuilt training images (TensorFlow 2.3+, PyTorch 1.4+) support Reduction Server
# (source reduction-server); their paths under the us-/europe-/asia-docker.pkg.dev mirrors.
_PREBUILT = ("docker.pkg.dev/vertex-ai/training/tf-gpu.", "docker.pkg.dev/vertex-ai/training/pytorch-gpu.")


def image_confirmed(spec: JobSpec) -> bool:
    """Does the job's image carry the Reduction Server NCCL plugin? True for the bundled GPU image
    (its Dockerfile installs it), a prebuilt Vertex AI GPU training image (python_package's
    executor, a script job's auto base) and an image.uri that is one; False for any other image."""
    image = spec.image
    if image is None:
        return True  # a local-only spec: reducers are skipped locally
    if image.python_package:
        return image.executor_image is None or any(p in image.executor_image for p in _PREBUILT)
    if image.uri:
        return any(p in image.uri for p in _PREBUILT)
    if image.context:
        return False  # a Dockerfile of your own
    if image.runs_code:
        return image.base_image in (None, "auto")
    return image.variant in ("auto", "gpu")  # the bundled trainer's Dockerfile installs it


def warnings(spec: JobSpec) -> list[str]:
    """What is valid but worth a look: reducers short of the workers' bandwidth; an image whose
    NCCL plugin cannot be confirmed (`image_confirmed`)."""
    r = reducers(spec)
    if r is None:
        return []
    out = []
    if r.workers_gbps is not None and r.covers < r.workers_gbps:
        out.append(
            f"scaling.reduction_server: {r.count} reducers give {r.covers:,.0f} Gbps, less than the "
            f"workers' {r.workers_gbps:,.0f} Gbps; Google sizes them to match or exceed it (auto "
            f"would use {math.ceil(r.workers_gbps / r.gbps_each)})"
        )
    if not image_confirmed(spec):
        out.append(
            "scaling.reduction_server: the job's image is your own, and vertex-trainer cannot "
            f"confirm it has the Reduction Server NCCL plugin: install the {PLUGIN} apt package "
            "(repository google-fast-socket on packages.cloud.google.com/apt; docs/scaling.md) with "
            "NCCL 2.7 or later, or the workers all-reduce without the reducers"
        )
    return out
