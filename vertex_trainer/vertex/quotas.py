"""The project's Vertex AI training quotas, read from the Cloud Quotas API.

Why this API (read 2026-11-30, https://cloud.google.com/docs/quotas/reference/rest):
- Cloud Quotas (`cloudquotas.googleapis.com/v1`, GA) lists a service's `QuotaInfo`s:
  `GET /v1/projects/P/locations/global/services/aiplatform.googleapis.com/quotaInfos`. Each has the
  `metric` (`aiplatform.googleapis.com/custom_model_training_nvidia_h100_gpus`) and
  `dimensionsInfos[]`: `{"dimensions": {"region": "us-central1"}, "details": {"value": "8"},
  "applicableLocations": [...]}`; an info without a region dimension holds for every region
  that has no info of its own. Permission: cloudquotas.quotas.get (roles/cloudquotas.viewer).
- Service Usage (`serviceusage.googleapis.com/v1beta1 .../consumerQuotaMetrics/METRIC`) answers one
  metric in one GET (`consumerQuotaLimits[].quotaBuckets[].effectiveLimit`), but it is a v1beta1
  surface that Cloud Quotas replaces. `quotaInfos.get` needs the quota id, which is not derived
  from the metric name in any documented way ("CustomModelTrainingPreemptibleT4GPUsPerProjectPerRegion"),
  so the list is read (a few pages) and matched on `metric`.
The API gives limits, not usage: a limit below what the job needs is "clearly insufficient";
a limit at or above it may still be in use by other jobs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from vertex_trainer.gcp.http import ApiError, Budget, ProjectApi
from vertex_trainer.settings import Settings

SERVICE = "aiplatform.googleapis.com"
MAX_PAGES = 20  # aiplatform has a few hundred quotas; never page forever
INCREASE_DOC = "https://cloud.google.com/docs/quotas/help/request_increase"


def console_url(project: str, metric: str) -> str:
    """The console page where the project asks for more of `metric`."""
    short = metric.split("/", 1)[-1]
    return (
        f"https://console.cloud.google.com/iam-admin/quotas?project={quote(project)}"
        f"&service={SERVICE}&metric={quote(short)}"
    )


@dataclass(frozen=True)
class Quota:
    """One quota metric's limit in one region."""

    metric: str
    region: str
    limit: int | None  # None: no limit (unlimited)
    request_url: str  # where to ask for more


class QuotasClient(ProjectApi):
    """The Cloud Quotas API for one project (read-only)."""

    SERVICE = "Cloud Quotas"
    HOST = "cloudquotas.googleapis.com"
    _infos: list[dict[str, Any]] | None = None  # the project's quota infos, once read

    def endpoint(self, settings: Settings) -> str:
        return settings.quotas_url()

    def hint(self, err: ApiError) -> str | None:
        return _hint(err)

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/global/services/{SERVICE}"

    def infos(self, budget: Budget | None = None) -> list[dict[str, Any]]:
        """Every QuotaInfo of Vertex AI for the project (read once, then kept)."""
        if self._infos is None:
            self._infos = self.api.list(
                "list",
                f"v1/{self.parent}/quotaInfos",
                items="quotaInfos",
                page_size=500,
                max_pages=MAX_PAGES,
                budget=budget,
            )
        return self._infos

    def limit(self, metric: str, region: str, budget: Budget | None = None) -> Quota | None:
        """The limit of `metric` in `region`, or None when the project has no such quota."""
        for info in self.infos(budget):
            if info.get("metric") != metric:
                continue
            value = _value_for(info.get("dimensionsInfos") or (), region)
            if value is _MISSING:
                continue
            return Quota(metric, region, value, console_url(self.project, metric))
        return None


_MISSING = object()


def _hint(err: ApiError) -> str | None:
    if err.code == 403:
        return "reading quotas needs cloudquotas.quotas.get on the project (role roles/cloudquotas.viewer)"
    return None


def _value_for(dimension_infos: Iterable[dict[str, Any]], region: str) -> Any:  # int, None or _MISSING
    """The quota value for `region`: its own dimensions info, else the one without a region."""
    default = _MISSING
    for info in dimension_infos:
        dims = info.get("dimensions") or {}
        value = _int((info.get("details") or {}).get("value", 0))
        if dims.get("region") == region:
            return value
        if "region" not in dims:
            default = value
    return default


def _int(value: Any) -> int | None:
    """ "8" -> 8 (proto3 JSON leaves a 0 out, hence the default 0); "-1" -> None (unlimited)."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return None if number < 0 else number
