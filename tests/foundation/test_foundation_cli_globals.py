"""The global options (issue 40 item 4): `--version`, `--debug` that keeps the error's exit code,
and `--help` that lists what main() takes off the command line before typer sees it."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.cli_support import edge_env, invoke
from tests.shared import job_body
from vertex_trainer.cli import _declared_version

ROOT = Path(__file__).resolve().parents[2]
MISSING = "projects/test-project/locations/us-central1/customJobs/99"


def test_version_prints_the_installed_distributions_version(tmp_path):
    expected = f"vertex-trainer {metadata.version('vertex-trainer')}\n"
    for flag in ("--version", "-V"):
        done = invoke([flag], env=edge_env(tmp_path))
        assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")
    with_debug = invoke(["--debug", "--version"], env=edge_env(tmp_path))
    assert with_debug.returncode == 0 and with_debug.stdout == expected


def test_version_loads_no_command_module(tmp_path):
    probe = (
        "import json, sys\n"
        "from vertex_trainer.cli import main\n"
        "main(['--version'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('vertex_trainer.cli.')"
        " or m.split('.')[0] in ('pydantic', 'rich', 'tensorflow')"
        " or m.startswith(('google.cloud.aiplatform', 'google.cloud.storage', 'google.auth')))),"
        " file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("vertex-trainer ")
    assert json.loads(proc.stderr.splitlines()[-1]) == ["vertex_trainer.cli.common"]


def test_a_checkout_without_metadata_reads_its_pyproject(tmp_path):
    # (what version_line falls back to when no distribution is installed)
    assert _declared_version(ROOT / "pyproject.toml") == metadata.version("vertex-trainer")
    other = tmp_path / "pyproject.toml"
    other.write_text('[project]\nname = "something-else"\nversion = "9"\n[tool.x]\nversion = "1"\n')
    assert _declared_version(other) is None
    other.write_text('[build-system]\nrequires = []\n[project]\nversion = "2.0"\nname = "vertex-trainer"\n')
    assert _declared_version(other) == "2.0"
    assert _declared_version(tmp_path / "absent.toml") is None


@pytest.mark.parametrize("where", ["before", "after", "environment"])
def test_debug_shows_the_traceback_and_keeps_exit_2(tmp_path, where):
    plain = invoke(["validate", "nope.yaml"], env=edge_env(tmp_path))
    args = {"before": ["--debug", "validate", "nope.yaml"], "after": ["validate", "nope.yaml", "--debug"]}
    env = edge_env(tmp_path, **({"VERTEX_TRAINER_DEBUG": "1"} if where == "environment" else {}))
    debug = invoke(args.get(where, ["validate", "nope.yaml"]), env=env)
    assert plain.returncode == debug.returncode == 2
    assert debug.stderr.startswith("Traceback (most recent call last):")
    assert "vertex_trainer.errors.UserError: spec file not found: nope.yaml" in debug.stderr
    assert debug.stderr.endswith(plain.stderr)  # then the message the user sees without --debug
    assert "Traceback" not in plain.stderr


@pytest.mark.wire
def test_debug_keeps_exit_1_for_a_failed_job_and_3_for_a_service_error(fake, cli_env):
    failed = fake.add_job(job_body(), state="JOB_STATE_FAILED")["name"]
    ended = invoke(["--debug", "status", failed, "--wait", "--no-logs"], env=cli_env)
    assert ended.returncode == 1
    assert "vertex_trainer.errors.JobFailed" in ended.stderr and "ended FAILED" in ended.stderr

    fake.fail("get", 500, times=20)
    refused = invoke(["status", MISSING, "--debug"], env=cli_env)
    assert refused.returncode == 3
    assert "Traceback" in refused.stderr and "vertex_trainer.errors.ServiceError" in refused.stderr
    assert refused.stderr.splitlines()[-2].startswith("error: get ")


def test_help_lists_the_global_options_and_each_command_names_them(tmp_path):
    top = invoke(["--help"], env=edge_env(tmp_path))
    assert top.returncode == 0
    options = top.stdout.split("Options:\n", 1)[1].split("Commands:\n", 1)[0]
    for flag in ("-V, --version", "--debug", "--impersonate-service-account SA", "VERTEX_TRAINER_DEBUG=1"):
        assert flag in options, flag
    for command in (["submit"], ["logs"], ["data", "synth"], ["data"]):
        shown = invoke([*command, "--help"], env=edge_env(tmp_path))
        assert shown.returncode == 0
        epilog = " ".join(shown.stdout.split("Show this message and exit.", 1)[1].split())
        assert "Global options, anywhere on the line: --debug" in epilog, command
        assert "--impersonate-service-account SA" in epilog


def test_the_global_options_still_work_anywhere_on_the_line(tmp_path):
    # --impersonate-service-account after the command is taken off the line (no typer error)
    # and is the identity the command reports.
    sa = "deployer@my-project.iam.gserviceaccount.com"
    env = edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT="http://127.0.0.1:9")
    done = invoke(["validate", "nope.yaml", "--impersonate-service-account", sa, "--debug"], env=env)
    assert done.returncode == 2 and "No such option" not in done.stderr
    assert "spec file not found" in done.stderr
