"""`tensorboard: auto` submitted to the fake Vertex AI: the region's instance is made once and
found after (a second submit, a create whose answer was lost, a submit that raced another), the
job names it, the fake's answers parse as the service's own types, and `status` and the report
link the job's page in Vertex AI TensorBoard."""

from __future__ import annotations

import json

import pytest

from tests.shared import fake_settings, spec_yaml, write_spec
from tests.tensorboard.conftest import PARENT, PROJECT, REGION

pytestmark = pytest.mark.wire


def _boards(fake) -> list[str]:
    return sorted(fake.tensorboards.tensorboards)


def test_two_submits_make_one_instance_and_the_second_finds_it(fake, submit):
    first, said = submit("tb-1")
    assert f"tensorboard: created {PARENT}/tensorboards/" in said
    second, said_again = submit("tb-2")
    (board,) = _boards(fake)
    assert f"tensorboard: using {board}" in said_again
    assert first["name"] != second["name"]
    assert [fake.jobs[j["name"]]["jobSpec"]["tensorboard"] for j in (first, second)] == [board, board]
    assert len(fake.calls("tensorboard-create")) == 1
    made = fake.tensorboards.tensorboards[board]
    assert made["displayName"] == "vertex-trainer" and made["labels"] == {"vertex-trainer-managed": "true"}


@pytest.mark.parametrize("status", [0, 503], ids=["dropped", "503"])
def test_a_create_whose_answer_was_lost_is_found_not_made_again(fake, submit, status):
    fake.fail("tensorboard-create", status, commit=True)  # made, then the answer is lost
    job, said = submit("tb-lost")
    (board,) = _boards(fake)
    assert len(fake.calls("tensorboard-create")) == 1
    assert "checking whether it was created" in said and f"tensorboard: using {board}" in said
    assert fake.jobs[job["name"]]["jobSpec"]["tensorboard"] == board


def test_a_submit_that_raced_another_keeps_the_older_instance(fake, submit):
    fake.tensorboards.race()  # another submit's create lands just before this one's
    job, said = submit("tb-race")
    (board,) = _boards(fake)  # this submit's own was deleted
    assert board.endswith("/tensorboards/6000000000000000001")  # the other's, made first
    assert fake.jobs[job["name"]]["jobSpec"]["tensorboard"] == board
    assert f"{board} was made first; using it" in said
    assert len(fake.calls("tensorboard-delete")) == 1


def test_the_fakes_answers_parse_as_the_services_types(fake):
    from google.cloud import aiplatform_v1

    from vertex_trainer.vertex.tensorboards import TensorboardsClient

    client = TensorboardsClient(PROJECT, REGION, settings=fake_settings(fake))
    operation = client.create_once()
    assert operation["metadata"]["@type"].endswith("CreateTensorboardOperationMetadata")
    done = client.api.json("poll", "GET", f"v1/{operation['name']}")
    assert done["done"] is True and done["response"]["@type"].endswith("v1.Tensorboard")
    made = {k: v for k, v in done["response"].items() if k != "@type"}
    listed = client.managed()
    for answer in (made, client.get(made["name"]), *listed):
        parsed = aiplatform_v1.Tensorboard.from_json(json.dumps(answer))  # strict: unknown fields raise
        assert parsed.name == made["name"] and parsed.labels["vertex-trainer-managed"] == "true"
    assert [t["name"] for t in listed] == [made["name"]]
    assert client.list('display_name="vertex-trainer"') == listed
    assert client.list('labels.vertex-trainer-managed="false"') == []


def test_a_job_naming_an_instance_of_another_region_is_refused(fake):
    from tests.shared import job_body
    from vertex_trainer.errors import ServiceError
    from vertex_trainer.vertex.custom_jobs import JobsClient
    from vertex_trainer.vertex.tensorboards import TensorboardsClient

    settings = fake_settings(fake)
    elsewhere = TensorboardsClient(PROJECT, "europe-west4", settings=settings).ensure().name
    body = job_body()
    body["jobSpec"]["tensorboard"] = elsewhere
    with pytest.raises(ServiceError, match="does not exist or is not in location us-central1"):
        JobsClient(PROJECT, REGION, settings=settings).create_once(body)
    assert fake.jobs == {}


def page_of(board: str, job: str) -> str:
    """A custom job's page in Vertex AI TensorBoard, spelt as google-cloud-aiplatform spells it
    (google/cloud/aiplatform/utils/console_utils.py custom_job_tensorboard_console_uri: the
    experiment is the job's id, '/' written '+'), independently of the tool's code. (Importing the
    SDK to call it costs seconds.)"""
    experiment = f"{board}/experiments/{job.rsplit('/', 1)[1]}"
    return f"https://{REGION}.tensorboard.googleusercontent.com/experiment/{experiment.replace('/', '+')}"


def test_status_links_the_jobs_page_in_vertex_ai_tensorboard(fake, submit, run_cli, tmp_path):
    job, _ = submit("tb-status")
    (board,) = _boards(fake)
    link = page_of(board, job["name"])
    text = run_cli("status", job["name"])
    assert text.returncode == 0, text.stderr
    assert f"tensorboard {link}" in text.stdout.splitlines()
    as_json = json.loads(run_cli("status", job["name"], "-o", "json").stdout)
    assert as_json["tensorboard_url"] == link

    plain, _ = submit("tb-none", write_spec(tmp_path, spec_yaml(), "plain.yaml"))
    assert "tensorboard" not in run_cli("status", plain["name"]).stdout
    assert json.loads(run_cli("status", plain["name"], "-o", "json").stdout)["tensorboard_url"] is None


def test_the_report_page_links_the_jobs_tensorboard(fake, submit):
    from vertex_trainer.reporting import page as report_page
    from vertex_trainer.reporting.run_data import RunData

    job, _ = submit("tb-report")
    data = fake.jobs[job["name"]]
    board = data["jobSpec"]["tensorboard"]
    page = report_page.html(RunData(source=job["name"], name="tiny", custom_job=dict(data)))
    link = page_of(board, job["name"])
    assert f'<a id="tensorboard" href="{link}">' in page
    without = {**data, "jobSpec": {k: v for k, v in data["jobSpec"].items() if k != "tensorboard"}}
    assert 'id="tensorboard"' not in report_page.html(RunData(source="x", name="x", custom_job=without))
