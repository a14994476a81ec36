"""Vertex AI Model Registry and Endpoints over the one HTTP layer: find, upload, create, deploy,
undeploy, and following their long-running operations.

Plain REST resources in and out (dicts in the API's JSON form); the idempotent orchestration of
"register this job's model and serve it" is in deploy.py, of "undeploy this one" in endpoints.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from vertex_trainer.gcp.http import decode
from vertex_trainer.gcp.lro import wait_operation
from vertex_trainer.log import Log
from vertex_trainer.settings import PollPolicy, Settings
from vertex_trainer.vertex.service import vertex_api

__all__ = ["RegistryClient", "vertex_api"]


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


class RegistryClient:
    """Models and endpoints of one project and region."""

    def __init__(
        self,
        project: str,
        region: str,
        *,
        settings: Settings | None = None,
        log: Log | None = None,
        session: Any = None,
    ):
        self.project, self.region = project, region
        self.settings = settings or Settings()
        self.api = vertex_api(project, region, self.settings, log=log, session=session)

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def _list(self, op: str, path: str, key: str, filter: str | None = None) -> list[dict[str, Any]]:
        return self.api.list(op, f"v1/{path}", items=key, params={"filter": filter} if filter else None)

    # -- models --------------------------------------------------------------------------------
    def find_model(self, display_name: str) -> dict[str, Any] | None:
        """The model (its default version) with this display name; the oldest if several."""
        found = self._list(
            "list models", f"{self.parent}/models", "models", f'display_name="{_quote(display_name)}"'
        )
        return min(found, key=lambda m: m.get("createTime", "")) if found else None

    def model_versions(self, model: str, filter: str | None = None) -> list[dict[str, Any]]:
        return self._list("list model versions", f"{model}:listVersions", "models", filter)

    def get_model(self, ref: str) -> dict[str, Any]:
        return self.api.json("get model", "GET", f"v1/{ref}")

    def upload_once(
        self, model: dict[str, Any], *, parent_model: str | None = None, model_id: str | None = None
    ) -> dict[str, Any]:
        """models:upload, one attempt (the caller checks for a committed upload before retrying).
        Returns the Operation."""
        body: dict[str, Any] = {"model": model}
        if parent_model:
            body["parentModel"] = parent_model
        if model_id:
            body["modelId"] = model_id
        return decode(self.api.send("upload", "POST", f"v1/{self.parent}/models:upload", json=body))

    # -- endpoints -----------------------------------------------------------------------------
    def find_endpoint(self, display_name: str) -> dict[str, Any] | None:
        """The oldest endpoint with this display name (the one deploy deploys to), or None."""
        found = self.find_endpoints(display_name)
        return found[0] if found else None

    def find_endpoints(self, display_name: str) -> list[dict[str, Any]]:
        """Every endpoint with this display name (Vertex AI does not keep them unique), oldest first."""
        found = self._list(
            "list endpoints",
            f"{self.parent}/endpoints",
            "endpoints",
            f'display_name="{_quote(display_name)}"',
        )
        return sorted(found, key=lambda e: (e.get("createTime", ""), e.get("name", "")))

    def get_endpoint(self, name: str) -> dict[str, Any]:
        return self.api.json("get endpoint", "GET", f"v1/{name}")

    def endpoint_or_none(self, name: str) -> dict[str, Any] | None:
        """The endpoint, or None when the service says it does not exist (404)."""
        response = self.api.call("get endpoint", "GET", f"v1/{name}", allow=(404,))
        return None if response.status_code == 404 else decode(response)

    def list_endpoints(self) -> list[dict[str, Any]]:
        """Every endpoint of the project and region, with its deployed models and traffic split."""
        return self._list("list endpoints", f"{self.parent}/endpoints", "endpoints")

    def create_endpoint(
        self, endpoint: dict[str, Any], endpoint_id: str | None = None
    ) -> dict[str, Any] | None:
        """endpoints.create. With a client-chosen id a repeated create answers ALREADY_EXISTS, so
        it is retried safely; returns the Operation, or None when the id already exists."""
        params = {"endpointId": endpoint_id} if endpoint_id else None
        response = self.api.call(
            "create endpoint",
            "POST",
            f"v1/{self.parent}/endpoints",
            params=params,
            json=endpoint,
            allow=(409,) if endpoint_id else (),
        )
        return None if response.status_code == 409 else decode(response)

    def deploy_once(
        self, endpoint: str, deployed_model: dict[str, Any], traffic_split: dict[str, int]
    ) -> dict[str, Any]:
        """endpoints.deployModel, one attempt. Returns the Operation."""
        body = {"deployedModel": deployed_model, "trafficSplit": traffic_split}
        return decode(self.api.send("deploy", "POST", f"v1/{endpoint}:deployModel", json=body))

    def undeploy_once(
        self, endpoint: str, deployed_model_id: str, traffic_split: dict[str, int] | None = None
    ) -> dict[str, Any]:
        """endpoints.undeployModel, one attempt. `traffic_split` (the remaining deployed models'
        shares, summing to 100) is required by the service when the one undeployed takes traffic
        and others remain. Returns the Operation."""
        body: dict[str, Any] = {"deployedModelId": deployed_model_id}
        if traffic_split:
            body["trafficSplit"] = traffic_split
        return decode(self.api.send("undeploy", "POST", f"v1/{endpoint}:undeployModel", json=body))

    def wait(
        self,
        operation: dict[str, Any],
        what: str,
        *,
        poll: PollPolicy,
        timeout: float | None,
        log: Log,
        sleep: Callable[[float], None] = time.sleep,
    ) -> dict[str, Any]:
        """Follow a long-running operation to its end, a progress line per poll; returns its
        response (a failed operation is ServiceError, exit 3, with the service's message)."""
        started = time.monotonic()

        def progress(op: dict[str, Any]) -> None:
            if not op.get("done"):
                log(f"{what}: still running ({time.monotonic() - started:.0f}s)")

        return wait_operation(
            self.api, operation, poll=poll, what=what, timeout=timeout, on_poll=progress, sleep=sleep
        )

    def operations(self, resource: str) -> list[dict[str, Any]]:
        """The long-running operations of a model or endpoint (done or not)."""
        return self._list("list operations", f"{resource}/operations", "operations")

    def predict(
        self, endpoint: str, instances: list[Any], parameters: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"instances": instances}
        if parameters:
            body["parameters"] = parameters
        return self.api.json("predict", "POST", f"v1/{endpoint}:predict", json=body)
