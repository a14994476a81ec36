"""A fake Cloud Logging (REST, v2) on loopback, for tests and `vertex-trainer dev fake-logging`.

Point the tool at it with `VERTEX_TRAINER_LOGGING_ENDPOINT=http://127.0.0.1:PORT` (an http://
endpoint means anonymous credentials). It serves what reading a CustomJob's logs needs:

- ``POST /v2/entries:list``   body ``{resourceNames: ["projects/P"], filter, orderBy, pageSize,
  pageToken}``; answer ``{entries: [...], nextPageToken}``
- ``POST /v2/entries:write``  body ``{logName, resource, labels, entries: [...]}``; answer ``{}``

Strict like the service: unknown body fields, a pageSize over 1,000, an unknown orderBy, a filter
term it does not understand or a page token from another query are 400s in Google's error
envelope. Filters are `AND`s of `resource.type`, `resource.labels.<key>`, `labels.<key>`,
`logName`, `severity` and `timestamp` comparisons (`=`, `!=`, `>=`, `>`, `<=`, `<`).
Timestamps are answered the way proto3 JSON writes them (0, 3, 6 or 9 fractional digits).

What tests need: `add(job_id, message, ...)` stores an entry of a CustomJob's log (`late=2.0`:
its timestamp is now, but it becomes visible only two seconds later, as Logging's ingestion can
do); `fail(429, times=2)` refuses the next reads; `min_read_interval` answers 429 to reads closer
together than that (a read quota); `wait_until(predicate)` awaits a request instead of sleeping.
It shares no code with the client (import-linter contract).
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from typing import Any

from vertex_trainer.emulators._http import JsonHandler, LoopbackServer, envelope, serve_until_interrupted

MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 50
_LIST_FIELDS = {"resourceNames", "projectIds", "filter", "orderBy", "pageSize", "pageToken"}
_WRITE_FIELDS = {"logName", "resource", "labels", "entries", "partialSuccess", "dryRun"}
_QUOTA = (
    "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute' "
    "of service 'logging.googleapis.com' for consumer 'project_number:{project}'."
)
_TERM = re.compile(
    r'^\s*(?P<field>resource\.type|resource\.labels\.[A-Za-z_][\w.]*|labels\.[\w./"-]+|'
    r'logName|severity|timestamp|insertId)\s*(?P<op>>=|<=|!=|=|>|<)\s*'
    r'(?P<value>"(?:[^"\\]|\\.)*"|[^\s"]+)\s*$'
)
# What Cloud Logging's filters accept: RFC 3339 (Z or +hh:mm), the `%z` form google-cloud-logging
# appends to a filter without a timestamp term (`timestamp>="2026-12-01T10:00:00.123456+0000"`),
# no zone (UTC), a space for the T, and a date alone (its midnight).
_TS = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2}))?(?:[.,](\d{1,9}))?)?"
    r"\s*(Z|z|[+-]\d{2}(?::?\d{2})?)?$"
)
_JOB_TERM = re.compile(r'resource\.labels\.job_id\s*=\s*"?([0-9]+)"?')
_SEVERITIES = ["DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY"]


class _Refused(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def _ns(text: str) -> int:
    m = _TS.match(text.strip())
    if not m:
        raise _Refused(400, f"Invalid timestamp: {text!r}")
    y, mo, d, hh, mm, ss, frac, zone = m.groups()
    secs = calendar.timegm((int(y), int(mo), int(d), int(hh or 0), int(mm or 0), int(ss or 0), 0, 0, 0))
    if zone and zone not in ("Z", "z"):
        minutes = zone[1:].replace(":", "")
        secs -= (1 if zone[0] == "+" else -1) * (int(minutes[:2]) * 3600 + int(minutes[2:4] or 0) * 60)
    return secs * 10**9 + int((frac or "").ljust(9, "0"))


def _stamp(ns: int) -> str:
    """proto3 JSON Timestamp: 0, 3, 6 or 9 fractional digits."""
    secs, frac = divmod(ns, 10**9)
    text = f"{datetime.fromtimestamp(secs, timezone.utc):%Y-%m-%dT%H:%M:%S}"
    if frac:
        digits = 3 if frac % 10**6 == 0 else 6 if frac % 10**3 == 0 else 9
        text += "." + f"{frac:09d}"[:digits]
    return text + "Z"


@dataclass
class _Stored:
    entry: dict[str, Any]
    ns: int
    visible_at: float
    project: str

    @property
    def key(self) -> tuple[int, str]:
        return self.ns, self.entry["insertId"]


@dataclass
class Fault:
    status: int = 429
    times: int = 1
    message: str | None = None


@dataclass
class FakeLogging(LoopbackServer):
    """The fake server; `with FakeLogging() as fake:` or start()/stop()."""

    host: str = "127.0.0.1"
    port: int = 0
    project: str = "test-project"
    min_read_interval: float = 0.0  # reads closer together than this are answered 429
    requests: list[dict[str, Any]] = field(default_factory=list)  # every entries:list body, in order
    answers: list[int] = field(default_factory=list)  # the status of each entries:list

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock: threading.Condition = threading.Condition()
        self._entries: list[_Stored] = []
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)
        self._last_read: float | None = None
        self._followed: dict[str, float] = {}  # job id -> when a client last read its entries

    def start(self) -> FakeLogging:
        fake = self

        class Handler(_Handler):
            pass

        Handler.fake = fake
        return self._serve(Handler)

    # -- test controls ----------------------------------------------------------------------
    def add(
        self,
        job_id: str,
        message: str,
        *,
        replica: str = "workerpool0-0",
        at: float | str | None = None,
        severity: str = "INFO",
        text: bool = False,
        late: float = 0.0,
        project: str | None = None,
        insert_id: str | None = None,
    ) -> dict[str, Any]:
        """Store one entry of CustomJob `job_id`'s log. `at`: its timestamp (epoch seconds or
        RFC 3339; default now); `late`: seconds from now before it is visible; `text`: a
        textPayload instead of jsonPayload.message; replica "service": the service's own log."""
        project = project or self.project
        ns = time.time_ns() if at is None else _ns(at) if isinstance(at, str) else int(at * 10**9)
        log = f"ml.googleapis.com%2F{job_id}" if replica == "service" else replica
        entry: dict[str, Any] = {
            "logName": f"projects/{project}/logs/{log}",
            "resource": {
                "type": "ml_job",
                "labels": {"job_id": str(job_id), "project_id": project, "task_name": replica},
            },
            "timestamp": _stamp(ns),
            "severity": severity,
            "insertId": insert_id or f"{next(self._ids):012x}",
        }
        if text:
            entry["textPayload"] = message
        else:
            entry["jsonPayload"] = {"message": message, "levelname": severity}
        return self._store(entry, ns, time.time() + late, project)

    def add_many(
        self,
        job_id: str,
        messages: list[str],
        *,
        start: float | None = None,
        step: float = 0.001,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:
        """Many entries, `step` seconds apart from `start` (default: so that the last is now)."""
        start = time.time() - step * len(messages) if start is None else start
        return [self.add(job_id, m, at=start + i * step, **kwargs) for i, m in enumerate(messages)]

    def fail(self, status: int = 429, *, times: int = 1, message: str | None = None) -> Fault:
        """Answer the next `times` entries:list requests with `status`."""
        fault = Fault(status, times, message)
        with self._lock:
            self._faults.append(fault)
        return fault

    def wait_until(self, predicate: Callable[[FakeLogging], bool], timeout: float = 10) -> bool:
        """Block until `predicate(fake)` holds (checked after each request); False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), timeout)

    def followed(self, job_id: str, within: float = 10.0) -> bool:
        """Whether a client read job `job_id`'s entries (a filter on its
        resource.labels.job_id) in the last `within` seconds: someone shows them already."""
        with self._lock:
            seen = self._followed.get(str(job_id))
        return seen is not None and time.monotonic() - seen <= within

    @property
    def reads(self) -> int:
        """entries:list requests answered 200."""
        return sum(1 for s in self.answers if s == 200)

    @property
    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            return [s.entry for s in sorted(self._entries, key=lambda s: s.key)]

    # -- the service ------------------------------------------------------------------------
    def _store(self, entry: dict[str, Any], ns: int, visible_at: float, project: str) -> dict[str, Any]:
        entry.setdefault("receiveTimestamp", _stamp(max(ns, int(visible_at * 10**9))))
        with self._lock:
            self._entries.append(_Stored(entry, ns, visible_at, project))
            self._lock.notify_all()
        return entry

    def list_entries(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise _Refused(400, "Invalid JSON payload received. Expected an object.")
        unknown = sorted(set(body) - _LIST_FIELDS)
        if unknown:
            raise _Refused(
                400, f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.'
            )
        names = body.get("resourceNames") or [f"projects/{p}" for p in body.get("projectIds") or ()]
        if not isinstance(names, list) or not names:
            raise _Refused(400, "resource_names: at least one resource name is required")
        projects = set()
        for name in names:
            m = re.fullmatch(r"projects/([^/]+)", str(name))
            if not m:
                raise _Refused(400, f"Invalid resource name: {name!r} (the fake knows projects/P)")
            projects.add(m[1])
        order = body.get("orderBy") or "timestamp asc"
        if order not in ("timestamp asc", "timestamp desc"):
            raise _Refused(400, f"Invalid orderBy: {order!r}; use \"timestamp asc\" or \"timestamp desc\"")
        size = body.get("pageSize", DEFAULT_PAGE_SIZE)
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_PAGE_SIZE:
            raise _Refused(400, f"page_size must be between 0 and {MAX_PAGE_SIZE}, got {size!r}")
        size = size or DEFAULT_PAGE_SIZE
        text = body.get("filter") or ""
        terms = _parse_filter(text)
        for job_id in _JOB_TERM.findall(text):
            with self._lock:
                self._followed[job_id] = time.monotonic()
        query = hashlib.sha256(json.dumps([sorted(projects), text, order]).encode()).hexdigest()[:16]
        after = _token_key(body.get("pageToken"), query)
        now = time.time()
        with self._lock:
            found = [
                s
                for s in self._entries
                if s.project in projects and s.visible_at <= now and all(term(s) for term in terms)
            ]
        desc = order.endswith("desc")
        found.sort(key=lambda s: s.key, reverse=desc)
        if after is not None:
            found = [s for s in found if (s.key < after if desc else s.key > after)]
        page = found[:size]
        answer: dict[str, Any] = {"entries": [dict(s.entry) for s in page]} if page else {}
        if len(found) > size:
            last = page[-1].key
            answer["nextPageToken"] = base64.urlsafe_b64encode(
                json.dumps({"q": query, "k": [last[0], last[1]]}).encode()
            ).decode()
        return answer

    def write_entries(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("entries"), list):
            raise _Refused(400, "entries: at least one entry is required")
        unknown = sorted(set(body) - _WRITE_FIELDS)
        if unknown:
            raise _Refused(400, f'Invalid JSON payload received. Unknown name "{unknown[0]}"')
        for raw in body["entries"]:
            entry = dict(raw)
            entry.setdefault("logName", body.get("logName"))
            entry.setdefault("resource", body.get("resource"))
            if body.get("labels"):
                entry["labels"] = {**body["labels"], **(entry.get("labels") or {})}
            m = re.fullmatch(r"projects/([^/]+)/logs/.+", str(entry.get("logName") or ""))
            if not m or not isinstance(entry.get("resource"), dict):
                raise _Refused(400, "each entry needs a logName projects/P/logs/L and a resource")
            ns = _ns(entry["timestamp"]) if entry.get("timestamp") else time.time_ns()
            entry["timestamp"] = _stamp(ns)
            entry.setdefault("severity", "DEFAULT")
            entry.setdefault("insertId", f"{next(self._ids):012x}")
            self._store(entry, ns, time.time(), m[1])
        return {}

    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method != "POST" or path.split("?")[0] not in ("/v2/entries:list", "/v2/entries:write"):
            return 404, envelope(404, f"Method {method} {path} not found.")
        try:
            if path.startswith("/v2/entries:write"):
                return 200, self.write_entries(body)
            with self._lock:
                self.requests.append(body if isinstance(body, dict) else {"_": body})
                fault = next((f for f in self._faults if f.times > 0), None)
                if fault:
                    fault.times -= 1
                now = time.monotonic()
                too_soon = (
                    self.min_read_interval
                    and self._last_read is not None
                    and now - self._last_read < self.min_read_interval
                )
                self._last_read = now
            if fault:
                message = fault.message or (
                    _QUOTA.format(project=self.project) if fault.status == 429 else "Fault injected."
                )
                return self._answer(fault.status, envelope(fault.status, message))
            if too_soon:
                return self._answer(429, envelope(429, _QUOTA.format(project=self.project)))
            return self._answer(200, self.list_entries(body))
        except _Refused as exc:
            return self._answer(exc.code, envelope(exc.code, exc.message))

    def _answer(self, status: int, payload: Any) -> tuple[int, Any]:
        with self._lock:
            self.answers.append(status)
            self._lock.notify_all()
        return status, payload


def _token_key(token: Any, query: str) -> tuple[int, str] | None:
    if not token:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(str(token).encode()))
        if data["q"] != query:
            raise ValueError
        return int(data["k"][0]), str(data["k"][1])
    except (ValueError, KeyError, TypeError, IndexError):
        raise _Refused(400, "page_token doesn't match arguments from the request") from None


def _parse_filter(text: str) -> list[Callable[[_Stored], bool]]:
    terms = []
    for part in [p for p in re.split(r"\s+AND\s+", text.strip()) if p] if text.strip() else []:
        m = _TERM.match(part)
        if not m:
            raise _Refused(400, f"Unparseable filter (the fake knows AND of field OP value): {part!r}")
        name, op, value = m["field"], m["op"], m["value"]
        if value.startswith('"'):
            value = json.loads(value)
        terms.append(_term(name, op, value))
    return terms


def _term(name: str, op: str, value: str) -> Callable[[_Stored], bool]:
    if name == "timestamp":
        want = _ns(value)
        return lambda s: _compare(s.ns, op, want)
    if name == "severity":
        rank = _SEVERITIES.index(value) if value in _SEVERITIES else -1
        if rank < 0:
            raise _Refused(400, f"Unknown severity {value!r}")
        return lambda s: _compare(_SEVERITIES.index(s.entry.get("severity", "DEFAULT")), op, rank)
    if op not in ("=", "!="):
        raise _Refused(400, f"{name} supports = and != only in the fake")

    def get(s: _Stored) -> Any:
        entry = s.entry
        if name == "resource.type":
            return (entry.get("resource") or {}).get("type")
        if name.startswith("resource.labels."):
            return ((entry.get("resource") or {}).get("labels") or {}).get(name[16:])
        if name.startswith("labels."):
            return (entry.get("labels") or {}).get(name[7:].strip('"'))
        return entry.get(name)

    return lambda s: (get(s) == value) == (op == "=")


def _compare(a: Any, op: str, b: Any) -> bool:
    result: bool = {"=": a == b, "!=": a != b, ">=": a >= b, ">": a > b, "<=": a <= b, "<": a < b}[op]
    return result


class _Handler(JsonHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeLogging

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            status, payload = 400, envelope(400, "Invalid JSON payload received.")
        else:
            status, payload = self.fake.handle(self.command, self.path, body)
        self.send_json(status, payload)

    do_GET = do_POST = do_DELETE = do_PATCH = _serve


def serve(host: str = "127.0.0.1", port: int = 8766, *, echo: Callable[[str], None] | None = None) -> None:
    """Run the fake until interrupted (for `vertex-trainer dev fake-logging`)."""
    fake = FakeLogging(host, port).start()
    serve_until_interrupted(
        fake,
        [
            f"fake Cloud Logging listening on {fake.url} (entries:list, entries:write)",
            f"  export VERTEX_TRAINER_LOGGING_ENDPOINT={fake.url}",
        ],
        echo,
    )
