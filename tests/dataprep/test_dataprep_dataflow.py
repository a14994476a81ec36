"""`--runner dataflow`: the dry run prints the options and sends nothing; the worker wheel holds
everything the workers import, and nothing else of vertex_trainer."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
import zipfile

import pytest

from vertex_trainer.dataprep import launch, staging

from .conftest import make_tree, run_cli

DATAFLOW = ["--runner", "dataflow", "--project", "my-project", "--region", "europe-west4"]


def test_dry_run_prints_the_dataflow_options(tmp_path):
    result = run_cli(
        "data",
        "convert",
        "gs://photos/train",
        "gs://datasets/imagenet-v1",
        *DATAFLOW,
        "--max-workers",
        "40",
        "--machine-type",
        "n2-standard-4",
        "--job-name",
        "convert-1",
        "--eval-dir",
        "gs://photos/val",
        "--max-side",
        "512",
        "--beam-option=--subnetwork=regions/europe-west4/subnetworks/data",
        "--dry-run",
    )
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert "nothing was sent" in lines[0]
    for option in (
        "--runner=DataflowRunner",
        "--project=my-project",
        "--region=europe-west4",
        "--temp_location=gs://datasets/tmp/dataflow",
        "--job_name=convert-1",
        "--max_num_workers=40",
        "--worker_machine_type=n2-standard-4",
        f"--extra_package={staging.wheel_name()}",
        "--subnetwork=regions/europe-west4/subnetworks/data",
    ):
        assert f"  {option}" in lines, option
    assert "larger than 512 px resized" in result.out and "then _SUCCESS" in result.out
    assert "Pillow==" in result.out


def test_dry_run_imports_no_cloud_library(tmp_path):
    code = textwrap.dedent("""
        import sys
        from vertex_trainer.cli import main
        try:
            main(["data", "convert", "gs://a/img", "gs://b/out", "--runner", "dataflow", "--project",
                  "my-project", "--region", "us-central1", "--dry-run"])
        except SystemExit as e:
            assert not e.code, e.code
        heavy = [m for m in ("apache_beam", "google.cloud.storage", "tensorflow", "PIL") if m in sys.modules]
        print("HEAVY", heavy)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["--runner", "dataflow", "--region", "r"], "needs a project"),
        (["--runner", "dataflow", "--project", "my-project"], "needs a region"),
        ([*DATAFLOW, "--job-name", "Bad_Name"], "--job-name"),
        (["--runner", "dataflow", "--project", "My Project", "--region", "r"], "the project id"),
        ([*DATAFLOW, "--temp-location", "/tmp/x"], "--temp-location"),
    ],
)
def test_dataflow_requests_are_checked_first(monkeypatch, args, message):
    for var in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "CLOUDSDK_AI_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", "/nonexistent")
    result = run_cli("data", "convert", "gs://a/img", "gs://b/out", *args, "--dry-run")
    assert result.code == 2 and message in result.err, result.err


def test_direct_pipeline_options():
    conv = launch.Conversion("a", "b")
    assert launch.pipeline_args(conv, launch.Runner(direct_workers=2)) == [
        "--runner=DirectRunner",
        "--direct_num_workers=2",
        "--direct_running_mode=multi_processing",
    ]


def test_the_worker_wheel_is_self_contained(tmp_path):
    """Install the wheel as pip would on a worker, then run the pipeline from it in an interpreter
    that cannot see this checkout: it must import nothing but the wheel's modules."""
    wheel = staging.build_wheel(tmp_path / "dist")
    assert staging.build_wheel(tmp_path / "again").read_bytes() == wheel.read_bytes()  # reproducible
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert {f"vertex_trainer/dataprep/{m}" for m in staging.WORKER_MODULES} < names
    assert "vertex_trainer/dataprep/launch.py" not in names and "vertex_trainer/errors.py" not in names

    target = tmp_path / "site"
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert pip.returncode == 0, pip.stderr
    tree = make_tree(tmp_path / "img", crops=2, bad=False)
    script = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(target)!r}, {sysconfig.get_paths()["purelib"]!r}]
        import apache_beam as beam
        import vertex_trainer
        from vertex_trainer.dataprep import pipeline
        assert vertex_trainer.__file__.startswith({str(target)!r}), vertex_trainer.__file__
        plan = pipeline.Plan(image_dir={str(tree.root)!r}, out_dir={str(tmp_path / "out")!r},
                             labels=("bw_flower", "flower", "temple"), shards=2)
        with beam.Pipeline() as p:
            pipeline.build(p, plan)
        ours = sorted(m for m in sys.modules if m.startswith("vertex_trainer"))
        print("MODULES", ours)
    """)
    # -I: no user site, no PYTHONPATH, no cwd; -S: no site-packages .pth (the editable install's hook).
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = eval(proc.stdout.split("MODULES", 1)[1])
    assert modules == [
        "vertex_trainer",
        "vertex_trainer.dataprep",
        "vertex_trainer.dataprep.images",
        "vertex_trainer.dataprep.pipeline",
        "vertex_trainer.dataprep.records",
    ]
    assert (tmp_path / "out" / "_SUCCESS").exists()
    assert sorted(p.name for p in (tmp_path / "out").glob("train-*")) == [
        "train-00000-of-00002",
        "train-00001-of-00002",
    ]
