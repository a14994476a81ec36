"""The utilization series the sandbox serves for its jobs, from what the local run measured
(docs/sandbox.md, "Utilization"; issue 43 item 5).

Vertex AI records a training job's accelerator, accelerator-memory and CPU utilization in Cloud
Monitoring; a sandbox job runs on this machine, so its series say so (their `measured_by` label,
which `status --utilization` prints):

- CPU (ml.googleapis.com/training/cpu/utilization), one series per replica: the CPU time of the
  replica's process group over each sampling period (local/supervisor.py reads /proc every
  second), divided by the period and this machine's vCPUs, as Vertex AI's figure is a fraction
  of the machine's allocated CPU.
- The accelerator (ml.googleapis.com/training/accelerator/utilization), the chief only, one
  point for the whole run: there is no accelerator here, so the figure is the share of the
  training time the trainer spent neither waiting for input nor between executions, from its
  metrics.json: 1 - input_wait_fraction - host_overhead_fraction (the latter when the trainer
  wrote it). A job that writes no such metrics.json (a script job) has no accelerator series.
- Accelerator memory: none (nothing here measures it); the verdict then names no batch headroom.
"""

from __future__ import annotations

import os
import time
from typing import Any

CPU = "ml.googleapis.com/training/cpu/utilization"
ACCELERATOR = "ml.googleapis.com/training/accelerator/utilization"
SOURCE_LABEL = "measured_by"  # the metric label the series carry (vertex/utilization.SOURCE_LABEL)


def cpu_source(vcpus: int) -> str:
    return (
        "the sandbox, on this machine: CPU time of each replica's processes / "
        f"(wall time x this machine's {vcpus} vCPUs), sampled every second"
    )


def accelerator_source(metrics: dict[str, Any]) -> str:
    terms = "input_wait_fraction" + (
        " - host_overhead_fraction" if metrics.get("host_overhead_fraction") is not None else ""
    )
    return (
        "the sandbox, on this machine: no accelerator here; the trainer's busy share from its "
        f"metrics.json, 1 - {terms}, one figure for the whole run"
    )


def busy_share(metrics: dict[str, Any] | None) -> float | None:
    """1 - input_wait_fraction - host_overhead_fraction (absent: 0) from a metrics.json; None
    when it has no input_wait_fraction."""
    if not isinstance(metrics, dict):
        return None
    try:
        waited = float(metrics["input_wait_fraction"])
        overhead = float(metrics.get("host_overhead_fraction") or 0.0)
    except (KeyError, TypeError, ValueError):
        return None
    return round(min(1.0, max(0.0, 1.0 - waited - overhead)), 4)


def record(monitoring: Any, project: str, job_id: str, result: Any) -> None:
    """Give `monitoring` (a FakeMonitoring) the series of the local run `result` (a LocalResult)
    of the job `job_id`."""
    vcpus = os.cpu_count() or 1
    for replica, samples in (getattr(result, "cpu", None) or {}).items():
        if samples:
            monitoring.record(
                project, job_id, CPU, replica, list(samples), labels={SOURCE_LABEL: cpu_source(vcpus)}
            )
    busy = busy_share(result.metrics)
    if busy is not None and result.replicas:
        chief = result.replicas[0]
        samples = (result.cpu or {}).get(chief) or []
        at = samples[-1][0] if samples else time.time()
        monitoring.record(
            project,
            job_id,
            ACCELERATOR,
            chief,
            [(at, busy)],
            labels={SOURCE_LABEL: accelerator_source(result.metrics)},
        )
