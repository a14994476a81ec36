"""A fake Cloud Monitoring API (v3) on loopback: the time series of training jobs, read with
`projects.timeSeries.list`.

    GET /v3/projects/P/timeSeries?filter=F&interval.startTime=T0&interval.endTime=T1
        &aggregation.alignmentPeriod=60s&aggregation.perSeriesAligner=ALIGN_MEAN&pageSize=N&pageToken=T

answers `{"timeSeries": [TimeSeries...], "nextPageToken"}` in the real API's shape: each series has
`metric` ({type, labels}), `resource` ({type: "cloudml_job", labels: {project_id, job_id,
task_name}}), `metricKind` GAUGE, `valueType` DOUBLE and `points` (newest first, each
`{"interval": {"startTime", "endTime"}, "value": {"doubleValue": x}}`). The filter takes what a
client of training jobs sends: `key = "value"` terms joined by AND over metric.type,
resource.type and resource.labels.*/metric.labels.*; anything else is a 400, as an unknown field
is on Google's side. interval.endTime is required; an aligner other than ALIGN_NONE needs an
alignmentPeriod of at least 60s (ALIGN_MEAN, ALIGN_MAX, ALIGN_MIN are served: each series' points
in blocks of the period from the interval's start, one point per block).

    with FakeMonitoring() as monitoring:
        monitoring.record("sandbox", "123", "ml.googleapis.com/training/cpu/utilization",
                          "workerpool0-0", [(1764000000.0, 0.42)], labels={"measured_by": "..."})
        monitoring.fail(403)      # the next request answers 403 PERMISSION_DENIED

Point the tool at it with `VERTEX_TRAINER_MONITORING_ENDPOINT=http://127.0.0.1:PORT`. Errors use
Google's envelope. It shares no code with the client it stands in for.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from vertex_trainer.emulators._http import JsonHandler, LoopbackServer, offset_page, query_of

_PATH = re.compile(r"^/v3/projects/(?P<project>[^/]+)/timeSeries$")
_TERM = re.compile(r'^\s*(?P<key>[a-z_.]+)\s*=\s*"(?P<value>[^"]*)"\s*$')
_KEYS = re.compile(r"^(metric\.type|resource\.type|resource\.labels\.[a-z_]+|metric\.labels\.[a-z_]+)$")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


_ALIGNERS: dict[str, Callable[[list[float]], float]] = {
    "ALIGN_MEAN": _mean,
    "ALIGN_MAX": max,
    "ALIGN_MIN": min,
}
RESOURCE_TYPE = "cloudml_job"
MIN_ALIGNMENT_S = 60


@dataclass
class _Series:
    project: str
    job_id: str
    metric: str
    task_name: str
    labels: dict[str, str]
    points: list[tuple[float, float]]  # (epoch seconds, value), oldest first


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _seconds(text: str) -> float:
    if not text.endswith("s"):
        raise ValueError(f"Invalid duration {text!r}: expected seconds with the suffix 's' (60s).")
    return float(text[:-1])


@dataclass
class FakeMonitoring(LoopbackServer):
    host: str = "127.0.0.1"
    port: int = 0
    page_size: int = 2  # small, so a client must follow nextPageToken
    series: list[_Series] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    failures: list[tuple[int, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    def record(
        self,
        project: str,
        job_id: str,
        metric: str,
        task_name: str,
        points: list[tuple[float, float]],
        *,
        labels: dict[str, str] | None = None,
    ) -> None:
        """One series of `metric` for the job's replica `task_name`: (epoch seconds, value) points."""
        with self._lock:
            self.series.append(
                _Series(project, job_id, metric, task_name, dict(labels or {}), sorted(points))
            )

    def fail(self, status: int, *, times: int = 1, message: str | None = None) -> None:
        """Answer the next `times` requests with `status`."""
        with self._lock:
            self.failures.extend([(status, message)] * times)

    def answer(self, project: str, query: dict[str, str]) -> list[dict[str, Any]]:
        """The series of `project` the query selects, aligned; ValueError: a 400's message."""
        terms = _terms(query.get("filter", ""))
        if "metric.type" not in terms:
            raise ValueError("The filter must name a metric.type.")
        end_text = query.get("interval.endTime")
        if not end_text:
            raise ValueError("Field interval.endTime had an invalid value: it is required.")
        end = _epoch(end_text)
        start = _epoch(query["interval.startTime"]) if query.get("interval.startTime") else end
        if start > end:
            raise ValueError("Field interval.startTime is later than interval.endTime.")
        aligner = query.get("aggregation.perSeriesAligner", "ALIGN_NONE")
        period = 0.0
        if aligner != "ALIGN_NONE":
            if aligner not in _ALIGNERS:
                raise ValueError(f"The stand-in serves ALIGN_NONE and {', '.join(_ALIGNERS)}, not {aligner}.")
            if not query.get("aggregation.alignmentPeriod"):
                raise ValueError("The alignment period is required with a per-series aligner.")
            period = _seconds(query["aggregation.alignmentPeriod"])
            if period < MIN_ALIGNMENT_S:
                raise ValueError("The alignment period must be at least 60 seconds.")
        with self._lock:
            chosen = [s for s in self.series if s.project == project and _matches(s, project, terms)]
        out = []
        for s in chosen:
            points = [(t, v) for t, v in s.points if start <= t <= end]
            if not points:
                continue
            out.append(_shape(s, project, _align(points, start, period, aligner)))
        return out

    def start(self) -> FakeMonitoring:
        fake = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                fake.requests.append(self.path)
                if self.send_fault(
                    fake, "Permission monitoring.timeSeries.list denied (or the resource may not exist)."
                ):
                    return None
                parts = urlsplit(self.path)
                m = _PATH.match(parts.path)
                if not m:
                    return self.send_envelope(404, f"Method GET {parts.path} not found.")
                query = query_of(self.path)
                try:
                    found = fake.answer(m["project"], query)
                    answer = offset_page(found, query, "timeSeries", size=fake.page_size, cap=fake.page_size)
                except (ValueError, KeyError) as exc:
                    return self.send_envelope(400, str(exc))
                answer.setdefault("unit", "10^2.%")
                self.send_json(200, answer)

        return self._serve(Handler)


