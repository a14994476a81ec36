"""`deploy` for people (docs/contract.md section 5): the requests a dry run would send, and the
deployment that serves (model, endpoint, traffic split)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from vertex_trainer.vertex.deploy import describe_split

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.vertex.deploy import Deployment

__all__ = ["deployment_text", "dry_run_text"]


def dry_run_text(plan: dict[str, Any]) -> str:
    """`deploy --dry-run`: the requests after the look-ups, each with its JSON body."""
    lines = ["# dry run: nothing was sent. deploy would look for the model and endpoint, then:"]
    for r in plan["requests"]:
        lines.append(f"{r['method']} {r['url']}")
        if "body" in r:
            lines.append(json.dumps(r["body"], indent=2))
    return "\n".join(lines)


def deployment_text(result: Deployment) -> str:
    """The deployed (or adopted) version: model@version, endpoint, deployed model id and who
    gets the traffic ("100% to this version", or its share beside the versions already there)."""
    verb = "already deployed" if result.adopted else "deployed"
    split = describe_split(result.traffic_split, new=result.deployed_model_id, label="this version")
    return (
        f"{verb:9} {result.model}@{result.model_version}\nendpoint  {result.endpoint}\n"
        f"model id  {result.deployed_model_id}\ntraffic   {split}"
    )
