"""Endpoints: what is deployed on them, and taking a deployed model off (docs/contract.md
section 5).

- `undeploy(client, endpoint, deployed_model_id)` looks before it acts: a deployed model that is
  not on the endpoint is already gone, and nothing is sent. One that takes traffic goes only
  where the others can take its share: they get it in proportion to theirs (the trafficSplit
  Vertex AI requires with such an undeployModel); one whose traffic has nowhere to go (the others
  take none) is refused, exit 2. The last one leaves the endpoint empty (an endpoint without
  models has no nodes and costs nothing). An answer lost in transit is checked (the endpoint's
  pending operations followed to their end, then the endpoint read) before another try.
- `retire(client, endpoint, keep)`: after a deploy whose version took all the traffic, every
  other deployed model left at 0% is undeployed, so its nodes stop billing; never the one kept,
  and nothing while the kept one does not take all the traffic.
- `change(client, endpoint, step, send, landed, ...)`: one deployModel or undeployModel (deploy.py
  sends its deploy through it), sent once and followed to its end, an answer lost in transit
  checked as above.
- `describe(client, endpoint, book)`: an endpoint as typed records, each deployed model with its
  machines and the hourly list price of its nodes (pricing.serving), for `endpoints`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp.http import Transient
from vertex_trainer.log import Log, silent
from vertex_trainer.pricing import Price, PriceBook
from vertex_trainer.pricing.serving import node_price
from vertex_trainer.settings import PollPolicy
from vertex_trainer.vertex.models import RegistryClient

ENDPOINT_NAME = re.compile(r"^projects/[^/]+/locations/(?P<region>[^/]+)/endpoints/[^/]+$")


@dataclass(frozen=True)
class Undeployment:
    """One deployed model taken off an endpoint (or found already gone)."""

    endpoint: str
    deployed_model_id: str
    model: str = ""  # the Model resource; "" when it was already gone
    model_version: str = ""
    display_name: str = ""  # the deployed model's
    undeployed: bool = True  # False: it was not on the endpoint, nothing was sent
    traffic_split: dict[str, int] = field(default_factory=dict)  # the endpoint's, after
    moved: dict[str, int] | None = None  # the split sent when its traffic went to the others
    remaining: int = 0  # deployed models left on the endpoint

    def to_dict(self) -> dict[str, Any]:
        """`undeploy --output json`: every field, by name."""
        return asdict(self)

    def summary(self) -> dict[str, str]:
        """What `deploy --output json` lists under "undeployed"."""
        return {
            "deployed_model_id": self.deployed_model_id,
            "model": self.model,
            "model_version": self.model_version,
        }


@dataclass(frozen=True)
class DeployedModelView:
    """One deployed model as `endpoints` shows it; `node` is the hourly price of one node."""

    id: str
    display_name: str
    model: str
    model_display_name: str
    model_version: str
    traffic: int
    machine_type: str | None  # None: automatic or shared resources (not this tool's deploys)
    accelerator_type: str | None
    accelerator_count: int
    min_replicas: int
    max_replicas: int
    create_time: str
    node: Price

    @property
    def hourly(self) -> Price:
        """What its nodes cost an hour at min_replicas (always running, traffic or not)."""
        return self.node.times(self.min_replicas)

    @property
    def hourly_at_max(self) -> Price:
        return self.node.times(self.max_replicas)

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployed_model_id": self.id,
            "display_name": self.display_name,
            "model": self.model,
            "model_display_name": self.model_display_name,
            "model_version": self.model_version,
            "traffic": self.traffic,
            "machine_type": self.machine_type,
            "accelerator_type": self.accelerator_type,
            "accelerator_count": self.accelerator_count,
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "create_time": self.create_time,
            "hourly": self.hourly.hourly,
            "hourly_at_max": self.hourly_at_max.hourly,
            "price_note": self.node.reason,
        }


@dataclass(frozen=True)
class EndpointView:
    """An endpoint and what is deployed on it; `price_basis` says where prices come from."""

    name: str
    display_name: str
    traffic_split: dict[str, int]
    deployed: tuple[DeployedModelView, ...]
    price_basis: str

    @property
    def hourly(self) -> Price:
        """All its deployed models' nodes at min_replicas; None when one price is unknown."""
        total = Price(0.0)
        for d in self.deployed:
            total = total.plus(d.hourly)
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "endpoint": self.name,
            "display_name": self.display_name,
            "traffic_split": self.traffic_split,
            "deployed_models": [d.to_dict() for d in self.deployed],
            "hourly": self.hourly.hourly,
            "price_basis": self.price_basis,
        }


