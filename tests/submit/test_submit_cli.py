"""`vertex-trainer submit/status/cancel/list` against the fake Vertex server: in this process
(run_cli), and the exit codes 0/1/2/3, the socket guard and Ctrl-C in a real process."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.wire


def one_json(stdout: str) -> dict:
    """stdout must be exactly one JSON object and nothing else."""
    obj = json.loads(stdout)
    assert isinstance(obj, dict)
    return obj


def test_submit_json_prints_one_object_and_sends_the_render_output(fake, run_cli, spec_file):
    result = run_cli("submit", spec_file, "--output", "json", "--idempotency-key", "ci-1")
    assert result.returncode == 0, result.stderr
    out = one_json(result.stdout)
    assert set(out) == {"name", "state", "console_url", "image", "idempotency_key", "adopted", "output_dir"}
    assert out["name"] in fake.jobs and out["adopted"] is False and out["idempotency_key"] == "ci-1"
    # the submission's own folder below output_dir, named after its key (docs/contract.md section 15)
    sent_dir = fake.calls("create")[0].body["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
    assert out["output_dir"] == sent_dir and sent_dir.endswith("/tiny-cnn-test-ci-1")
    assert out["image"] == "us-docker.pkg.dev/test-project/training/trainer:v1"
    assert out["console_url"].endswith(f"/training/{out['name'].rsplit('/', 1)[1]}/cpu?project=test-project")

    rendered = run_cli("render", spec_file, "--format", "json", "--idempotency-key", "ci-1")
    assert rendered.returncode == 0, rendered.stderr
    sent = fake.calls("create")[0].body
    assert sent == json.loads(rendered.stdout)  # the very object render prints

    from google.cloud import aiplatform_v1

    parsed = aiplatform_v1.CustomJob.from_json(json.dumps(sent))  # strict: unknown fields raise
    assert parsed.labels["vertex-trainer-key"] == "ci-1" and parsed.labels["vertex-trainer-spec"]
    assert parsed.job_spec.scheduling.strategy == aiplatform_v1.Scheduling.Strategy.SPOT
    assert (
        parsed.job_spec.worker_pool_specs[0].machine_spec.accelerator_type
        == aiplatform_v1.AcceleratorType.NVIDIA_TESLA_T4
    )


def test_same_idempotency_key_twice_gives_one_job(fake, run_cli, spec_file):
    first = one_json(run_cli("submit", spec_file, "-o", "json", "--idempotency-key", "run-7").stdout)
    again = run_cli("submit", spec_file, "-o", "json", "--idempotency-key", "run-7")
    assert again.returncode == 0, again.stderr
    second = one_json(again.stdout)
    assert second["name"] == first["name"] and second["adopted"] is True
    assert len(fake.jobs) == 1 and len(fake.calls("create")) == 1


def test_without_a_key_each_submit_is_a_new_job(fake, run_cli, spec_file):
    a = one_json(run_cli("submit", spec_file, "-o", "json").stdout)
    b = one_json(run_cli("submit", spec_file, "-o", "json").stdout)
    assert a["idempotency_key"] != b["idempotency_key"] and len(fake.jobs) == 2


def test_committed_create_answered_503_is_adopted(fake, run_cli, spec_file):
    fake.fail("create", 503, commit=True)
    result = run_cli("submit", spec_file, "-o", "json", "--idempotency-key", "ci-2")
    assert result.returncode == 0, result.stderr
    assert one_json(result.stdout)["adopted"] is True
    assert len(fake.jobs) == 1 and len(fake.calls("create")) == 1
    assert "checking whether the job was created" in result.stderr


def test_503_then_success_retries(fake, run_cli, spec_file):
    fake.fail("create", 503)
    result = run_cli("submit", spec_file, "-o", "json")
    assert result.returncode == 0, result.stderr
    assert one_json(result.stdout)["adopted"] is False
    assert len(fake.calls("create")) == 2 and len(fake.jobs) == 1
    assert "retrying" in result.stderr


def test_persistent_503_exits_3(fake, run_cli_process, spec_file):
    fake.fail("any", 503, times=100)
    # The exit codes as a shell sees them (here, and in the other run_cli_process tests).
    result = run_cli_process("submit", spec_file, "-o", "json")
    assert result.returncode == 3
    assert json.loads(result.stdout)["error"]["kind"] == "service"  # still the one object
    assert "failed after 4 attempts" in result.stderr and "Traceback" not in result.stderr
    assert fake.jobs == {}


def test_403_exits_2_with_the_permission_and_check(fake, run_cli, spec_file):
    """A denied permission is the project's setup, not a service failure: exit 2 (issue 33)."""
    fake.fail("list", 403)
    result = run_cli("submit", spec_file)
    assert result.returncode == 2
    assert "PERMISSION_DENIED" in result.stderr and "aiplatform.customJobs.list" in result.stderr
    assert "vertex-trainer check" in result.stderr
    assert "hint:" in result.stderr and "Traceback" not in result.stderr
    assert len(fake.requests) == 1


