"""A careless user writes `max_wait: 0` on a Flex Start job meaning "don't wait" (issue 42, H2
round 2). For Vertex AI (and the contract) 0 is the opposite: the job waits for capacity for as
long as it takes, and starts (and bills) whenever capacity comes, a week later if need be, when
nobody wants it any more. `validate` showed "max wait 0s", which reads as "no wait". Now it says
what 0 means; the body sent is unchanged ("0s", Vertex AI's spelling of "indefinitely").
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import T4_JOB, cli_runner

SPEC = {**T4_JOB, "hardware": "a100x1", "scheduling": {"strategy": "flex-start", "timeout": "2d"}}


@pytest.fixture
def cli(tmp_path):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)

    def go(*args, max_wait):
        spec = tmp_path / "job.yaml"
        spec.write_text(yaml.safe_dump({**SPEC, "scheduling": {**SPEC["scheduling"], "max_wait": max_wait}}))
        return run(args[0], spec, *args[1:])

    return go


def test_max_wait_0_is_said_to_wait_indefinitely(cli):
    done = cli("validate", max_wait="0")
    assert done.returncode == 0, done.stderr
    (line,) = [s for s in done.stdout.splitlines() if s.strip().startswith("schedule")]
    assert (
        "max wait 0 (none: it waits for capacity for as long as it takes, then bills from its start)" in line
    )
    assert "max wait 0s" not in line
    body = json.loads(cli("render", max_wait="0").stdout)
    assert body["jobSpec"]["scheduling"]["maxWaitDuration"] == "0s"  # what Vertex AI reads as no limit


def test_a_real_max_wait_reads_as_before(cli):
    done = cli("validate", max_wait="4h")
    assert done.returncode == 0, done.stderr
    assert "  schedule  flex-start, max wait 4h, timeout 2d" in done.stdout
