"""Capacity fallback (docs/contract.md section 8): the plan's strategies tried in order, each as its own
job under one idempotency key.

The plan is scheduling.strategy, then scheduling.fallback. Attempt n runs the n-th strategy and
carries the label vertex-trainer-attempt=n beside the key label. A strategy is refused when

- its create answers 429 RESOURCE_EXHAUSTED naming a custom-training quota metric (the
  project's quota for the accelerator: `gcp.http.Refused`, never retried), or
- its job ends FAILED (or EXPIRED) with error code 8, RESOURCE_EXHAUSTED ("Resources are
  insufficient in region ..."; a Flex Start job whose max_wait passed without capacity).

Then the next strategy is submitted. A job that fails for any other reason, or is cancelled, is
final: never resubmitted. A refusal of the second kind is seen only by following the job, so it
needs `wait`; a re-run with the same key adopts the latest attempt (and, when that attempt was
refused and the plan has more, goes on with the next one, as the first run would have).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from vertex_trainer import render
from vertex_trainer.contract import ATTEMPT_LABEL, Artifact, state_name
from vertex_trainer.errors import JobFailed
from vertex_trainer.gcp.http import Refused
from vertex_trainer.vertex.jobs import Job, JobsClient, create_idempotent

RESOURCE_EXHAUSTED = 8  # google.rpc.Code
Log = Callable[[str], None]
Follow = Callable[[Job, "float | None"], Any]


@dataclass
class Attempt:
    """One strategy of the plan, tried: its job (None when the create was refused) and why it
    was left (None for the last one, unless it failed)."""

    n: int
    strategy: str
    name: str | None = None
    state: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict:
        return {"attempt": self.n, "strategy": self.strategy, "name": self.name, "state": self.state,
                "reason": self.reason}


def refusal(data: dict) -> str | None:
    """Why a job that ended was refused for capacity, or None (it succeeded, runs, was cancelled
    or failed for another reason)."""
    error = data.get("error") or {}
    if state_name(data.get("state")) not in ("JOB_STATE_FAILED", "JOB_STATE_EXPIRED"):
        return None
    try:
        code = int(error.get("code"))
    except (TypeError, ValueError):
        return None
    if code != RESOURCE_EXHAUSTED:
        return None
    return f"no capacity (code 8 RESOURCE_EXHAUSTED): {error.get('message') or 'no message'}"


def attempt_of(data: dict) -> int:
    """The attempt a job of the key is (a job without the label: the first)."""
    try:
        return max(1, int((data.get("labels") or {}).get(ATTEMPT_LABEL, 1)))
    except ValueError:
        return 1


def summary(attempts: list[dict]) -> str:
    """flex-start FAILED (no capacity) -> spot refused (quota) -> standard SUCCEEDED."""
    parts = []
    for a in attempts:
        what = (a["state"] or "").removeprefix("JOB_STATE_") or "refused"
        if a["reason"] and a["reason"].startswith("no capacity"):
            what += " (no capacity)"
        elif a["reason"] and a["reason"].startswith("quota"):
            what += " (quota)"
        parts.append(f"{a['strategy']} {what}")
    return " -> ".join(parts)


def submit(client: JobsClient, spec, artifact: Artifact, key: str, *, image: str | None,
           job_type: type[Job] = Job, wait: bool = False, timeout: float | None = None,
           follow: Follow | None = None, on_state: Callable[[Job], None] | None = None,
           log: Log = lambda _: None, check: bool = True) -> Job:
    """Run the plan of `spec` under `key` (see the module doc) and return the last attempt's
    job, with `.attempts` (the JSON records) and `.spec`. `follow(job, timeout)` waits for one
    attempt's job to end (default: `Job.wait` without raising); `wait=False` returns after the
    first create that is not refused. Raises `Refused` (exit 3) when the last strategy's create
    is refused too, and (`wait` and `check`) JobFailed unless the last job SUCCEEDED."""
    plan = render.strategies(spec)
    deadline = None if timeout is None else time.monotonic() + timeout
    follow = follow or (lambda job, left: job.wait(left, on_state=on_state, check=False))
    earlier: dict[int, dict] = {}
    for data in client.list(client.key_filter(key)):  # newest first: the oldest of a number wins
        earlier[attempt_of(data)] = data
    attempts: list[Attempt] = []
    n = max(earlier) if earlier else 1
    for m in sorted(earlier):
        if m < n:
            data = earlier[m]
            attempts.append(Attempt(m, _strategy(plan, m, data), data.get("name"),
                                    state_name(data.get("state")), refusal(data) or _error(data)))
    while True:
        strategy = _strategy(plan, n, earlier.get(n))
        data, adopted = earlier.get(n), True
        if data is None:
            body = render.custom_job(spec, artifact, idempotency_key=key, attempt=n)
            try:
                data, adopted = create_idempotent(client, body, key, match=(ATTEMPT_LABEL,))
            except Refused as exc:
                err = exc.error
                reason = f"quota refused ({err.code} {err.status}): {err.message}"
                attempts.append(Attempt(n, strategy, reason=reason))
                if n < len(plan):
                    log(f"attempt {n} ({strategy}) refused: {reason}; next: {plan[n]}")
                    n += 1
                    continue
                records = [a.to_dict() for a in attempts]
                raise Refused(f"every strategy of the plan was refused: {summary(records)}; "
                              f"last: {exc.message}", error=err, hint=exc.hint) from None
        job = job_type(data, client, image=image, idempotency_key=key, adopted=adopted)
        if wait and not job.done:
            follow(job, None if deadline is None else max(0.0, deadline - time.monotonic()))
        reason = refusal(job.data)
        attempts.append(Attempt(n, strategy, job.name, job.state, reason or _error(job.data)))
        if reason and n < len(plan):
            log(f"attempt {n} ({strategy}) refused: {reason}; next: {plan[n]}")
            n += 1
            continue
        break
    job.attempts = [a.to_dict() for a in attempts]
    job.spec = spec
    if wait and check and not job.succeeded:
        raise JobFailed(job.failure_message() + f" (attempts: {summary(job.attempts)})")
    if not wait and not job.done and n < len(plan):
        log(f"scheduling.fallback: a capacity refusal of this job (code 8) is seen only by "
            f"following it: use --wait, or run the same submit with --idempotency-key {key} "
            "--wait later to go on with the next strategy")
    return job


def _strategy(plan: tuple[str, ...], n: int, data: dict | None) -> str:
    if n <= len(plan):
        return plan[n - 1]
    # An attempt beyond today's plan (the spec's fallback list was shortened): its own strategy.
    strategy = str(((data or {}).get("jobSpec") or {}).get("scheduling", {}).get("strategy", "?"))
    return strategy.lower().replace("_", "-")


def _error(data: dict) -> str | None:
    """The error of a job that ended other than SUCCEEDED (why it is final), else None."""
    if state_name(data.get("state")) in ("JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"):
        return (data.get("error") or {}).get("message") or "ended without a message"
    return None
