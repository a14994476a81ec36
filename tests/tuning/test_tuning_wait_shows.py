"""A tuning job's `wait()` shows in a notebook what `submit --wait` shows in a terminal (issue 40
item 6): its state changes and each trial as it ends, on the stream given (default stderr)."""

from __future__ import annotations

import io
import re

import pytest

from tests.shared import FAST_POLL
from vertex_trainer import api
from vertex_trainer.spec import build_spec
from vertex_trainer.vertex.hptuning import TuningJob

from .conftest import spec_data

pytestmark = pytest.mark.wire


def test_wait_shows_the_states_and_each_trial_as_it_ends(fake, settings):
    fake.tuning.set_metrics([0.61, None])
    job = api.submit(build_spec(spec_data()), idempotency_key="shown-1", settings=settings)
    assert isinstance(job, TuningJob)
    fake.tuning.jobs[job.name].data["maxTrialCount"] = 2
    shown = io.StringIO()
    job.wait(stream=shown, poll=FAST_POLL)
    lines = [re.sub(r"^\d\d:\d\d:\d\d  ", "", line) for line in shown.getvalue().splitlines()]
    assert lines[0] == f"QUEUED  hyperparameter tuning job {job.name}" and lines[-1] == "SUCCEEDED"
    assert sorted(line for line in lines if line.startswith("trial ")) == [
        "trial 1 SUCCEEDED: accuracy=0.6100",
        "trial 2 INFEASIBLE: no accuracy  (The trial's CustomJob failed: the replica workerpool0-0 exited "
        "with a non-zero status of 1.)",
    ]


def test_wait_quiet_shows_nothing_and_on_trial_still_hears_each(fake, settings):
    fake.tuning.set_metrics([0.5])
    job = api.submit(build_spec(spec_data()), idempotency_key="shown-2", settings=settings)
    fake.tuning.jobs[job.name].data["maxTrialCount"] = 1
    shown, ended = io.StringIO(), []
    job.wait(stream=shown, poll=FAST_POLL, quiet=True, on_trial=ended.append)
    assert shown.getvalue() == "" and [t.id for t in ended] == ["1"]
