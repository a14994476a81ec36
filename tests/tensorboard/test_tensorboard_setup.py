"""`check` and `setup` of a spec with `tensorboard: auto` against the stand-ins alone (Service
Usage, IAM, Cloud Storage, Vertex AI): check says the instance is not there yet (a WARN: the first
submit makes it) and that the job's service account cannot upload (a FAIL); `setup --dry-run`
sends nothing and lists the create and the grant; `setup --grant` makes the instance once and
grants the account, every request valid against Google's discovery documents."""

from __future__ import annotations

import pytest

from tests.discovery_support import conforms, discovery_methods, record_requests
from tests.shared import FAST_POLL, FAST_RETRY, PROJECT, REGION, spec_yaml, write_spec
from tests.tensorboard.conftest import PARENT, SA
from vertex_trainer import api
from vertex_trainer.settings import Settings

pytestmark = pytest.mark.wire

DOCUMENTS = ("aiplatform.v1", "serviceusage.v1", "cloudresourcemanager.v3", "iam.v1", "storage.v1")
SPEC = spec_yaml(hardware="cpu", scheduling=None, service_account=SA, tensorboard="auto")
MEMBER = f"serviceAccount:{SA}"


@pytest.fixture
def stand_ins(fake):
    from vertex_trainer.emulators.gcs import GcsEmulator
    from vertex_trainer.emulators.iam import FakeIam
    from vertex_trainer.emulators.serviceusage import FakeServiceUsage

    with FakeServiceUsage() as usage, FakeIam() as iam, GcsEmulator(project=PROJECT) as gcs:
        gcs.create_bucket("test-bucket")
        settings = Settings(
            vertex_endpoint=fake.url,
            serviceusage_endpoint=usage.url,
            iam_endpoint=iam.url,
            storage_emulator=gcs.endpoint,
            retry=FAST_RETRY,
            poll=FAST_POLL,
            project=PROJECT,
        )
        yield settings, iam


def _by_name(items) -> dict:
    return {i.name: i for i in items}


def test_check_then_setup_make_the_instance_once_and_grant_the_account(
    fake, stand_ins, tmp_path, monkeypatch
):
    settings, iam = stand_ins
    spec = api.load_spec(write_spec(tmp_path, SPEC), settings=settings)
    instance = f"tensorboard auto in {REGION}"
    uploads = f"roles/aiplatform.user for {SA} (TensorBoard uploads)"

    dry = api.project_setup(spec, dry_run=True, settings=settings)
    assert fake.requests == [] and iam.requests == []  # a dry run sends nothing
    steps = {s.what: s for s in dry.steps}
    create = steps[f"create the TensorBoard instance in {REGION} (tensorboard: auto)"]
    assert (create.method, create.url) == ("POST", f"{fake.url}/v1/{PARENT}/tensorboards")
    assert "gcloud ai tensorboards create --display-name=vertex-trainer" in create.gcloud
    grant = steps[f"grant roles/aiplatform.user to {MEMBER} on projects/{PROJECT}"]
    assert grant.body == {"policy": {"bindings": [{"role": "roles/aiplatform.user", "members": [MEMBER]}]}}
    assert any("tensorboards (labels.vertex-trainer-managed" in r for r in dry.reads)

    sent = record_requests(monkeypatch)
    before = _by_name(api.project_check(spec, settings=settings, spec_path="job.yaml").items)
    assert (before[instance].status, before[uploads].status) == ("WARN", "FAIL")
    assert before[instance].fix.startswith("vertex-trainer setup job.yaml (or gcloud ai tensorboards create")
    done = api.project_setup(spec, grant=True, member="user:dev@example.com", settings=settings)
    assert [s.done for s in done.steps if s.make.get("kind") == "tensorboard"] == [True]
    (board,) = fake.tensorboards.tensorboards
    assert {"role": "roles/aiplatform.user", "members": [MEMBER]} in iam.policies[f"projects/{PROJECT}"]

    after = _by_name(api.project_check(spec, settings=settings).items)
    assert (after[instance].status, after[instance].detail) == ("OK", board)
    assert after[uploads].status == "OK"
    again = api.project_setup(spec, grant=True, member="user:dev@example.com", settings=settings)
    assert not any(s.make.get("kind") == "tensorboard" for s in again.steps)
    assert len(fake.tensorboards.tensorboards) == 1 and len(fake.calls("tensorboard-create")) == 1

    found = discovery_methods(DOCUMENTS)
    assert [(m, u, b) for m, u, b in sent if conforms(m, u, b, found) is None] == []
    verbs = {conforms(m, u, b, found) for m, u, b in sent}
    assert {
        "aiplatform.v1: aiplatform.projects.locations.tensorboards.list",
        "aiplatform.v1: aiplatform.projects.locations.tensorboards.create",
        "cloudresourcemanager.v3: cloudresourcemanager.projects.getIamPolicy",
        "cloudresourcemanager.v3: cloudresourcemanager.projects.setIamPolicy",
    } <= verbs
