"""Vertex AI CustomJobs: create (idempotent), get, list, cancel, and `Job` to follow one.

Transport: the JobService REST wire (`/v1/projects/P/locations/L/customJobs`) through the shared
`gcp.http.ApiClient`. The generated `aiplatform_v1` client costs about 1 s to import and retries
nothing on create; the body we send is the render output, which the tests parse with
`aiplatform_v1.CustomJob`. See docs/submitter.md.

Idempotency (docs/contract.md section 3): every job carries `vertex-trainer-key=<key>`. Before creating,
and after any create whose outcome is unknown (timeout, connection reset, 429/5xx), we list jobs
with that label and adopt the one found instead of creating a second job.

A create refused with 429 RESOURCE_EXHAUSTED naming a custom-training quota metric (the
project's quota for the accelerator, not a rate limit) is final: `Refused` at once, never
retried (capacity fallback, docs/contract.md section 8, moves on to the next strategy). So is a
create refused because the region does not offer the job's machine (`not_offered`: the region
table the pre-flight reads may be out of date; the fallback moves on to the next attempt).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from vertex_trainer.contract import KEY_LABEL, SPEC_LABEL
from vertex_trainer.errors import ServiceError
from vertex_trainer.gcp.http import ApiError, Budget, Transient, decode, look_after_lost, quota_metrics
from vertex_trainer.vertex.names import (
    check_key,
    console_url,
    job_name,
    new_key,
    parse_label,
    split_name,
)
from vertex_trainer.vertex.quotas import console_url as quota_url
from vertex_trainer.vertex.service import CollectionClient
from vertex_trainer.vertex.stateful import StatefulResource
from vertex_trainer.vertex.tensorboards import tensorboard_url

if TYPE_CHECKING:  # the spec's models, named for the type checker (a client needs no pydantic)
    from vertex_trainer.spec import JobSpec

__all__ = [
    "Job",
    "JobsClient",
    "check_key",
    "console_url",
    "create_idempotent",
    "job_name",
    "new_key",
    "parse_label",
    "split_name",
]

_PERMISSIONS = {
    "create": "aiplatform.customJobs.create",
    "get": "aiplatform.customJobs.get",
    "list": "aiplatform.customJobs.list",
    "cancel": "aiplatform.customJobs.cancel",
}
_RETRY_HINT = (
    "the Vertex AI API is unreachable or overloaded; run the same command again later "
    "(with the same --idempotency-key, no second job is created)"
)


class JobsClient(CollectionClient):
    """JobService over REST for one project and region (CustomJobs; a subclass names another
    collection of the same service, e.g. hptuning.TuningClient): get, cancel and list come from
    `CollectionClient`; the idempotent create is `create_idempotent`."""

    collection = "customJobs"
    retry_hint = _RETRY_HINT

    def create_once(self, job: dict[str, Any]) -> dict[str, Any]:
        """POST one CustomJob. Raises Transient when the outcome is unknown. Not retried here."""
        return decode(self.api.send("create", "POST", f"v1/{self.parent}/{self.collection}", json=job))

    def key_filter(self, key: str, also: dict[str, str] | None = None) -> str:
        terms = {KEY_LABEL: key, **(also or {})}
        return " AND ".join(f'labels.{k}="{v}"' for k, v in terms.items())

    def find_by_key(
        self, key: str, budget: Budget | None = None, also: dict[str, str] | None = None
    ) -> dict[str, Any] | None:
        """The job created with this idempotency key (and the labels `also`), the oldest should
        there be several."""
        found = self.list(self.key_filter(key, also), budget=budget)
        if len(found) > 1:
            self.log(f"warning: {len(found)} jobs carry {KEY_LABEL}={key}; adopting the oldest")
        return min(found, key=_age) if found else None

    def requests_for(self, job: dict[str, Any], key: str) -> list[dict[str, Any]]:
        """What an idempotent create sends, in order (for --dry-run); opens no connection: the
        look for the key's job, the create, and the look after it (`_keep_oldest`)."""
        look = {
            "method": "GET",
            "url": self.url(f"{self.parent}/{self.collection}"),
            "params": {"filter": self.key_filter(key)},
        }
        return [look, {"method": "POST", "url": look["url"], "body": job}, dict(look)]

    # -- errors --------------------------------------------------------------------------------
    def _user_error(self, op: str, err: ApiError) -> bool:
        return err.code == 404 and op in ("get", "cancel")  # the caller's job name: exit 2

    def _final(self, op: str, err: ApiError) -> bool:
        # a quota, not a rate limit; or a region that does not offer the machine
        return op == "create" and bool(capacity_quota(err) or not_offered(err))

    def _hint(self, op: str, err: ApiError) -> str | None:
        if err.code == 403:
            permission = f"aiplatform.{self.collection}.{op if op in _PERMISSIONS else '*'}"
            return (
                f"the caller needs {permission} on project "
                f"{self.project} (role roles/aiplatform.user); check the account with "
                "`gcloud auth list`, and that the Vertex AI API is enabled "
                "(gcloud services enable aiplatform.googleapis.com)"
            )
        if err.code == 404:
            if op in ("get", "cancel"):
                return (
                    f"no such job in project {self.project}, region {self.region}: check the "
                    "job name (`vertex-trainer list`) and --project/--region"
                )
            return (
                f"project {self.project!r} or region {self.region!r} was not found: check "
                "the spec's project/region (Vertex AI regions look like us-central1)"
            )
        if op == "create" and not_offered(err):
            return (
                f"Vertex AI does not offer this machine in {self.region} now (the region table "
                "vertex-trainer reads may be out of date): use another region (`vertex-trainer "
                "hardware --region R`), or add an attempt in another region to scheduling.fallback"
            )
        if err.code == 400:
            return "the service rejected the request; `vertex-trainer render SPEC` shows the body sent"
        metric = capacity_quota(err)
        if metric:
            return (
                f"the project's quota {metric.split('/')[-1]} in {self.region} is too small for "
                f"this job: ask for more at {quota_url(self.project, metric)}, try another "
                "region, or let scheduling.fallback try the next strategy"
            )
        return None


