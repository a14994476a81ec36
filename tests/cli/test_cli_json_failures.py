"""`--output json` on failure: stdout is still exactly one JSON object, `{"error": {"exit_code",
"kind", "message", "hint", "field"}}`, whatever failed (bad input, a denial, a service, a job,
Ctrl-C, a defect), unless the command wrote its own object first (a job that ended FAILED); the
text on stderr and the exit code are as without it (cli/__init__.py, docs/contract.md section 2).
"""

from __future__ import annotations

import json

import pytest
import typer

from tests.shared import job_body
from vertex_trainer import api
from vertex_trainer.cli import app, asks_json, failure_object
from vertex_trainer.errors import UserError

JOB = "projects/test-project/locations/us-central1/customJobs/{}"
PLACE = ("--project", "test-project", "--region", "us-central1")
SPEC = "job_specs/quickstart-local.yaml"
MISSING = "/nonexistent/spec.yaml"


def one_error(done) -> dict:
    """The run's whole stdout as one JSON object: its "error", which names the exit code."""
    error = json.loads(done.stdout)["error"]
    assert error["exit_code"] == done.returncode
    return error


def stderr_message(done) -> str:
    """The message of the text's `error: ...` line (and the lines after it, up to the hint)."""
    text = done.stderr.split("error: ", 1)[1]
    return text.split("\n  hint: ")[0].rstrip("\n")


# Every command that takes --output json, with a line that fails before it sends anything.
FAILING = {
    "submit": ("submit", MISSING),
    "package": ("package", MISSING),
    "deploy": ("deploy", MISSING),
    "bench": ("bench", MISSING),
    "cost": ("cost", MISSING),
    "check": ("check", MISSING),
    "setup": ("setup", MISSING),
    "pipeline submit": ("pipeline", "submit", MISSING),
    "pipeline status": ("pipeline", "status", "12"),
    "pipeline cancel": ("pipeline", "cancel", "12"),
    "trigger render": ("trigger", "render", SPEC, "--bucket", "b", "--out", "unused"),
    "trigger deploy": ("trigger", "deploy", SPEC, "--bucket", "b"),
    "resources create": ("resources", "create", MISSING),
    "resources list": ("resources", "list", "--project", "test-project"),
    "resources delete": ("resources", "delete", "12"),
    "status": ("status", "12"),
    "cancel": ("cancel", "12"),
    "list": ("list", "--project", "test-project"),
    "logs": ("logs", "12"),
    "trials": ("trials", "12"),
    "shell": ("shell", "12"),
    "profile": ("profile", "12"),
    "endpoints": ("endpoints", "--project", "test-project"),
    "undeploy": ("undeploy", "e", "1", "--project", "test-project"),
    "hardware": ("hardware", "--region", "nowhere-1"),
    "data convert": ("data", "convert", "/nonexistent/images", "unused", "--shards", "0"),
}


def _commands_with_output(command, path=()) -> set[str]:
    found = set()
    for name, sub in (getattr(command, "commands", None) or {}).items():
        found |= _commands_with_output(sub, (*path, name))
    if any(p.name == "output" for p in getattr(command, "params", ())):
        found.add(" ".join(path))
    return found


def test_the_table_names_every_command_that_takes_output_json():
    group = typer.main.get_command(app)
    found = set()
    for name in group.list_commands(None):
        found |= _commands_with_output(group.get_command(None, name), (name,))
    assert found == set(FAILING)


@pytest.mark.parametrize("name", sorted(FAILING))
def test_every_command_answers_bad_input_with_one_object(run_cli, name):
    done = run_cli(*FAILING[name], "--output", "json")
    error = one_error(done)
    assert done.returncode == 2 and error["kind"] in {"invalid", "usage"}
    assert error["message"] and error["message"] in done.stderr


def test_bad_input_names_the_field_and_says_what_the_text_says_secrets_masked(run_cli, tmp_path):
    done = run_cli(
        "submit",
        SPEC,
        "--local",
        "--set",
        "image.repository=null",
        "--set",
        "image.uri=https://me:TOKEN1234@host/x;rm",
        "--output",
        "json",
    )
    error = one_error(done)
    assert done.returncode == 2
    assert error["kind"] == "invalid" and error["field"] == "image.uri"
    assert error["message"] == stderr_message(done)
    assert error["hint"] and error["hint"] in done.stderr
    assert "TOKEN1234" not in done.stdout + done.stderr and "https://***@host" in error["message"]


def test_a_spec_with_several_problems_lists_each_with_its_field(run_cli):
    done = run_cli("submit", SPEC, "--set", "hardware=nope", "--set", "trainer.epochs=0", "-o", "json")
    error = one_error(done)
    assert done.returncode == 2 and error["kind"] == "invalid"
    assert {p["field"] for p in error["problems"]} >= {"hardware", "trainer.epochs"}
    assert all(p["message"] in done.stderr for p in error["problems"])


def test_a_command_line_error_is_a_usage_object_naming_the_option(run_cli):
    done = run_cli("bench", SPEC, "--steps", "many", "--output=json")
    error = one_error(done)
    assert done.returncode == 2 and error["kind"] == "usage" and error["field"] == "--steps"
    assert error["message"] in done.stderr
    done = run_cli("pipeline", "submit", SPEC, "-ojson", "--no-such-flag")
    assert one_error(done)["field"] == "--no-such-flag"
    done = run_cli("submit", "--output", "json")  # no SPEC
    assert done.returncode == 2 and one_error(done)["field"] == "spec"
    done = run_cli("list", "--output", "json", "--limit")  # no value
    assert done.returncode == 2 and one_error(done)["field"] == "--limit"


