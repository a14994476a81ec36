"""The issue's "done when", as a user does it: with `vertex-trainer dev sandbox`'s exports, the
README's notebook example (`<!-- docs-test: sandbox checked-by tests/sandbox/test_sandbox_trainer.py
-->`, run here as the docs harness would, inside the sandbox this test started) uploads the digits
to the emulated bucket, submits the spec through the Python API (the image built by the fake Cloud
Build and pushed to the fake registry, the job really training the bundled trainer on gs:// data),
deploys and predicts; then `submit SPEC --deploy` with the notebook's idempotency key adopts that
job (its log streamed, nothing created, built or deployed twice), `logs JOB`, metrics.json from the
bucket, the held-out digits from the endpoint; a job whose data is corrupt ends FAILED; then SIGTERM
leaves no process and no port. The notebook's job is the one the digits train for here: the page
and these checks share it."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import pytest
import yaml

from tests.cli_support import invoke
from tests.docs import harness
from tests.process_support import processes_with_env
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import JobsClient
from vertex_trainer.vertex.job_logs import to_ns  # RFC 3339 (nanoseconds) -> ns

from .conftest import ROOT, SandboxProcess, listening_sockets, ports_of

SPEC = "examples/sandbox/digits.yaml"
BUCKET = "sandbox-demo"  # the spec's
HERE = "tests/sandbox/test_sandbox_trainer.py"
NOTEBOOK = 'vt.submit(spec, idempotency_key="notebook-1")'  # what picks README.md's block


def _run(args: list[str], env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return _ok(args, done)


def _vt(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`vertex-trainer ARGS` in this process (tests/cli_support.py `invoke`: the same environment,
    directory, output and exit code, without a new interpreter's start-up): the sandbox, the job
    and the model server are the subjects here, not the CLI's process."""
    return _ok(args, invoke(args, env=env, cwd=ROOT))


