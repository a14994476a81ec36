"""A careless user's `logs --since` time that is not the time meant (issue 42, HC round 4).

`--since 2026-11-29T18:00:00` (no zone) was read as UTC: typed from a clock an hour ahead of
UTC it showed an hour more than asked, behind it an hour less, without a word. A day, hour or
offset that does not exist was rolled on: `2026-02-30T10:00:00Z` read as 2 March,
`T25:00:00Z` as 01:00 the next day, `+99:99` as four days off. A time without its zone and a
time that does not exist are now exit 2, saying how to write it; RFC 3339 times (Z or an offset)
and durations read as before."""

from __future__ import annotations

import pytest

from vertex_trainer.errors import UserError
from vertex_trainer.vertex.job_logs import parse_since, to_ns

NOW = to_ns("2026-12-01T12:00:00Z") / 1e9


def test_a_time_without_its_zone_is_refused_with_both_fixes():
    with pytest.raises(UserError) as e:
        parse_since("2026-11-29T18:00:00", NOW)
    assert e.value.message == "--since '2026-11-29T18:00:00': a time needs its zone"
    assert e.value.hint and "--since 2026-11-29T18:00:00Z (UTC)" in e.value.hint and "+01:00" in e.value.hint


@pytest.mark.parametrize(
    "text",
    ["2026-02-30T10:00:00Z", "2026-11-29T25:00:00Z", "2026-11-29T18:61:00Z", "2026-11-29T18:00:00+99:99"],
)
def test_a_time_that_does_not_exist_is_refused_not_rolled_on(text):
    with pytest.raises(UserError, match="no such time"):
        parse_since(text, NOW)
    with pytest.raises(ValueError):
        to_ns(text)


def test_rfc3339_times_and_durations_read_as_before(run_cli):
    assert parse_since("2026-11-29T18:00:00Z", NOW) == to_ns("2026-11-29T18:00:00Z")
    assert parse_since("2026-11-29T19:00:00+01:00", NOW) == to_ns("2026-11-29T18:00:00Z")
    assert parse_since("30m", NOW) == int((NOW - 1800) * 1e9)
    proc = run_cli("logs", "projects/p/locations/us-central1/customJobs/1", "--since", "2026-11-29T18:00:00")
    assert proc.returncode == 2 and "a time needs its zone" in proc.stderr
