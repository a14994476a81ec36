"""The Cloud Billing Catalog API (cloudbilling.googleapis.com/v1): Vertex AI's public SKUs.

    GET /v1/services
        -> {"services": [{"name", "serviceId", "displayName"}], "nextPageToken"}
    GET /v1/services/{id}/skus?currencyCode=USD
        -> {"skus": [Sku...], "nextPageToken"}

The Vertex AI service is found by its displayName ("Vertex AI"; its id, C7E2-9256-1C43, is
reported in public code, not relied on). Every page of both lists is read through the one pager
(gcp.http.ApiClient.pages). The catalog is public list pricing: an API key
($VERTEX_TRAINER_BILLING_API_KEY, sent as `key=`) or Application Default Credentials will do;
an http:// endpoint is a local stand-in (emulators.billing).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from vertex_trainer.errors import ServiceError
from vertex_trainer.gcp import auth
from vertex_trainer.gcp.http import ApiClient, default_hint
from vertex_trainer.log import Log
from vertex_trainer.pricing import PriceBook
from vertex_trainer.pricing import skus as sku_rules
from vertex_trainer.settings import RetryPolicy, Settings

SERVICE_NAME = "Vertex AI"
SKU_PAGE_SIZE = 5000  # the API's maximum: Vertex AI has a few thousand SKUs
MAX_PAGES = 100


class BillingClient:
    """The Catalog API at the settings' endpoint (read-only)."""

    def __init__(
        self,
        *,
        settings: Settings,
        retry: RetryPolicy | None = None,
        log: Log | None = None,
        session: Any = None,
    ):
        self.settings = settings
        self.key = settings.billing_api_key
        if session is None and self.key:
            session = auth.plain_session()  # an API key needs no credentials
        self.api = ApiClient.of(
            settings,
            settings.billing_url(),
            retry=retry,
            log=log,
            session=session,
            service="Cloud Billing Catalog",
            hints=default_hint("Cloud Billing", "cloudbilling.googleapis.com"),
        )

    def _params(self, **extra: Any) -> dict[str, Any]:
        return {**({"key": self.key} if self.key else {}), **extra}

    def service_id(self, display_name: str = SERVICE_NAME) -> str:
        """The serviceId of the service named `display_name` (every page of services.list).

        Args:
            display_name: the service's displayName.
        Returns:
            Its serviceId; ServiceError (exit 3) when no service has that name."""
        for page in self.api.pages(
            "list services",
            "GET",
            "v1/services",
            items="services",
            params=self._params(),
            page_size=5000,
            max_pages=MAX_PAGES,
        ):
            for service in page:
                if service.get("displayName") == display_name:
                    return str(service.get("serviceId") or str(service.get("name", "")).split("/")[-1])
        raise ServiceError(
            f"the Cloud Billing catalog lists no service named {display_name!r}",
            hint="the catalog's service names changed: report it",
        )

    def skus(self, service_id: str, currency: str = "USD") -> list[dict[str, Any]]:
        """Every SKU of the service (all pages), priced in `currency`."""
        return self.api.list(
            "list skus",
            f"v1/services/{service_id}/skus",
            items="skus",
            params=self._params(currencyCode=currency),
            page_size=SKU_PAGE_SIZE,
            max_pages=MAX_PAGES,
        )

    def price_book(self, *, today: _dt.date | None = None) -> PriceBook:
        """Vertex AI's training prices read now, as a PriceBook (source "billing-api").

        Args:
            today: the date to stamp (default: today, UTC).
        Returns:
            The PriceBook; its data is what `dev refresh-prices` writes."""
        service = self.service_id()
        found = self.skus(service)
        day = (today or _dt.datetime.now(_dt.timezone.utc).date()).isoformat()
        data = sku_rules.snapshot(
            found,
            as_of=day,
            source=f"Cloud Billing Catalog API, services/{service}/skus ({SERVICE_NAME}), list prices",
        )
        if not data["skus_used"]:
            raise ServiceError(
                f"none of the {len(found)} SKUs of services/{service} is a custom-training "
                "price this tool recognizes; the snapshot was not changed",
                hint="the SKU descriptions changed: report it (vertex_trainer/pricing/skus.py)",
            )
        return PriceBook(data, source="billing-api")
