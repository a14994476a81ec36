"""`resources` for people (docs/contract.md section 11): persistent resources and their pools."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vertex_trainer.vertex.resources import describe_pool

__all__ = ["resources_text"]


def resources_text(found: Iterable[dict[str, Any]], project: str, region: str) -> str:
    """`resources list`: each resource's id and state, then one line per pool ("a3-highgpu-8g
    (8 x NVIDIA_H100_80GB), pd-ssd 100 GB, 2 replicas"), then what it bills per hour when the
    resource carries "hourly" (api.resource_hourly) and the command that deletes it; a sentence
    when there are none."""
    lines = []
    for r in found:
        name = str(r.get("name", ""))
        lines.append(f"{name.rsplit('/', 1)[-1]}  {r.get('state')}")
        lines += [f"  {pool.get('id', '?')}: {describe_pool(pool)}" for pool in r.get("resourcePools") or []]
        if "hourly" in r:
            hourly = r["hourly"]
            price = "unknown (not in the price snapshot)"
            if hourly is not None:
                price = f"about {hourly:,.2f} USD/h at list price"
            lines.append(
                f"  bills    {price} while it exists, whether or not a job runs on it; "
                f"when done: vertex-trainer resources delete {name}"
            )
    return "\n".join(lines) if lines else f"no persistent resources in {project} / {region}"
