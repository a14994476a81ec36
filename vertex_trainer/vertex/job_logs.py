"""A CustomJob's logs from Cloud Logging: read them, follow them until the job ends, and say why
it failed (docs/contract.md section 7). See docs/logs.md.

Transport: `entries:list` (POST {logging}/v2/entries:list) through the one HTTP layer
(`gcp.http.ApiClient`: retries with backoff and jitter, 429 included; Google's error shapes).

Reading: `resource.type="ml_job" AND resource.labels.job_id="<id>"` (plus
`resource.labels.task_name` for one replica, `timestamp>=` for --since), ascending, 1,000 entries
a page; the text is `jsonPayload.message` or `textPayload`.

Following: each cycle looks at the job's state afresh, then reads only the entries older than
now - lag. Logging may make an entry visible seconds after its timestamp; reading behind a lag
window keeps such late entries in the output and in time order. The next read starts at the newest
timestamp shown (`>=`) and skips what was shown by (timestamp, insertId). Once the job has ended,
one last read past the lag window takes its final lines, and the iteration ends. Reads are spaced
to stay inside the Logging read quota (about 60 a minute per project); a 429 backs off in
ApiClient. gcloud's beta stream-logs checks the job's end only once, at its start.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import unquote

from vertex_trainer.contract import Failure, JobEvent, LogEntry
from vertex_trainer.durations import fmt_duration, parse_duration
from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp.http import ApiClient, ApiError, default_hint
from vertex_trainer.log import Log
from vertex_trainer.settings import Settings, is_emulator
from vertex_trainer.vertex.advice import advice
from vertex_trainer.vertex.custom_jobs import Job
from vertex_trainer.vertex.names import job_name, split_name
from vertex_trainer.vertex.waiting import bounded

__all__ = [
    "Failure",
    "FollowPolicy",
    "JobEvent",
    "LogEntry",
    "LogsClient",
    "job_of",
    "parse_entry",
    "parse_since",
    "queue_note",
    "rfc3339",
    "to_ns",
]

Item = LogEntry | JobEvent | Failure
PAGE_SIZE = 1000  # the most entries:list returns in one page
TAIL_LINES = 20  # the failing replica's last lines shown under the error
SERVICE = "service"  # the replica name of the service's own messages
_READ_FAILURES = 3  # while following: after this many failed reads, stop reading logs
_NS = 10**9


@dataclass(frozen=True)
class FollowPolicy:
    """The clock of following. Against the real service: a 5 s lag window (gcloud's) and reads at
    least 1 s apart (the ~60 reads/min quota)."""

    lag: float = 5.0  # read only entries older than now - lag
    read_interval: float = 1.0  # the least time between two reads (each page is a read)
    max_interval: float = 15.0  # the longest pause between two looks while nothing happens
    page_size: int = PAGE_SIZE
    tail: int = TAIL_LINES

    @classmethod
    def for_settings(cls, settings: Settings) -> FollowPolicy:
        """The real service's policy; against a Logging emulator (which has neither a quota nor
        an ingestion delay) every time shrinks with the poll interval, so tests run fast."""
        if not is_emulator(settings.logging_endpoint):
            return cls()
        scale = min(1.0, settings.poll.initial / 5.0)
        return cls(lag=5.0 * scale, read_interval=1.0 * scale, max_interval=15.0 * scale)


# -- entries and times ----------------------------------------------------------------------------

_TS = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9})\d*)?"
    r"(Z|z|[+-]\d{2}:\d{2})?$"
)


def to_ns(text: str) -> int:
    """An RFC 3339 timestamp -> nanoseconds since the epoch (exact; ValueError if malformed)."""
    m = _TS.match(text.strip())
    if not m:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    date, hh, mm, ss, frac, zone = m.groups()
    y, mo, d = (int(x) for x in date.split("-"))
    # a day, hour or offset that does not exist (02-30, 25:00, +99:00) is no time, not the next one
    datetime(y, mo, d, int(hh), int(mm), min(int(ss), 59))  # (60: a leap second)
    if zone and zone not in ("Z", "z") and (int(zone[1:3]) > 23 or int(zone[4:6]) > 59):
        raise ValueError(f"not an RFC 3339 timestamp: {text!r} (offset {zone})")
    secs = calendar.timegm((y, mo, d, int(hh), int(mm), int(ss), 0, 0, 0))
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        secs -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return secs * _NS + int((frac or "").ljust(9, "0"))


def rfc3339(ns: int) -> str:
    """Nanoseconds since the epoch -> `2026-11-29T18:46:51.123456789Z`."""
    secs, frac = divmod(int(ns), _NS)
    return f"{datetime.fromtimestamp(secs, timezone.utc):%Y-%m-%dT%H:%M:%S}.{frac:09d}Z"


def parse_entry(raw: dict[str, Any]) -> LogEntry:
    """A Cloud Logging LogEntry (REST JSON) -> LogEntry."""
    payload = raw.get("jsonPayload")
    if isinstance(payload, dict) and "message" in payload:
        message = str(payload["message"])
    elif "textPayload" in raw:
        message = str(raw["textPayload"])
    elif isinstance(payload, dict):
        message = json.dumps(payload, sort_keys=True)
    else:
        message = ""
    return LogEntry(
        timestamp=str(raw.get("timestamp") or raw.get("receiveTimestamp") or ""),
        replica=_replica(raw),
        message=message.rstrip("\n"),
        severity=str(raw.get("severity") or "DEFAULT"),
        insert_id=str(raw.get("insertId") or ""),
    )


def _replica(raw: dict[str, Any]) -> str:
    labels = (raw.get("resource") or {}).get("labels") or {}
    extra = raw.get("labels") or {}
    name = labels.get("task_name") or extra.get("ml.googleapis.com/task_name") or extra.get("task_name")
    if name:
        return str(name)
    log = unquote(str(raw.get("logName") or "")).rsplit("/logs/", 1)[-1]
    return log if re.fullmatch(r"workerpool\d+-\d+", log) else SERVICE


def parse_since(text: str | None, now: float | None = None) -> int | None:
    """--since: a duration back from now (90s, 30m, 4h, 2d, 1h30m) or an RFC 3339 time -> ns."""
    if text is None or str(text).strip() == "":
        return None
    text = str(text).strip()
    m = _TS.match(text)
    if m and not m[6]:  # read as UTC, it would be hours off wherever the clock is not UTC
        raise UserError(
            f"--since {text!r}: a time needs its zone",
            hint=f"--since {text}Z (UTC), or with the offset of your clock, e.g. {text}+01:00",
        )
    try:
        return to_ns(text)
    except ValueError:
        if m:
            raise UserError(
                f"--since {text!r}: no such time (a day, hour or offset out of range)",
                hint="e.g. --since 2026-11-29T18:00:00Z, or a duration back from now: 30m, 4h, 2d",
            ) from None
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise UserError(
            f"--since {text!r}: use a duration back from now (90s, 30m, 4h, 2d, 1h30m) "
            "or a time like 2026-11-29T18:00:00Z"
        ) from None
    return int(((time.time() if now is None else now) - seconds) * _NS)


def _seconds(value: Any) -> float | None:
    """A proto JSON duration ("14400s", "1.5s") -> seconds."""
    if value is None:
        return None
    try:
        return float(str(value).rstrip("s"))
    except ValueError:
        return None


def queue_note(job: Job, now: float | None = None) -> str | None:
    """For a Flex Start job still waiting for capacity: `queued 12m of max_wait 4h`."""
    if job.state not in ("JOB_STATE_QUEUED", "JOB_STATE_PENDING"):
        return None
    scheduling = (job.data.get("jobSpec") or {}).get("scheduling") or {}
    if str(scheduling.get("strategy")) not in ("FLEX_START", "6"):
        return None
    try:
        created = to_ns(job.data["createTime"]) / _NS
    except (KeyError, ValueError):
        return None
    waited = fmt_duration(max(0, int((time.time() if now is None else now) - created)))
    max_wait = _seconds(scheduling.get("maxWaitDuration"))
    if max_wait == 0:
        return f"Flex Start: queued {waited} (max_wait 0: waits for capacity indefinitely)"
    limit = fmt_duration(int(max_wait if max_wait is not None else 24 * 3600))  # the API's default
    return f"Flex Start: queued {waited} of max_wait {limit}"


def job_of(job: str, project: str | None = None) -> tuple[str, str]:
    """(project, numeric job id) of a job name, or of an id with `project` (no region needed)."""
    job = job.strip()
    if re.fullmatch(r"[0-9]+", job):
        if not project:
            raise UserError(
                f"job id {job} needs --project (or pass the full name projects/P/locations/R/customJobs/ID)"
            )
        return project, job
    p, _, job_id = split_name(job_name(job))
    return p, job_id


# -- the client -----------------------------------------------------------------------------------


class _Cursor:
    """Where the next read starts, and the entries at exactly that time already shown."""

    def __init__(self, ns: int | None):
        self.ns = ns
        self.ids: set[str] = set()

    def admit(self, entry: LogEntry) -> bool:
        try:
            ns = to_ns(entry.timestamp)
        except ValueError:
            return True  # no usable time: show it rather than lose it
        if self.ns is not None and ns < self.ns:
            return False
        if self.ns is not None and ns == self.ns:
            if entry.insert_id in self.ids:
                return False
            self.ids.add(entry.insert_id)
            return True
        self.ns, self.ids = ns, {entry.insert_id}
        return True


class LogsClient:
    """Cloud Logging `entries:list` for the CustomJobs of one project."""

    def __init__(
        self,
        project: str,
        *,
        settings: Settings | None = None,
        log: Log | None = None,
        session: Any = None,
        policy: FollowPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.project = project
        self.settings = settings or Settings()
        self.policy = policy or FollowPolicy.for_settings(self.settings)
        shared = default_hint("Cloud Logging", "logging.googleapis.com", project)
        self.api = ApiClient.of(
            self.settings,
            self.settings.logging_url(),
            log=log,
            session=session,
            service="Cloud Logging",
            hints=lambda op, err: shared(op, err) or self._hint(err),
            retry_hint="Cloud Logging is unreachable or over its read quota "
            "(about 60 reads a minute per project); try again later",
        )
        self._sleep = sleep
        self._last_read: float | None = None
        self.reads = 0

    @property
    def log(self) -> Log:
        return self.api.log

    @property
    def offline(self) -> bool:
        """Vertex AI is an emulator and Logging is not: this run is offline by construction."""
        return self.settings.offline and not self.settings.logging_endpoint

    def _hint(self, err: ApiError) -> str | None:
        if err.code == 403:
            return (
                f"reading logs needs logging.logEntries.list on project {self.project} (role "
                "roles/logging.viewer); check the account with `gcloud auth list`"
            )
        if err.code == 400:
            return "Cloud Logging refused the query (filter or page token)"
        return None

    # -- reading ---------------------------------------------------------------------------------
    def filter(
        self, job_id: str, *, replica: str | None = None, since: int | None = None, until: int | None = None
    ) -> str:
        """The Logging filter for a job's entries, [since, until) in nanoseconds."""
        terms = ['resource.type="ml_job"', f'resource.labels.job_id="{job_id}"']
        if replica:
            terms.append(f'resource.labels.task_name="{replica}"')
        if since is not None:
            terms.append(f'timestamp>="{rfc3339(since)}"')
        if until is not None:
            terms.append(f'timestamp<"{rfc3339(until)}"')
        return " AND ".join(terms)

    def _pace(self) -> None:
        """Keep reads at least `read_interval` apart (the per-project read quota), counted from
        the end of the last one: the service then sees them at least that far apart too."""
        if self._last_read is not None:
            wait = self._last_read + self.policy.read_interval - time.monotonic()
            if wait > 0:
                self._sleep(wait)

    def pages(
        self,
        filter: str,
        *,
        order: str = "timestamp asc",
        page_size: int | None = None,
        limit: int | None = None,
    ) -> Iterator[list[dict[str, Any]]]:
        """The raw entries matching `filter`, a page (one paced read) at a time, through the one
        pager (`ApiClient.pages`; a job's log may run to any number of pages)."""
        body = {"resourceNames": [f"projects/{self.project}"], "filter": filter, "orderBy": order}
        return self.api.pages(
            "Cloud Logging",
            "POST",
            "v2/entries:list",
            items="entries",
            body=body,
            page_size=page_size or self.policy.page_size,
            max_pages=None,
            limit=limit,
            read=self._read,
        )

    def _read(self, fetch: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """One read, paced; counted in `reads` when it succeeds."""
        self._pace()
        try:
            page = fetch()
        finally:
            self._last_read = time.monotonic()
        self.reads += 1
        return page

    def entries(
        self, job_id: str, *, replica: str | None = None, since: int | str | None = None
    ) -> Iterator[LogEntry]:
        """Every entry of the job so far, in time order, each once (`logs JOB`)."""
        if self.offline:
            raise UserError(
                "Vertex AI is an emulator here but Cloud Logging is not: the job's "
                "logs are not in Google's Cloud Logging",
                hint="run `vertex-trainer dev fake-logging` and set "
                "VERTEX_TRAINER_LOGGING_ENDPOINT to its URL",
            )
        start = parse_since(since) if isinstance(since, str) else since
        cursor = _Cursor(start)
        for page in self.pages(self.filter(job_id, replica=replica, since=start)):
            for raw in page:
                entry = parse_entry(raw)
                if cursor.admit(entry):
                    yield entry

    def tail(self, job_id: str, *, replica: str | None = None, n: int = TAIL_LINES) -> list[LogEntry]:
        """The job's last `n` entries (of one replica), oldest first: one read."""
        found: list[LogEntry] = []
        for page in self.pages(
            self.filter(job_id, replica=replica), order="timestamp desc", page_size=n, limit=n
        ):
            found.extend(parse_entry(raw) for raw in page)
        return list(reversed(found[:n]))

    # -- following -------------------------------------------------------------------------------
    def follow(
        self,
        job: Job,
        *,
        lines: bool = True,
        replica: str | None = None,
        since: int | str | None = None,
        timeout: float | None = None,
    ) -> Iterator[Item]:
        """Follow `job` to its end: a `JobEvent` per look at its state (the first without a new
        GET: the job given is fresh), its new `LogEntry`s in time order (unless `lines=False`),
        and, when it ended other than SUCCEEDED, a `Failure` last. Raises TimeoutError after
        `timeout` seconds; a read that keeps failing is reported through `log` and ends the
        reading, never the following."""
        policy = self.policy
        start = parse_since(since) if isinstance(since, str) else since
        state = _Follow(self, job.id, replica, _Cursor(start), reading=lines and not self.offline)
        deadline = None if timeout is None else time.monotonic() + timeout
        # Lines shown: look at least every max_interval; the state alone: as Job.wait does.
        longest = policy.max_interval if state.reading else self.settings.poll.maximum
        intervals = _intervals(self.settings.poll.initial, longest)
        last, first = None, True
        while True:
            if not first:
                job.refresh()
            first = False
            changed = job.state != last
            last = job.state
            yield JobEvent(job, changed, queue_note(job))
            if job.done:
                break
            new = 0
            for entry in state.read(until=time.time_ns() - int(policy.lag * _NS)):
                new += 1
                yield entry
            if changed or new:
                intervals = _intervals(self.settings.poll.initial, longest)
            self._sleep(bounded(next(intervals), deadline, job, timeout))
        if state.reading:
            # The last lines: let the lag window pass since the job ended, then read to the end.
            ended = _end_time(job)
            wait = policy.lag - (time.time() - ended) if ended is not None else policy.lag
            if wait > 0:
                self._sleep(wait)
            yield from state.read(until=None)
        if not job.succeeded:
            yield state.failure(job)


def _intervals(initial: float, maximum: float) -> Iterator[float]:
    delay = initial
    while True:
        yield delay
        delay = min(delay * 1.5, max(initial, maximum))


def _end_time(job: Job) -> float | None:
    try:
        return to_ns(job.data["endTime"]) / _NS
    except (KeyError, ValueError, TypeError):
        return None


class _Follow:
    """The reading side of one follow: cursor, the replicas' last lines, failures."""

    def __init__(self, client: LogsClient, job_id: str, replica: str | None, cursor: _Cursor, reading: bool):
        self.client, self.job_id, self.replica, self.cursor = client, job_id, replica, cursor
        self.reading = reading
        self.tails: dict[str, deque[LogEntry]] = {}
        self.failures = 0

    def read(self, until: int | None) -> Iterator[LogEntry]:
        if not self.reading:
            return
        query = self.client.filter(self.job_id, replica=self.replica, since=self.cursor.ns, until=until)
        try:
            for page in self.client.pages(query):
                for raw in page:
                    entry = parse_entry(raw)
                    if self.cursor.admit(entry):
                        self.tails.setdefault(entry.replica, deque(maxlen=TAIL_LINES)).append(entry)
                        yield entry
        except (ServiceError, UserError) as exc:
            self.failures += 1
            stop = isinstance(exc, UserError) or self.failures >= _READ_FAILURES
            self.client.log(
                f"warning: could not read the job's logs: {exc}"
                + ("; following the job's state only" if stop else "; retrying later")
            )
            if stop:
                self.reading = False

    def failure(self, job: Job) -> Failure:
        """The error, the failing replica's last lines (only for FAILED), and advice."""
        message = job.failure_message()
        replica = _failed_replica(job.error)
        lines: list[str] = []
        if job.state == "JOB_STATE_FAILED" and not self.client.offline:
            entries = self._last_entries(replica)
            if replica is None:
                workers = [e for e in entries if e.replica != SERVICE]
                errors = [e for e in workers if e.severity in ("ERROR", "CRITICAL", "ALERT")]
                pick = errors or workers
                replica = pick[-1].replica if pick else None
            lines = [e.message for e in entries if replica is None or e.replica == replica]
        return Failure(
            message=message, replica=replica, lines=tuple(lines[-TAIL_LINES:]), advice=advice(job.data, lines)
        )

    def _last_entries(self, replica: str | None) -> list[LogEntry]:
        if self.tails and (replica is None or replica in self.tails):
            if replica is not None:
                return list(self.tails[replica])
            return sorted((e for t in self.tails.values() for e in t), key=_time_key)
        if self.failures >= _READ_FAILURES:
            return []
        try:
            return self.client.tail(self.job_id, replica=replica)
        except (ServiceError, UserError) as exc:
            self.client.log(f"warning: could not read the failing replica's last lines: {exc}")
            return []


def _time_key(entry: LogEntry) -> int:
    try:
        return to_ns(entry.timestamp)
    except ValueError:
        return 0


def _failed_replica(error: str | None) -> str | None:
    m = re.search(r"\b(workerpool\d+-\d+)\b", error or "")
    return m[1] if m else None
