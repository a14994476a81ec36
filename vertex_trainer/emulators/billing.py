"""A fake Cloud Billing Catalog API (v1) on loopback: services and Vertex AI's SKUs, in pages.

    GET /v1/services?pageSize=N&pageToken=T                     -> {"services": [...], "nextPageToken"}
    GET /v1/services/{id}/skus?currencyCode=USD&pageSize=N&pageToken=T -> {"skus": [...], "nextPageToken"}

The catalog it serves is `billing_catalog.json` beside this file: Sku objects built by hand in
the cloudbilling.v1 shape (discovery document revision 20260901: description, category
{serviceDisplayName, resourceFamily, resourceGroup, usageType}, serviceRegions, geoTaxonomy,
pricingInfo[].pricingExpression {usageUnit, tieredRates[].unitPrice {currencyCode, units, nanos}},
aggregationInfo), with the noise a real page has (prediction, generative AI and commitment SKUs).
It is not a recording of the live API; its prices are the figures docs/cost.md cites. Pages are
small (`page_size`), so a client must follow nextPageToken. Point the tool at it with
`VERTEX_TRAINER_BILLING_ENDPOINT=http://127.0.0.1:PORT`.

    with FakeBilling() as billing:
        billing.inject(503)          # the next request answers 503 UNAVAILABLE

It shares no code with the client it stands in for.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from vertex_trainer.emulators._http import JsonHandler, LoopbackServer, offset_page, query_of

CATALOG = Path(__file__).with_name("billing_catalog.json")
_SKUS = re.compile(r"^/v1/services/(?P<service>[^/]+)/skus$")


def load_catalog(path: Path = CATALOG) -> dict[str, Any]:
    """{"services": [...], "skus": [...]} from a catalog file (the shipped one by default)."""
    with open(path, encoding="utf-8") as f:
        catalog: dict[str, Any] = json.load(f)
        return catalog


@dataclass
class FakeBilling(LoopbackServer):
    host: str = "127.0.0.1"
    port: int = 0
    page_size: int = 25  # at most this many SKUs a page: several pages
    services_page_size: int = 2  # and services: the client must page those too
    catalog: dict[str, Any] = field(default_factory=load_catalog)
    requests: list[str] = field(default_factory=list)
    faults: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    def set_price(self, description: str, usd: float) -> None:
        """Change the unit price of the SKU with this description (what a refresh then reads)."""
        with self._lock:
            for sku in self.catalog["skus"]:
                if sku["description"] == description:
                    units = int(usd)
                    sku["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"].update(
                        units=str(units), nanos=round((usd - units) * 1e9)
                    )
                    return
        raise KeyError(description)

    def start(self) -> FakeBilling:
        fake = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                fake.requests.append(self.path)
                status = fake._take_fault("GET")
                if status:
                    return self.send_envelope(status, "Fault injected.")
                parts = urlsplit(self.path)
                query = query_of(self.path)
                with fake._lock:
                    catalog = copy.deepcopy(fake.catalog)
                if parts.path == "/v1/services":
                    items, key, cap = catalog["services"], "services", fake.services_page_size
                else:
                    m = _SKUS.match(parts.path)
                    if not m:
                        return self.send_envelope(404, f"Method GET {parts.path} not found.")
                    if not any(s["serviceId"] == m["service"] for s in catalog["services"]):
                        return self.send_envelope(404, f"Service {m['service']} not found.")
                    if query.get("currencyCode", "USD") != "USD":
                        return self.send_envelope(400, "This stand-in prices in USD only.")
                    items = [s for s in catalog["skus"] if s["name"].startswith(f"services/{m['service']}/")]
                    key, cap = "skus", fake.page_size
                try:
                    answer = offset_page(items, query, key, size=cap, cap=cap)
                except ValueError as exc:
                    return self.send_envelope(400, str(exc))
                self.send_json(200, answer)

        return self._serve(Handler)
