"""The error Vertex AI reports for a failed job holds words the job wrote (its exit message, the
last lines of a replica): `status` prints it, and `status --wait` ends with it as the error line.
Escape sequences in it would set the window title, write the clipboard (OSC 52) or move the
cursor over earlier lines, as in a log line (test_hostile_attack_log_escapes.py): each control
character is shown as `\\xNN`, on stdout and on stderr alike."""

from __future__ import annotations

import pytest

from tests.shared import job_body

pytestmark = pytest.mark.wire

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"  # OSC 52: the clipboard gets `rm -rf ~`
ERROR = f"The replica workerpool0-0 exited with 1: {CLIPBOARD}\x1b[2Kdone\r"
SHOWN = "The replica workerpool0-0 exited with 1: \\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b[2Kdone"


def _no_control(text: str) -> None:
    bad = [c for c in text if (ord(c) < 32 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F]
    assert bad == [], repr(text)


@pytest.fixture
def failed_job(fake) -> str:
    name = fake.add_job(job_body(), state="JOB_STATE_RUNNING")["name"]
    fake.set_state(name, "JOB_STATE_FAILED", error_message=ERROR)
    return name


def test_status_shows_the_error_without_sending_its_escapes(run_cli, failed_job):
    result = run_cli("status", failed_job)
    assert result.returncode == 0, result.stderr
    _no_control(result.stdout)
    assert f"error    {SHOWN}" in result.stdout.splitlines()


def test_status_wait_ends_with_the_error_line_escaped(run_cli, failed_job):
    result = run_cli("status", failed_job, "--wait")
    assert result.returncode == 1
    _no_control(result.stdout + result.stderr)
    assert f"ended FAILED: {SHOWN}" in result.stderr


def test_json_keeps_the_error_as_vertex_ai_sent_it(run_cli, failed_job):
    import json

    result = run_cli("status", failed_job, "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["error"] == ERROR  # a script reads the real text (JSON escapes it)
