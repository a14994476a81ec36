"""`--output json` on failure (b67437a), where the process is not the usual one: a process started
with stdout closed. The failure keeps its message and its exit code."""

from __future__ import annotations

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
