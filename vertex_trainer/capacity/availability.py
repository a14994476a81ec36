"""Know before submitting: does each attempt's region offer its accelerator, does the project's
quota cover it, does the persistent resource fit? (issue 13, docs/contract.md sections 8 and 11;
fallback.py handles what this cannot know.)

- `region_warning(spec, plan)` / `check_regions(plan)`: pure, from the table in regions.py. The spec's
  own region (attempt 1) gets a warning, never an error: the user chose it, the table is read from
  the docs on a date and the service decides. A fallback attempt the plan moves to a region the
  table says does not offer its accelerator is exit 2, naming the attempt and the regions that do
  (the nearest first in the hint); where the table is unsure (an accelerator read from the Cloud
  TPU / Compute Engine zone pages), a warning. Where the table is wrong, the service's refusal of
  the create moves the plan on (fallback.py, reason skipped-not-offered).
- `check_quota(spec, plan, settings=..., log=...)`: reads the project's custom-training quota for each
  attempt's accelerator in its region (Cloud Quotas API, vertex/quotas.py); standard counts
  against custom_model_training_<gpu>, spot and flex-start against the preemptible_ variant. A
  limit below what the job needs, for every attempt of the plan, is a UserError (exit 2, nothing
  built or created) naming the numbers and the page to ask for more; for some attempts only,
  those attempts are skipped without a create (one line each). A quota that cannot be read (403,
  no credentials, the API disabled, a network error) is a warning, never a failure. Offline
  (Vertex AI is an emulator and no quota endpoint is set) it is skipped, like the bucket check.
- `check_persistent_resource(spec, ...)`: persistent_resource must be RUNNING with a pool that
  fits each worker pool (vertex/resources.py), else exit 2 naming the mismatch.
- `warnings(spec, plan)`: the pure warnings of a cloud submit (the submit plan holds them);
  `before_submit(...)`: the reads a cloud submit makes before it sends; returns the attempts to skip.

`plan` is always the capacity plan's attempts as the caller planned them (spec/attempts.py; a
submit's SubmitPlan holds them): nothing here plans them again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from vertex_trainer import regions, render
from vertex_trainer.contract import Artifact
from vertex_trainer.errors import UserError, VertexTrainerError
from vertex_trainer.log import Log, silent
from vertex_trainer.preflight import ReducerCpus, reducer_cpus, registry_far, short_retry
from vertex_trainer.settings import Settings
from vertex_trainer.spec import JobSpec
from vertex_trainer.spec.attempts import PlannedAttempt
from vertex_trainer.spec.rules import warnings as spec_warnings
from vertex_trainer.suggest import nearest
from vertex_trainer.vertex.quotas import INCREASE_DOC, QuotasClient
from vertex_trainer.vertex.resources import PersistentResource, ResourcesClient, fit_problems

Plan = tuple[PlannedAttempt, ...]  # the capacity plan's attempts, attempt 1 first


@dataclass(frozen=True)
class QuotaCheck:
    """The quota of some attempts (those counting against one metric in one region) against what
    the job needs."""

    strategy: str  # the strategies that count against `metric` ("flex-start, spot")
    metric: str
    region: str
    needed: int
    limit: int | None = None  # None: unlimited (when `known`)
    known: bool = True  # False: the quota could not be read (`why`)
    why: str | None = None
    request_url: str | None = None
    attempts: tuple[int, ...] = (1,)  # the attempts of the plan this check covers
    accelerator: str | None = None  # theirs (a fallback entry may name other hardware)

    @property
    def short(self) -> bool:
        """Clearly insufficient: the limit is below what the job needs."""
        return self.known and self.limit is not None and self.limit < self.needed

    def describe(self, accelerator: str) -> str:
        accelerator = self.accelerator or accelerator
        name = self.metric.split("/")[-1]
        if not self.known:
            return f"{self.strategy}: quota {name} in {self.region} not checked ({self.why})"
        limit = "unlimited" if self.limit is None else self.limit
        text = f"{self.strategy}: needs {self.needed} {accelerator}, quota {limit} in {self.region} ({name})"
        return text + (f"; ask for more: {self.request_url}" if self.short else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "metric": self.metric,
            "region": self.region,
            "needed": self.needed,
            "limit": self.limit,
            "known": self.known,
            "why": self.why,
            "request_url": self.request_url,
            "short": self.short,
            "attempts": list(self.attempts),
        }


def accelerator(spec: JobSpec) -> str | None:
    acc = spec.hardware.accelerator
    return acc.name if acc else None


def region_warning(spec: JobSpec, plan: Plan) -> str | None:
    """A warning when the spec's region does not offer its accelerator for training, and one line
    more for each fallback attempt in a region that may not offer its accelerator (one whose
    regions the table knows with low confidence: check_regions lets it through, and a refusal
    of its create moves the plan on, fallback.py). None when there is nothing to say."""
    lines = [regions.availability_warning(spec.region, accelerator(spec))]
    for a in plan[1:]:
        acc = a.hardware.accelerator
        if acc is None or not a.region or (a.region, a.hardware) == (plan[0].region, plan[0].hardware):
            continue
        if acc.name in regions.UNCERTAIN and regions.offers(a.region, acc.name) is False:
            then = (
                "the plan moves on to the next attempt" if a.n < len(plan) else "the plan ends there (exit 3)"
            )
            lines.append(
                f"warning: {a.field}: {a.describe()}: {a.region} may not offer {acc.name} for "
                f"Vertex AI training (regions known to: {', '.join(regions.regions_for(acc.name))}); "
                f"if the service refuses it there, {then}"
            )
    found = [line for line in dict.fromkeys(lines) if line]
    return "\n".join(found) or None


def check_regions(plan: Plan) -> None:
    """Exit 2 (UserError) when a fallback attempt of `plan` runs where the region table says its
    accelerator is not offered for training: the attempt, and the regions that do."""
    first = plan[0]
    for a in plan[1:]:
        acc = a.hardware.accelerator
        if acc is None or (a.region, a.hardware) == (first.region, first.hardware):
            continue  # attempt 1's region and hardware: region_warning's
        if a.region and regions.offers(a.region, acc.name) is False and acc.name not in regions.UNCERTAIN:
            offered = regions.regions_for(acc.name)
            near = (nearest(a.region, offered, n=1) or [*offered, "R"])[0]  # us-west2 -> us-west1
            raise UserError(
                f"{a.field}: {a.describe()}: {a.region} does not offer {acc.name} for "
                f"Vertex AI training; regions that do: {', '.join(offered)}; nothing was created",
                hint=f"give the entry a region that does (region: {near}), "
                f"or other hardware (vertex-trainer hardware --region {a.region}); "
                f"source: {regions.LOCATIONS_URL} (read {regions.READ})",
            )


def offline(settings: Settings) -> bool:
    return settings.offline and not settings.quotas_endpoint


def quota_checks(
    spec: JobSpec, plan: Plan, *, settings: Settings, log: Log | None = None, session: Any = None
) -> list[QuotaCheck]:
    """The quota of every attempt of the plan against the job's need (accelerators x machines),
    one check per (metric, region), then the CPU quota of a Reduction Server job's reducers
    (preflight.reducer_cpus); [] when there is nothing to check (a CPU job, no project or region,
    an unknown metric)."""
    if not spec.project or not spec.region:
        return []
    # (metric, region, devices) -> attempts: flex-start and spot share the preemptible quota
    groups: dict[tuple[str, str, int], list[PlannedAttempt]] = {}
    # the reducers': (metric, region, vCPUs) -> attempts
    cpus: dict[tuple[str, str, int], list[tuple[PlannedAttempt, ReducerCpus]]] = {}
    for a in plan:
        acc = a.hardware.accelerator
        if acc is None or not a.region:
            continue
        metric = regions.quota_metric(acc.name, a.strategy)
        if not metric:
            return []
        groups.setdefault((metric, a.region, a.hardware.devices), []).append(a)
        need = reducer_cpus(spec, a)
        if need is not None:
            cpus.setdefault((need.metric, need.region, need.needed), []).append((a, need))
    if not groups:
        return []
    # A pre-flight must not hold a submit for minutes: a short budget, then a warning.
    retry = short_retry(settings)
    client = QuotasClient(spec.project, settings=settings, retry=retry, log=log or silent, session=session)

    def base(metric: str, region: str, group: list[PlannedAttempt]) -> QuotaCheck:
        names = ", ".join(dict.fromkeys(a.strategy for a in group))
        acc = group[0].hardware.accelerator  # (each attempt of a group has one: see above)
        return QuotaCheck(
            names,
            metric,
            region,
            spec.replicas * group[0].hardware.devices,
            attempts=tuple(a.n for a in group),
            accelerator=acc.name if acc else None,
        )

    def reducer_base(
        metric: str, region: str, needed: int, group: list[tuple[PlannedAttempt, ReducerCpus]]
    ) -> QuotaCheck:
        return QuotaCheck(
            ", ".join(dict.fromkeys(a.strategy for a, _ in group)),
            metric,
            region,
            needed,
            attempts=tuple(a.n for a, _ in group),
            accelerator=group[0][1].what,
        )

    checks = [base(m, r, g) for (m, r, _), g in groups.items()]
    checks += [reducer_base(m, r, n, g) for (m, r, n), g in cpus.items()]
    try:
        client.infos()
    except VertexTrainerError as exc:  # 403, disabled API, no credentials, network: not checked
        why = exc.message + (f" ({exc.hint})" if exc.hint else "")
        return [dataclasses.replace(c, known=False, why=why) for c in checks]
    out = []
    for check in checks:
        metric, region = check.metric, check.region
        quota = client.limit(metric, region)
        if quota is None:
            out.append(dataclasses.replace(check, known=False, why="the project lists no such quota"))
        else:
            out.append(dataclasses.replace(check, limit=quota.limit, request_url=quota.request_url))
    return out


def check_quota(
    spec: JobSpec, plan: Plan, *, settings: Settings, log: Log, session: Any = None
) -> list[QuotaCheck]:
    """Read the quotas (see the module doc); raise UserError when every attempt is clearly
    short, warn when some are or when a quota could not be read. Returns the checks (the short
    ones name the attempts a submit skips)."""
    if offline(settings):
        return []
    checks = quota_checks(spec, plan, settings=settings, log=log, session=session)
    acc = accelerator(spec) or ""
    short = [c for c in checks if c.short]
    covered = {n for c in checks for n in c.attempts}
    if short and covered <= {n for c in short for n in c.attempts}:  # no attempt left to run
        lines = [c.describe(acc) for c in short]
        first = short[0]
        what = (
            f"needs {first.needed} {first.accelerator or acc}, quota {first.limit} in {first.region} "
            f"({first.metric.split('/')[-1]})"
            if len(short) == 1
            else "every strategy of the plan is short of quota:\n  " + "\n  ".join(lines)
        )
        raise UserError(
            f"quota: {what}; nothing was created",
            hint=f"ask for more at {first.request_url} ({INCREASE_DOC}), use a region "
            "with quota (vertex-trainer hardware --region R), or skip this check "
            "with --no-quota-check",
        )
    for check in checks:
        if check.short or not check.known:
            log(f"warning: quota: {check.describe(acc)}")
    return checks


def skipped_attempts(checks: list[QuotaCheck]) -> dict[int, str]:
    """attempt n -> why a submit skips it: its quota is clearly too small (fallback.py)."""
    out: dict[int, str] = {}
    for check in checks:
        if check.short:
            for n in check.attempts:
                out[n] = (
                    f"quota {check.metric.split('/')[-1]} in {check.region} is {check.limit}, "
                    f"the job needs {check.needed}"
                )
    return out


def check_persistent_resource(
    spec: JobSpec,
    *,
    settings: Settings,
    log: Log,
    session: Any = None,
    pools: list[dict[str, Any]] | None = None,
) -> PersistentResource | None:
    """Read spec.persistent_resource and refuse (exit 2, nothing created) one that is not RUNNING
    or has no pool that fits each worker pool of the job (`pools`: the submit plan's, else
    rendered here); returns the resource, parsed (None: no such field)."""
    if not spec.persistent_resource:
        return None
    client = ResourcesClient(spec.project, spec.region, settings=settings, log=log, session=session)
    resource = client.read(spec.persistent_resource)
    if pools is None:
        pools = render.worker_pools(spec, Artifact("(the machines only)"))
    problem = fit_problems(resource, pools)
    if problem:
        raise UserError(
            f"persistent_resource: {resource.name} {problem}; nothing was created",
            hint="create one that fits: vertex-trainer resources create SPEC --id ID, or "
            "change the spec's hardware / boot_disk / replicas to match a pool "
            "(vertex-trainer resources list)",
        )
    return resource


def warnings(spec: JobSpec, plan: Plan) -> list[str]:
    """The warnings a cloud submit shows before it sends (valid, nothing stops): the spec's
    settings without effect, an image registry far from the region, a region the table says does
    not offer the accelerator. Pure: the submit plan holds them, validate and submit print them."""
    found = [*spec_warnings(spec), registry_far(spec, plan), region_warning(spec, plan)]
    return [w for w in found if w]


def before_submit(
    spec: JobSpec,
    plan: Plan,
    *,
    settings: Settings,
    log: Log,
    quota: bool = True,
    pools: list[dict[str, Any]] | None = None,
) -> dict[int, str]:
    """What a cloud submit reads before it builds or sends (the plan made the pure checks:
    `warnings`, `check_regions`): the quota pre-flight (unless `quota=False`), then the
    persistent resource.

    Args:
        spec: the JobSpec; plan: its attempts (the SubmitPlan's); settings: the endpoints and
            policies; log: warnings and notes.
        quota: read the quotas (False: --no-quota-check).
        pools: the job's worker pools, as the plan rendered them (None: rendered here).
    Returns:
        attempt n -> why it is skipped (its quota is clearly too small)."""
    skipped = skipped_attempts(check_quota(spec, plan, settings=settings, log=log)) if quota else {}
    check_persistent_resource(spec, settings=settings, log=log, pools=pools)
    return skipped