def _terms(text: str) -> dict[str, str]:
    """`a = "x" AND b = "y"` -> {a: x, b: y}; ValueError for anything else."""
    terms: dict[str, str] = {}
    for part in re.split(r"\s+AND\s+", text.strip()) if text.strip() else []:
        m = _TERM.match(part)
        if not m or not _KEYS.match(m["key"]):
            raise ValueError(f'The stand-in\'s filter takes key = "value" terms joined by AND, not {part!r}.')
        terms[m["key"]] = m["value"]
    return terms


def _matches(s: _Series, project: str, terms: dict[str, str]) -> bool:
    resource = {"project_id": project, "job_id": s.job_id, "task_name": s.task_name}
    for key, value in terms.items():
        if key == "metric.type":
            have: str | None = s.metric
        elif key == "resource.type":
            have = RESOURCE_TYPE
        elif key.startswith("resource.labels."):
            have = resource.get(key.removeprefix("resource.labels."))
        else:
            have = s.labels.get(key.removeprefix("metric.labels."))
        if have != value:
            return False
    return True


def _align(
    points: list[tuple[float, float]], start: float, period: float, aligner: str
) -> list[tuple[float, float, float]]:
    """(block start, block end, value) per block of `period` from `start`, newest first; with no
    period, each point as it is."""
    if not period:
        return [(t, t, v) for t, v in reversed(points)]
    blocks: dict[int, list[float]] = {}
    for t, v in points:
        blocks.setdefault(int((t - start) // period), []).append(v)
    reduce = _ALIGNERS[aligner]
    return [
        (start + k * period, start + (k + 1) * period, float(reduce(blocks[k])))
        for k in sorted(blocks, reverse=True)
    ]


def _shape(s: _Series, project: str, points: list[tuple[float, float, float]]) -> dict[str, Any]:
    return {
        "metric": {"type": s.metric, "labels": dict(s.labels)},
        "resource": {
            "type": RESOURCE_TYPE,
            "labels": {"project_id": project, "job_id": s.job_id, "task_name": s.task_name},
        },
        "metricKind": "GAUGE",
        "valueType": "DOUBLE",
        "points": [
            {"interval": {"startTime": _stamp(a), "endTime": _stamp(b)}, "value": {"doubleValue": v}}
            for a, b, v in points
        ],
    }
