"""`deploy` for people (docs/contract.md section 5): the requests a dry run would send, and the
deployment that serves (model, endpoint, traffic split, the versions it undeployed)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from vertex_trainer.vertex.model_deploy import describe_split

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.vertex.model_deploy import Deployment

__all__ = ["billing_note", "deployment_text", "dry_run_text"]

_LOOKUPS = "deploy would look for the model and endpoint, then:"


def dry_run_text(plan: dict[str, Any], lookups: str = _LOOKUPS) -> str:
    """A dry run (`deploy --dry-run`, `undeploy --dry-run`): the requests after the look-ups,
    each with its JSON body and when it is sent, then what deploy would undeploy."""
    lines = [f"# dry run: nothing was sent. {lookups}"]
    for r in plan["requests"]:
        if "note" in r:
            lines.append(f"# {r['note']}")
        lines.append(f"{r['method']} {r['url']}")
        if "body" in r:
            lines.append(json.dumps(r["body"], indent=2))
    if "undeploys" in plan:
        lines.append(f"# undeploys: {plan['undeploys']}")
    return "\n".join(lines)


def deployment_text(result: Deployment) -> str:
    """The deployed (or adopted) version: model@version, endpoint, deployed model id, who gets
    the traffic ("100% to this version", or its share beside the versions already there), and
    each version undeployed after it took all the traffic."""
    verb = "already deployed" if result.adopted else "deployed"
    split = describe_split(result.traffic_split, new=result.deployed_model_id, label="this version")
    lines = [
        f"{verb:9} {result.model}@{result.model_version}",
        f"endpoint  {result.endpoint}",
        f"model id  {result.deployed_model_id}",
        f"traffic   {split}",
    ]
    lines += [
        f"undeployed {u.model}@{u.model_version} ({u.display_name + ', ' if u.display_name else ''}"
        f"deployed model {u.deployed_model_id}): it took no traffic; its nodes stopped"
        for u in result.undeployed
        if u.undeployed
    ]
    return "\n".join(lines)


def billing_note(result: Deployment) -> str:
    """What a careless user forgets: a deployed model's nodes bill by the hour for as long as it
    stays deployed, requests or not; the commands that show their price and take it off."""
    return (
        f"note: deployed model {result.deployed_model_id}'s nodes bill by the hour while it stays "
        f"deployed, whether or not it gets requests (their price: vertex-trainer endpoints "
        f"--endpoint {result.endpoint}); when done: vertex-trainer undeploy {result.endpoint} "
        f"{result.deployed_model_id}"
    )