def capacity_quota(err: ApiError) -> str | None:
    """The custom-training quota metric a 429 RESOURCE_EXHAUSTED names (the project's allocation
    quota for an accelerator), or None (a rate limit such as custom_job_requests: retry it)."""
    if err.code != 429 and err.status != "RESOURCE_EXHAUSTED":
        return None
    return next((m for m in quota_metrics(err) if "/custom_model_training_" in m), None)


# "... is not supported in region R", "... not available in this location", "... not supported in
# locations: [zone]": a refusal of the place. "Accelerator X is not supported for machine type Y"
# names no place (no region serves that pair): it stays an error.
_NOT_HERE = re.compile(
    r"\b(not supported|not available|unavailable|not offered)\b[^.;]*"
    r"(\b(region|location|zone)s?\b|\bin [a-z]+-[a-z]+[0-9]+)",
    re.IGNORECASE,
)
_MACHINE = re.compile(r"\b(machine|accelerator|gpu|tpu)", re.IGNORECASE)


def not_offered(err: ApiError) -> bool:
    """Is `err` a create refused because the region does not offer the job's machine or
    accelerator? A 400 (INVALID_ARGUMENT or FAILED_PRECONDITION) whose message names a machine or
    accelerator and says it is not supported, available or offered in a region, location or zone."""
    if err.code != 400 and err.status not in ("INVALID_ARGUMENT", "FAILED_PRECONDITION"):
        return False
    return bool(_MACHINE.search(err.message) and _NOT_HERE.search(err.message))


def create_idempotent(
    client: JobsClient, job: dict[str, Any], key: str, *, match: tuple[str, ...] = ()
) -> tuple[dict[str, Any], bool]:
    """Create `job` (which carries the key label) at most once. Returns (job, adopted).

    `match`: more of the body's label keys a job must share to count as this one (the attempt
    label: the attempts of one key are different jobs). A create refused for quota raises
    `Refused` (gcp.http) at once."""
    labels = job.get("labels") or {}
    if labels.get(KEY_LABEL) != key:
        raise ValueError(f"the job body must carry the label {KEY_LABEL}={key}")
    also = {name: labels[name] for name in match}
    budget = client.api.budget()
    existing = client.find_by_key(key, budget, also)
    if existing is not None:
        _warn_if_other_spec(client, existing, job)
        return existing, True
    try:
        while True:
            try:
                return _keep_oldest(client, client.create_once(job), key, also)
            except Transient as exc:
                # The service may have committed the job before the answer was lost: look first.
                client.log(f"create: {exc}; checking whether the job was created")
                existing = look_after_lost(
                    lambda: client.find_by_key(key, budget, also), exc, window=client.api.retry.read_timeout
                )
                if existing is not None:
                    return existing, True
                budget.backoff("create", str(exc), retry_hint=_RETRY_HINT)
    except KeyboardInterrupt:
        # Ctrl-C once a create may have been sent: the job may exist (and bill) though nothing
        # named it; the key (random unless given) is the one way to find it, or adopt it.
        find = (  # (`list` lists CustomJobs; a tuning job is found by the key's adoption alone)
            f"; find it: vertex-trainer list --label {KEY_LABEL}={key}"
            if client.collection == "customJobs"
            else ""
        )
        client.log(
            f"interrupted while creating the job: it may have been created. Submit again with "
            f"--idempotency-key {key} to adopt it (no second job is created){find}"
        )
        raise


def _age(job: dict[str, Any]) -> tuple[str, str]:
    """The order of a key's jobs, oldest first: every process that looks sorts them the same."""
    return str(job.get("createTime", "")), str(job.get("name", ""))


