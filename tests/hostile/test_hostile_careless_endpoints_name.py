"""`endpoints --endpoint projects/P/locations/R/endpoints/ID`, the form its --help names (and
what `deploy` prints), needs no --project or --region (issue 42, H2 round 2): the name holds them,
as `undeploy`'s ENDPOINT and the API's list_endpoints take it. Before, without a default project
($GOOGLE_CLOUD_PROJECT, gcloud's) it was exit 2 "no project: pass --project", so a user checking
what a deploy left billing on a fresh machine (or in CI) could not see it.
"""

from __future__ import annotations

import json

from tests.shared import PROJECT, REGION
from vertex_trainer.settings import PollPolicy
from vertex_trainer.vertex.model_deploy import DeployRequest, ServingContainer, deploy
from vertex_trainer.vertex.models import RegistryClient


def _deployed(settings) -> tuple[str, str]:
    request = DeployRequest(
        model_display_name="digits",
        artifact_uri="gs://b/runs/111/model",
        container=ServingContainer("us-docker.pkg.dev/p/r/trainer:abc"),
        job_id="111",
        endpoint="digits-endpoint",
        machine_type="n1-standard-4",
    )
    client = RegistryClient(PROJECT, REGION, settings=settings)
    done = deploy(client, request, poll=PollPolicy(initial=0.01, maximum=0.02), timeout=30)
    return done.endpoint, done.deployed_model_id


def test_a_full_endpoint_name_needs_no_project_or_region(settings, run_cli):
    endpoint, ident = _deployed(settings)
    assert endpoint == f"projects/{PROJECT}/locations/{REGION}/endpoints/digits-endpoint"

    shown = run_cli("endpoints", "--endpoint", endpoint)  # no --project, no default project
    assert shown.returncode == 0, shown.stderr
    assert f"endpoint digits-endpoint  {endpoint}" in shown.stdout and ident in shown.stdout

    as_json = run_cli("endpoints", "--endpoint", endpoint, "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    (listed,) = json.loads(as_json.stdout)["endpoints"]
    assert listed["endpoint"] == endpoint

    missing = f"projects/{PROJECT}/locations/{REGION}/endpoints/nothing-here"
    none = run_cli("endpoints", "--endpoint", missing)
    assert none.returncode == 0, none.stderr
    assert f"no endpoint {missing!r} in {PROJECT} / {REGION}" in none.stdout


def test_a_display_name_still_needs_the_project(run_cli):
    refused = run_cli("endpoints", "--endpoint", "digits-endpoint")
    assert refused.returncode == 2
    assert "no project" in refused.stderr and "--project" in refused.stderr
