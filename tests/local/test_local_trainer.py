"""End to end with the real trainer (trainer_image/trainer): README.md's quickstart block (`submit
--local`, then `report`) and docs/local.md's gs:// block (data and output in the Cloud Storage
emulator), each run here as the docs harness runs it (`<!-- docs-test: checked-by
tests/local/test_local_trainer.py -->`) and asserted on; two workers under
MultiWorkerMirroredStrategy, and a failing worker, on the same quickstart data."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from tests.docs import harness
from tests.process_support import processes_with_env
from tests.shared import latest_run
from vertex_trainer.local import FAILED, SUCCEEDED, run_local

from .conftest import local_settings

pytestmark = [pytest.mark.trainer, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "job_specs" / "quickstart-local.yaml"
HERE = "tests/local/test_local_trainer.py"
README_RUN = "submit   job_specs/quickstart-local.yaml --local"  # README.md, "Using it"
GS_RUN = "--set output_dir=gs://demo/runs/quickstart"  # docs/local.md, the emulator's example
# Added after docs/local.md's block, while its emulator still listens (the block's end stops it,
# and the bucket lives in its memory): the bucket's objects and the metrics.json the run wrote.
READ_BUCKET = """
python - <<'END'
import json, os, urllib.request
host = os.environ["STORAGE_EMULATOR_HOST"]
get = urllib.request.build_opener(urllib.request.ProxyHandler({})).open
names = [o["name"] for o in json.load(get(f"{host}/storage/v1/b/demo/o")).get("items", [])]
run = "runs%2Fquickstart%2Fquickstart-local-demo-1"  # the run's own folder: the block's key names it
metrics = json.load(get(f"{host}/storage/v1/b/demo/o/{run}%2Fmetrics.json?alt=media"))
with open("bucket.json", "w") as f:
    json.dump({"objects": names, "metrics": metrics}, f)
END
"""


@pytest.fixture(scope="session")
def local_data(tmp_path_factory) -> Path:
    """The quickstart data (`make demo`'s `data synth`: train-*, validation-*), made once per test
    run and shared with the docs examples (harness.quickstart_data)."""
    return harness.quickstart_data(tmp_path_factory)


def _console():
    import io

    from rich.console import Console

    buf = io.StringIO()
    return Console(file=buf, width=200), buf


def _job(sets: list[str]):
    """The quickstart spec, resolved and rendered exactly as submit renders it."""
    from vertex_trainer import render
    from vertex_trainer.contract import Artifact
    from vertex_trainer.spec import load_spec

    spec = load_spec(QUICKSTART, sets=sets)
    return render.custom_job(spec, artifact=Artifact(image_uri="local/trainer:test")), spec


def _saved_model_files(model_dir: Path) -> set[str]:
    return {p.name for p in model_dir.iterdir()} if model_dir.is_dir() else set()


def _summary(stdout: str) -> dict[str, str]:
    """`submit --local`'s summary for people (local, state, model, output, metrics, report: a line
    each, on stdout), found among the output of the block's other commands."""
    lines = stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("local "))
    return dict(line.split(None, 1) for line in lines[start : start + 6])


def _shown_metrics(summary: dict[str, str], metrics: dict) -> dict:
    """The summary's metrics, checked to be metrics.json's own values."""
    shown = json.loads(summary["metrics"])
    assert shown and shown == {k: v for k, v in metrics.items() if k in shown}, (shown, metrics)
    return shown


def test_this_file_runs_every_block_of_the_docs_that_names_it() -> None:
    named = {b.id for b in harness.blocks() if b.checked_by == HERE}
    assert named == {
        harness.checked_block("README.md", README_RUN, HERE).id,
        harness.checked_block("docs/local.md", GS_RUN, HERE).id,
    }


