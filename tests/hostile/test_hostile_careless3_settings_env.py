"""A careless user's tuning environment: VERTEX_TRAINER_POLL_INTERVAL=nan, or
VERTEX_TRAINER_RETRY=deadline=inf, initial=-1, read_timeout=0. Each parsed as a float and was
taken: nan and negatives ended in a traceback at the first wait (time.sleep), inf waited forever,
a read timeout of 0 made every request fail. Now each is exit 2 naming the variable and the
value, before anything is sent (vertex_trainer/settings.py)."""

from __future__ import annotations

import pytest

from vertex_trainer.errors import UserError
from vertex_trainer.settings import PollPolicy, RetryPolicy

JOB = "projects/test-project/locations/us-central1/customJobs/1"


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "0", "-2"])
def test_a_poll_interval_that_is_no_number_of_seconds_is_refused(text):
    with pytest.raises(UserError, match=rf"VERTEX_TRAINER_POLL_INTERVAL='{text}' must be a number"):
        PollPolicy.parse(text)


@pytest.mark.parametrize(
    "text,says",
    [
        ("deadline=inf", "deadline='inf' must be a number at least 0"),
        ("initial=nan", "initial='nan' must be a number at least 0"),
        ("maximum=-1", "maximum='-1' must be a number at least 0"),
        ("attempts=0", "attempts='0' must be a number at least 1"),
        ("multiplier=0.5", "multiplier='0.5' must be a number at least 1"),
        ("read_timeout=0", "read_timeout='0' must be a number more than 0"),
        ("connect_timeout=nan", "connect_timeout='nan' must be a number more than 0"),
    ],
)
def test_a_retry_setting_out_of_its_range_is_refused(text, says):
    with pytest.raises(UserError) as refused:
        RetryPolicy.parse(text)
    assert refused.value.message == f"$VERTEX_TRAINER_RETRY: {says}"


def test_settings_that_are_numbers_still_load():
    assert PollPolicy.parse("0.02").initial == 0.02
    policy = RetryPolicy.parse("attempts=1,initial=0,maximum=0,multiplier=1,deadline=0,read_timeout=5")
    assert (policy.attempts, policy.initial, policy.deadline, policy.read_timeout) == (1, 0, 0, 5)


def test_the_cli_says_so_with_exit_2_and_sends_nothing(fake, run_cli):
    done = run_cli("status", JOB, env={"VERTEX_TRAINER_POLL_INTERVAL": "nan"})
    assert done.returncode == 2, done.stderr
    assert "VERTEX_TRAINER_POLL_INTERVAL='nan' must be a number of seconds more than 0" in done.stderr
    assert "Traceback" not in done.stderr and not fake.requests