@pytest.mark.parametrize("command,runner", [("status", "run_cli_process"), ("cancel", "run_cli")])
def test_a_missing_job_is_exit_2(fake, request, command, runner):
    """No such job is the caller's input, not a service failure (issue 15)."""
    result = request.getfixturevalue(runner)(
        command, "12345", "--project", "test-project", "--region", "us-central1"
    )
    assert result.returncode == 2, result.stderr
    assert "NOT_FOUND" in result.stderr and "vertex-trainer list" in result.stderr


@pytest.mark.parametrize(
    "final,code,runner",
    [
        ("JOB_STATE_SUCCEEDED", 0, "run_cli_process"),  # 0 and 1 as a shell sees them
        ("JOB_STATE_FAILED", 1, "run_cli_process"),
        ("JOB_STATE_CANCELLED", 1, "run_cli"),
        ("JOB_STATE_EXPIRED", 1, "run_cli"),
    ],
)
def test_wait_exit_codes(fake, request, spec_file, final, code, runner):
    fake.set_script(
        ["JOB_STATE_PENDING", "JOB_STATE_RUNNING", final],
        error_message="The replica workerpool0-0 exited with a non-zero status of 137.",
    )
    result = request.getfixturevalue(runner)("submit", spec_file, "--wait", "-o", "json")
    assert result.returncode == code, result.stderr
    out = one_json(result.stdout)
    assert out["state"] == final
    for state in ("PENDING", "RUNNING", final.removeprefix("JOB_STATE_")):
        assert state in result.stderr  # each state change shown
    if final == "JOB_STATE_FAILED":
        assert "non-zero status of 137" in result.stderr
    # the job's error in its object too (as status has it): a script learns why from stdout
    if final == "JOB_STATE_SUCCEEDED":
        assert "error" not in out
    elif final == "JOB_STATE_FAILED":
        assert out["error"] == "The replica workerpool0-0 exited with a non-zero status of 137."
    else:  # the service's word for it (a cancelled job's error is "CANCELED", as Vertex AI's)
        assert out["error"]


def test_wait_text_output(fake, run_cli, spec_file):
    result = run_cli("submit", spec_file, "--wait")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("created  projects/test-project/locations/us-central1/customJobs/")
    assert "final    SUCCEEDED" in result.stdout


def test_invalid_spec_sends_nothing(fake, run_cli, spec_file):
    spec_file.write_text(spec_file.read_text().replace("hardware: t4x1", "hardware: t4x3"))
    result = run_cli("submit", spec_file, "-o", "json")
    assert result.returncode == 2 and json.loads(result.stdout)["error"]["field"] == "hardware"
    assert "hardware" in result.stderr and "Traceback" not in result.stderr
    assert fake.requests == [] and fake.connections == 0


def test_local_paths_are_refused_before_sending(fake, run_cli, spec_file):
    result = run_cli("submit", spec_file, "--set", "output_dir=runs/x")
    assert result.returncode == 2 and "output_dir" in result.stderr
    assert fake.connections == 0


def test_invalid_idempotency_key_exits_2(fake, run_cli, spec_file):
    result = run_cli("submit", spec_file, "--idempotency-key", "Run #42")
    assert result.returncode == 2
    assert "--idempotency-key" in result.stderr and "run-42" in result.stderr
    assert fake.connections == 0


