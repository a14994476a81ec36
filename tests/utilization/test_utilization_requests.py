"""Every request the utilization client sends is one Google's API definition accepts (monitoring
v3's discovery document, shipped in google-api-python-client, held by tests/discovery_support.py:
the method, its path and query parameters, the aligner among its enum, the period a
google-duration of at least 60 s), it pages through nextPageToken, a refusal names the role to
ask for, and a job that has not started is not read at all."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.discovery_support import conforms, discovery_methods, documents_folder, record_requests
from tests.shared import FAST_RETRY
from vertex_trainer.emulators.monitoring import FakeMonitoring
from vertex_trainer.errors import ServiceError
from vertex_trainer.settings import Settings
from vertex_trainer.vertex import utilization

PROJECT, JOB_ID = "p", "4411643896526798848"


def _job(start: datetime, end: datetime | None) -> dict:
    return {
        "name": f"projects/{PROJECT}/locations/us-central1/customJobs/{JOB_ID}",
        "state": "JOB_STATE_SUCCEEDED" if end else "JOB_STATE_RUNNING",
        "startTime": start.isoformat(),
        **({"endTime": end.isoformat()} if end else {}),
        "jobSpec": {"workerPoolSpecs": [{"containerSpec": {"imageUri": "i", "command": ["python", "t.py"]}}]},
    }


def _enum(name: str) -> list[str]:
    doc = json.loads((documents_folder() / "monitoring.v3.json").read_text())
    return doc["resources"]["projects"]["resources"]["timeSeries"]["methods"]["list"]["parameters"][name][
        "enum"
    ]


def test_every_request_is_in_the_monitoring_api_definition_and_pages_are_followed(monkeypatch):
    sent = record_requests(monkeypatch)
    found = discovery_methods(("monitoring.v3",))
    now = time.time()
    with FakeMonitoring() as fake:  # two series a page: three replicas take two pages
        for replica in range(3):
            fake.record(
                PROJECT, JOB_ID, utilization.CPU, f"workerpool0-{replica}", [(now - 30, 0.1 * (replica + 1))]
            )
        fake.record(PROJECT, "other-job", utilization.CPU, "workerpool0-0", [(now - 30, 1.0)])
        client = utilization.MonitoringClient(
            PROJECT, settings=Settings(monitoring_endpoint=fake.url, retry=FAST_RETRY)
        )
        start = datetime.fromtimestamp(now - 600, timezone.utc)
        use = utilization.read(_job(start, datetime.fromtimestamp(now, timezone.utc)), client)
    (pool,) = use.pools
    assert pool.replicas == 3 and pool.cpu.peak == pytest.approx(0.3) and pool.cpu.mean == pytest.approx(0.2)
    assert pool.accelerator is None and use.verdicts[0].kind == "cpu-only"
    assert len(sent) == 4  # three metrics, the CPU's in two pages
    assert any("pageToken=" in url for _, url, _ in sent)
    for method, url, body in sent:
        assert conforms(method, url, body, found) == "monitoring.v3: monitoring.projects.timeSeries.list"
        query = parse_qs(urlsplit(url).query)
        assert query["aggregation.perSeriesAligner"] == ["ALIGN_MEAN"]
        assert "ALIGN_MEAN" in _enum("aggregation.perSeriesAligner")
        assert query["view"][0] in _enum("view")
        period = query["aggregation.alignmentPeriod"][0]
        assert period.endswith("s") and float(period[:-1]) >= 60
        assert f'resource.labels.job_id = "{JOB_ID}"' in query["filter"][0]


def test_the_check_catches_a_parameter_the_api_does_not_have():
    found = discovery_methods(("monitoring.v3",))
    base = f"http://127.0.0.1:1/v3/projects/{PROJECT}/timeSeries"
    assert conforms("GET", f"{base}?filter=x&aggregation.alignmentPeriod=60s", None, found)
    assert conforms("GET", f"{base}?filter=x&aggregation.period=60s", None, found) is None
    assert conforms("GET", f"{base}?filter=x&interval.start=1", None, found) is None


def test_a_long_job_is_read_at_a_coarser_period_that_keeps_a_series_small():
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert utilization.alignment_s(start, start + timedelta(minutes=5)) == utilization.MIN_ALIGNMENT_S
    week = timedelta(days=7)
    period = utilization.alignment_s(start, start + week)
    assert period % 60 == 0 and week.total_seconds() / period <= utilization.MAX_POINTS


def test_a_job_that_has_not_started_is_not_read():
    client = utilization.MonitoringClient(
        PROJECT, settings=Settings(monitoring_endpoint="http://127.0.0.1:9")
    )
    job = _job(datetime.now(timezone.utc), None)
    del job["startTime"]
    use = utilization.read(job, client)  # a request would fail: nothing listens on port 9
    assert use.empty and "has not started" in use.notes[0]


def test_a_refusal_names_the_role_that_reads_monitoring():
    with FakeMonitoring() as fake:
        fake.fail(403)
        client = utilization.MonitoringClient(
            PROJECT, settings=Settings(monitoring_endpoint=fake.url, retry=FAST_RETRY)
        )
        start = datetime.now(timezone.utc) - timedelta(minutes=5)
        with pytest.raises(ServiceError) as caught:
            utilization.read(_job(start, None), client)
    assert "monitoring.timeSeries.list" in str(caught.value) and "roles/monitoring.viewer" in (
        caught.value.hint or ""
    )


def test_a_running_job_with_no_series_yet_says_so():
    with FakeMonitoring() as fake:
        client = utilization.MonitoringClient(
            PROJECT, settings=Settings(monitoring_endpoint=fake.url, retry=FAST_RETRY)
        )
        use = utilization.read(_job(datetime.now(timezone.utc) - timedelta(seconds=5), None), client)
    assert use.empty and use.notes and "no utilization series yet" in use.notes[0]


@pytest.mark.parametrize(
    ("query", "refusal"),
    [
        ({"filter": f'metric.type = "{utilization.CPU}"'}, "interval.endTime"),
        (
            {
                "filter": f'metric.type = "{utilization.CPU}"',
                "interval.endTime": "2026-01-01T00:00:00Z",
                "aggregation.perSeriesAligner": "ALIGN_MEAN",
                "aggregation.alignmentPeriod": "10s",
            },
            "at least 60 seconds",
        ),
        ({"filter": "metric.type = one_of(a)", "interval.endTime": "2026-01-01T00:00:00Z"}, "filter"),
    ],
)
def test_the_stand_in_refuses_what_the_api_refuses(query, refusal):
    """The stand-in is no looser than the API where the client could go wrong."""
    with pytest.raises(ValueError, match=refusal):
        FakeMonitoring().answer(PROJECT, query)
