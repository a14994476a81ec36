"""The Vertex AI REST API of one region, and the client of one collection of it.

`vertex_api()` is the one factory of every Vertex AI `ApiClient` (jobs, tuning jobs, pipelines,
models, endpoints): the shared hints (refused credentials, a disabled API, a missing permission,
a resource that is not there) and the caller's own. `CollectionClient` is what every collection
with resources that end shares (customJobs, hyperparameterTuningJobs, pipelineJobs, and what the
capacity work adds): get, cancel, and list through the one pager (`ApiClient.pages`); its
subclasses add create, each with the collection's own idempotency.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from vertex_trainer import lazy
from vertex_trainer.errors import UserError
from vertex_trainer.gcp import auth
from vertex_trainer.gcp.http import ApiClient, ApiError, Budget, Hints, default_hint
from vertex_trainer.log import Log
from vertex_trainer.settings import Settings

_PERMISSIONS = {
    "upload": "aiplatform.models.upload",
    "deploy": "aiplatform.endpoints.deploy",
    "create endpoint": "aiplatform.endpoints.create",
    "predict": "aiplatform.endpoints.predict",
}


def vertex_api(
    project: str,
    region: str,
    settings: Settings,
    *,
    log: Log | None = None,
    session: Any = None,
    hints: Hints | None = None,
    retry_hint: str | None = None,
    user_error: Callable[[str, ApiError], bool] | None = None,
    final: Callable[[str, ApiError], bool] | None = None,
) -> ApiClient:
    """The Vertex AI REST API of one region, with the hints every Vertex call shares.

    Args:
        project, region: where the resources are (the hints name them).
        settings: the endpoint (`Settings.vertex_url`) and the retry policy.
        log: where retries are reported. session: an authorized requests session (tests).
        hints: the caller's own hints, asked after the shared ones (credentials, disabled API)
            and before the generic ones (a missing permission, a resource not found).
        retry_hint, user_error, final: as for `gcp.http.ApiClient`.

    Returns: the ApiClient."""
    shared = default_hint("Vertex AI", "aiplatform.googleapis.com", project)

    def hint(op: str, err: ApiError) -> str | None:
        found = shared(op, err) or (hints(op, err) if hints else None)
        if found:
            return found
        if err.code == 403:
            return (
                f"the caller needs {_PERMISSIONS.get(op, 'aiplatform.*')} on project {project} "
                "(role roles/aiplatform.user)"
            )
        if err.code == 404:
            return f"not found in project {project}, region {region}: check the name and --region"
        return None

    return ApiClient.of(
        settings,
        settings.vertex_url(region),
        log=log,
        session=session,
        service="Vertex AI",
        hints=hint,
        retry_hint=retry_hint,
        user_error=user_error,
        final=final,
    )


def aiplatform_sdk(project: str, region: str, settings: Settings) -> tuple[Any, Any]:
    """The google-cloud-aiplatform SDK (imported here, on first use) for `project` and `region`,
    and the credentials to pass it: None (the SDK's own, Application Default Credentials), or,
    against a stand-in (`settings.vertex_endpoint`), anonymous ones (a sandbox's token when the
    settings hold one), after pointing the SDK's global configuration at the stand-in over REST
    (`aiplatform.init(api_endpoint=...)`).

    Returns: (the `google.cloud.aiplatform` module, credentials or None)."""
    aiplatform = lazy.require("google.cloud.aiplatform")
    if not settings.vertex_endpoint:
        return aiplatform, None

    credentials = auth.emulator_credentials(settings.emulator_token)  # a sandbox's token, if any
    aiplatform.init(
        project=project,
        location=region,
        api_endpoint=settings.vertex_url(region),
        api_transport="rest",
        credentials=credentials,
    )
    return aiplatform, credentials


class CollectionClient:
    """One collection of Vertex AI resources (`collection`) for one project and region.

    A subclass names the collection, the names of its operations in messages (`ops`), the advice
    when retries run out (`retry_hint`), and may add hints (`_hint`), refusals that are the
    caller's input (`_user_error`) or final (`_final`)."""

    collection: ClassVar[str] = ""
    ops: ClassVar[dict[str, str]] = {"get": "get", "cancel": "cancel", "list": "list", "create": "create"}
    retry_hint: ClassVar[str | None] = None

    def __init__(
        self,
        project: str | None,
        region: str | None,
        *,
        settings: Settings | None = None,
        session: Any = None,
        log: Log | None = None,
    ):
        """Args: project, region: where the collection is (UserError when either is missing);
        settings: endpoint, retry and poll policies (defaults: the real service); session: an
        authorized requests session; log: where retries and warnings go."""
        if not project:
            raise UserError(
                "no Google Cloud project: set `project:` in the spec, pass --project, "
                "or set $GOOGLE_CLOUD_PROJECT"
            )
        if not region:
            raise UserError("no region: set `region:` in the spec or pass --region")
        self.project, self.region = project, region
        self.settings = settings or Settings()
        self.api = vertex_api(
            project,
            region,
            self.settings,
            log=log,
            session=session,
            hints=self._hint,
            retry_hint=self.retry_hint,
            user_error=self._user_error,
            final=self._final,
        )

    @property
    def log(self) -> Log:
        return self.api.log

    @log.setter
    def log(self, log: Log) -> None:
        self.api.log = log

    @property
    def endpoint(self) -> str:
        return self.api.endpoint

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def url(self, path: str) -> str:
        """The absolute URL of a resource path (projects/...)."""
        return self.api.url(f"v1/{path}")

    def name_of(self, resource_id: str) -> str:
        """The resource name of an id in this collection."""
        return f"{self.parent}/{self.collection}/{resource_id}"

    # -- the operations every collection has ---------------------------------------------------
    def get(self, name: str) -> dict[str, Any]:
        """The resource `name` (REST JSON)."""
        return self.api.json(self.ops["get"], "GET", f"v1/{name}")

    def cancel(self, name: str) -> None:
        """Ask the service to cancel `name` (it ends later, through a CANCELLING state)."""
        self.api.json(self.ops["cancel"], "POST", f"v1/{name}:cancel", json={})

    def list(
        self,
        filter: str | None = None,
        *,
        limit: int | None = None,
        budget: Budget | None = None,
        page_size: int = 100,
        order_by: str | None = None,
    ) -> list[dict[str, Any]]:
        """The collection's resources matching `filter` (Vertex filter syntax), newest first.

        Args: filter; limit: at most this many; budget: one retry budget for every page;
        page_size; order_by: the service's order (the result is sorted newest first anyway).
        Returns: the resources (REST JSON)."""
        params = {k: v for k, v in (("filter", filter), ("orderBy", order_by)) if v}
        pages = self.api.pages(
            self.ops["list"],
            "GET",
            f"v1/{self.parent}/{self.collection}",
            items=self.collection,
            params=params,
            page_size=page_size,
            limit=limit or None,
            budget=budget,
        )
        found = [resource for page in pages for resource in page]
        found.sort(key=lambda r: r.get("createTime", ""), reverse=True)
        return found[:limit] if limit else found

    # -- errors (a subclass refines them) ------------------------------------------------------
    def _hint(self, op: str, err: ApiError) -> str | None:
        return None

    def _user_error(self, op: str, err: ApiError) -> bool:
        return False

    def _final(self, op: str, err: ApiError) -> bool:
        return False
