"""Endpoints (docs/contract.md section 5): what is deployed, with what its nodes cost an
hour, and taking one deployed model off."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from vertex_trainer.api.core import _stderr, settings_from_env
from vertex_trainer.errors import UserError
from vertex_trainer.log import Log
from vertex_trainer.pricing import load_snapshot
from vertex_trainer.settings import Settings
from vertex_trainer.vertex import deployed as eps
from vertex_trainer.vertex.models import RegistryClient

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.vertex.deployed import EndpointView, Undeployment

__all__ = ["list_endpoints", "undeploy"]

_NAME = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/endpoints/[^/]+$")


def list_endpoints(
    project: str | None = None,
    region: str | None = None,
    *,
    endpoint: str | None = None,
    settings: Settings | None = None,
) -> list[EndpointView]:
    """The endpoints of a project and region (or the one named), each with its deployed models:
    model and version, traffic, machines, replicas, and the hourly list price of their nodes
    (None with the reason where the price snapshot has no prediction price).

    Args:
        project: the Google Cloud project (not needed when ``endpoint`` is a resource name).
        region: the Vertex AI region (idem).
        endpoint: only this one: projects/P/locations/R/endpoints/ID, an ID or a display name.
        settings: the process settings (default: read from the environment).

    Returns:
        EndpointView records, oldest endpoint first; empty when there is none (or none of that
        name).
    """
    client = _client(endpoint, project, region, settings)
    if endpoint is not None:
        resources = eps.resolve_all(client, endpoint)  # all of a display name several share
    else:
        resources = sorted(client.list_endpoints(), key=lambda e: (e.get("createTime", ""), e["name"]))
    book = load_snapshot()
    return [eps.describe(client, e, book) for e in resources]


def undeploy(
    endpoint: str,
    deployed_model_id: str,
    *,
    project: str | None = None,
    region: str | None = None,
    dry_run: bool = False,
    timeout: float | None = None,
    log: Log | None = None,
    settings: Settings | None = None,
) -> Undeployment | dict:
    """Take one deployed model off an endpoint; its nodes stop billing. Idempotent: one that is
    not there any more is said so (``undeployed`` False) and nothing is sent. One that takes
    traffic goes only when the others can take it: they get its share in their ratio. The last
    one leaves the endpoint empty (it stays, and costs nothing without models).

    Args:
        endpoint: projects/P/locations/R/endpoints/ID, or an ID or display name with
            ``project`` and ``region``.
        deployed_model_id: the deployed model's id on the endpoint (``endpoints`` lists them).
        project: the Google Cloud project (not needed with a resource name).
        region: the Vertex AI region (idem).
        dry_run: return the requests it would send, as a dict; no connection is opened.
        timeout: seconds to wait for the undeploy (default: an hour).
        log: where progress lines go (default: stderr).
        settings: the process settings (default: read from the environment).

    Returns:
        the Undeployment (endpoint, deployed model, model@version, the split after, what moved),
        or with ``dry_run`` a dict ``{"requests": [...]}``.

    Raises:
        UserError: a deployed model id that is no number, an endpoint that does not exist, or a
            deployed model whose traffic has nowhere to go (exit 2; nothing sent).
    """
    if not re.fullmatch(r"[0-9]{1,19}", deployed_model_id):
        raise UserError(
            f"deployed model id {deployed_model_id!r} is not one: Vertex AI's are numbers",
            hint="`vertex-trainer endpoints` lists each endpoint's deployed model ids",
        )
    settings = settings or settings_from_env()
    log = log or _stderr
    client = _client(endpoint, project, region, settings)
    if dry_run:
        base = client.api.url("v1")
        name = endpoint if _NAME.match(endpoint) else f"{client.parent}/endpoints/ENDPOINT_ID"
        requests: list[dict] = []
        if not _NAME.match(endpoint):
            requests.append(
                {
                    "method": "GET",
                    "url": f"{base}/{client.parent}/endpoints",
                    "params": {"filter": f'display_name="{endpoint}"'},
                }
            )
        requests += [
            {"method": "GET", "url": f"{base}/{name}"},
            {
                "method": "POST",
                "url": f"{base}/{name}:undeployModel",
                "body": {"deployedModelId": deployed_model_id},
                "note": "when it takes traffic, with a trafficSplit giving its share to the others "
                "in their ratio; nothing is sent when it is not on the endpoint",
            },
        ]
        return {
            "dry_run": True,
            "endpoint": endpoint,
            "deployed_model_id": deployed_model_id,
            "requests": requests,
        }
    found = eps.resolve_all(client, endpoint)
    if not found:
        raise UserError(
            f"no endpoint {endpoint!r} in {client.project} / {client.region}; nothing was sent",
            hint=f"list them: vertex-trainer endpoints --project {client.project} --region {client.region}",
        )
    target = eps.pick(found, deployed_model_id)  # of several of one display name, the one holding it
    return eps.undeploy(
        client, target["name"], deployed_model_id, poll=settings.poll, timeout=timeout or 3600.0, log=log
    )


def _client(endpoint: str | None, project: str | None, region: str | None, settings: Settings | None):
    """The client of the endpoint's project and region: a resource name's own, else the ones
    given (else the settings' defaults)."""
    settings = settings or settings_from_env()
    m = _NAME.match(endpoint or "")
    project, region = (
        (m["project"], m["region"]) if m else (project or settings.project, region or settings.region)
    )
    if not project:
        raise UserError("no project: pass --project (or a spec) or set $GOOGLE_CLOUD_PROJECT")
    if not region:
        raise UserError("no region: pass --region (e.g. --region us-central1) or a spec")
    return RegistryClient(project, region, settings=settings)
