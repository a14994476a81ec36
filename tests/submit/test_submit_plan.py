"""One plan, then run it (issue 31): `plan_submit` is a frozen value, `submit --dry-run` prints it,
`validate` shows it, and `submit` sends exactly its bodies (each attempt rendered once)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from tests.shared import T4_JOB, merged
from vertex_trainer import api
from vertex_trainer.contract import ATTEMPT_LABEL
from vertex_trainer.spec import build_spec

pytestmark = pytest.mark.wire


def test_the_plan_is_frozen_and_names_its_kind(settings):
    spec = build_spec(T4_JOB)
    plan = api.plan_submit(spec, idempotency_key="plan-1", settings=settings)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.key = "other"  # type: ignore[misc]
    assert plan.kind == "custom" and plan.key == "plan-1" and len(plan.attempts) == 1
    assert [r["method"] for r in plan.requests] == ["GET", "POST", "GET"]  # look, create, look after
    assert plan.requests[1]["body"] is plan.body  # the one render
    assert api.plan_submit(spec, local=True, settings=settings).kind == "local"
    fallback = build_spec(merged(T4_JOB, {"scheduling": {"fallback": ["standard"]}}))
    assert api.plan_submit(fallback, settings=settings).kind == "fallback"


def test_submit_sends_the_plans_body_and_the_dry_run_is_the_plan(fake, settings):
    spec = build_spec(T4_JOB)
    dry = api.submit(spec, idempotency_key="same-1", dry_run=True, settings=settings, log=lambda _: None)
    assert fake.requests == []  # a dry run sends nothing
    plan = api.plan_submit(spec, idempotency_key="same-1", settings=settings)
    assert dry.to_dict() == plan.to_dict() and dry.plan.body == plan.body
    job = api.submit(spec, idempotency_key="same-1", settings=settings, log=lambda _: None)
    (create,) = fake.calls("create")
    assert create.body == dry.job == plan.body and job.spec is spec


def test_each_fallback_attempt_sends_the_plans_own_body(fake, settings):
    spec = build_spec(merged(T4_JOB, {"scheduling": {"fallback": ["standard"]}}))
    fake.no_quota("SPOT")
    plan = api.plan_submit(spec, idempotency_key="fb-1", settings=settings)
    job = api.submit(spec, idempotency_key="fb-1", settings=settings, log=lambda _: None)
    sent = [call.body for call in fake.calls("create")]
    assert sent == [a.body for a in plan.attempts]
    assert [b["labels"][ATTEMPT_LABEL] for b in sent] == ["1", "2"]
    assert [a["strategy"] for a in job.attempts] == ["spot", "standard"]


def test_validate_and_the_dry_run_answer_from_the_same_plan(fake, run_cli, tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(merged(T4_JOB, {"scheduling": {"max_wait": "1h"}})))
    validated = run_cli("validate", str(path))
    dry = run_cli("submit", str(path), "--dry-run", "-o", "json", "--idempotency-key", "v-1")
    assert validated.returncode == dry.returncode == 0, validated.stderr + dry.stderr
    assert validated.stderr == dry.stderr and "max_wait" in dry.stderr  # the plan's one warning
    assert json.loads(dry.stdout)["requests"][1]["body"]["labels"]["vertex-trainer-key"] == "v-1"
    assert fake.requests == []