def remaining_split(split: dict[str, int], removed: str) -> dict[str, int]:
    """The trafficSplit once `removed` goes: the others' shares scaled to 100 in their ratio
    (largest remainders), or {} when none of them takes traffic.

    Args:
        split: the endpoint's trafficSplit (deployed model id -> percent).
        removed: the deployed model id that goes.
    Returns:
        The new split, integers summing to 100, or {}."""
    others = {k: int(v) for k, v in split.items() if k != removed and int(v) > 0}
    return apportion(others, 100) if others else {}


def apportion(shares: dict[str, int], total: int) -> dict[str, int]:
    """`total` percent shared in the ratio of `shares` (positive), in integers summing to it:
    each gets its exact share rounded down, and the largest remainders the percents left over
    (ties to the smaller key). Those that get none are left out.

    Args:
        shares: key -> its current share (positive).
        total: the percent to share out.
    Returns:
        key -> its share of `total`."""
    whole = sum(shares.values())
    exact = {k: total * v / whole for k, v in shares.items()}
    out = {k: int(x) for k, x in exact.items()}
    for k in sorted(exact, key=lambda k: (out[k] - exact[k], k))[: total - sum(out.values())]:
        out[k] += 1
    return {k: v for k, v in out.items() if v}


def resolve(client: RegistryClient, ref: str) -> dict[str, Any] | None:
    """The endpoint a person named: its resource name, its id, or its display name (the oldest
    of that name). None when there is none.

    Args:
        client: the project and region's client.
        ref: projects/P/locations/R/endpoints/ID, an ID, or a display name.
    Returns:
        The Endpoint resource, or None."""
    found = resolve_all(client, ref)
    return found[0] if found else None


def resolve_all(client: RegistryClient, ref: str) -> list[dict[str, Any]]:
    """Every endpoint `ref` names, oldest first: several only when several endpoints share the
    display name (Vertex AI allows it; one made in the console beside deploy's, say), so that
    `endpoints` shows each and `undeploy` acts on the one holding the model (pick)."""
    if ENDPOINT_NAME.match(ref):
        one = client.endpoint_or_none(ref)
        return [one] if one is not None else []
    named = client.find_endpoints(ref)
    if named:
        return named
    if re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", ref):  # an id (a number, or chosen at create)
        one = client.endpoint_or_none(f"{client.parent}/endpoints/{ref}")
        return [one] if one is not None else []
    return []


def pick(found: list[dict[str, Any]], deployed_model_id: str) -> dict[str, Any]:
    """Of the endpoints one name resolved to (resolve_all, not empty), the one that holds the
    deployed model; the oldest when none does (the model is gone: nothing to undeploy)."""
    holding = [e for e in found if str(deployed_model_id) in _ids(e)]
    return (holding or found)[0]


