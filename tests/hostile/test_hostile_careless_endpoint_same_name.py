"""Two endpoints of one display name (issue 42, H2 round 2): Vertex AI does not keep display
names unique, and one made in the console (or by a colleague's script) beside the one `deploy`
made is easy to have.

`undeploy NAME ID` resolved NAME to the oldest endpoint of that name; when the deployed model was
on the other one it said "deployed model ID is not on .../endpoints/<oldest>: nothing to
undeploy", exit 0, and the model kept its nodes, billed, while the user believed it gone.
`endpoints --endpoint NAME` likewise showed the oldest only, hiding what the other one bills.
Now `undeploy` acts on the endpoint of that name that holds the deployed model, and `endpoints`
lists every endpoint of the name.
"""

from __future__ import annotations

from tests.shared import PROJECT, REGION
from vertex_trainer.settings import PollPolicy
from vertex_trainer.vertex.model_deploy import DeployRequest, ServingContainer, deploy
from vertex_trainer.vertex.models import RegistryClient

PARENT = f"projects/{PROJECT}/locations/{REGION}"
FAST = dict(poll=PollPolicy(initial=0.01, maximum=0.02), timeout=30)


def _deploy(client: RegistryClient, job_id: str, endpoint: str) -> str:
    request = DeployRequest(
        model_display_name=f"digits-{job_id}",
        artifact_uri=f"gs://b/runs/{job_id}/model",
        container=ServingContainer("us-docker.pkg.dev/p/r/trainer:abc"),
        job_id=job_id,
        endpoint=endpoint,
        machine_type="n1-standard-4",
    )
    return deploy(client, request, **FAST).deployed_model_id


def _ids(client: RegistryClient, endpoint: str) -> list[str]:
    return [str(d["id"]) for d in client.get_endpoint(endpoint).get("deployedModels") or []]


def test_undeploy_by_a_shared_name_acts_on_the_endpoint_holding_the_model(settings, run_cli):
    client = RegistryClient(PROJECT, REGION, settings=settings)
    first = _deploy(client, "111", "digits")  # deploy makes endpoints/digits, named digits
    oldest = f"{PARENT}/endpoints/digits"
    client.create_endpoint({"displayName": "digits"}, "digits-console")  # the second of the name
    other = f"{PARENT}/endpoints/digits-console"
    second = _deploy(client, "222", other)
    assert _ids(client, oldest) == [first] and _ids(client, other) == [second]

    place = ("--project", PROJECT, "--region", REGION)
    shown = run_cli("endpoints", "--endpoint", "digits", *place)
    assert shown.returncode == 0, shown.stderr
    assert f"endpoint digits  {oldest}" in shown.stdout and f"endpoint digits  {other}" in shown.stdout
    assert first in shown.stdout and second in shown.stdout

    gone = run_cli("undeploy", "digits", second, *place)
    assert gone.returncode == 0, gone.stderr
    assert "nothing to undeploy" not in gone.stderr + gone.stdout
    assert _ids(client, other) == []  # its nodes stopped
    assert _ids(client, oldest) == [first]  # the other endpoint's model untouched

    again = run_cli("undeploy", "digits", second, *place)  # still idempotent: gone is exit 0
    assert again.returncode == 0 and "nothing to undeploy" in again.stderr
    assert _ids(client, oldest) == [first]
