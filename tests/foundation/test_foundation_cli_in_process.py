"""The suite runs the CLI in its own process (tests/cli_support.py `invoke`, issue 31): what a test
sees there must be what the console script shows in a process of its own, and no call may leave
the process changed for the next test."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tests.cli_support import cli_command, edge_env, invoke

ROOT = Path(__file__).resolve().parents[2]
SPEC = "job_specs/resnet50-a100x8.yaml"


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],  # click's help, as wide as COLUMNS
        ["render", SPEC, "--format", "yaml", "--idempotency-key", "k1"],  # (a fixed run folder)
        ["validate", "nope.yaml"],  # our one-line error, exit 2
        ["submitt"],  # typer's error panel (a rich console on stderr, COLUMNS from the environment)
    ],
    ids=lambda args: " ".join(args),
)
def test_in_process_output_is_byte_identical_to_the_console_scripts(tmp_path, args):
    env = edge_env(tmp_path)
    ours = invoke(args, env=env, cwd=ROOT)
    real = subprocess.run(
        [*cli_command(), *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert (ours.returncode, ours.stdout, ours.stderr) == (real.returncode, real.stdout, real.stderr)


def test_debug_prints_the_traceback_and_keeps_the_exit_code_as_the_console_script_does(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nreplica: 2\n")
    args, env = ["validate", str(bad), "--debug"], edge_env(tmp_path)  # the traceback, then exit 2
    ours = invoke(args, env=env)
    real = subprocess.run([*cli_command(), *args], capture_output=True, text=True, env=env, timeout=120)
    assert ours.returncode == real.returncode == 2 and ours.stdout == real.stdout == ""
    assert ours.stderr.startswith("Traceback (most recent call last):")
    # The frames differ (this process called main() from elsewhere); the exception does not.
    assert ours.stderr.split("vertex_trainer.errors.")[-1] == real.stderr.split("vertex_trainer.errors.")[-1]
    assert "vertex_trainer.errors.SpecProblems: 2 problems in the spec:" in real.stderr
    assert real.stderr.splitlines()[-1].startswith("    hint:")  # the usual message closes it


def test_a_call_sees_its_environment_and_directory_and_leaves_the_process_as_it_was(tmp_path):
    (tmp_path / "spec.yaml").write_text((ROOT / SPEC).read_text())
    environ, here = dict(os.environ), os.getcwd()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    streams, filters = (sys.stdin, sys.stdout, sys.stderr), list(warnings.filters)

    done = invoke(
        ["validate", "spec.yaml"], env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, cwd=tmp_path
    )

    assert done.returncode == 0, done.stderr
    assert dict(os.environ) == environ and os.getcwd() == here
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    assert (sys.stdin, sys.stdout, sys.stderr) == streams and warnings.filters == filters
    assert gc.isenabled()  # validate runs with the collector paused (cli/__init__.py QUICK)


def test_each_call_reads_its_own_environment(tmp_path):
    """The environment is read per call: a second call with another environment is not answered
    from what the first one read (a notebook runs several commands in one process too)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train-0").write_bytes(b"")
    (tmp_path / "spec.yaml").write_text(
        "name: job-{{ env.WHO }}\nhardware: cpu\noutput_dir: out\n"
        "trainer: {model: tiny-cnn, train_data: data/train-*, num_classes: 4}\n"
    )
    for who in ("alpha", "beta"):
        done = invoke(
            ["validate", "spec.yaml", "--local"], env={**edge_env(tmp_path), "WHO": who}, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"OK  spec.yaml: job-{who} (for --local)\n"), done.stdout
