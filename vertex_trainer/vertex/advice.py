"""One line of advice for the usual reasons a CustomJob does not succeed (shown under its error).

The table is small on purpose: capacity or quota (error code 8, RESOURCE_EXHAUSTED, a Flex Start
job whose max_wait passed), permissions (the job's service account), and image pulls (the image
and its registry's region). Anything else gets no advice: the error and the failing replica's
last lines speak for themselves. Pure: no network.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from vertex_trainer.regions import region_or_none

RESOURCE_EXHAUSTED, PERMISSION_DENIED = 8, 7  # google.rpc.Code
_IMAGE = re.compile(
    r"pull access denied|unable to pull|failed to pull|error pulling|errimagepull|"
    r"imagepullbackoff|manifest unknown|manifest for .* not found|"
    r"image .* (?:not found|does not exist)",
    re.I,
)
_CAPACITY = re.compile(
    r"resource_exhausted|resources are insufficient|quota|stockout|"
    r"zone_resource_pool_exhausted|not enough capacity|no capacity",
    re.I,
)
_PERMISSION = re.compile(
    r"permission_denied|permission .*denied|does not have .*(?:permission|access)|"
    r"access denied|403 forbidden|iam\.serviceaccounts\.actas",
    re.I,
)
_REGISTRY = re.compile(r"^(?P<region>[a-z0-9-]+)-docker\.pkg\.dev/|^(?:(?P<gcr>us|eu|asia)\.)?gcr\.io/")


def advice(job: dict[str, Any], lines: Iterable[str] = ()) -> str | None:
    """The advice for a job (the CustomJob REST dict) that did not succeed, or None."""
    error = job.get("error") or {}
    code = _int(error.get("code"))
    text = "\n".join([str(error.get("message") or ""), *lines])
    spec = job.get("jobSpec") or {}
    region = region_or_none(job.get("name", ""))
    if code == RESOURCE_EXHAUSTED or str(job.get("state")) in ("JOB_STATE_EXPIRED", "9"):
        return _capacity(spec, region)
    if _IMAGE.search(text):
        return _image(spec, region)
    if _CAPACITY.search(text):
        return _capacity(spec, region)
    if code == PERMISSION_DENIED or _PERMISSION.search(text):
        return _permission(spec)
    return None


def _capacity(spec: dict[str, Any], region: str | None) -> str:
    where = f" in {region}" if region else ""
    strategy = str((spec.get("scheduling") or {}).get("strategy") or "")
    if strategy in ("FLEX_START", "6"):
        return (
            f"no capacity or quota for this machine{where} within max_wait: add "
            "scheduling.fallback: [spot, standard] to try the next strategy, raise max_wait, "
            "or try another region"
        )
    return (
        f"no capacity or quota for this machine{where}: scheduling.strategy: flex-start (with "
        "max_wait) queues until capacity is free, and scheduling.fallback: [spot, standard] "
        "tries the next strategy; or ask for more quota (console: IAM & Admin > Quotas)"
    )


def _permission(spec: dict[str, Any]) -> str:
    account = spec.get("serviceAccount") or (
        "the Vertex AI Custom Code Service Agent "
        "(service-PROJECT_NUMBER@gcp-sa-aiplatform-cc.iam.gserviceaccount.com)"
    )
    return (
        f"the job runs as {account}: grant it the role the failing call needs (e.g. "
        "roles/storage.objectAdmin on the output bucket, roles/artifactregistry.reader on the "
        "image's repository), or set service_account: in the spec"
    )


def _image(spec: dict[str, Any], region: str | None) -> str:
    images = [
        (p.get("containerSpec") or {}).get("imageUri")
        or (p.get("pythonPackageSpec") or {}).get("executorImageUri")
        for p in spec.get("workerPoolSpecs") or ()
    ]
    image = next((i for i in images if i), None)
    if not image:
        return "the replicas' image could not be pulled: check the image URI and who may read it"
    text = (
        f"check that {image} exists (gcloud artifacts docker images list "
        f"{image.rsplit(':', 1)[0].rsplit('@', 1)[0]}) and that the job's service account may "
        "read it (roles/artifactregistry.reader)"
    )
    home = registry_region(image)
    if home and region and not (region == home or region.startswith(home + "-")):
        text += f"; the registry is in {home}, the job in {region}: push the image to {region}"
    return text


def registry_region(image: str) -> str | None:
    """us-central1-docker.pkg.dev/... -> us-central1; eu.gcr.io/... -> eu; gcr.io -> us."""
    m = _REGISTRY.match(image)
    if not m:
        return None
    return m["region"] or m["gcr"] or "us"


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
