"""`endpoints` and `undeploy` for people (docs/contract.md section 5): each endpoint's
deployed models as a table (model@version, traffic, machines, replicas, the hourly price of their
nodes), and what an undeploy did. The figures are vertex.endpoints' records; only the words are
here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vertex_trainer.deployment.deploy_text import dry_run_text
from vertex_trainer.redact import shown_name
from vertex_trainer.vertex.model_deploy import describe_split

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.vertex.deployed import DeployedModelView, EndpointView, Undeployment

__all__ = ["endpoints_text", "undeploy_dry_run_text", "undeployment_text"]


def endpoints_text(found: list[EndpointView], project: str, region: str, named: str | None = None) -> str:
    """`endpoints`: per endpoint, a row per deployed model (most traffic first), the endpoint's
    hourly total, and why a price is unknown; a sentence when there is nothing.

    Args:
        found: the endpoints (api.list_endpoints).
        project, region: where they were looked for.
        named: the endpoint asked for, if one was."""
    if not found:
        if named:
            return f"no endpoint {named!r} in {project} / {region}: nothing is deployed there"
        return f"no endpoints in {project} / {region}"
    blocks = [_endpoint_text(e) for e in found]
    return "\n\n".join(blocks)


def _endpoint_text(e: EndpointView) -> str:
    # Display names are anyone's in the project, and Vertex AI takes any UTF-8: shown escaped.
    lines = [f"endpoint {shown_name(e.display_name or '-')}  {e.name}"]
    if not e.deployed:
        lines.append("  no deployed models (an endpoint without models has no nodes and costs nothing)")
        return "\n".join(lines)
    rows: list[tuple[str, ...]] = [("DEPLOYED MODEL", "MODEL", "TRAFFIC", "MACHINE", "REPLICAS", "USD/HOUR")]
    rows += [_row(d) for d in e.deployed]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines += [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows
    ]
    total = e.hourly
    reasons = sorted({d.node.reason for d in e.deployed if d.node.reason and d.hourly.hourly is None})
    if total.hourly is not None:
        lines.append(f"  hourly   {total.hourly:,.2f} USD at min replicas ({e.price_basis})")
    else:
        lines.append("  hourly   unknown: " + "; ".join(reasons))
    idle = [d for d in e.deployed if d.traffic == 0]
    if idle:
        ids = " ".join(d.id for d in idle)
        lines.append(
            f"  note     {len(idle)} deployed model(s) take no traffic and their nodes still bill: "
            f"vertex-trainer undeploy {e.name} ID ({ids})"
        )
    return "\n".join(lines)


def _row(d: DeployedModelView) -> tuple[str, ...]:
    named = d.model_display_name or d.display_name or d.model.rsplit("/", 1)[-1]
    name = f"{shown_name(named)}@{d.model_version}"
    machine = d.machine_type or "automatic"
    if d.accelerator_type:
        machine += f" + {d.accelerator_count} x {d.accelerator_type}"
    replicas = (
        str(d.min_replicas) if d.min_replicas == d.max_replicas else f"{d.min_replicas}-{d.max_replicas}"
    )
    low, high = d.hourly.hourly, d.hourly_at_max.hourly
    if low is None:
        price = "unknown"
    elif high is not None and high != low:
        price = f"{low:,.2f} (up to {high:,.2f})"
    else:
        price = f"{low:,.2f}"
    return (d.id, name, f"{d.traffic}%", machine, replicas, price)


def undeployment_text(u: Undeployment) -> str:
    """What `undeploy` did: the version taken off, where its traffic went, what is left."""
    if not u.undeployed:
        return (
            f"deployed model {u.deployed_model_id} is not on {u.endpoint} (already undeployed): "
            "nothing to undeploy"
        )
    named = shown_name(u.display_name) + ", " if u.display_name else ""
    lines = [
        f"undeployed {u.model}@{u.model_version} ({named}"
        f"deployed model {u.deployed_model_id}): its nodes stopped",
        f"endpoint   {u.endpoint}",
    ]
    if u.moved:
        lines.append("moved      its traffic to the others in their ratio")
    if u.remaining:
        lines.append(f"traffic    {describe_split(u.traffic_split, new='', label='')}")
    else:
        lines.append(
            "left       no deployed models: the endpoint stays, and costs nothing without them "
            "(gcloud ai endpoints delete removes it)"
        )
    return "\n".join(lines)


def undeploy_dry_run_text(plan: dict[str, Any]) -> str:
    """`undeploy --dry-run`: the look-up and the undeployModel request."""
    return dry_run_text(plan, "undeploy would look for the endpoint and the deployed model, then:")
