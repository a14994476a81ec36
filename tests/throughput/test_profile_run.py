"""`vertex-trainer profile RUN` and `vertex-trainer tensorboard RUN` over one real profiled run:
`submit --local` of a tiny CNN with `trainer.profile_steps`, the host-overhead tests' spe1 run
(conftest.py `host_runs`: the trainer in its own process, as on Vertex AI). Its trace is read by
xprof as a local run, and as a sandbox job's (a CustomJob in the fake Vertex AI whose outputs are
in the storage emulator)."""

from __future__ import annotations

import json
import re
import signal
import uuid
from pathlib import Path

import pytest
import requests

from tests.process_support import processes_with_env, wait_gone
from tests.shared import put_object, storage_emulator

pytestmark = pytest.mark.trainer  # a real run of the bundled trainer (TensorFlow, in a subprocess)

ONEDNN = re.compile(r"^_Mkl(Native)?")  # the prefix of oneDNN's kernels in TensorFlow's op types
HOST_LINE = re.compile(
    r"^verdict: host-bound: (\d+)% of the time between executions at steps_per_execution=1: "
    r"use trainer\.steps_per_execution: "
)


@pytest.fixture(scope="module")
def run(host_runs) -> Path:
    """A finished local run that profiled its steps 3-6 (conftest.py `host_runs`: the spe1 run, 100
    synthetic steps of 8 examples at 8 px, one step an execution): its folder."""
    return host_runs["spe1"].output


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_a_profiled_run_shows_where_its_step_time_goes(run, run_cli):
    traces = sorted(run.glob("logs/plugins/profile/*/*.xplane.pb"))
    assert len(traces) == 1  # one session, one host
    before = _files(run)
    text = run_cli("profile", str(run))
    assert text.returncode == 0, text.stderr
    found = run_cli("profile", str(run), "--output", "json")
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert _files(run) == before  # xprof's caches went to a scratch copy, not the run's folder

    assert data["trace"]["files"] == [str(traces[0])] and data["hardware"] == "CPU_ONLY"
    assert data["steps"] >= 1 and data["steps_per_execution"] == 1  # from trainer_config.json
    shares = {c["name"]: c["fraction"] for c in data["breakdown"]}
    assert {"compute", "host"} <= set(shares)  # a CPU's ops, the host between executions
    assert abs(sum(shares.values()) - 1) < 0.005
    step = data["step_time_ms"]
    for c in data["breakdown"]:
        assert abs(c["ms_per_step"] - c["fraction"] * step) <= 0.01 * step
    ops = data["top_ops"]
    assert ops and [o["self_ms"] for o in ops] == sorted((o["self_ms"] for o in ops), reverse=True)
    # the CNN's own ops are there: TensorFlow's Conv2D*, or oneDNN's kernel of it where TensorFlow
    # picks one for the CPU (_MklNativeConv2D, _MklNativeConv2DBackpropFilter on an AMD EPYC)
    assert any(ONEDNN.sub("", o["type"]).startswith("Conv2D") for o in ops), ops

    # The verdict in the trainer's words, by the trainer's rule (trainer/throughput.py bound()).
    host, waiting = shares.get("host", 0), shares.get("input", 0)
    line = text.stdout.splitlines()[-1]
    assert line == f"verdict: {data['verdict']}"
    if host >= 0.10 and host >= waiting:
        match = HOST_LINE.match(line)
        assert match and int(match.group(1)) == round(100 * host), line
    elif waiting >= 0.10:
        assert line.startswith(f"verdict: input-bound: {100 * waiting:.0f}% of the time waiting for data")
    else:
        assert line.startswith(f"verdict: compute-bound: {100 * waiting:.0f}% of the time waiting for data")
    # each category on its line, largest first, with its share
    rows = [r for r in text.stdout.splitlines() if r.startswith("  ") and "% " in r and "a step" in r]
    assert len(rows) == len(shares)
    assert [float(re.search(r"([\d.]+)%", r).group(1)) for r in rows] == sorted(
        (round(100 * f, 1) for f in shares.values()), reverse=True
    )
    assert (
        "idle between steps (host round trips)" in text.stdout
        and "top ops by self time (host):" in text.stdout
    )


def test_a_sandbox_jobs_trace_is_read_from_its_bucket(run, run_cli, fake):
    """The job found by name in (the fake) Vertex AI, its base output directory listed and its
    trace read through the storage client pointed at the emulator: the same breakdown."""
    local = json.loads(run_cli("profile", str(run), "-o", "json").stdout)
    with storage_emulator("sandbox-bucket") as url:
        base = "gs://sandbox-bucket/runs/profiled-1"
        for path in run.rglob("*"):
            if path.is_file() and ("plugins" in path.parts or path.name == "trainer_config.json"):
                put_object(url, f"{base}/{path.relative_to(run)}", path.read_bytes())
        from tests.shared import job_body

        body = job_body(name="profiled")
        body["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": base}
        job = fake.add_job(body, state="JOB_STATE_SUCCEEDED")
        proc = run_cli("profile", job["name"], "-o", "json", env={"STORAGE_EMULATOR_HOST": url})
    assert proc.returncode == 0, proc.stderr
    remote = json.loads(proc.stdout)
    session = local["trace"]["session"]
    assert remote["trace"]["files"] == [
        f"{base}/logs/plugins/profile/{session}/{Path(local['trace']['files'][0]).name}"
    ]
    assert remote["source"] == job["name"]
    for key in ("breakdown", "top_ops", "verdict", "steps_per_execution", "step_names"):
        assert remote[key] == local[key], key


def test_tensorboard_serves_the_run_on_loopback_until_ctrl_c(run, popen_cli):
    marker = f"VT_TEST_TENSORBOARD_{uuid.uuid4().hex}"  # TensorBoard inherits the CLI's environment
    proc = popen_cli("tensorboard", run, "--port", "0", env={marker: "1"})
    url = proc.stdout.readline().strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url + proc.stderr.read()
    try:
        runs = requests.get(url + "data/runs", timeout=60).json()
        assert "train" in runs  # the run's logs/train event files
        sessions = requests.get(url + "data/plugin/profile/runs", timeout=60).json()
        session = next(run.glob("logs/plugins/profile/*")).name
        assert any(session in str(s) for s in sessions), sessions  # the Profile tab has the trace
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert err.rstrip().endswith("stopped")
    # TensorBoard ended with it: its process and its data server are gone (the data server ends
    # when TensorBoard closes its stdin: waited for). Not its port: on a busy machine another
    # test's server may be given the freed port at once.
    assert wait_gone(processes_with_env(marker), timeout=60) == []
