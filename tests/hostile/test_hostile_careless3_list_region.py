"""`list --region mars-central1`: a well-formed region that is no Vertex AI region (HB, item 4).

A spec's region is checked before anything is sent (exit 2, the nearest regions named), and so is
`hardware --region`; `list` sent its request to mars-central1-aiplatform.googleapis.com, a host
that does not exist, and after its retries ended in a transport error (exit 3, 'the Vertex AI API
is unreachable or overloaded; run the same command again later'), which sent the user to wait
instead of to the typo. Now the region is checked first: one message, exit 2, nothing sent.
"""

from __future__ import annotations

import json

import pytest

from tests.cli_support import edge_env
from tests.shared import cli_runner, fake_settings
from vertex_trainer import api
from vertex_trainer.errors import UserError


@pytest.fixture
def run(fake, tmp_path):
    return cli_runner(edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url), cwd=tmp_path)


@pytest.mark.parametrize(("region", "near"), [("mars-central1", None), ("us-centrl1", "'us-central1'")])
def test_an_unknown_region_is_refused_before_anything_is_sent(fake, run, region, near):
    done = run("list", "--project", "p", "--region", region)
    assert done.returncode == 2, done.stderr
    assert f"--region '{region}' is not a Vertex AI training region" in done.stderr
    assert "nothing was sent" in done.stderr and "unreachable" not in done.stderr
    if near:
        assert f"did you mean {near}" in done.stderr
    assert fake.requests == []


def test_a_known_region_lists_and_the_api_checks_the_same(fake, run, tmp_path):
    done = run("list", "--project", "p", "--region", "us-central1", "--output", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"jobs": []} and fake.requests
    with pytest.raises(UserError, match="'mars-central1' is not a Vertex AI training region"):
        api.list_jobs("p", "mars-central1", settings=fake_settings(fake))


@pytest.mark.parametrize("command", ["status", "logs", "cancel", "trials"])
def test_a_job_id_with_an_unknown_region_is_refused_as_well(fake, run, command):
    done = run(command, "123", "--project", "p", "--region", "mars-central1")
    assert done.returncode == 2, done.stderr
    assert "--region 'mars-central1' is not a Vertex AI training region" in done.stderr
    assert fake.requests == []
