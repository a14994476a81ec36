"""Checks a cloud submit makes before anything is built or created: do the Cloud Storage buckets
the job reads and writes exist, and are they near the job's region?

A missing bucket is an error (exit 2): the job would fail only after the image build and the
queue wait. A bucket in another region is a warning: it works, but every read crosses regions
(slower input, egress charges). A bucket whose metadata cannot be read (403, network) is a
warning too: the job's service account may still have access.

One metadata GET per distinct bucket, through the Cloud Storage JSON API
(`STORAGE_EMULATOR_HOST` honoured). Skipped when the Vertex endpoint is an emulator and no
storage emulator is set: such a run is offline by construction.
"""

from __future__ import annotations

import os
from typing import Callable

from vertex_trainer import auth
from vertex_trainer.errors import UserError

STORAGE_ENDPOINT = "https://storage.googleapis.com"
# Multi-regions and the region prefixes they cover.
_MULTI = {"US": ("us-", "northamerica-"), "EU": ("europe-",), "ASIA": ("asia-", "australia-")}


def buckets_of(spec) -> dict[str, str]:
    """bucket -> the first spec field that names it (gs:// or /gcs/ paths)."""
    fields = {"output_dir": spec.output_dir, "trainer.train_data": spec.trainer.train_data,
              "trainer.eval_data": spec.trainer.eval_data, "image.staging_bucket": spec.image.staging_bucket}
    found: dict[str, str] = {}
    for field, value in fields.items():
        bucket = _bucket(value)
        if bucket and bucket not in found:
            found[bucket] = field
    return found


def _bucket(path: str | None) -> str | None:
    if not path:
        return None
    for prefix in ("gs://", "/gcs/"):
        if path.startswith(prefix):
            return path[len(prefix):].split("/", 1)[0] or None
    return None


def location_mismatch(region: str, location: str, location_type: str | None) -> str | None:
    """Why a bucket at `location` is far from a job in `region`, or None if it is near."""
    loc = (location or "").upper()
    if not loc:
        return None
    if (location_type or "").lower() == "multi-region" or loc in _MULTI:
        prefixes = _MULTI.get(loc, ())
        if prefixes and not region.startswith(prefixes):
            return f"is in the {loc} multi-region, the job runs in {region}"
        return None
    if (location_type or "").lower() == "dual-region":
        return None  # a dual-region's member regions are not in the metadata; don't guess
    if loc.lower() != region:
        return f"is in {loc.lower()}, the job runs in {region}"
    return None


def check_buckets(spec, *, log: Callable[[str], None], vertex_endpoint: str | None = None) -> None:
    """Refuse missing buckets (UserError), warn about far or unreadable ones."""
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    if vertex_endpoint and auth.is_emulator(vertex_endpoint) and not emulator:
        return
    buckets = buckets_of(spec)
    if not buckets:
        return
    endpoint = (emulator if emulator.startswith("http") else f"http://{emulator}") if emulator else STORAGE_ENDPOINT
    import requests

    session = auth.session(endpoint.rstrip("/"))
    for bucket, field in buckets.items():
        url = f"{endpoint.rstrip('/')}/storage/v1/b/{bucket}"
        try:
            resp = session.get(url, params={"fields": "location,locationType"}, timeout=10)
        except requests.RequestException as exc:
            log(f"warning: {field}: could not check gs://{bucket} ({type(exc).__name__}); submitting anyway")
            continue
        if resp.status_code == 404:
            raise UserError(f"{field}: bucket gs://{bucket} does not exist; nothing was created",
                            hint=f"create it near the job: gcloud storage buckets create gs://{bucket} "
                                 f"--location={spec.region}")
        if resp.status_code != 200:
            log(f"warning: {field}: could not read the metadata of gs://{bucket} (HTTP {resp.status_code}); "
                "the job's service account may still have access")
            continue
        meta = resp.json()
        far = location_mismatch(spec.region, meta.get("location", ""), meta.get("locationType"))
        if far:
            log(f"warning: {field}: gs://{bucket} {far}: reads cross regions (slower input, egress "
                "charges); a bucket in the job's region is faster and cheaper")
