"""A tuning job's budget is its whole search's (issue 31): up to max_trials trials run, each to its
timeout, so scheduling.max_cost and --max-cost are checked against max_trials x one trial's worst
case, by submit (Python and CLI) exactly as by validate, before anything reaches the fake."""

from __future__ import annotations

import dataclasses

import pytest

from vertex_trainer import api
from vertex_trainer.errors import UserError
from vertex_trainer.spec import build_spec

from .conftest import spec_data, write_spec

pytestmark = pytest.mark.wire

# One trial: 2 h x 89.25 USD/h (8 x H100, standard) = 178.50 USD; the 16 trials: 2,856.05 USD.
ONE_TRIAL = "178.50 USD"
SEARCH = "2,856.05 USD"


def _priced(data: dict, max_cost: float | None = None) -> dict:
    data["hardware"] = "h100x8"
    data["scheduling"]["strategy"] = "standard"
    if max_cost is not None:
        data["scheduling"]["max_cost"] = max_cost
    return data


def _refusal(field: str, budget: str) -> str:
    return (
        f"{field}: the worst case of the whole search is {SEARCH} (16 trials x {ONE_TRIAL}, one "
        "trial's worst case"
    ), f"over the budget of {budget}; nothing was sent"


def test_a_budget_one_trial_fits_but_the_search_does_not_is_refused_by_plan_and_submit(fake, settings):
    spec = build_spec(_priced(spec_data(), max_cost=500))
    with pytest.raises(UserError) as planned:
        api.plan_submit(spec, settings=settings)  # what validate shows
    with pytest.raises(UserError) as submitted:
        api.submit(spec, idempotency_key="budget-1", settings=settings, log=lambda _: None)
    assert submitted.value.message == planned.value.message
    head, tail = _refusal("scheduling.max_cost", "500.00 USD")
    assert head in submitted.value.message and tail in submitted.value.message
    assert "lower tune.max_trials to at most 2" in (submitted.value.hint or "")
    assert fake.requests == []  # nothing sent: not even the key's lookup


def test_max_cost_on_submit_wins_and_names_the_whole_search(fake, settings):
    spec = build_spec(_priced(spec_data(), max_cost=10_000))
    with pytest.raises(UserError) as refused:
        api.submit(spec, settings=settings, max_cost=1000, log=lambda _: None)
    head, tail = _refusal("--max-cost", "1,000.00 USD")
    assert head in refused.value.message and tail in refused.value.message
    assert fake.requests == []
    job = api.submit(spec, idempotency_key="budget-2", settings=settings, log=lambda _: None)
    assert job.name in fake.tuning.jobs  # 10,000 USD covers the 16 trials


def test_the_cli_refuses_it_on_validate_and_on_submit_alike(fake, run_cli, tmp_path):
    path = write_spec(tmp_path, lambda d: _priced(d, max_cost=500))
    validated = run_cli("validate", path)
    submitted = run_cli("submit", path)
    dry = run_cli("submit", path, "--dry-run")
    assert validated.returncode == submitted.returncode == dry.returncode == 2, submitted.stderr
    head, tail = _refusal("scheduling.max_cost", "500.00 USD")
    for result in (validated, submitted, dry):
        assert head in result.stderr and tail in result.stderr
    assert submitted.stderr == validated.stderr
    over = run_cli("submit", write_spec(tmp_path, _priced, "plain.yaml"), "--max-cost", "1000")
    assert over.returncode == 2 and "--max-cost: the worst case of the whole search" in over.stderr
    assert fake.requests == []


def test_validate_and_the_dry_run_show_the_whole_search(fake, run_cli, tmp_path):
    path = write_spec(tmp_path, lambda d: _priced(d, max_cost=5000))
    validated = run_cli("validate", path)
    assert validated.returncode == 0, validated.stderr
    assert f"  search    up to 16 trials, worst case {SEARCH} (16 x one trial's)" in validated.stdout
    dry = run_cli("submit", path, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"# search: up to 16 trials, worst case {SEARCH} (16 x one trial's)" in dry.stdout
    assert fake.requests == []


def test_the_plan_is_frozen_and_the_dry_run_is_the_plan(settings):
    spec = build_spec(spec_data())
    plan = api.plan_submit(spec, idempotency_key="frozen-1", settings=settings)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.kind = "custom"  # type: ignore[misc]
    assert plan.kind == "tuning" and plan.tuning is not None
    assert plan.tuning["trialJobSpec"] == plan.body["jobSpec"]  # the one render
    dry = api.submit(spec, idempotency_key="frozen-1", dry_run=True, settings=settings)
    assert dry.to_dict() == plan.to_dict() and dry.plan.tuning == plan.tuning
