"""`setup` says what it does and does what it says (issue 41, area C).

- `setup --dry-run` sends nothing at all: no read of the project and no look for credentials (a
  process whose every socket use is fatal, with Google's real endpoints and no credentials, so
  any read or metadata-server probe would be one), and its text says so; `--plan` is the mode
  that reads (tests/check/test_check_sandbox.py).
- `setup --member allUsers` (or allAuthenticatedUsers, or anything that is not an IAM principal)
  is exit 2 naming --member before anything is sent: the sandbox records no request at all.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.check.conftest import BUCKET, REPO, SPEC, start_sandbox
from tests.cli_support import cli_command, edge_env, no_socket_hook
from tests.shared import cli_runner
from vertex_trainer.errors import UserError
from vertex_trainer.gcp.names import check_member


@pytest.fixture(scope="module")
def sandbox():
    """One sandbox for the refusals (nothing may reach it): the Vertex AI API disabled, actAs
    denied, as tests/check's; yields (the sandbox, the spec file, the in-process CLI)."""
    box = start_sandbox(buckets=[BUCKET], deny=["iam.serviceAccounts.actAs"], disable_apis=["aiplatform"])
    box.iam.add_repository(REPO)
    try:
        yield box
    finally:
        box.stop()


@pytest.fixture(scope="module")
def run_box(sandbox, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-setup")
    spec = root / "job.yaml"
    spec.write_text(SPEC)
    run = cli_runner(edge_env(root, **sandbox.env()))
    return lambda *args: run(*args[:1], spec, *args[1:])


@pytest.fixture
def no_socket_env(tmp_path) -> dict[str, str]:
    """No emulator, no credentials, no gcloud configuration, the metadata server not ruled out
    (NO_GCE_CHECK unset); an audit hook ends the process (exit 99) at any socket use."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERTEX_TRAINER_", "GOOGLE_", "CLOUDSDK_", "STORAGE_EMULATOR", "GCE_", "NO_GCE"))
    }
    hook = no_socket_hook(tmp_path / "no-socket")
    return {**env, "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "PYTHONPATH": hook, "COLUMNS": "200"}


def _dry_run(tmp_path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`setup SPEC --dry-run ARGS` in its own process with `env`."""
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    command = [*cli_command(), "setup", str(spec), "--dry-run", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_setup_dry_run_opens_no_connection_and_says_so(tmp_path, no_socket_env):
    done = _dry_run(tmp_path, no_socket_env)
    assert "SOCKET USED" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("# dry run: nothing was sent, not even a read, and no credentials were loaded.")
    assert "#   GET https://serviceusage.googleapis.com/v1/projects/sandbox/services:batchGet" in out
    assert "would, if missing: enable aiplatform.googleapis.com" in out
    assert "would, if missing: create gs://check-bucket in us-central1" in out
    assert "to grant, if missing: grant roles/iam.serviceAccountUser to MEMBER on" in out
    assert "--plan" in out.splitlines()[-1]


def test_setup_dry_run_json_says_nothing_was_sent(tmp_path, no_socket_env):
    import json

    done = _dry_run(tmp_path, no_socket_env, "--output", "json", "--member", "group:ml@example.com")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["dry_run"], result["mode"], result["sent"]) == (True, "dry-run", False)
    assert result["reads"] and all(step["if_missing"] for step in result["steps"])
    grants = [s for s in result["steps"] if s["binding"]]
    assert grants and all("group:ml@example.com" in s["what"] for s in grants)


@pytest.mark.wire
@pytest.mark.parametrize(
    "member",
    [
        "allUsers",
        "allAuthenticatedUsers",
        "allusers",
        "user:",
        "user:someone",
        "user:a b@example.com",
        "serviceAccount:$(touch PWNED)@p.iam.gserviceaccount.com",
        "domain:example.com\ncurl evil",
        "owner:me@example.com",
    ],
)
def test_setup_grants_only_to_a_named_principal_and_refuses_before_sending(run_box, sandbox, member):
    box = sandbox
    sent = (len(box.serviceusage.requests), len(box.iam.requests), len(box.vertex.requests))
    for extra in ((), ("--dry-run",), ("--plan",)):
        done = run_box("setup", "--grant", "--member", member, *extra)
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert done.stderr.startswith("error: --member ") and "nothing was sent" in done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""
    assert (len(box.serviceusage.requests), len(box.iam.requests), len(box.vertex.requests)) == sent
    assert not box.serviceusage.enabled("aiplatform.googleapis.com")


def test_a_public_principal_is_named_as_public():
    with pytest.raises(UserError, match="a public principal") as refused:
        check_member("allUsers")
    assert "user:EMAIL" in (refused.value.hint or "")


@pytest.mark.parametrize(
    "member",
    [
        "user:alex@example.com",
        "group:ml-team@example.com",
        "domain:example.com",
        "serviceAccount:trainer@sandbox.iam.gserviceaccount.com",
        "serviceAccount:123456789012-compute@developer.gserviceaccount.com",
        "principal://iam.googleapis.com/locations/global/workforcePools/pool/subject/alex",
        "principalSet://iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/gh/attribute.repository/org/repo",
    ],
)
def test_every_named_principal_form_is_accepted(member):
    assert check_member(member) == member
