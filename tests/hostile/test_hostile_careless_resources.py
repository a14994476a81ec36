"""A careless user makes a persistent resource and forgets it (issue 42, A1).

`resources create SPEC` holds the spec's machines (8 H100s each, say) until `resources delete`,
billed by the hour whether or not a job runs on them; the command said only "created NAME /
state RUNNING". Now it says what it bills (the list price of its machines, from the same book
as `cost`) and the command that deletes it, and `--output json` has "hourly".
"""

from __future__ import annotations

import json

import yaml

from tests.shared import PROJECT, REGION, T4_JOB
from vertex_trainer import api


def test_resources_create_says_what_it_bills_and_how_to_delete_it(fake, run_cli, tmp_path):
    data = {**T4_JOB, "hardware": "h100x8", "replicas": 2, "scheduling": {"strategy": "standard"}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    # the list price of the same machines for a job of this spec: `cost`'s own figure
    expected = api.cost(api.load_spec(str(path))).attempts[0].hourly
    assert expected is not None and expected > 0

    made = run_cli("resources", "create", path, "--id", "team-h100")
    assert made.returncode == 0, made.stderr
    name = f"projects/{PROJECT}/locations/{REGION}/persistentResources/team-h100"
    assert f"created  {name}" in made.stdout
    assert f"it bills about {expected:,.2f} USD/h at list price while it exists" in made.stderr
    assert f"vertex-trainer resources delete {name}" in made.stderr

    again = run_cli("resources", "create", path, "--id", "team-h100", "-o", "json")
    assert again.returncode == 0, again.stderr
    out = json.loads(again.stdout)
    assert out["adopted"] is True and out["hourly"] == expected

    gone = run_cli("resources", "delete", name)  # what the line says works
    assert gone.returncode == 0 and "deleted" in gone.stdout and not fake.resources.resources
