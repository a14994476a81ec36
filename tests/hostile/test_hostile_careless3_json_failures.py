"""`--output json` on failure (b67437a), where the line or the process is not the usual one: a
process started with stdout closed, and `-o json` on a line refused before its command is looked
up. The failure keeps its message, its exit code and (where stdout is there) its one object."""

from __future__ import annotations

import json
import subprocess

from tests.cli_support import cli_command, edge_env

MISSING = "/nonexistent/spec.yaml"


def _closed_stdout(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """vertex-trainer ARGS in a process whose stdout is closed (`>&-`: Python's sys.stdout is None)."""
    return subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *cli_command(), *args],
        capture_output=True,
        text=True,
        env=edge_env(tmp_path),
        timeout=120,
    )


def test_a_failure_with_stdout_closed_keeps_its_message_and_exit_code(tmp_path):
    # A CI step that closed stdout (or a wrapper that runs the tool without one): the error object
    # has nowhere to go; the text on stderr and exit 2 are what is left, not a traceback, exit 1.
    done = _closed_stdout(tmp_path, "submit", MISSING, "--output", "json")
    assert done.returncode == 2, done.stderr
    assert "spec file not found" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_global_option_without_its_value_and_short_o_json_is_one_object(run_cli):
    # `-o json` (and -ojson) asks for JSON as --output json does: the refusal of the global option,
    # before the command is looked up, is one object too.
    for output in (("-o", "json"), ("-ojson",)):
        done = run_cli("submit", MISSING, *output, "--impersonate-service-account")
        assert done.returncode == 2
        error = json.loads(done.stdout)["error"]
        assert error["exit_code"] == 2 and error["kind"] == "invalid"
        assert "--impersonate-service-account" in error["message"]


def test_a_global_option_refused_under_text_output_writes_nothing_on_stdout(run_cli):
    # `-o json` as another option's value, or after `--`, asks for nothing (read as click reads it).
    for line in (
        ("submit", MISSING, "--set", "--output", "json", "--impersonate-service-account"),
        ("submit", MISSING, "--impersonate-service-account", "--", "--output", "json"),
    ):
        done = run_cli(*line)
        assert done.returncode == 2 and done.stdout == ""
        assert "--impersonate-service-account" in done.stderr


def test_an_object_written_by_an_earlier_run_in_this_process_does_not_silence_the_next(run_cli):
    # `app` run in this process (typer's CliRunner, a notebook) wrote its object and left that
    # mark set: the next line refused before its command was looked up wrote nothing on stdout.
    from typer.testing import CliRunner

    from vertex_trainer.cli import app

    assert CliRunner().invoke(app, ["hardware", "--output", "json"]).exit_code == 0
    done = run_cli("submit", MISSING, "--output", "json", "--impersonate-service-account")
    assert done.returncode == 2
    assert "--impersonate-service-account" in json.loads(done.stdout)["error"]["message"]