def undeploy(
    client: RegistryClient,
    endpoint: str,
    deployed_model_id: str,
    *,
    poll: PollPolicy,
    timeout: float | None = 3600.0,
    log: Log = silent,
    sleep: Callable[[float], None] = time.sleep,
) -> Undeployment:
    """Take one deployed model off an endpoint (see the module docstring). Idempotent.

    Args:
        client: the endpoint's project and region.
        endpoint: the endpoint's resource name.
        deployed_model_id: the deployed model's id on it.
        poll, timeout, log, sleep: how the operation is followed.
    Returns:
        The Undeployment (undeployed False when it was not there).
    Raises:
        UserError: it takes traffic and the others take none (exit 2; nothing sent)."""
    current = client.get_endpoint(endpoint)
    deployed = {str(d["id"]): d for d in current.get("deployedModels") or []}
    target = deployed.get(str(deployed_model_id))
    split = traffic_of(current)
    if target is None:
        # a mistyped id reads as "already gone" (exit 0): name what is there, billing, to compare
        there = ", ".join(
            f"{k} ({d.get('displayName') or model_of(d)[0].rsplit('/', 1)[-1]})" for k, d in deployed.items()
        )
        log(
            f"undeploy: deployed model {deployed_model_id} is not on {endpoint}: nothing to undeploy"
            + (f"; its deployed models (their nodes bill): {there}" if there else "")
        )
        return Undeployment(
            endpoint, str(deployed_model_id), undeployed=False, traffic_split=split, remaining=len(deployed)
        )
    model, version = model_of(target)
    others = [k for k in deployed if k != target["id"]]
    share = split.get(target["id"], 0)
    moved = None
    if share and others:
        moved = remaining_split(split, target["id"])
        if not moved:
            raise UserError(
                f"deployed model {target['id']} ({model}@{version}) takes {share}% of the traffic of "
                f"{endpoint}, and the other deployed models ({', '.join(others)}) take none: "
                "its traffic has nowhere to go; nothing was sent",
                hint=f"give the traffic to the one that should serve first (gcloud ai endpoints update "
                f"{endpoint.rsplit('/', 1)[-1]} --region={client.region} --traffic-split={others[0]}=100), "
                "or undeploy the others first",
            )
        log(
            f"undeploy: deployed model {target['id']} takes {share}%; it goes to the others in "
            f"their ratio: " + ", ".join(f"{v}% to {k}" for k, v in moved.items())
        )
    log(f"undeploy: {model}@{version} (deployed model {target['id']}) from {endpoint}")
    change(
        client,
        endpoint,
        "undeploy",
        lambda: client.undeploy_once(endpoint, target["id"], moved),
        lambda now: target["id"] not in _ids(now),
        what="undeploying the model",
        earlier="an earlier operation",
        poll=poll,
        timeout=timeout,
        log=log,
        sleep=sleep,
    )
    after = client.get_endpoint(endpoint)
    if target["id"] in _ids(after):
        raise ServiceError(
            f"undeploy of deployed model {target['id']} finished but {endpoint} still lists it",
            hint="see the endpoint in the Google Cloud console",
        )
    return Undeployment(
        endpoint,
        target["id"],
        model,
        version,
        str(target.get("displayName") or ""),
        undeployed=True,
        traffic_split=traffic_of(after),
        moved=moved,
        remaining=len(_ids(after)),
    )


def retire(
    client: RegistryClient,
    endpoint: dict[str, Any],
    keep: str,
    *,
    poll: PollPolicy,
    timeout: float | None = 3600.0,
    log: Log = silent,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Undeployment, ...]:
    """Undeploy every deployed model but `keep` that takes no traffic, once `keep` takes it all.

    Args:
        client: the endpoint's project and region.
        endpoint: the Endpoint resource, read after `keep` was deployed.
        keep: the deployed model id of the version just deployed.
        poll, timeout, log, sleep: how each operation is followed.
    Returns:
        What was undeployed, in the endpoint's order (empty when nothing was left at 0%)."""
    split = traffic_of(endpoint)
    if split.get(keep, 0) != 100:  # something else still serves: leave the endpoint as it is
        return ()
    idle = [str(d["id"]) for d in endpoint.get("deployedModels") or [] if str(d["id"]) != keep]
    if idle:
        log(
            f"undeploy: {len(idle)} other deployed model(s) left at 0% on {endpoint['name']}: "
            "their nodes stop"
        )
    return tuple(
        undeploy(client, endpoint["name"], i, poll=poll, timeout=timeout, log=log, sleep=sleep) for i in idle
    )