def _ok(args, done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, (
        f"{args}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    return done


def test_this_file_runs_every_block_of_the_docs_that_names_it():
    named = {b.id for b in harness.blocks() if b.checked_by == HERE}
    block = harness.checked_block("README.md", NOTEBOOK, HERE)
    assert named == {block.id} and block.in_sandbox and block.buckets == [BUCKET]


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_submit_trains_in_the_sandbox_and_the_model_answers_offline(
    base_env, marker, tmp_path, tmp_path_factory
):
    box = SandboxProcess("--bucket", BUCKET, env=base_env)
    try:
        env = box.env(base_env)
        # README.md's notebook: upload, vt.submit (the spec's epochs), job.wait(), job.deploy(),
        # predict.
        work = harness.workdir(tmp_path / "work", harness.quickstart_data(tmp_path_factory))
        notebook = harness.checked_block("README.md", NOTEBOOK, HERE)
        # A user's retries (harness.env_for), not the suite's fast ones: the first prediction
        # waits for the model server to load the model.
        user = {k: v for k, v in env.items() if k != "VERTEX_TRAINER_RETRY"}
        shown, said = harness.run_block(notebook, work, env=user)
        assert "(built and pushed with cloud-build)" in said, said[-3000:]
        url = re.search(r"^JOB_STATE_\w+ (https://console\.cloud\.google\.com/\S+)$", shown, re.M)
        assert url, shown[-3000:]
        (printed,) = [ast.literal_eval(line) for line in shown.splitlines() if line.startswith("[{")]
        assert len(printed) == 1 and len(printed[0]["probabilities"]) == 10, printed

        # The same key from the CLI: the notebook's job adopted (never created twice), its log.
        submit = _vt("submit", SPEC, "--idempotency-key", "notebook-1", "--deploy", env=env)
        job = re.search(r"^adopted\s+(\S+)", submit.stdout, re.M)[1]
        assert job.rsplit("/", 1)[1] in url[1]  # the console link the notebook printed
        assert [
            j["name"]
            for j in JobsClient("sandbox", "us-central1", settings=Settings.from_environ(env)).list()
        ] == [job]
        assert re.search(r"^final\s+SUCCEEDED", submit.stdout, re.M)
        assert re.search(
            r"^endpoint\s+projects/sandbox/locations/us-central1/endpoints/digits", submit.stdout, re.M
        )
        assert "(reused: already in the registry, nothing built or pushed)" in submit.stderr
        assert "workerpool0-0 | trainer: eval: loss=" in submit.stderr  # the log, as it came
        assert "already serves on projects/sandbox/locations/us-central1/endpoints/digits" in submit.stderr

        logs = _vt("logs", job, env=env).stdout
        # The job ends when its replicas do: the runner reads metrics.json and sets the state at
        # once (a stall in that read once left every sandbox job 110 s behind its replicas, and
        # every test still passed). The bound is far above a read's time on a busy machine.
        entries = _vt("logs", job, "--output", "json", env=env).stdout.splitlines()
        last_line = max(to_ns(json.loads(e)["timestamp"]) for e in entries)
        described = json.loads(_vt("status", job, "--output", "json", env=env).stdout)
        assert to_ns(described["end_time"]) - last_line < 30 * 10**9, described
        folder = f"gs://{BUCKET}/runs/digits/sandbox-digits-notebook-1"  # the key's own (section 15)
        assert described["output_dir"] == folder
        assert f"[workerpool0-0] trainer: exported model to {folder}/model/" in logs
        # Every epoch of the spec's, each a pass over the 1,500 training digits.
        trainer = yaml.safe_load((ROOT / SPEC).read_text())["trainer"]
        epochs, per_epoch = trainer["epochs"], 1500 // trainer["batch_size"]
        progress = rf"^\[workerpool0-0\] progress epoch={epochs}/{epochs} step={per_epoch}/{per_epoch} "
        assert re.search(progress, logs, re.M), logs[-3000:]

        metrics = storage.read_json(Settings.from_environ(env), f"{folder}/metrics.json")
        # These digits are learnt (about 0.98 held out).
        assert metrics["epochs"] == epochs and metrics["steps"] == epochs * per_epoch, metrics
        assert metrics["eval_accuracy"] >= 0.95, metrics

        package = json.loads(_vt("package", SPEC, "--output", "json", env=env).stdout)
        assert package["built"] is False  # the tag is in the sandbox's registry: nothing to build

        answer = _run([sys.executable, "examples/sandbox/digits.py", "predict", SPEC, job], env).stdout
        right, total = map(int, re.search(r"(\d+)/(\d+) held-out digits right", answer).groups())
        assert total == 297 and abs(right / total - metrics["eval_accuracy"]) <= 0.03, answer

        # A replica that fails: the job ends FAILED with its exit status and its own last line.
        storage.client(Settings.from_environ(env)).bucket(BUCKET).blob(
            "bad/train-00000-of-00001"
        ).upload_from_string(b"not a TFRecord file" * 100)
        failed = invoke(
            [
                "submit",
                SPEC,
                "--wait",
                "--output",
                "json",
                "--set",
                f"trainer.train_data=gs://{BUCKET}/bad/train-*",
                "--set",
                f"output_dir=gs://{BUCKET}/runs/bad",
            ],
            env=env,
            cwd=ROOT,
        )
        assert failed.returncode == 1, failed.stderr[-3000:]
        failed_job = json.loads(failed.stdout)
        assert failed_job["state"] == "JOB_STATE_FAILED"
        error = json.loads(_vt("status", failed_job["name"], "--output", "json", env=env).stdout)["error"]
        assert error.startswith("The replica workerpool0-0 exited with a non-zero status of 2."), error
        assert f"error: corrupt record in gs://{BUCKET}/bad/train-00000-of-00001" in error

        ports = ports_of(box.exports)
        served = listening_sockets(ports)
        assert sorted(served) == ports  # each port the sandbox exported has its server
        code, err = box.terminate()
        assert code == 0, err[-3000:]
        assert processes_with_env(marker) == []
        # None of those sockets is left (another test's server may have taken a port since).
        assert {p: s & served[p] for p, s in listening_sockets(ports).items() if s & served[p]} == {}
    finally:
        box.kill()
