"""What the function does with one event, around the run api.on_object_finalized starts: triage
(which events start a run), one JSON log line per event, and the guard against two deliveries
of one event creating two CustomJobs at the same instant."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vertex_trainer.contract import ATTEMPT_LABEL
from vertex_trainer.trigger.events import BadEvent, Decision, ObjectEvent, TriggerConfig, decide
from vertex_trainer.vertex.jobs import Job

Emit = Callable[[dict[str, Any]], None]


def json_line(record: dict[str, Any]) -> None:
    """Cloud Run turns a JSON line on stdout into a structured log entry with its severity."""
    print(json.dumps(record, sort_keys=True), flush=True)


class EventLog:
    """One JSON log line per event; `last` is the record of the latest."""

    def __init__(self, emit: Emit | None = None):
        self.emit = emit or json_line
        self.last: dict[str, Any] = {}

    def _say(self, severity: str, action: str, message: str, **fields: Any) -> dict[str, Any]:
        self.last = {"severity": severity, "message": message, "action": action, **fields}
        self.emit(self.last)
        return self.last

    def ignored(self, decision: Decision) -> dict[str, Any]:
        return self._say("DEBUG", "ignored", f"{decision.event.name}: {decision.reason}", **decision.to_log())

    def refused(self, decision: Decision, error: Exception) -> dict[str, Any]:
        record = decision.to_log()
        return self._say("ERROR", "refused", f"no run for {record['folder']}: {error}", **record)

    def retry(self, decision: Decision, error: Exception) -> dict[str, Any]:
        return self._say(
            "ERROR", "retry", f"failed; Eventarc delivers the event again: {error}", **decision.to_log()
        )

    def started(self, decision: Decision, run: Any) -> dict[str, Any]:
        record = decision.to_log()
        verb = "adopted" if run.adopted else "started"
        return self._say(
            "NOTICE",
            verb,
            f"{verb} {run.name} for {record['folder']}",
            run=run.name,
            state=run.state,
            **record,
        )


def triage(event: Any, function_dir: str | Path, log: EventLog) -> tuple[TriggerConfig, Decision | None]:
    """The function's configuration and the decision for `event`; None (logged) when the event
    starts nothing."""
    config = TriggerConfig.load(function_dir)
    try:
        decision = decide(config, ObjectEvent.from_cloud_event(event))
    except BadEvent as exc:
        log._say("WARNING", "ignored", f"not a storage object event: {exc}")
        return config, None
    if not decision.starts_run:
        log.ignored(decision)
        return config, None
    return config, decision


def spec_vars(config: TriggerConfig, decision: Decision) -> dict[str, Any]:
    """The template variables of the event's spec: render time's, and `trigger`."""
    return {**config.vars, "trigger": decision.template_vars()}


def keep_oldest(run: Any) -> Any:
    """Two deliveries of one event at the same instant may both find no job and both create one
    (CustomJobs take no client-chosen id; pipelines need no such step): each then keeps the
    oldest job with the key, and cancels its own when it is the newer (a queued job costs
    nothing)."""
    if not isinstance(run, Job) or run.adopted or run.idempotency_key is None:
        return run
    # With scheduling.fallback the key's attempts are different jobs: compare this attempt's only.
    attempt = run.labels.get(ATTEMPT_LABEL)
    also = {ATTEMPT_LABEL: attempt} if attempt else None
    found = sorted(
        run.client.list(run.client.key_filter(run.idempotency_key, also)),
        key=lambda j: (j.get("createTime", ""), j.get("name", "")),
    )
    if len(found) < 2 or found[0].get("name") == run.name:
        return run
    run.cancel()
    return Job(found[0], run.client, idempotency_key=run.idempotency_key, adopted=True)