def _keep_oldest(
    client: JobsClient, made: dict[str, Any], key: str, also: dict[str, str]
) -> tuple[dict[str, Any], bool]:
    """The look after a create. Two submits with one idempotency key at the same instant (a CI
    job and its retry, a script started twice) both find no job in the look before and both
    create one: CustomJobs and tuning jobs take no client-chosen id. Both would run, billed, into
    the key's one folder (`<output_dir>/<name>-<key>/`), each over the other's model and
    checkpoints. Each then keeps the oldest job of the key: the newer cancels its own (queued:
    nothing ran) and adopts the oldest. Returns (job, adopted)."""
    try:
        found = {j.get("name"): j for j in client.list(client.key_filter(key, also))}
    except ServiceError as exc:  # the create stands; only the look failed
        client.log(f"warning: could not look for another job with the key {key} after the create: {exc}")
        return made, False
    found.setdefault(made.get("name"), made)
    oldest = min(found.values(), key=_age)
    if oldest.get("name") == made.get("name"):
        return made, False
    client.log(
        f"another submit with the idempotency key {key} created {oldest.get('name')} at the same "
        f"time: cancelling this one, {made.get('name')} (queued, nothing ran), and adopting that"
    )
    client.cancel(str(made["name"]))
    return oldest, True


def _warn_if_other_spec(client: JobsClient, existing: dict[str, Any], job: dict[str, Any]) -> None:
    theirs = (existing.get("labels") or {}).get(SPEC_LABEL)
    ours = (job.get("labels") or {}).get(SPEC_LABEL)
    if theirs and ours and theirs != ours:
        client.log(
            f"warning: adopting {existing.get('name')}, created with the same idempotency "
            f"key from a different spec ({SPEC_LABEL} {theirs} != {ours}); use a new "
            "--idempotency-key to submit the changed spec"
        )


class Job(StatefulResource):
    """A Vertex AI CustomJob: `name`, `state`, `console_url`, `refresh()`, `wait()`, `cancel()`
    (`StatefulResource`), plus the image it runs and, with scheduling.fallback, its attempts.

    Returned by `vertex_trainer.submit`; `Job.get(name)` attaches to any job."""

    client_class: ClassVar[type[JobsClient]] = JobsClient  # a subclass names its collection's client
    kind = "job"  # what messages call it
    console_page = "training/{id}/cpu"
    output_fields = ("name", "state", "console_url", "image", "idempotency_key", "adopted")
    sdk_class = "CustomJob"

    def __init__(
        self,
        data: dict[str, Any],
        client: JobsClient,
        *,
        image: str | None = None,
        idempotency_key: str | None = None,
        adopted: bool = False,
        attempts: Sequence[Any] | None = None,
        spec: JobSpec | None = None,
    ):
        """Args: data, client, idempotency_key, adopted: as for StatefulResource; image: the
        image the job runs; attempts: with scheduling.fallback, what each attempt of the submit
        met, in order (capacity.fallback.AttemptRecord: `attempt_records`, and their JSON form
        `attempts`); spec: the JobSpec it was submitted from (Job.deploy uses it)."""
        super().__init__(data, client, idempotency_key=idempotency_key, adopted=adopted)
        self.client: JobsClient = client
        self.image = image
        self.attempt_records: tuple[Any, ...] = tuple(attempts or ())
        self.attempts: list[dict[str, Any]] | None = (
            None if attempts is None else [a.to_dict() for a in self.attempt_records]
        )
        self.spec = spec

    @property
    def web_access_uris(self) -> dict[str, str]:
        """Replica ("workerpool0-0") -> the URI of its interactive shell, while the job runs with
        enable_web_access (docs/contract.md section 11); {} otherwise. `refresh()` first for news."""
        return dict(self.data.get("webAccessUris") or {})

    @property
    def output_dir(self) -> str | None:
        """The job's own folder (its baseOutputDirectory: model/, checkpoints/, logs/ and
        metrics.json; docs/contract.md section 15), or None when it has none."""
        base = ((self.data.get("jobSpec") or {}).get("baseOutputDirectory") or {}).get("outputUriPrefix")
        return str(base).rstrip("/") if base else None

    def to_dict(self) -> dict[str, Any]:
        """The docs/contract.md section 2 submit object, with the job's own folder
        ("output_dir") and, when the spec has a fallback, "attempts"."""
        out = super().to_dict()
        out["output_dir"] = self.output_dir
        if self.attempts is not None:
            out["attempts"] = self.attempts
        return out

    @property
    def tensorboard(self) -> str | None:
        """The Vertex AI TensorBoard instance the job writes to (jobSpec.tensorboard), or None."""
        return (self.data.get("jobSpec") or {}).get("tensorboard") or None

    @property
    def tensorboard_url(self) -> str | None:
        """The job's page in Vertex AI TensorBoard (vertex/tensorboards.py), or None without one."""
        return tensorboard_url(self.tensorboard, self.name)

    def describe(self) -> dict[str, Any]:
        """The status object (StatefulResource.describe) with the job's own folder and, when it
        has a TensorBoard instance, its page there ("tensorboard_url"; None without one)."""
        return {**super().describe(), "output_dir": self.output_dir, "tensorboard_url": self.tensorboard_url}
