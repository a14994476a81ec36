"""`resources` for people (docs/contract.md section 11): persistent resources and their pools."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vertex_trainer.vertex.resources import describe_pool

__all__ = ["resources_text"]


def resources_text(found: Iterable[dict[str, Any]], project: str, region: str) -> str:
    """`resources list`: each resource's id and state, then one line per pool ("a3-highgpu-8g
    (8 x NVIDIA_H100_80GB), pd-ssd 100 GB, 2 replicas"); a sentence when there are none."""
    lines = []
    for r in found:
        lines.append(f"{r.get('name', '').rsplit('/', 1)[-1]}  {r.get('state')}")
        lines += [f"  {pool.get('id', '?')}: {describe_pool(pool)}" for pool in r.get("resourcePools") or []]
    return "\n".join(lines) if lines else f"no persistent resources in {project} / {region}"
