"""What the function does with one event, around the run api.on_object_finalized starts: triage
(which events start a run), one JSON log line per event, the guard against two deliveries of one
event creating two CustomJobs at the same instant, and the cap on one folder's runs.

The cap (issue 41; docs/events.md): each upload of a folder's marker is a new generation, so a
new run, and each run is a paid job. A folder's runs carry its label (events.FOLDER_LABEL); the
function lists them by it (Vertex AI's own record, so every instance sees the same count) and
counts idempotency keys, not jobs or deliveries: a redelivered event (same key) is never a second
run and never counts twice; a fallback's attempts are one run. Within `folder_window`, the
oldest `max_runs_per_folder` keys may run; a newer key is acknowledged and starts nothing
("capped"). Two uploads handled at the same instant may both pass the look before; the look
after the create sees both, and the newer one cancels its own run (queued: it costs nothing)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from vertex_trainer.automation.storage_events import (
    FOLDER_LABEL,
    BadEvent,
    Decision,
    ObjectEvent,
    TriggerConfig,
    decide,
)
from vertex_trainer.contract import ATTEMPT_LABEL, KEY_LABEL
from vertex_trainer.settings import Settings
from vertex_trainer.spec import JobSpec
from vertex_trainer.spec.attempts import regions
from vertex_trainer.vertex.custom_jobs import Job, JobsClient
from vertex_trainer.vertex.hptuning import TuningClient
from vertex_trainer.vertex.pipelines import PipelinesClient

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
        return self._say(
            "WARNING" if decision.warn else "DEBUG",
            "ignored",
            f"{decision.event.name}: {decision.reason}",
            **decision.to_log(),
        )

    def refused(self, decision: Decision, error: Exception) -> dict[str, Any]:
        record = decision.to_log()
        return self._say("ERROR", "refused", f"no run for {record['folder']}: {error}", **record)

    def retry(self, decision: Decision, error: Exception) -> dict[str, Any]:
        return self._say(
            "ERROR", "retry", f"failed; Eventarc delivers the event again: {error}", **decision.to_log()
        )

    def capped(self, decision: Decision, why: str, run: Any = None) -> dict[str, Any]:
        record = decision.to_log()
        extra = {"run": run.name, "state": run.state} if run is not None else {}
        return self._say("WARNING", "capped", f"no run for {record['folder']}: {why}", **extra, **record)

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


def folder_set(decision: Decision) -> tuple[str, ...]:
    """The `--set` that labels the run with its folder (what FolderCap counts by)."""
    return (f"labels.{FOLDER_LABEL}={decision.folder_label}",)


class FolderCap:
    """At most `config.max_runs_per_folder` runs of the decision's folder in `config.folder_window`
    (see the module docstring). `spec` is the event's spec: its kind says which collection its
    runs are in (pipelineJobs with deploy:, hyperparameterTuningJobs with tune:, customJobs in each
    region of its plan)."""

    def __init__(self, config: TriggerConfig, decision: Decision, spec: JobSpec, settings: Settings):
        self.config, self.decision, self.spec, self.settings = config, decision, spec, settings

    def _clients(self) -> list[Any]:
        spec = self.spec
        if spec.deploy is not None:
            return [PipelinesClient(spec.project, spec.region, settings=self.settings)]
        if spec.tune is not None:
            return [TuningClient(spec.project, spec.region, settings=self.settings)]
        return [JobsClient(spec.project, r, settings=self.settings) for r in regions(spec) or (spec.region,)]

    def keys(self) -> list[str]:
        """The folder's runs in the window: their keys, oldest first (by a run's first create)."""
        since = datetime.now(timezone.utc) - timedelta(seconds=self.config.window_seconds)
        first: dict[str, datetime] = {}
        wanted = f'labels.{FOLDER_LABEL}="{self.decision.folder_label}"'
        for client in self._clients():
            for resource in client.list(wanted):
                key = (resource.get("labels") or {}).get(KEY_LABEL)
                created = _time(resource.get("createTime"))
                if key and created is not None and created >= since:
                    first[key] = min(created, first.get(key, created))
        return sorted(first, key=lambda k: (first[k], k))

    def _over(self, keys: list[str]) -> str | None:
        limit, key = self.config.max_runs_per_folder, self.decision.key
        if key in keys[:limit] or (key not in keys and len(keys) < limit):
            return None
        return (
            f"{len([k for k in keys if k != key])} run(s) of this folder in the last "
            f"{self.config.folder_window} already, at most {limit} (--max-runs-per-folder); "
            "upload the data to a new folder, or render the function with a larger cap"
        )

    def before(self) -> str | None:
        """Why the event may not start its run (None: it may, or its run exists: adopted)."""
        return self._over(self.keys())

    def after(self, run: Any) -> str | None:
        """The look after a create: a run that made the folder's count exceed the cap (two
        uploads at the same instant) is cancelled; returns why, or None."""
        if run.adopted:
            return None
        why = self._over(self.keys())
        if why is not None:
            run.cancel()
        return why


def _time(text: Any) -> datetime | None:
    try:
        found = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return found if found.tzinfo else found.replace(tzinfo=timezone.utc)


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
