"""A sandbox job's `status --utilization`: the sandbox serves the job's series from what its local
run measured (each replica's CPU from /proc, the accelerator figure from the trainer's
metrics.json, labelled as the sandbox's), and the CLI prints the figures, a verdict and the fix,
as text and JSON, and the report shows them; a job that does not exist is exit 2, as `status` is.

The job is the sandbox tests' own stand-in (tests/sandbox/conftest.py: a CustomJob whose replica is
`python -c`), the smallest that runs for real: it burns 1.5 sampler periods of CPU time (SAMPLE_S,
vertex_trainer/local/supervisor.py; CPU time, not wall time: on a busy machine it takes longer,
never fewer samples), so it is still running at the first sample, and writes the metrics.json the
bundled trainer would."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.cli_support import edge_env, invoke
from tests.sandbox.conftest import REGION, echoed, marker, python_job, sandbox  # noqa: F401 (fixtures)
from vertex_trainer.api.report import report_data
from vertex_trainer.local.supervisor import SAMPLE_S
from vertex_trainer.reporting.page import html
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import Job, JobsClient
from vertex_trainer.vertex.utilization import THRESHOLDS, Figure, PoolUse, TrainerFlags, verdict

pytestmark = pytest.mark.wire

WAITED = 0.4  # the stand-in's input_wait_fraction
SCRIPT = textwrap.dedent(f"""\
    import json, os, time
    end = time.process_time() + 1.5 * {SAMPLE_S}
    while time.process_time() < end:
        pass
    base = os.path.dirname(os.environ["AIP_MODEL_DIR"].rstrip("/"))
    with open(os.path.join(base, "metrics.json"), "w") as f:
        json.dump({{"input_wait_fraction": {WAITED}}}, f)
    """)


@pytest.fixture
def finished(sandbox, tmp_path):  # noqa: F811
    """The stand-in job, run to its end in the sandbox; (its name, the CLI's environment)."""
    env = sandbox.env()
    settings = Settings.from_environ(env)
    client = JobsClient(sandbox.project, REGION, settings=settings)
    job = Job(client.create_once(python_job(SCRIPT, output_dir=str(tmp_path / "run"))), client)
    job.wait(timeout=120)
    assert job.state == "JOB_STATE_SUCCEEDED", job.data
    return job.name, edge_env(tmp_path, **env)


def test_a_sandbox_jobs_utilization_gives_figures_a_verdict_and_where_they_come_from(finished):
    name, env = finished
    done = invoke(["status", name, "--utilization", "--output", "json"], env=env)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["state"] == "JOB_STATE_SUCCEEDED"
    (pool,) = shown["utilization"]["pools"]
    assert pool["pool"] == "workerpool0" and pool["replicas"] == 1
    assert pool["accelerator"]["mean"] == pytest.approx(1 - WAITED) and pool["memory"] is None
    cpu = pool["cpu"]
    assert cpu["points"] >= 1 and 0 < cpu["mean"] <= cpu["peak"]
    # a script job (a command of its own): the verdict by the stated rules, its fix the compile() line
    expected = "input-bound" if cpu["mean"] >= THRESHOLDS.cpu_busy else "host-bound"
    assert pool["verdict"]["kind"] == expected
    assert shown["utilization"]["flags"]["bundled"] is False
    notes = shown["utilization"]["notes"]
    assert any("the sandbox, on this machine" in n and "vCPUs" in n for n in notes), notes
    assert any("no accelerator here" in n and "input_wait_fraction" in n for n in notes), notes

    text = invoke(["status", name, "--utilization"], env=env)
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "workerpool0 (1 replica)" in out and f"verdict        {expected}:" in out
    assert f"mean {100 * (1 - WAITED):5.1f}%" in out  # the accelerator line
    assert "note: the sandbox, on this machine" in out
    if expected == "host-bound":
        assert "model.compile(..., steps_per_execution=32)" in out
    # the words are the rules' on the figures served (nothing decided twice)
    use = PoolUse("workerpool0", 1, accelerator=Figure(**pool["accelerator"]), cpu=Figure(**cpu))
    assert pool["verdict"]["reason"] == verdict(use, TrainerFlags(bundled=False)).reason

    # the report shows the same figures for the cloud job
    data = report_data(name, settings=Settings.from_environ(env))
    assert data.utilization["pools"][0]["accelerator"] == pool["accelerator"]
    page = html(data)
    assert 'id="utilization"' in page and 'data-utilization-verdict="workerpool0"' in page
    assert f"{100 * (1 - WAITED):.0f}% / {100 * (1 - WAITED):.0f}%" in page

    missing = f"projects/{name.split('/')[1]}/locations/{REGION}/customJobs/999999"
    done = invoke(["status", missing, "--utilization"], env=env)
    assert done.returncode == 2, (done.stdout, done.stderr)
