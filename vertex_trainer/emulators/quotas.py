"""A fake Cloud Quotas API (v1) on loopback: the project's Vertex AI quotas, as `quotaInfos`.

    GET /v1/projects/P/locations/global/services/SERVICE/quotaInfos?pageSize=N&pageToken=T

answers `{"quotaInfos": [QuotaInfo...], "nextPageToken"}` in the real API's shape: each QuotaInfo
has `name`, `quotaId`, `metric`, `service`, `dimensions: ["region"]` and `dimensionsInfos`
(`{"dimensions": {"region": R}, "details": {"value": "8"}, "applicableLocations": [R]}`, plus
one without a region: the default for every other region). Point the tool at it with
`VERTEX_TRAINER_QUOTAS_ENDPOINT=http://127.0.0.1:PORT`.

    with FakeQuotas() as quotas:
        quotas.set("aiplatform.googleapis.com/custom_model_training_nvidia_h100_gpus", "us-central1", 0)
        quotas.fail(403, times=1)      # the next request answers 403 PERMISSION_DENIED

Errors use Google's envelope. It shares no code with the client it stands in for.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from vertex_trainer.emulators._http import JsonHandler, LoopbackServer, offset_page, query_of

_PATH = re.compile(
    r"^/v1/projects/(?P<project>[^/]+)/locations/global/services/(?P<service>[^/]+)/quotaInfos$"
)


def _quota_id(metric: str) -> str:
    # custom_model_training_nvidia_h100_gpus -> CustomModelTrainingNvidiaH100GpusPerProjectPerRegion
    return "".join(p.capitalize() for p in metric.split("/")[-1].split("_")) + "PerProjectPerRegion"


@dataclass
class FakeQuotas(LoopbackServer):
    host: str = "127.0.0.1"
    port: int = 0
    page_size: int = 2  # small, so a client must follow nextPageToken
    # metric -> {region or None (the default for other regions): value}
    limits: dict[str, dict[str | None, int]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    failures: list[tuple[int, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()
        for metric in (
            "aiplatform.googleapis.com/custom_job_requests",  # noise, as on the real API
            "aiplatform.googleapis.com/custom_model_training_cpus",
        ):
            self.limits.setdefault(metric, {None: 2200})

    def set(self, metric: str, region: str | None, value: int) -> None:
        """The limit of `metric` in `region` (None: every region without its own; -1: unlimited)."""
        with self._lock:
            self.limits.setdefault(metric, {})[region] = value

    def fail(self, status: int, *, times: int = 1, message: str | None = None) -> None:
        """Answer the next `times` requests with `status`."""
        with self._lock:
            self.failures.extend([(status, message)] * times)

    def infos(self, project: str, service: str) -> list[dict[str, Any]]:
        out = []
        with self._lock:
            for metric, values in self.limits.items():
                if not metric.startswith(service + "/"):
                    continue
                quota_id = _quota_id(metric)
                dims = []
                for region, value in values.items():
                    info: dict[str, Any] = {"details": {"value": str(value)} if value else {}}
                    if region is None:
                        info["dimensions"] = {}
                        info["applicableLocations"] = ["global"]
                    else:
                        info["dimensions"] = {"region": region}
                        info["applicableLocations"] = [region]
                    dims.append(info)
                out.append(
                    {
                        "name": f"projects/{project}/locations/global/services/{service}"
                        f"/quotaInfos/{quota_id}",
                        "quotaId": quota_id,
                        "metric": metric,
                        "service": service,
                        "isPrecise": True,
                        "containerType": "PROJECT",
                        "dimensions": ["region"],
                        "metricDisplayName": metric.split("/")[-1],
                        "dimensionsInfos": dims,
                        "isConcurrent": True,
                        "serviceRequestQuotaUri": "https://console.cloud.google.com/iam-admin/quotas",
                    }
                )
        return out

    def start(self) -> FakeQuotas:
        fake = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                fake.requests.append(self.path)
                if self.send_fault(fake, "Permission 'cloudquotas.quotas.get' denied on resource"):
                    return None
                parts = urlsplit(self.path)
                m = _PATH.match(parts.path)
                if not m:
                    return self.send_envelope(404, f"Method GET {parts.path} not found.")
                infos = fake.infos(m["project"], m["service"])
                try:
                    answer = offset_page(
                        infos, query_of(self.path), "quotaInfos", size=fake.page_size, cap=fake.page_size
                    )
                except ValueError as exc:
                    return self.send_envelope(400, str(exc))
                self.send_json(200, answer)

        return self._serve(Handler)
