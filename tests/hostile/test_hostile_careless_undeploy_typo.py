"""A careless user undeploys by a mistyped deployed model id (issue 42, H2 round 2): ids are 19
digits, and one digit short or swapped names nothing.

`undeploy` is idempotent, so an id that is not on the endpoint is "already gone": exit 0, and
all it said was "deployed model X is not on E: nothing to undeploy". The model meant stayed
deployed, its nodes billed, and the user believed it gone. The exit stays 0 (a retried undeploy
must not fail), but the line now names the endpoint's deployed models, whose nodes bill, so the
mistake shows (and `undeploy` of the id it names then takes it off).
"""

from __future__ import annotations

from tests.shared import PROJECT, REGION
from vertex_trainer.settings import PollPolicy
from vertex_trainer.vertex.model_deploy import DeployRequest, ServingContainer, deploy
from vertex_trainer.vertex.models import RegistryClient


def test_an_id_not_on_the_endpoint_names_the_ones_that_are(settings, run_cli):
    client = RegistryClient(PROJECT, REGION, settings=settings)
    request = DeployRequest(
        model_display_name="digits",
        artifact_uri="gs://b/runs/111/model",
        container=ServingContainer("us-docker.pkg.dev/p/r/trainer:abc"),
        job_id="111",
        endpoint="digits",
        machine_type="n1-standard-4",
    )
    done = deploy(client, request, poll=PollPolicy(initial=0.01, maximum=0.02), timeout=30)
    real = done.deployed_model_id
    typo = real[:-1]  # one digit short

    missed = run_cli("undeploy", done.endpoint, typo)
    assert missed.returncode == 0, missed.stderr  # still idempotent
    (line,) = [s for s in missed.stderr.splitlines() if "nothing to undeploy" in s]
    assert f"deployed model {typo} is not on {done.endpoint}" in line
    assert f"its deployed models (their nodes bill): {real} (digits-v1)" in line
    (still,) = client.get_endpoint(done.endpoint)["deployedModels"]
    assert str(still["id"]) == real

    gone = run_cli("undeploy", done.endpoint, real)  # the id the line names
    assert gone.returncode == 0, gone.stderr
    assert not client.get_endpoint(done.endpoint).get("deployedModels")
    again = run_cli("undeploy", done.endpoint, real)  # gone: nothing left to name
    assert again.returncode == 0 and "its deployed models" not in again.stderr
