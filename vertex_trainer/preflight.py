"""Checks a cloud submit makes before anything is built or created.

- Values that only work locally (a local output_dir or data path, no project): `spec.cloud_problems`.
- The bundled trainer's own flag parser on the job's args (a misspelt model or flag is exit 2
  here, not after an image build and a queue wait).
- Do the Cloud Storage buckets the job reads and writes exist, and are they near the job's region?
  A missing bucket is an error (exit 2): the job would fail only after the build and the queue
  wait. A bucket in another region is a warning: it works, but every read crosses regions. A
  bucket whose metadata cannot be read (403, network) is a warning too: the job's service account
  may still have access. One metadata GET per distinct bucket. Skipped when Vertex AI is an
  emulator and no storage emulator is set: such a run is offline by construction.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings

# Multi-regions and the region prefixes they cover.
_MULTI = {"US": ("us-", "northamerica-"), "EU": ("europe-",), "ASIA": ("asia-", "australia-")}


def buckets_of(spec) -> dict[str, str]:
    """bucket -> the first spec field that names it (gs:// or /gcs/ paths)."""
    fields = {"output_dir": spec.output_dir, "trainer.train_data": spec.trainer.train_data,
              "trainer.eval_data": spec.trainer.eval_data, "image.staging_bucket": spec.image.staging_bucket}
    found: dict[str, str] = {}
    for field, value in fields.items():
        bucket = storage.bucket_of(value)
        if bucket and bucket not in found:
            found[bucket] = field
    return found


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


def check_buckets(spec, *, settings: Settings, log: Callable[[str], None]) -> None:
    """Refuse missing buckets (UserError), warn about far or unreadable ones."""
    if settings.offline and not settings.storage_emulator:
        return
    buckets = buckets_of(spec)
    if not buckets:
        return
    # A pre-flight must not hold a submit for minutes: a short budget, then a warning.
    short = dataclasses.replace(settings.retry, attempts=min(settings.retry.attempts, 3),
                                deadline=min(settings.retry.deadline, 15.0),
                                read_timeout=min(settings.retry.read_timeout, 10.0))
    api = storage.storage_api(settings, log=lambda _: None, retry=short)
    for bucket, field in buckets.items():
        try:
            meta = storage.bucket_metadata(api, bucket)
        except ServiceError as exc:
            log(f"warning: {field}: could not read the metadata of gs://{bucket} ({exc.message}); "
                "the job's service account may still have access")
            continue
        if meta is None:
            raise UserError(f"{field}: bucket gs://{bucket} does not exist; nothing was created",
                            hint=f"create it near the job: gcloud storage buckets create gs://{bucket} "
                                 f"--location={spec.region}")
        far = location_mismatch(spec.region, meta.get("location", ""), meta.get("locationType"))
        if far:
            log(f"warning: {field}: gs://{bucket} {far}: reads cross regions (slower input, egress "
                "charges); a bucket in the job's region is faster and cheaper")