def describe(client: RegistryClient, endpoint: dict[str, Any], book: PriceBook) -> EndpointView:
    """An endpoint as `endpoints` shows it: each deployed model with its Model's display name
    (one read per model), its machines and the list price of its nodes.

    Args:
        client: the endpoint's project and region.
        endpoint: the Endpoint resource.
        book: the prices.
    Returns:
        The EndpointView."""
    split = traffic_of(endpoint)
    region = (m["region"] if (m := ENDPOINT_NAME.match(endpoint.get("name", ""))) else None) or client.region
    names: dict[str, str] = {}
    views = []
    for d in endpoint.get("deployedModels") or []:
        model, version = model_of(d)
        if model and model not in names:
            names[model] = _display_name(client, model) or str(d.get("displayName") or "")
        # dedicatedResources (this tool's deploys), or automaticResources (AutoML's): replicas alike.
        resources = d.get("dedicatedResources") or d.get("automaticResources") or {}
        machine = resources.get("machineSpec") or {}
        machine_type = machine.get("machineType")
        accelerator = machine.get("acceleratorType")
        count = int(machine.get("acceleratorCount") or 0)
        low = int(resources.get("minReplicaCount") or 1)
        high = max(int(resources.get("maxReplicaCount") or 0), low)
        node = (
            node_price(
                book,
                machine_type=machine_type,
                accelerator_type=accelerator,
                accelerator_count=count,
                region=region,
            )
            if machine_type
            else Price(None, "no dedicated machines (automatic or shared resources): not priced here")
        )
        views.append(
            DeployedModelView(
                id=str(d["id"]),
                display_name=str(d.get("displayName") or ""),
                model=model,
                model_display_name=names.get(model, ""),
                model_version=version,
                traffic=split.get(str(d["id"]), 0),
                machine_type=machine_type,
                accelerator_type=accelerator,
                accelerator_count=count,
                min_replicas=low,
                max_replicas=high,
                create_time=str(d.get("createTime") or ""),
                node=node,
            )
        )
    views.sort(key=lambda v: (-v.traffic, v.create_time, v.id))
    return EndpointView(
        name=endpoint["name"],
        display_name=str(endpoint.get("displayName") or ""),
        traffic_split=split,
        deployed=tuple(views),
        price_basis=f"Vertex AI prediction list prices, {book.where} (as of {book.as_of})",
    )


def change(
    client: RegistryClient,
    endpoint: str,
    step: str,
    send: Callable[[], dict[str, Any]],
    landed: Callable[[dict[str, Any]], bool],
    *,
    what: str,
    earlier: str,
    **wait: Any,
) -> None:
    """Send one change of an endpoint (deployModel, undeployModel) and follow its operation to
    its end, sending it once: an answer lost in transit is checked before another try (the
    endpoint's unfinished operations followed to their end, since a committed change shows on
    the endpoint only then; then the endpoint read again).

    Args:
        client: the endpoint's project and region.
        endpoint: the endpoint's resource name.
        step: "deploy" or "undeploy", for the log lines and the retry budget.
        send: one attempt (`client.deploy_once(...)`); returns the Operation.
        landed: whether the endpoint, read again, shows the change made.
        what: the operation's progress lines ("deploying the model").
        earlier: an earlier operation's progress lines ("an earlier deploy").
        **wait: poll, timeout, log, sleep: how the operations are followed."""
    log = wait["log"]
    budget = client.api.budget()
    while True:
        try:
            operation = send()
            break
        except Transient as exc:  # committed or not? look before trying again
            log(f"{step}: {exc}; checking whether the model was {step}ed")
            for pending in client.operations(endpoint):
                if not pending.get("done"):
                    try:
                        client.wait(pending, earlier, **wait)
                    except ServiceError as failed:
                        log(f"{step}: an earlier operation failed ({failed.message})")
            if landed(client.get_endpoint(endpoint)):
                return
            budget.backoff(step, str(exc))
    client.wait(operation, what, **wait)


def _display_name(client: RegistryClient, model: str) -> str:
    try:
        return str(client.get_model(model).get("displayName") or "")
    except ServiceError:
        return ""  # deleted since, or not readable: the deployed model's own name stands in


def model_of(deployed: dict[str, Any]) -> tuple[str, str]:
    """(the Model resource, its version id) a deployed model serves."""
    ref, _, ref_version = str(deployed.get("model", "")).partition("@")
    return ref, str(deployed.get("modelVersionId") or ref_version)


def _ids(endpoint: dict[str, Any]) -> list[str]:
    return [str(d["id"]) for d in endpoint.get("deployedModels") or []]


def traffic_of(endpoint: dict[str, Any]) -> dict[str, int]:
    """An Endpoint resource's trafficSplit: deployed model id -> percent (integers)."""
    return {str(k): int(v) for k, v in (endpoint.get("trafficSplit") or {}).items()}
