"""Every request `check` and `setup` send is one Google's API definitions accept: its method, its
path, its query parameters and its body fields, held against the discovery documents shipped in
google-api-python-client (serviceusage v1, cloudresourcemanager v3, iam v1, storage v1,
artifactregistry v1; the checker is tests/discovery_support.py). The requests are recorded on
their way out (the transport is called through, nothing is faked) while check and setup --grant
run against the stand-ins alone, with everything missing that setup can make."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.check.conftest import BUCKET, PROJECT, SA, SPEC
from tests.discovery_support import conforms, record_requests
from tests.discovery_support import discovery_methods as _discovery_methods
from tests.shared import FAST_POLL, FAST_RETRY
from vertex_trainer import api
from vertex_trainer.emulators.gcs import GcsEmulator
from vertex_trainer.emulators.iam import FakeIam
from vertex_trainer.emulators.serviceusage import FakeServiceUsage
from vertex_trainer.settings import Settings

DOCUMENTS = ("serviceusage.v1", "cloudresourcemanager.v3", "iam.v1", "storage.v1", "artifactregistry.v1")


def discovery_methods():
    return _discovery_methods(DOCUMENTS)


@pytest.fixture
def sent(monkeypatch):
    """Every request sent through requests, recorded on its way out and then sent."""
    return record_requests(monkeypatch)


def test_every_request_of_check_and_setup_is_in_googles_api_definitions(sent, tmp_path):
    found = discovery_methods()
    with (
        FakeServiceUsage(disabled={"aiplatform.googleapis.com"}) as usage,
        FakeIam(denied={"iam.serviceAccounts.actAs", "aiplatform.customJobs.create"}) as iam,
        GcsEmulator(project=PROJECT) as gcs,
    ):
        settings = Settings(
            vertex_endpoint="http://127.0.0.1:9",  # a stand-in that is never called
            serviceusage_endpoint=usage.url,
            iam_endpoint=iam.url,
            storage_emulator=gcs.endpoint,
            retry=FAST_RETRY,
            poll=FAST_POLL,
            project=PROJECT,
        )
        path = tmp_path / "job.yaml"
        path.write_text(SPEC)
        spec = api.load_spec(path, settings=settings)
        before = api.project_check(spec, settings=settings)
        failed = {i.name for i in before.items if i.status == "FAIL"}
        assert failed == {
            "aiplatform.googleapis.com",
            "aiplatform.customJobs.create",
            f"iam.serviceAccounts.actAs on {SA}",
            f"gs://{BUCKET} (output_dir)",
            "projects/sandbox/locations/us-central1/repositories/training",
        }
        api.project_setup(spec, grant=True, member="user:dev@example.com", settings=settings)
        assert api.project_check(spec, settings=settings).ok
    verbs = {(m, urlsplit(u).path.split(":")[-1] if ":" in urlsplit(u).path else "") for m, u, _ in sent}
    assert {("POST", "batchEnable"), ("POST", "setIamPolicy"), ("POST", "testIamPermissions")} <= verbs
    assert any(m == "POST" and urlsplit(u).path == "/storage/v1/b" for m, u, _ in sent)
    assert any("repositoryId=training" in u for _, u, _ in sent)
    wrong = [(m, u, b) for m, u, b in sent if conforms(m, u, b, found) is None]
    assert wrong == []


def test_a_request_google_would_refuse_is_caught():
    """The check above can fail: a misspelt path, a field no schema has, an unknown parameter."""
    found = discovery_methods()
    base = "http://127.0.0.1:1"
    good = (
        "POST",
        f"{base}/v3/projects/p:testIamPermissions",
        {"permissions": ["aiplatform.customJobs.create"]},
    )
    assert (
        conforms(*good, found) == "cloudresourcemanager.v3: cloudresourcemanager.projects.testIamPermissions"
    )
    assert conforms("POST", f"{base}/v3/projects/p:testPermissions", good[2], found) is None
    assert conforms("POST", good[1], {"permission": ["x"]}, found) is None
    assert conforms("GET", f"{base}/v1/projects/p/services:batchGet?names=a&pageSize=2", None, found) is None
    assert conforms("GET", f"{base}/v1/projects/p/services:batchGet?names=a", None, found)
