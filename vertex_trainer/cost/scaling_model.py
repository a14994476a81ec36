"""What scaling costs (issue 35, docs/scaling.md): a small model of data-parallel training across
machines, an ESTIMATE (`bench` on the machines measures the real figure).

Per training step every machine computes its share of the global batch, then the machines
all-reduce the gradients (parameters x 4 bytes: Keras keeps float32 variables, so float32
gradients, also under mixed precision). Across machines:

- ring all-reduce (NCCL) moves 2(N-1)/N x size through each machine's network;
- Reduction Server moves 1 x size (each worker sends its gradients once to the reducers and
  receives the sum once): Google's "up to 2x algorithm bandwidth" (source reduction-server-blog).

time per step = compute (the machine's share of the batch / one machine's examples per second)
+ communication (bytes moved / the machine's network bandwidth, catalog/networking.csv; the
family's most, so this is the best case). The GPUs within a machine all-reduce over NVLink/PCIe,
left out. No overlap of compute and communication is assumed (frameworks overlap some, so the
real efficiency may be higher). efficiency = compute / (compute + communication); N machines run
N x efficiency as fast as one, and cost 1 / efficiency as much per example: one machine for
longer is always the cheaper way to train, more machines the faster one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vertex_trainer import catalog, pricing
from vertex_trainer.spec import JobSpec
from vertex_trainer.spec.scaling import network, reducers

BYTES_PER_PARAM = 4  # float32 gradients


@dataclass(frozen=True)
class Scaling:
    """The estimate for `machines` machines against one."""

    machines: int
    params: int
    gbps: float  # one machine's network bandwidth (catalog)
    reduction_server: bool
    compute_s: float  # one step's compute (one machine's share of the batch)
    comm_s: float  # one step's all-reduce across machines
    source: str  # where the parameters and the bandwidth come from

    @property
    def allreduce_bytes(self) -> int:
        return self.params * BYTES_PER_PARAM

    @property
    def efficiency(self) -> float:
        return self.compute_s / (self.compute_s + self.comm_s)

    @property
    def speedup(self) -> float:
        return self.machines * self.efficiency

    def describe(self) -> str:
        how = "Reduction Server" if self.reduction_server else "ring all-reduce"
        return (
            f"estimate: {self.machines} machines run {self.speedup:.2f}x as fast as 1 "
            f"(scaling efficiency {self.efficiency:.0%}: {self.allreduce_bytes / 1e6:,.0f} MB of gradients "
            f"per step by {how} over {self.gbps:,.0f} Gbps takes {self.comm_s * 1e3:,.1f} ms beside "
            f"{self.compute_s * 1e3:,.1f} ms of compute); `bench` on {self.machines} machines measures it"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "estimate": True,
            "machines": self.machines,
            "allreduce_bytes": self.allreduce_bytes,
            "gbps": self.gbps,
            "reduction_server": self.reduction_server,
            "compute_ms": round(self.compute_s * 1e3, 3),
            "allreduce_ms": round(self.comm_s * 1e3, 3),
            "efficiency": round(self.efficiency, 4),
            "speedup": round(self.speedup, 3),
        }


def params_of(spec: JobSpec) -> tuple[int, str] | None:
    """The bundled trainer's model's parameter count and its source (None: your own code)."""
    if spec.trainer is None:
        return None
    row = next((r for r in catalog.table("model_sizes") if r["model"] == spec.trainer.model), None)
    return None if row is None else (int(row["params"]), row["source"])


def allreduce_seconds(size_bytes: float, machines: int, gbps: float, reduction_server: bool) -> float:
    """One all-reduce of `size_bytes` across `machines`, each with `gbps` of network: ring
    2(N-1)/N x size, Reduction Server 1 x size, through each machine's network."""
    if machines < 2:
        return 0.0
    moved = size_bytes if reduction_server else 2 * (machines - 1) / machines * size_bytes
    return moved * 8 / (gbps * 1e9)


def estimate(spec: JobSpec, one_machine_examples_per_sec: float | None) -> Scaling | None:
    """The scaling estimate of a multi-machine GPU job, from one machine's throughput.

    Args:
        spec: the job (replicas, hardware, trainer.model, trainer.batch_size, scaling).
        one_machine_examples_per_sec: what one machine of the spec's hardware trains per second.
    Returns:
        A Scaling, or None for one machine, a TPU or CPU job, your own code (its model size is
        not known), hardware without a network row, or no throughput."""
    if spec.replicas < 2 or not one_machine_examples_per_sec or spec.trainer is None:
        return None
    acc = spec.hardware.accelerator
    net = network(spec.hardware)
    sized = params_of(spec)
    if acc is None or acc.kind != "gpu" or net is None or sized is None:
        return None
    params, model_source = sized
    per_machine_batch = (spec.trainer.batch_size or 256) / spec.replicas  # batch_size is global
    compute = per_machine_batch / one_machine_examples_per_sec
    r = reducers(spec)
    gbps = net.gbps
    if r is not None:  # reducers short of the workers' bandwidth slow every worker down to their share
        gbps = min(gbps, r.covers / spec.replicas)
    comm = allreduce_seconds(params * BYTES_PER_PARAM, spec.replicas, gbps, r is not None)
    return Scaling(spec.replicas, params, gbps, r is not None, compute, comm, f"{model_source} {net.source}")


def job_throughput(spec: JobSpec, examples_per_sec: float, published: bool) -> tuple[float, Scaling | None]:
    """The whole job's examples per second and its scaling estimate.

    A published reference is per accelerator (x every device of the job: linear scaling), so the
    job's figure is one machine's x the speed-up. Any other figure (--throughput, a bench result)
    is the job's own: it stays, and one machine's is solved from it.

    Returns:
        (the job's examples per second, the Scaling or None)."""
    n = spec.replicas
    if published:
        one = examples_per_sec / n
        s = estimate(spec, one)
        return (one * s.speedup if s else examples_per_sec), s
    one = examples_per_sec / n
    s = estimate(spec, one)
    for _ in range(20):  # the job's = one machine's x speed-up(one machine's): a fixed point
        if s is None:
            break
        one = examples_per_sec / s.speedup
        s = estimate(spec, one)
    return examples_per_sec, s


def reducer_price(
    book: pricing.PriceBook, spec: JobSpec, region: str | None, strategy: str
) -> pricing.Price | None:
    """The hourly price of the job's reducers (scaling.reduction_server), None without them."""
    r = reducers(spec)
    if r is None:
        return None
    each = pricing.machine_price(
        book,
        machine_type=r.machine_type,
        accelerator_type=None,
        accelerator_count=0,
        region=region,
        strategy=strategy,
    )
    reason = each.reason and f"reducers ({r.machine_type}): {each.reason}"
    return pricing.Price(each.hourly, reason, each.upper_bound).times(r.count)
