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
- A Reduction Server job's reducers need CPU quota (`reducer_cpus`): N x n1-highcpu-16 count
  against custom_model_training_cpus (spot and flex-start: custom_model_training_preemptible_cpus,
  the metric Vertex AI's refusals name) in the attempt's region; workflows/capacity.py reads it
  beside the accelerator quota.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings

# N1 and E2 vCPUs of custom training (the reducers' N1): on demand, and Spot / Flex Start.
CPU_QUOTA = {
    "standard": "custom_model_training_cpus",
    "preemptible": "custom_model_training_preemptible_cpus",
}


@dataclasses.dataclass(frozen=True)
class ReducerCpus:
    """The vCPUs an attempt's reducers need: `needed` against `metric` in `region`, `what` says
    whose ('vCPUs for 4 reducers (n1-highcpu-16)')."""

    metric: str
    region: str
    needed: int
    what: str


def reducer_cpus(spec, attempt) -> ReducerCpus | None:
    """The CPU quota one attempt's reducer pool needs (scaling.reduction_server), or None (no
    reducers, no region, or a reducer machine whose vCPUs the catalog does not know).

    Args:
        spec: the JobSpec.
        attempt: one of `spec.attempts.attempts(spec)` (its hardware, region and strategy).
    Returns:
        A ReducerCpus: count x the reducer machine's vCPUs, against the standard or the
        preemptible (spot, flex-start) CPU metric of the attempt's region."""
    from vertex_trainer import hardware as hw
    from vertex_trainer.regions import SERVICE
    from vertex_trainer.spec.scaling import reducers

    if not attempt.region or not spec.scaling or spec.scaling.reduction_server is None:
        return None
    same = attempt.hardware == spec.hardware and attempt.region == spec.region
    r = reducers(
        spec if same else spec.model_copy(update={"hardware": attempt.hardware, "region": attempt.region})
    )
    machine = hw.machine(r.machine_type) if r else None
    if r is None or machine is None or not machine.vcpus:
        return None
    kind = "preemptible" if attempt.strategy in ("spot", "flex-start") else "standard"
    return ReducerCpus(
        f"{SERVICE}/{CPU_QUOTA[kind]}",
        attempt.region,
        r.count * machine.vcpus,
        f"vCPUs for {r.count} reducer(s) ({r.machine_type})",
    )


# Multi-regions and the region prefixes they cover.
_MULTI = {"US": ("us-", "northamerica-"), "EU": ("europe-",), "ASIA": ("asia-", "australia-")}


def buckets_of(spec) -> dict[str, str]:
    """bucket -> the first spec field that names it (gs:// or /gcs/ paths)."""
    fields = {
        "output_dir": spec.output_dir,
        # script jobs (issue 32): no trainer: block, no trainer data paths
        "trainer.train_data": spec.trainer.train_data if spec.trainer else None,
        "trainer.eval_data": spec.trainer.eval_data if spec.trainer else None,
        "image.staging_bucket": spec.image.staging_bucket if spec.image else None,
    }
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
    short = dataclasses.replace(
        settings.retry,
        attempts=min(settings.retry.attempts, 3),
        deadline=min(settings.retry.deadline, 15.0),
        read_timeout=min(settings.retry.read_timeout, 10.0),
    )
    api = storage.storage_api(settings, log=lambda _: None, retry=short)
    for bucket, field in buckets.items():
        try:
            meta = storage.bucket_metadata(api, bucket)
        except ServiceError as exc:
            log(
                f"warning: {field}: could not read the metadata of gs://{bucket} ({exc.message}); "
                "the job's service account may still have access"
            )
            continue
        if meta is None:
            raise UserError(
                f"{field}: bucket gs://{bucket} does not exist; nothing was created",
                hint=f"create it near the job: gcloud storage buckets create gs://{bucket} "
                f"--location={spec.region}",
            )
        far = location_mismatch(spec.region, meta.get("location", ""), meta.get("locationType"))
        if far:
            log(
                f"warning: {field}: gs://{bucket} {far}: reads cross regions (slower input, egress "
                "charges); a bucket in the job's region is faster and cheaper"
            )
        _check_attempt_regions(spec, bucket, field, meta)


def _check_attempt_regions(spec, bucket: str, field: str, meta: dict) -> None:
    """A fallback attempt the plan moves to another region must find its data there: the bucket's
    location covers that region (a multi-region containing it does), or the spec says
    scheduling.allow_remote_data: true; else exit 2 (docs/contract.md section 11). The spec's own
    region keeps the warning above: the user chose that region with the bucket."""
    from vertex_trainer.spec.attempts import attempts

    if spec.scheduling.allow_remote_data:
        return
    for a in attempts(spec)[1:]:
        if not a.region or a.region == spec.region:
            continue
        far = location_mismatch(a.region, meta.get("location", ""), meta.get("locationType"))
        if far:
            raise UserError(
                f"{a.field}: {a.describe()}: {field} gs://{bucket} "
                f"{far.replace('the job runs', 'the attempt runs')}; nothing was created",
                hint="keep the attempt where the data is, use a multi-region bucket that covers every "
                "region of the plan (e.g. --location=US), or set scheduling.allow_remote_data: "
                "true to read across regions",
            )


_REGISTRY_HOST = re.compile(r"^(?P<location>[a-z]+(?:-[a-z]+[0-9]+)?)-docker\.pkg\.dev/")


def registry_far(spec) -> str | None:
    """A warning when the job's image lives in an Artifact Registry location far from the job
    (every replica pulls it across regions), else None; for a plan whose attempts run in other
    regions, a regional repository on another continent than some attempt. Pure: no network."""
    image = spec.image
    ref = image and (image.repository or image.uri)
    m = _REGISTRY_HOST.match(ref or "")
    if not m or not spec.region:
        return None
    location = m["location"]
    own = _registry_far_from(spec, location)
    if own or "-" not in location:
        return own
    from vertex_trainer.spec.attempts import attempts

    field = "image.repository" if image.repository else "image.uri"
    continent = location.split("-")[0]
    away = [a for a in attempts(spec)[1:] if a.region and a.region.split("-")[0] != continent]
    if not away:
        return None
    where = ", ".join(dict.fromkeys(f"{a.region} (attempt {a.n})" for a in away))
    first = (away[0].region or "").split("-")[0]
    multi = {"us": "us", "northamerica": "us", "europe": "europe"}.get(first, "asia")
    return (
        f"warning: {field} is in {location}, and the plan also runs in {where}: those replicas "
        f"pull the image from another continent; a multi-region repository serves each "
        f"continent near ({multi}-docker.pkg.dev/PROJECT/REPO, or one per continent)"
    )


def _registry_far_from(spec, location: str) -> str | None:
    image = spec.image
    if "-" in location:  # a region, e.g. us-central1-docker.pkg.dev
        near = location == spec.region
    else:  # a multi-region: us, europe, asia
        near = spec.region.startswith(_MULTI.get(location.upper(), (location + "-",)))
    if near:
        return None
    field = "image.repository" if image.repository else "image.uri"
    return (
        f"warning: {field} is in {location}, the job runs in {spec.region}: every replica pulls "
        f"the image across regions (slower start, egress charges); use a repository in "
        f"the job's region ({spec.region})"
    )


def check_stand_ins(spec, settings: Settings, *, builder: str | None = None) -> None:
    """With Vertex AI emulated, every other Google API the submit touches must be too, or the
    command stops here (exit 2) naming the stand-in that is missing, before anything is sent."""
    if not settings.offline or spec.image is None or not spec.image.builds:
        return
    missing: list[str] = []
    if spec.image.python_package:
        if not settings.storage_emulator:
            missing.append(
                "Cloud Storage, to stage the package (STORAGE_EMULATOR_HOST: "
                "`vertex-trainer dev gcs-emulator`)"
            )
    else:
        if not settings.registry_endpoint:
            missing.append(
                "the image registry, for the content-hash tag check (VERTEX_TRAINER_REGISTRY_ENDPOINT)"
            )
        if (builder or spec.image.builder) == "cloud-build":
            if not settings.cloudbuild_endpoint:
                missing.append("Cloud Build (VERTEX_TRAINER_CLOUDBUILD_ENDPOINT)")
            if not settings.storage_emulator:
                missing.append(
                    "Cloud Storage, to stage the build context (STORAGE_EMULATOR_HOST: "
                    "`vertex-trainer dev gcs-emulator`)"
                )
    if missing:
        raise UserError(
            f"Vertex AI is a local stand-in ({settings.vertex_endpoint}) but this spec builds its "
            "image, and these are not: " + "; ".join(missing) + ". Nothing was sent",
            hint="point those variables at stand-ins too, or skip the build with an existing image "
            "(--set image.repository=null --set image.uri=REGISTRY/PATH:TAG), or run it here "
            "with --local",
        )