def test_the_readmes_quickstart_trains_here_and_writes_its_report(tmp_path_factory) -> None:
    """README.md's first block: hardware, validate, render, two dry runs, `submit
    job_specs/quickstart-local.yaml --local` (its summary on stdout, once; the replica's lines on
    stderr) and `report runs/quickstart -o report.html`. Run once in the suite (harness.shared_run):
    README.md's serving block serves the model it trains (tests/serving/test_serving_cli.py)."""
    block = harness.checked_block("README.md", README_RUN, HERE)
    work, stdout, stderr = harness.shared_run(block, tmp_path_factory)
    output_dir = latest_run(work / "runs" / "quickstart")  # the run's own folder below output_dir
    out = _summary(stdout)
    assert list(out) == ["local", "state", "model", "output", "metrics", "report"], stdout[-3000:]
    assert out["local"].startswith("quickstart-") and out["state"].startswith("SUCCEEDED in ")
    assert (work / out["output"]).resolve() == output_dir.resolve()
    assert (work / out["model"]).resolve() == (output_dir / "model").resolve()
    assert out["report"] == f"vertex-trainer report {out['output']}"  # docs/report.md
    assert "saved_model.pb" in _saved_model_files(output_dir / "model")
    metrics = json.loads((output_dir / "metrics.json").read_text())
    _shown_metrics(out, metrics)
    assert metrics["replicas"] == 1 and metrics["epochs"] == 3
    # One replica still gets CLUSTER_SPEC/TF_CONFIG (one-task cluster): the default strategy.
    assert metrics["strategy"] == "default" and metrics["workers"] == 1
    assert "workerpool0-0 | " in stderr and f"Running {out['local']} locally" in stderr
    assert "model:" not in stderr and "metrics:" not in stderr  # said once, on stdout
    # report: the run as one self-contained page, with its figures.
    assert stdout.splitlines()[-1] == "report.html"
    page = (work / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert f'data-metric="eval_accuracy">{metrics["eval_accuracy"]:.4f}<' in page


def test_gs_data_and_gs_output_through_the_emulator(tmp_path: Path, local_data: Path) -> None:
    """docs/local.md's block: `dev gcs-emulator --bucket demo`, `data synth gs://demo/quickstart`,
    then `submit --local` reading and writing gs://demo (TensorFlow through the emulator's proxy)."""
    block = harness.checked_block("docs/local.md", GS_RUN, HERE)
    work = harness.workdir(tmp_path / "work", local_data)
    stdout, stderr = harness.run_block(dataclasses.replace(block, body=block.body + READ_BUCKET), work)
    out = _summary(stdout)
    assert out["state"].startswith("SUCCEEDED in "), stdout[-3000:] + stderr[-3000:]
    run = "runs/quickstart/quickstart-local-demo-1"  # its own folder below output_dir, named by its key
    assert out["model"] == f"gs://demo/{run}/model/"
    assert out["output"] == f"gs://demo/{run}"
    bucket = json.loads((work / "bucket.json").read_text())
    objects = set(bucket["objects"])
    assert {"quickstart/train-00000-of-00004", "quickstart/validation-00000-of-00001"} <= objects, objects
    assert f"{run}/model/saved_model.pb" in objects
    assert f"{run}/metrics.json" in objects
    # What the run read back and showed is the bucket's metrics.json.
    metrics = bucket["metrics"]
    _shown_metrics(out, metrics)
    assert metrics["replicas"] == 1 and metrics["model_dir"] == out["model"]
    assert metrics["eval_examples"] == 512 and metrics["steps"] == 3 * 2048 // 64  # the bucket's data
    assert not (work / "runs").exists()  # nothing written here: the output is the bucket's


def test_two_replicas_train_together(tmp_path, local_data, marker):
    out = tmp_path / "out"
    job, spec = _job(
        [
            f"output_dir={out}",
            f"trainer.train_data={local_data}/train-*",
            f"trainer.eval_data={local_data}/validation-*",
            "replicas=2",
            # the least that shows lockstep: two epochs of two executions, small batches at 8 px
            "trainer.image_size=8",
            "trainer.batch_size=16",
            "trainer.epochs=2",
            "trainer.steps_per_epoch=4",
            "trainer.steps_per_execution=2",
        ]
    )
    assert [p["replicaCount"] for p in job["jobSpec"]["workerPoolSpecs"]] == ["1", "1"]
    console, buf = _console()
    result = run_local(job, spec, settings=local_settings(VT_MARKER=marker), console=console)
    log = buf.getvalue()
    assert result.state == SUCCEEDED and result.exit_code == 0, log[-4000:]
    assert result.replicas == ["workerpool0-0", "workerpool1-0"]
    assert result.metrics["replicas"] == 2 and result.metrics["workers"] == 2
    assert result.metrics["strategy"] == "multi-worker" and result.metrics["steps_per_execution"] == 2
    assert "saved_model.pb" in _saved_model_files(out / "model")
    # Each process found its role in CLUSTER_SPEC; only the chief exports.
    assert "task=chief:0 chief=True" in log
    assert "task=worker:0 chief=False" in log
    assert not [
        line for line in log.splitlines() if line.startswith("workerpool1-0") and "exported model" in line
    ]
    # Both processes trained in lockstep: each reported every epoch with the same loss.
    losses = {}
    for line in log.splitlines():
        if "| progress " in line:
            name, rest = line.split(" | ", 1)
            losses.setdefault(name.strip(), []).append(rest.split("loss=")[1].split()[0])
    assert set(losses) == {"workerpool0-0", "workerpool1-0"}
    assert losses["workerpool0-0"] == losses["workerpool1-0"] and len(losses["workerpool0-0"]) == 2
    assert processes_with_env(marker) == []


def test_a_failing_worker_fails_the_run_and_stops_the_waiting_chief(tmp_path, local_data, marker):
    job, spec = _job(
        [
            f"output_dir={tmp_path / 'out'}",
            f"trainer.train_data={local_data}/train-*",
            f"trainer.eval_data={local_data}/validation-*",
            "replicas=2",
        ]
    )
    # The worker pool gets a data path that matches nothing: it fails at start, while the chief
    # waits for it in the collective set-up and would wait forever.
    pools = job["jobSpec"]["workerPoolSpecs"]
    pools[1] = copy.deepcopy(pools[1])  # render may share sub-objects between the pools
    worker = pools[1]["containerSpec"]
    worker["args"] = [
        a if not a.startswith("--train-data=") else f"--train-data={tmp_path}/missing/train-*"
        for a in worker["args"]
    ]
    console, buf = _console()
    result = run_local(job, spec, settings=local_settings(VT_MARKER=marker), console=console)
    # The chief would wait for the worker forever: the run ending at all means it was stopped.
    assert result.state == FAILED and result.exit_code == 1
    assert result.failed_replica == "workerpool1-0" and result.failed_exit_code != 0
    assert any("missing/train-*" in line for line in result.log_tail), result.log_tail
    assert not any(
        "missing/train-*" in line
        for line in buf.getvalue().splitlines()
        if line.startswith("workerpool0-0 |")
    ), "the chief had good data"
    assert f"workerpool1-0 exited with code {result.failed_exit_code}" in buf.getvalue()
    assert result.metrics is None
    assert processes_with_env(marker) == []
