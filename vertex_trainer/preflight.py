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
- Does each `gs://` (or `/gcs/`) data pattern the trainer will read (`trainer.train_data`,
  `trainer.eval_data`; a comma-separated list is each of its patterns) match an object? One that
  matches none is exit 2 naming the field, before the build: on Vertex AI the trainer would fail
  only after the machines were provisioned. Matched as the trainer's `tf.io.gfile.glob` matches
  (gcp/gcs_glob.py), over a bounded listing by the pattern's fixed prefix, stopping at the first
  object; a listing that hits the bound, fails after retries or is denied is a warning (the
  job's service account may read what this account cannot). The plan holds the checks
  (`data_checks`, which `--dry-run` lists); the executor makes them (`check_data`).
- A Reduction Server job's reducers need CPU quota (`reducer_cpus`): N x n1-highcpu-16 count
  against custom_model_training_cpus (spot and flex-start: custom_model_training_preemptible_cpus,
  the metric Vertex AI's refusals name) in the attempt's region; capacity/availability.py reads it
  beside the accelerator quota.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from vertex_trainer import hardware as hw
from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp import gcs_glob, storage
from vertex_trainer.gcp.http import ApiClient, Refused, denial
from vertex_trainer.log import Log
from vertex_trainer.regions import SERVICE
from vertex_trainer.settings import RetryPolicy, Settings
from vertex_trainer.spec import JobSpec
from vertex_trainer.spec.attempts import PlannedAttempt
from vertex_trainer.spec.rules import split_patterns
from vertex_trainer.spec.scaling import reducers

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


def reducer_cpus(spec: JobSpec, attempt: PlannedAttempt) -> ReducerCpus | None:
    """The CPU quota one attempt's reducer pool needs (scaling.reduction_server), or None (no
    reducers, no region, or a reducer machine whose vCPUs the catalog does not know).

    Args:
        spec: the JobSpec.
        attempt: one attempt of the plan (spec/attempts.py; its hardware, region and strategy).
    Returns:
        A ReducerCpus: count x the reducer machine's vCPUs, against the standard or the
        preemptible (spot, flex-start) CPU metric of the attempt's region."""
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


def buckets_of(spec: JobSpec) -> dict[str, str]:
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


def short_retry(settings: Settings) -> RetryPolicy:
    """A short retry budget: a pre-flight must not hold a submit for minutes, nor a check hang
    on one look (a short budget, then a warning)."""
    return dataclasses.replace(
        settings.retry,
        attempts=min(settings.retry.attempts, 3),
        deadline=min(settings.retry.deadline, 15.0),
        read_timeout=min(settings.retry.read_timeout, 10.0),
    )


def _storage_checked(settings: Settings) -> bool:
    """False when Vertex AI is an emulator and no storage emulator is set: an offline run."""
    return not (settings.offline and not settings.storage_emulator)


def check_buckets(spec: JobSpec, plan: tuple[PlannedAttempt, ...], *, settings: Settings, log: Log) -> None:
    """Refuse missing buckets (UserError), warn about far or unreadable ones; `plan`: the job's
    attempts (a fallback attempt in another region must find its data there)."""
    if not _storage_checked(settings):
        return
    buckets = buckets_of(spec)
    if not buckets:
        return
    api = storage.storage_api(settings, log=lambda _: None, retry=short_retry(settings))
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
        far = (
            location_mismatch(spec.region, meta.get("location", ""), meta.get("locationType"))
            if spec.region
            else None
        )
        if far:
            log(
                f"warning: {field}: gs://{bucket} {far}: reads cross regions (slower input, egress "
                "charges); a bucket in the job's region is faster and cheaper"
            )
        _check_attempt_regions(spec, plan, bucket, field, meta)


def _check_attempt_regions(
    spec: JobSpec, plan: tuple[PlannedAttempt, ...], bucket: str, field: str, meta: dict[str, Any]
) -> None:
    """A fallback attempt the plan moves to another region must find its data there: the bucket's
    location covers that region (a multi-region containing it does), or the spec says
    scheduling.allow_remote_data: true; else exit 2 (docs/contract.md section 11). The spec's own
    region keeps the warning above: the user chose that region with the bucket."""
    if spec.scheduling.allow_remote_data:
        return
    for a in plan[1:]:
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


@dataclasses.dataclass(frozen=True)
class DataCheck:
    """A read a cloud submit makes before it builds or sends: `pattern`, one of `field`'s
    comma-separated patterns (gs:// or /gcs/), must match at least one object."""

    field: str
    pattern: str

    def describe(self) -> str:
        """'trainer.train_data gs://b/train-* matches at least one object'."""
        return f"{self.field} {self.pattern} matches at least one object"

    def to_dict(self) -> dict[str, Any]:
        """The dry run's JSON `checks[]` entry."""
        return {"check": "data", "field": self.field, "pattern": self.pattern}


def data_checks(spec: JobSpec, settings: Settings) -> tuple[DataCheck, ...]:
    """The data checks of a cloud submit of `spec` (none for a script job, an offline run, or
    data the trainer will not read: synthetic data with a set epoch length reads no train files,
    and evaluates nothing)."""
    t = spec.trainer
    if t is None or not _storage_checked(settings):  # script jobs (issue 32): their args are theirs
        return ()
    read = {"trainer.eval_data": t.eval_data if not t.synthetic_data else None}
    if not (t.synthetic_data and (t.steps_per_epoch or t.train_examples)):
        read = {"trainer.train_data": t.train_data, **read}
    return tuple(
        DataCheck(field, p)
        for field, value in read.items()
        for p in split_patterns(value or "")
        if p.startswith(("gs://", "/gcs/"))  # (a local path in a cloud job: spec.cloud_problems)
    )


def check_data(
    checks: tuple[DataCheck, ...],
    *,
    settings: Settings,
    log: Log,
    cap: int | None = None,
) -> None:
    """Make the plan's data checks: a pattern that matches no object (or, for a whole field,
    only folders) is exit 2 naming the field, nothing built or created; a listing stopped by the
    bound (`cap` objects a pattern), failing after retries, or denied is a warning.

    Args:
        checks: from `data_checks` (the plan's).
        settings: the process settings (the storage endpoint, the retry policy).
        log: where the warnings go.
        cap: the most objects read for one pattern (default: gcs_glob.MAX_LISTED)."""
    if not checks:
        return
    api = storage.storage_api(
        settings, log=lambda _: None, retry=short_retry(settings), final=lambda _op, err: err.code == 403
    )
    limit = cap or gcs_glob.MAX_LISTED
    listed: dict[str, gcs_glob.GlobMatch | None] = {}  # pattern -> its match (None: not read)
    by_field: dict[str, list[tuple[str, gcs_glob.GlobMatch | None]]] = {}
    for check in checks:
        if check.pattern not in listed:
            listed[check.pattern] = _listing(api, check, limit, log)
        by_field.setdefault(check.field, []).append((check.pattern, listed[check.pattern]))
    missing: list[str] = []
    for field, matches in by_field.items():
        for pattern, m in matches:
            if m is None or m.found:
                continue
            if m.unchecked:
                log(f"warning: {field}: {pattern} not checked ({m.unchecked})")
            elif m.capped:
                log(
                    f"warning: {field}: {pattern}: no match among the first {m.listed:,} objects "
                    "under its prefix; not checked further (the trainer lists them all)"
                )
            elif not m.folder:
                missing.append(f"{field}: {pattern} matches no object")
        # The trainer drops folders from its matches: a field whose every pattern matched only
        # folders leaves it no file to read.
        if all(m is not None and m.folder and not m.capped for _, m in matches):
            folders = ", ".join(f"{p} (the folder {m.folder})" for p, m in matches if m is not None)
            missing.append(f"{field}: {folders} matches only folders, no object")
    if missing:
        raise UserError(
            "; ".join(missing) + "; nothing was built or created",
            hint="upload the data first, or fix the pattern (gcloud storage ls PATTERN lists what "
            "it matches); the trainer matches as tf.io.gfile.glob does: * and ? stop at /, so "
            "gs://BUCKET/DIR/* names the files in DIR, not DIR's subfolders",
        )


def _listing(api: ApiClient, check: DataCheck, cap: int, log: Log) -> gcs_glob.GlobMatch | None:
    """The first match of one pattern, or None when it could not be listed (said in a warning:
    a denial names the permission; the job's account may hold it)."""
    bucket = storage.bucket_of(check.pattern)
    try:
        return gcs_glob.first_match(api, check.pattern, cap=cap)
    except Refused as exc:  # a 403: say what this account lacks rather than refuse the data
        permission = denial(exc.error)[1] or "storage.objects.list"
        log(
            f"warning: {check.field}: {check.pattern} not checked: permission {permission} denied "
            f"on gs://{bucket} to this account; the job's service account may still read it "
            "(roles/storage.objectViewer on the bucket lets this check run)"
        )
    except ServiceError as exc:
        log(f"warning: {check.field}: {check.pattern} not checked: listing failed: {exc.message}")
    return None


_REGISTRY_HOST = re.compile(r"^(?P<location>[a-z]+(?:-[a-z]+[0-9]+)?)-docker\.pkg\.dev/")


def registry_far(spec: JobSpec, plan: tuple[PlannedAttempt, ...]) -> str | None:
    """A warning when the job's image lives in an Artifact Registry location far from the job
    (every replica pulls it across regions), else None; for a plan whose attempts (`plan`) run in
    other regions, a regional repository on another continent than some attempt. Pure: no network."""
    image = spec.image
    ref = image and (image.repository or image.uri)
    m = _REGISTRY_HOST.match(ref or "")
    if image is None or not m or not spec.region:
        return None
    location = m["location"]
    own = _registry_far_from(spec, location)
    if own or "-" not in location:
        return own
    field = "image.repository" if image.repository else "image.uri"
    continent = location.split("-")[0]
    away = [a for a in plan[1:] if a.region and a.region.split("-")[0] != continent]
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


def _registry_far_from(spec: JobSpec, location: str) -> str | None:
    image = spec.image
    assert image is not None and spec.region  # (registry_far read them)
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


def check_stand_ins(spec: JobSpec, settings: Settings, *, builder: str | None = None) -> None:
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