def test_a_denied_api_is_exit_2_denied(fake, run_cli):
    fake.fail(
        "get",
        403,
        message="Vertex AI API has not been used in project 123 before or it is disabled. "
        "Enable it by visiting https://console.developers.google.com/apis/api/aiplatform.googleapis.com",
    )
    done = run_cli("status", JOB.format(1), "--output", "json")
    error = one_error(done)
    assert done.returncode == 2 and error["kind"] == "denied"
    assert error["api"] == "aiplatform.googleapis.com"
    assert error["message"] == stderr_message(done)


def test_a_service_that_keeps_failing_is_exit_3_service(fake, run_cli):
    fake.fail("get", 503, times=20)
    done = run_cli("status", JOB.format(1), "--output", "json")
    error = one_error(done)
    assert done.returncode == 3 and error["kind"] == "service"
    assert error["message"] == stderr_message(done) and error["hint"]


def test_a_failed_job_keeps_its_own_object_and_adds_none(fake, run_cli):
    job = fake.add_job(job_body(), state="JOB_STATE_FAILED")
    done = run_cli("status", job["name"], "--wait", "--output", "json")
    assert done.returncode == 1
    shown = json.loads(done.stdout)  # one object: the job's
    assert shown["state"] == "JOB_STATE_FAILED" and "exit_code" not in json.dumps(shown)


def test_a_failed_job_followed_by_logs_ends_the_stream_with_one_error_line_escaped(fake, run_cli):
    job = fake.add_job(job_body())
    fake.set_state(job["name"], "JOB_STATE_FAILED", error_message="boom \x1b]52;c;QUFB\x07 end")
    done = run_cli("logs", job["name"], "--follow", "--output", "json")
    assert done.returncode == 1
    last = done.stdout.splitlines()[-1]  # (the NDJSON stream's last line)
    error = json.loads(last)["error"]
    assert error["exit_code"] == 1 and error["kind"] == "job_failed"
    assert "boom \\x1b]52;c;QUFB\\x07 end" in error["message"] and "\x1b" not in error["message"]
    assert error["message"] == stderr_message(done)


def test_ctrl_c_is_exit_130_interrupted(run_cli, monkeypatch):
    def pressed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "list_jobs", pressed)  # the user's Ctrl-C during the call
    done = run_cli("list", *PLACE, "--output", "json")
    error = one_error(done)
    assert done.returncode == 130 and error["kind"] == "interrupted"


def test_a_defect_is_exit_1_internal_with_its_traceback_on_stderr(run_cli, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug \x1b[2J here")

    monkeypatch.setattr(api, "list_jobs", broken)
    done = run_cli("list", *PLACE, "--output", "json")
    error = one_error(done)
    assert done.returncode == 1 and error["kind"] == "internal"
    assert error["message"] == "RuntimeError: a bug \\x1b[2J here"
    assert "Traceback" in done.stderr


def test_text_output_writes_nothing_on_stdout_on_failure(run_cli):
    done = run_cli("submit", MISSING)
    assert done.returncode == 2 and done.stdout == "" and "spec file not found" in done.stderr


def test_an_option_without_its_value_before_the_command_is_found_is_one_object_too(run_cli):
    done = run_cli("list", *PLACE, "--output", "json", "--impersonate-service-account")
    error = one_error(done)
    assert done.returncode == 2 and "--impersonate-service-account" in error["message"]


# -- the parts ------------------------------------------------------------------------------------


def _command(*path: str):
    group = typer.main.get_command(app)
    command = group.get_command(None, path[0])
    for name in path[1:]:
        command = command.commands[name]
    return command


@pytest.mark.parametrize(
    ("path", "args", "expected"),
    [
        (("list",), ["--output", "json"], True),
        (("list",), ["-o", "json"], True),
        (("list",), ["-ojson"], True),
        (("list",), ["--output=json"], True),
        (("list",), ["--output", "json", "-o", "text"], False),  # the last one wins, as in click
        (("list",), ["--label", "-o", "--output", "text"], False),  # -o is --label's value there
        (("list",), ["--", "--output", "json"], False),
        (("list",), [], False),
        (("report",), ["run", "-o", "json"], False),  # report's -o is --out
        (("pipeline",), ["submit", "s.yaml", "--output", "json"], True),
        (("pipeline",), ["compile", "s.yaml", "-o", "json"], False),  # compile's -o is --out
        (("trigger",), ["render", "s.yaml", "--output", "json"], True),
    ],
)
def test_asks_json_reads_the_line_as_the_command_reads_it(path, args, expected):
    assert asks_json(_command(*path), args) is expected


def test_the_object_escapes_control_characters_as_the_text_does():
    error = failure_object(UserError("bad \x1b]0;title\x07 value", hint="fix \x1bc it"))["error"]
    assert error == {
        "exit_code": 2,
        "kind": "invalid",
        "message": "bad \\x1b]0;title\\x07 value",
        "hint": "fix \\x1bc it",
        "field": None,
    }


def test_an_exit_that_is_no_failure_writes_nothing():
    assert failure_object(typer.Exit(0)) is None and failure_object(SystemExit(0)) is None
    assert failure_object(typer.Exit(130))["error"]["kind"] == "interrupted"
