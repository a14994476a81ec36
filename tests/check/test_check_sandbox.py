"""Issue 33's "done when", in the sandbox: the Vertex AI API disabled and actAs denied give
exactly those two FAILs, each with its fix; setup --dry-run sends nothing and lists every step
it could take, if missing; setup --plan reads and lists the enablement and the binding; after
setup (--grant) check passes and a submit is accepted; a second setup changes nothing."""

from __future__ import annotations

import json

from tests.check.conftest import SA

# A ready image and no trainer: block: nothing is built, and the sandbox's runner does not start
# TensorFlow for the job it is given (the test looks at the create, not at a training).
IMAGE_NOT_BUILT = (
    "--set",
    "image.repository=null",
    "--set",
    "image.uri=us-central1-docker.pkg.dev/sandbox/training/trainer:v1",
    "--set",
    "trainer=null",
)


def fails(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("FAIL")]


def test_check_names_the_disabled_api_and_the_denied_act_as_and_setup_dry_run_lists_their_fixes(
    run_box, box, spec_file
):
    """One sandbox for both: neither check nor a dry run changes anything."""
    result = run_box("check", spec_file)
    assert result.returncode == 2, result.stderr
    assert fails(result.stdout) == [
        "FAIL  api         aiplatform.googleapis.com: not enabled in the project",
        f"FAIL  permission  iam.serviceAccounts.actAs on {SA}: not held: a job that runs as {SA} is "
        "refused (roles/iam.serviceAccountUser carries it)",
    ]
    assert (
        "      fix: gcloud services enable aiplatform.googleapis.com --project sandbox "
        f"(or vertex-trainer setup {spec_file})"
    ) in result.stdout
    assert (
        f"      fix: gcloud iam service-accounts add-iam-policy-binding {SA} --member=MEMBER "
        "--role=roles/iam.serviceAccountUser --project sandbox"
    ) in result.stdout

    as_json = run_box("check", spec_file, "--output", "json")
    assert as_json.returncode == 2
    report = json.loads(as_json.stdout)
    assert report["ok"] is False and report["project"] == "sandbox"
    failed = [(i["area"], i["name"]) for i in report["items"] if i["status"] == "FAIL"]
    assert failed == [
        ("api", "aiplatform.googleapis.com"),
        ("permission", f"iam.serviceAccounts.actAs on {SA}"),
    ]
    assert all(i["fix"] for i in report["items"] if i["status"] == "FAIL")

    seen = (len(box.serviceusage.requests), len(box.iam.requests), len(box.vertex.requests))
    result = run_box("setup", spec_file, "--dry-run")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert (len(box.serviceusage.requests), len(box.iam.requests), len(box.vertex.requests)) == seen
    assert out.startswith("# dry run: nothing was sent, not even a read, and no credentials were loaded.")
    assert f"#   GET {box.serviceusage.url}/v1/projects/sandbox/services:batchGet" in out  # would read
    assert "would, if missing: enable aiplatform.googleapis.com, storage.googleapis.com" in out
    assert "to grant, if missing: grant roles/iam.serviceAccountUser to MEMBER on " in out

    result = run_box("setup", spec_file, "--plan")  # reads, and says so; changes nothing
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("# plan: read the project's state (")
    assert "no change was sent" in out
    assert "would: enable aiplatform.googleapis.com" in out
    assert f"POST {box.serviceusage.url}/v1/projects/sandbox/services:batchEnable" in out
    assert "gcloud: gcloud services enable aiplatform.googleapis.com --project sandbox" in out
    assert (
        f"to grant: grant roles/iam.serviceAccountUser to MEMBER on projects/sandbox/serviceAccounts/{SA}"
        in out
    )
    assert not box.serviceusage.enabled("aiplatform.googleapis.com")
    assert not [r for r in box.serviceusage.requests if r[0] == "POST"]
    assert not [r for r in box.iam.requests if ":setIamPolicy" in r[1]]


def test_after_setup_check_passes_submit_is_accepted_and_setup_again_changes_nothing(run_box, box, spec_file):
    box.serviceusage.disable("logging.googleapis.com")
    refused = run_box("submit", spec_file, *IMAGE_NOT_BUILT)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    first = refused.stderr.splitlines()[0]  # the API met, the others the cheap check found, check
    assert "the aiplatform.googleapis.com API is not enabled in the project" in first
    assert "also not enabled: logging.googleapis.com; `vertex-trainer check`" in first
    assert "gcloud services enable aiplatform.googleapis.com logging.googleapis.com" in refused.stderr

    done = run_box("setup", spec_file, "--grant", "--member", "user:dev@example.com")
    assert done.returncode == 0, done.stderr
    assert "done: enable aiplatform.googleapis.com, logging.googleapis.com" in done.stdout
    assert box.serviceusage.enabled("aiplatform.googleapis.com")

    again = run_box("check", spec_file)
    assert again.returncode == 0, again.stdout + again.stderr
    assert fails(again.stdout) == [] and again.stdout.rstrip().splitlines()[-1].startswith("ready")

    accepted = run_box("submit", spec_file, *IMAGE_NOT_BUILT)
    assert accepted.returncode == 0, accepted.stderr
    assert [j["displayName"] for j in box.vertex.jobs.values()] == ["check-demo"]

    second = run_box("setup", spec_file)
    assert second.returncode == 0 and second.stdout.startswith("nothing to do"), second.stdout