def test_the_socket_guard_works(no_socket_env, fake, cli):
    """Control for the dry-run test: the audit hook really stops a connect."""
    result = subprocess.run(
        [*cli, "status", "projects/p/locations/us-central1/customJobs/1"],
        env=no_socket_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 99 and "SOCKET USED" in result.stderr


def test_dry_run_opens_no_socket(no_socket_env, fake, spec_file, cli):
    for output in ("text", "json"):
        result = subprocess.run(
            [*cli, "submit", str(spec_file), "--dry-run", "-o", output, "--idempotency-key", "ci-9"],
            env=no_socket_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        if output == "json":
            plan = one_json(result.stdout)
            assert plan["dry_run"] is True and plan["idempotency_key"] == "ci-9"
            create = plan["requests"][1]  # (the look for the key, the create, the look after it)
            assert (
                create["method"] == "POST"
                and create["url"] == f"{fake.url}/v1/projects/test-project/locations/us-central1/customJobs"
            )
            assert create["body"]["labels"]["vertex-trainer-key"] == "ci-9"
        else:
            assert "POST " in result.stdout and '"displayName": "tiny-cnn-test"' in result.stdout
    assert fake.connections == 0


def test_no_credentials_exit_2_and_nothing_sent(no_socket_env, spec_file, tmp_path, cli):
    env = {k: v for k, v in no_socket_env.items() if k != "VERTEX_TRAINER_API_ENDPOINT"}
    env["HOME"] = str(tmp_path)  # no ~/.config/gcloud either
    result = subprocess.run(
        [*cli, "submit", str(spec_file)], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert "gcloud auth application-default login" in result.stderr
    assert "SOCKET USED" not in result.stderr and "Traceback" not in result.stderr


def test_status_cancel_list_json(fake, run_cli, spec_file):
    fake.set_script(["JOB_STATE_RUNNING"])
    name = one_json(run_cli("submit", spec_file, "-o", "json", "--idempotency-key", "k-1").stdout)["name"]
    other = fake.add_job(
        {
            "displayName": "not-ours",
            "jobSpec": {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "replicaCount": "1",
                        "containerSpec": {"imageUri": "x"},
                    }
                ]
            },
        }
    )

    status = one_json(run_cli("status", name, "-o", "json").stdout)
    assert status["name"] == name and status["state"] == "JOB_STATE_RUNNING"
    assert status["labels"]["vertex-trainer-key"] == "k-1"
    by_id = run_cli("status", name.rsplit("/", 1)[1], "--project", "test-project", "--region", "us-central1")
    assert by_id.returncode == 0 and "RUNNING" in by_id.stdout

    listed = one_json(
        run_cli("list", "--project", "test-project", "--region", "us-central1", "-o", "json").stdout
    )
    assert [j["name"] for j in listed["jobs"]] == [name]  # only jobs made by vertex-trainer
    everything = one_json(
        run_cli("list", "--project", "test-project", "--region", "us-central1", "--all", "-o", "json").stdout
    )
    assert {j["name"] for j in everything["jobs"]} == {name, other["name"]}
    filtered = one_json(
        run_cli(
            "list",
            "--project",
            "test-project",
            "--region",
            "us-central1",
            "--label",
            "vertex-trainer-key=nope",
            "-o",
            "json",
        ).stdout
    )
    assert filtered == {"jobs": []}
    text = run_cli("list", "--project", "test-project", "--region", "us-central1")
    assert name.rsplit("/", 1)[1] in text.stdout and "RUNNING" in text.stdout

    cancelled = run_cli("cancel", name, "-o", "json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert one_json(cancelled.stdout)["state"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    assert len(fake.calls("cancel")) == 1
    again = run_cli("cancel", name)
    assert again.returncode == 0 and "already ended" in again.stdout
    assert len(fake.calls("cancel")) == 1


def test_status_wait_on_failed_job_exits_1(fake, run_cli_process, job_body):
    job = fake.add_job(job_body(), state="JOB_STATE_FAILED")
    result = run_cli_process("status", job["name"], "--wait")
    assert result.returncode == 1 and "FAILED" in result.stderr


def test_bad_job_argument_exits_2(fake, run_cli):
    result = run_cli("status", "12345")
    assert result.returncode == 2 and "--project" in result.stderr
    assert run_cli("status", "jobs/x").returncode == 2
    assert run_cli("list", "--region", "us-central1", "--label", "Bad").returncode == 2
    assert fake.connections == 0


@pytest.mark.parametrize("cancel_on_interrupt", [False, True])
def test_ctrl_c_while_waiting(fake, cli_env, spec_file, cancel_on_interrupt, cli):
    fake.set_script(["JOB_STATE_RUNNING"])
    args = [*cli, "submit", str(spec_file), "--wait"]
    if cancel_on_interrupt:
        args.append("--cancel-on-interrupt")
    proc = subprocess.Popen(args, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not fake.calls("get") and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    (name,) = fake.jobs
    if cancel_on_interrupt:
        assert len(fake.calls("cancel")) == 1 and "cancel requested" in stderr
        assert fake.jobs[name]["state"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    else:
        assert fake.calls("cancel") == [] and f"vertex-trainer cancel {name}" in stderr
        assert "keeps running" in stderr


def test_fake_vertex_dev_command(cli_env, cli):
    env = cli_env
    proc = subprocess.Popen(
        [*cli, "dev", "fake-vertex", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)


@pytest.fixture(scope="session")
def quickstart_data(tmp_path_factory) -> Path:
    """`make demo`'s quickstart data, made once per test run (shared with the docs examples)."""
    from tests.docs.harness import quickstart_data

    return quickstart_data(tmp_path_factory)


@pytest.mark.trainer
@pytest.mark.slow
def test_submit_local_json(fake, run_cli, tmp_path, quickstart_data):
    """--local runs the same rendered job here; --output json adds output_dir and metrics (its
    summary for people: tests/local/test_local_trainer.py, README.md's quickstart)."""
    spec = tmp_path / "local.yaml"
    spec.write_text(f"""\
name: local-test
region: us-central1
hardware: cpu
image: {{uri: unused-for-local:v1}}
output_dir: {tmp_path / 'runs'}
trainer: {{model: tiny-cnn, train_data: "{quickstart_data}/train-*", num_classes: 10, image_size: 32,
           epochs: 1, steps_per_epoch: 2, batch_size: 32, steps_per_execution: 1}}
""")
    result = run_cli("submit", spec, "--local", "--output", "json", "--idempotency-key", "loc-1", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = one_json(result.stdout)  # exactly one JSON object on stdout
    run = tmp_path / "runs" / "local-test-loc-1"  # its own folder below output_dir, named after its key
    assert out["state"] == "JOB_STATE_SUCCEEDED" and out["output_dir"] == str(run)
    assert out["metrics"]["steps"] == 2 and out["idempotency_key"] == "loc-1"
    assert out["metrics"] == json.loads((run / "metrics.json").read_text())
    assert "workerpool0-0 | " in result.stderr and "\nSUCCEEDED in " in result.stderr  # (text: short)
    assert fake.connections == 0  # nothing went to Vertex AI


def test_dry_run_of_a_build_spec_shows_the_package_step(no_socket_env, fake, spec_file, cli):
    build = [
        "--set",
        "image.uri=null",
        "--set",
        "image.repository=us-central1-docker.pkg.dev/p/r/trainer",
        "--set",
        "output_dir=gs://bucket/runs/x",
    ]
    result = subprocess.run(
        [*cli, "submit", str(spec_file), "--dry-run", "-o", "json", *build],
        env=no_socket_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    plan = one_json(result.stdout)
    pkg = plan["package"]
    assert pkg["kind"] == "image" and pkg["builder"] == "cloud-build" and pkg["files"] > 5
    assert pkg["target"] == plan["image"] and pkg["target"].startswith(
        "us-central1-docker.pkg.dev/p/r/trainer:"
    )
    assert (
        plan["requests"][1]["body"]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"]
        == plan["image"]
    )
    text = subprocess.run(
        [*cli, "submit", str(spec_file), "--dry-run", *build],
        env=no_socket_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "# 1. package: if us-central1-docker.pkg.dev/p/r/trainer:" in text.stdout
    assert "# 3. if there is none, create it" in text.stdout
    assert fake.connections == 0
