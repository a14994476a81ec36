"""Capacity fallback (docs/contract.md sections 8 and 11): the plan's attempts tried in order, each
as its own job in its own region, under one idempotency key.

The plan is spec/attempts.py's: attempt 1 is the spec's own (strategy, region, hardware,
reservation), each scheduling.fallback entry one more. Attempt n carries the label
vertex-trainer-attempt=n beside the key label and is created under its region's parent, through
that region's endpoint (`clients(region)`). An attempt is refused when

- its create answers 429 RESOURCE_EXHAUSTED naming a custom-training quota metric (the
  project's quota for the accelerator in that region: `gcp.http.Refused`, never retried),
- its create answers 400 saying the region does not offer the job's machine or accelerator
  (`vertex.jobs.not_offered`; the region table the pre-flight checked is read from the docs on a
  date, the service decides): reason `skipped-not-offered`, no job made, or
- its job ends FAILED (or EXPIRED) with error code 8, RESOURCE_EXHAUSTED ("Resources are
  insufficient in region ..."; a Flex Start job whose max_wait passed without capacity),

and skipped without a create when the pre-flight found its quota clearly too small
(`skipped`, from capacity/availability.py). Then the next attempt is submitted. A job that fails for
any other reason, or is cancelled, is final: never resubmitted. A refusal of the second kind is
seen only by following the job, so it needs `wait`; a re-run with the same key looks in every
region of the plan, adopts the latest attempt (and, when that attempt was refused and the plan
has more, goes on with the next one, as the first run would have).

Each attempt is planned and its CustomJob rendered once, in the submit plan (api/plan.py):
`submit` sends the plan's attempts (`Attempt`: the planned attempt and its body) and neither
plans nor renders anything again. What the service answers about a job is parsed once into a
`JobAnswer` (its region, attempt, state, strategy, machine, error); what each attempt met is a
typed `AttemptRecord` (SkyPilot's failover history): the JSON `attempts` and the text summary
print from the records, never from parsed messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from vertex_trainer.contract import ATTEMPT_LABEL, state_name
from vertex_trainer.errors import JobFailed, UserError
from vertex_trainer.gcp.http import Refused
from vertex_trainer.log import Log
from vertex_trainer.spec.attempts import PlannedAttempt
from vertex_trainer.vertex.custom_jobs import Job, JobsClient, create_idempotent, not_offered
from vertex_trainer.vertex.names import split_name

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.spec import JobSpec

RESOURCE_EXHAUSTED = 8  # google.rpc.Code
Follow = Callable[[Job, "float | None"], Any]
Clients = Callable[[str], JobsClient]
Reason = Literal["no-capacity", "quota", "skipped-quota", "skipped-not-offered"]
REASONS: tuple[str, ...] = ("no-capacity", "quota", "skipped-quota", "skipped-not-offered")


class Attempt(Protocol):
    """One attempt of the submit plan as the fallback sends it (api/plan.py's AttemptPlan): where
    and how it runs, and its CustomJob, rendered once."""

    @property
    def planned(self) -> PlannedAttempt: ...

    @property
    def body(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class JobAnswer:
    """A CustomJob as the service answered it, parsed once: what the fallback reads of it (where
    it runs, which attempt of the plan it is, its state, strategy and machine, its error). `data`
    is the answer itself, for the Job handle."""

    data: dict
    name: str | None
    region: str | None  # from the name (None: not a custom job's name; the plan says)
    attempt: int  # the vertex-trainer-attempt label (a job without it: the first)
    state: str | None
    strategy: str  # its scheduling strategy, as the spec spells it ("flex-start")
    machine: str
    error_code: int | None
    error_message: str | None
    create_time: str

    @classmethod
    def of(cls, data: Mapping) -> JobAnswer:
        """The answer `data` (a CustomJob's REST JSON), parsed."""
        data = dict(data or {})
        name = data.get("name") or None
        try:
            region: str | None = split_name(name or "", "customJobs")[1]
        except ValueError:
            region = None
        try:
            attempt = max(1, int((data.get("labels") or {}).get(ATTEMPT_LABEL, 1)))
        except ValueError:
            attempt = 1
        job_spec = data.get("jobSpec") or {}
        strategy = str((job_spec.get("scheduling") or {}).get("strategy", "?")).lower().replace("_", "-")
        pools = job_spec.get("workerPoolSpecs") or [{}]
        machine = str(((pools[0] or {}).get("machineSpec") or {}).get("machineType", "?"))
        error = data.get("error") or {}
        raw = error.get("code")
        try:
            code = None if raw is None else int(raw)
        except (TypeError, ValueError):
            code = None
        return cls(
            data,
            name,
            region,
            attempt,
            state_name(data.get("state")),
            strategy,
            machine,
            code,
            error.get("message"),
            str(data.get("createTime") or ""),
        )

    @property
    def refusal(self) -> str | None:
        """Why a job that ended was refused for capacity (the service's words), or None."""
        if (
            self.state not in ("JOB_STATE_FAILED", "JOB_STATE_EXPIRED")
            or self.error_code != RESOURCE_EXHAUSTED
        ):
            return None
        return f"no capacity (code 8 RESOURCE_EXHAUSTED): {self.error_message or 'no message'}"

    @property
    def error(self) -> str | None:
        """The error of a job that ended other than SUCCEEDED (why it is final), else None."""
        if self.state in ("JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"):
            return self.error_message or "ended without a message"
        return None


@dataclass(frozen=True)
class AttemptRecord:
    """What one attempt of the plan met: its job (`name` None when no job was made: the create
    was refused or the attempt skipped), the job's `state`, and `reason`, why the plan moved on
    (None: it did not, e.g. the last attempt, or a job that failed on its own). `message` is the
    service's words (or why the job is final)."""

    n: int
    region: str | None
    strategy: str
    hardware: str
    name: str | None = None
    state: str | None = None
    reason: Reason | None = None
    message: str | None = None

    @property
    def refused(self) -> bool:
        """True when the plan moved on from this attempt (capacity, quota, or skipped)."""
        return self.reason is not None

    def outcome(self) -> str:
        """'FAILED (no capacity)', 'refused (quota)', 'skipped (quota)', 'refused (not offered
        there)', 'SUCCEEDED'."""
        if self.reason == "skipped-quota":
            return "skipped (quota)"
        if self.reason == "skipped-not-offered":  # the service's answer to the create: no job made
            return "refused (not offered there)"
        if self.name is None and self.reason is None:  # passed over in an earlier run (passed_over)
            return "refused in an earlier run"
        what = (self.state or "").removeprefix("JOB_STATE_") or "refused"
        if self.reason == "no-capacity":
            what += " (no capacity)"
        elif self.reason == "quota":
            what += " (quota)"
        return what

    def to_dict(self) -> dict:
        """The JSON record (docs/contract.md section 11)."""
        return {
            "attempt": self.n,
            "region": self.region,
            "strategy": self.strategy,
            "hardware": self.hardware,
            "name": self.name,
            "state": self.state,
            "reason": self.reason,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> AttemptRecord:
        """The record of a JSON attempt (`to_dict`'s form)."""
        reason = data.get("reason")
        return cls(
            int(data["attempt"]),
            data.get("region"),
            str(data.get("strategy") or "?"),
            str(data.get("hardware") or "?"),
            data.get("name"),
            data.get("state"),
            reason if reason in REASONS else None,
            data.get("message"),
        )


def summary(records: Iterable[AttemptRecord | Mapping[str, Any]]) -> str:
    """One line from the records: 'flex-start FAILED (no capacity) -> spot refused (quota) ->
    standard SUCCEEDED'; each attempt's region (and hardware) is named when the plan has more
    than one."""
    typed = [r if isinstance(r, AttemptRecord) else AttemptRecord.from_dict(r) for r in records]
    regions = len({r.region for r in typed}) > 1
    machines = len({r.hardware for r in typed}) > 1
    parts = []
    for r in typed:
        where = (f" in {r.region}" if regions else "") + (f" on {r.hardware}" if machines else "")
        parts.append(f"{r.strategy}{where} {r.outcome()}")
    return " -> ".join(parts)


def refusal(data: Mapping) -> str | None:
    """Why a job that ended was refused for capacity (the service's words), or None (it
    succeeded, runs, was cancelled or failed for another reason)."""
    return JobAnswer.of(data).refusal


def attempt_of(data: Mapping) -> int:
    """The attempt a job of the key is (a job without the label: the first)."""
    return JobAnswer.of(data).attempt


def record_of(answer: JobAnswer | Mapping, planned: PlannedAttempt | None, n: int) -> AttemptRecord:
    """The record of an attempt's job (its answer), planned as `planned` (None: beyond today's plan)."""
    job = answer if isinstance(answer, JobAnswer) else JobAnswer.of(answer)
    why = job.refusal
    return AttemptRecord(
        n,
        job.region or (planned.region if planned else None),
        planned.strategy if planned else job.strategy,
        planned.hardware_name if planned else job.machine,
        job.name,
        job.state,
        "no-capacity" if why else None,
        why or job.error,
    )


EARLIER_RUN = (
    "no job in any region of the plan: an earlier run's create was refused (quota, or "
    "not offered there) or the attempt was skipped; the service's words are not stored"
)


def passed_over(planned: PlannedAttempt, skipped: str | None = None) -> AttemptRecord:
    """The record, on a re-run, of an attempt the plan went past without a job (an earlier run's
    create was refused): `skipped-quota` when today's pre-flight skips it too (`skipped`: why),
    else without a reason (not stored anywhere the re-run can read) and EARLIER_RUN as message."""
    return AttemptRecord(
        planned.n,
        planned.region,
        planned.strategy,
        planned.hardware_name,
        reason="skipped-quota" if skipped else None,
        message=skipped or EARLIER_RUN,
    )


def earlier_jobs(clients: Clients, regions: tuple[str, ...], key: str) -> dict[int, JobAnswer]:
    """attempt n -> its job, from every region of the plan (the oldest of a number wins)."""
    found: dict[int, JobAnswer] = {}
    for region in regions:
        client = clients(region)
        for data in client.list(client.key_filter(key)):  # newest first
            job = JobAnswer.of(data)
            if job.attempt not in found or job.create_time < found[job.attempt].create_time:
                found[job.attempt] = job
    return found


def submit(
    clients: Clients | JobsClient,
    attempts: Sequence[Attempt],
    key: str,
    *,
    spec: JobSpec | None = None,
    image: str | None,
    job_type: type[Job] = Job,
    wait: bool = False,
    timeout: float | None = None,
    follow: Follow | None = None,
    on_state: Callable[[Job], None] | None = None,
    log: Log = lambda _: None,
    check: bool = True,
    skipped: Mapping[int, str] | None = None,
) -> Job:
    """Run the submit plan's `attempts` under `key` (see the module doc) and return the last
    attempt's job.

    Args:
        clients: region -> the JobsClient of that region (a single JobsClient serves its own
            region only, for plans that stay there).
        attempts: each attempt of the plan with its CustomJob, in order (the submit plan's:
            planned and rendered once, never again here); key: the idempotency key.
        spec: the JobSpec the plan was made from, given to the Job returned (Job.deploy).
        image: the image named in the job's output; job_type: the Job class to return.
        wait: follow each attempt to its end (a capacity refusal after the create needs it).
        timeout: seconds for the whole plan; follow: `follow(job, seconds_left)` waits for one
            attempt (default `Job.wait` without raising); on_state: its state callback.
        log: one line per refused or skipped attempt; check: with `wait`, raise JobFailed unless
            the last job SUCCEEDED.
        skipped: attempt n -> why the pre-flight skips it (its quota is clearly too small).
    Returns:
        The last attempt's Job, with `.attempts` (the JSON records), `.attempt_records` (the
        typed ones) and `.spec`.
    Raises:
        Refused (exit 3) when the last attempt's create is refused too; JobFailed (see check)."""
    if isinstance(clients, JobsClient):
        clients = _single(clients)
    plan = [a.planned for a in attempts]
    bodies = [a.body for a in attempts]
    skipped = dict(skipped or {})
    deadline = None if timeout is None else time.monotonic() + timeout
    follow = follow or (lambda job, left: job.wait(left, on_state=on_state, check=False))
    regions = tuple(dict.fromkeys(a.region for a in plan if a.region))
    earlier = earlier_jobs(clients, regions, key)
    records: list[AttemptRecord] = []
    n = max(earlier) if earlier else 1
    for m in range(1, n):  # what the attempts before the one adopted met
        if m in earlier:
            records.append(record_of(earlier[m], plan[m - 1] if m <= len(plan) else None, m))
        elif m <= len(plan):
            records.append(passed_over(plan[m - 1], skipped.get(m)))
    job: Job | None = None
    while True:
        planned = plan[n - 1] if n <= len(plan) else None
        found, adopted = earlier.get(n), True
        if found is None:  # n passes the end of the plan only to adopt an earlier run's job
            assert planned is not None
        if found is None and planned is not None and n in skipped:
            records.append(
                AttemptRecord(
                    n,
                    planned.region,
                    planned.strategy,
                    planned.hardware_name,
                    reason="skipped-quota",
                    message=skipped[n],
                )
            )
            log(f"attempt {n} ({planned.strategy} in {planned.region}) skipped: {skipped[n]}")
            if n < len(plan):
                n += 1
                continue
            break
        if found is None and planned is not None:
            client = clients(_region(planned))
            try:
                data, adopted = create_idempotent(client, bodies[n - 1], key, match=(ATTEMPT_LABEL,))
            except Refused as exc:
                err = exc.error
                reason: Reason = "skipped-not-offered" if not_offered(err) else "quota"
                what = "not offered there" if reason == "skipped-not-offered" else "quota refused"
                message = f"{what} ({err.code} {err.status}): {err.message}"
                records.append(
                    AttemptRecord(
                        n,
                        planned.region,
                        planned.strategy,
                        planned.hardware_name,
                        reason=reason,
                        message=message,
                    )
                )
                if n < len(plan):
                    log(
                        f"attempt {n} ({_where(planned, plan)}) refused: {message}; next: "
                        f"{_where(plan[n], plan)}"
                    )
                    n += 1
                    continue
                raise Refused(
                    f"every attempt of the plan was refused: {summary(records)}; last: {exc.message}",
                    error=err,
                    hint=exc.hint,
                ) from None
        elif found is not None:
            data = found.data
            client = clients(found.region or _region(plan[min(n, len(plan)) - 1]))
        job = job_type(data, client, image=image, idempotency_key=key, adopted=adopted)
        if wait and not job.done:
            follow(job, None if deadline is None else max(0.0, deadline - time.monotonic()))
        record = record_of(JobAnswer.of(job.data), planned, n)
        records.append(record)
        if record.refused and n < len(plan):
            log(
                f"attempt {n} ({_where(plan[n - 1], plan)}) refused: {record.message}; next: "
                f"{_where(plan[n], plan)}"
            )
            n += 1
            continue
        break
    if job is None:  # every attempt left was skipped, and none made a job
        raise UserError(
            f"no attempt of the plan could be made: {summary(records)}; nothing was created",
            hint="ask for more quota, or add an attempt in a region with quota",
        )
    # The job returned is built complete: its attempts and spec are constructor arguments.
    job = job_type(
        job.data,
        job.client,
        image=image,
        idempotency_key=key,
        adopted=job.adopted,
        attempts=records,
        spec=spec,
    )
    if wait and check and not job.succeeded:
        raise JobFailed(job.failure_message() + f" (attempts: {summary(records)})")
    if not wait and not job.done and n < len(plan):
        log(
            f"scheduling.fallback: a capacity refusal of this job (code 8) is seen only by "
            f"following it: use --wait, or run the same submit with --idempotency-key {key} "
            "--wait later to go on with the next attempt"
        )
    return job


def region_clients(client: JobsClient) -> Clients:
    """region -> a JobsClient of `client`'s project there (its own endpoint, same settings and
    log); `client` itself serves its region."""
    cache = {client.region: client}

    def get(region: str) -> JobsClient:
        if region not in cache:
            cache[region] = JobsClient(client.project, region, settings=client.settings, log=client.log)
        return cache[region]

    return get


def _single(client: JobsClient) -> Clients:
    def one(region: str) -> JobsClient:
        if region != client.region:
            raise ValueError(
                f"this JobsClient serves {client.region}, the plan needs {region}: "
                "pass a client factory (region -> JobsClient)"
            )
        return client

    return one


def _region(a: PlannedAttempt) -> str:
    """The attempt's region (a cloud plan's attempts all have one: the spec's checks made sure)."""
    if not a.region:
        raise ValueError(f"attempt {a.n} has no region")
    return a.region


def _where(a: PlannedAttempt, plan: Sequence[PlannedAttempt]) -> str:
    """'spot' in a plan that stays in one region on one machine, else 'spot in us-east5'."""
    text = a.strategy
    if len({p.region for p in plan}) > 1:
        text += f" in {a.region}"
    if len({p.hardware for p in plan}) > 1:
        text += f" on {a.hardware_name}"
    return text
