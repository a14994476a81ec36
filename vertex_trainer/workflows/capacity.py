"""Know before submitting: does the region offer the accelerator, and does the project's quota
cover the job? (issue 13; docs/contract.md section 8 is the fallback that handles what this cannot know.)

- `region_warning(spec)`: pure, from the table in regions.py (a warning, never an error: the
  table is read from the docs on a date, the service decides).
- `check_quota(spec, settings=..., log=...)`: reads the project's custom-training quota for the
  accelerator in the job's region (Cloud Quotas API, vertex/quotas.py) for each strategy of the
  plan (standard counts against custom_model_training_<gpu>, spot and flex-start against the
  preemptible_ variant). A limit below what the job needs, for every strategy of the plan, is a
  UserError (exit 2, nothing built or created) naming the numbers and the page to ask for more;
  for some of them only, a warning. A quota that cannot be read (403, no credentials, the API
  disabled, a network error) is a warning, never a failure. Offline (Vertex AI is an emulator and
  no quota endpoint is set) it is skipped, like the bucket pre-flight.
- `before_submit(...)`: both, as a cloud submit runs them (`quota=False`: --no-quota-check).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from vertex_trainer import regions
from vertex_trainer.errors import UserError, VertexTrainerError
from vertex_trainer.settings import Settings

Log = Callable[[str], None]


@dataclass(frozen=True)
class QuotaCheck:
    """One strategy's quota against what the job needs."""

    strategy: str                     # the strategies that count against `metric` ("flex-start, spot")
    metric: str
    region: str
    needed: int
    limit: int | None = None          # None: unlimited (when `known`)
    known: bool = True                # False: the quota could not be read (`why`)
    why: str | None = None
    request_url: str | None = None

    @property
    def short(self) -> bool:
        """Clearly insufficient: the limit is below what the job needs."""
        return self.known and self.limit is not None and self.limit < self.needed

    def describe(self, accelerator: str) -> str:
        name = self.metric.split("/")[-1]
        if not self.known:
            return f"{self.strategy}: quota {name} in {self.region} not checked ({self.why})"
        limit = "unlimited" if self.limit is None else self.limit
        text = f"{self.strategy}: needs {self.needed} {accelerator}, quota {limit} in {self.region} ({name})"
        return text + (f"; ask for more: {self.request_url}" if self.short else "")

    def to_dict(self) -> dict:
        return {"strategy": self.strategy, "metric": self.metric, "region": self.region,
                "needed": self.needed, "limit": self.limit, "known": self.known, "why": self.why,
                "request_url": self.request_url, "short": self.short}


def plan(spec) -> tuple[str, ...]:
    """scheduling.strategy, then scheduling.fallback."""
    return (spec.scheduling.strategy, *(spec.scheduling.fallback or ()))


def accelerator(spec) -> str | None:
    acc = spec.hardware.accelerator
    return acc.name if acc else None


def region_warning(spec) -> str | None:
    """A warning when the spec's region does not offer its accelerator for training."""
    return regions.availability_warning(spec.region, accelerator(spec))


def offline(settings: Settings) -> bool:
    return settings.offline and not settings.quotas_endpoint


def quota_checks(spec, *, settings: Settings, log: Log | None = None, session=None) -> list[QuotaCheck]:
    """The quota of every strategy of the plan against the job's need (accelerators x machines);
    [] when there is nothing to check (a CPU job, no project or region, an unknown metric)."""
    acc = accelerator(spec)
    if not acc or not spec.project or not spec.region:
        return []
    metrics = {s: regions.quota_metric(acc, s) for s in plan(spec)}
    if not all(metrics.values()):
        return []
    from vertex_trainer.vertex.quotas import QuotasClient

    # A pre-flight must not hold a submit for minutes: a short budget, then a warning.
    retry = dataclasses.replace(settings.retry, attempts=min(settings.retry.attempts, 3),
                                deadline=min(settings.retry.deadline, 15.0),
                                read_timeout=min(settings.retry.read_timeout, 10.0))
    client = QuotasClient(spec.project, settings=settings, retry=retry, log=log or (lambda _: None),
                          session=session)
    needed = spec.total_devices
    by_metric: dict[str, list[str]] = {}
    for strategy, metric in metrics.items():  # flex-start and spot share the preemptible quota
        by_metric.setdefault(metric, []).append(strategy)
    try:
        client.infos()
    except VertexTrainerError as exc:  # 403, disabled API, no credentials, network: not checked
        why = exc.message + (f" ({exc.hint})" if exc.hint else "")
        return [QuotaCheck(", ".join(s), m, spec.region, needed, known=False, why=why)
                for m, s in by_metric.items()]
    out = []
    for metric, strategies in by_metric.items():
        base = QuotaCheck(", ".join(strategies), metric, spec.region, needed)
        quota = client.limit(metric, spec.region)
        if quota is None:
            out.append(dataclasses.replace(base, known=False, why="the project lists no such quota"))
        else:
            out.append(dataclasses.replace(base, limit=quota.limit, request_url=quota.request_url))
    return out


def check_quota(spec, *, settings: Settings, log: Log, session=None) -> list[QuotaCheck]:
    """Read the quotas (see the module doc); raise UserError when every strategy is clearly
    short, warn when some are or when a quota could not be read. Returns the checks."""
    if offline(settings):
        return []
    checks = quota_checks(spec, settings=settings, log=log, session=session)
    acc = accelerator(spec) or ""
    if checks and all(c.short for c in checks):
        from vertex_trainer.vertex.quotas import INCREASE_DOC

        lines = [c.describe(acc) for c in checks]
        first = checks[0]
        what = (f"needs {first.needed} {acc}, quota {first.limit} in {first.region} "
                f"({first.metric.split('/')[-1]})" if len(checks) == 1
                else "every strategy of the plan is short of quota:\n  " + "\n  ".join(lines))
        raise UserError(f"quota: {what}; nothing was created",
                        hint=f"ask for more at {first.request_url} ({INCREASE_DOC}), use a region "
                             "with quota (vertex-trainer hardware --region R), or skip this check "
                             "with --no-quota-check")
    for check in checks:
        if check.short or not check.known:
            log(f"warning: quota: {check.describe(acc)}")
    return checks


def before_submit(spec, *, settings: Settings, log: Log, quota: bool = True) -> None:
    """What a cloud submit knows before it builds or sends: the region warning, then (unless
    `quota=False`) the quota pre-flight."""
    warning = region_warning(spec)
    if warning:
        log(warning)
    if quota:
        check_quota(spec, settings=settings, log=log)
