"""--impersonate-service-account (and its variable, and gcloud's auth/impersonate_service_account)
reaches every request: the token each session, the storage client and the registry's bearer
token carry is the impersonated account's, obtained with the caller's own credentials (issue 33).
The source credentials are an authorized_user file holding a token still valid, and IAM
Credentials is the IAM stand-in: nothing leaves the machine."""

from __future__ import annotations

import json
import time

import pytest

from tests.cli_support import edge_env
from tests.shared import FAST_RETRY, cli_runner
from vertex_trainer.emulators.iam import FakeIam
from vertex_trainer.emulators.serviceusage import FakeServiceUsage
from vertex_trainer.gcp import auth, storage
from vertex_trainer.settings import Settings

SA = "deployer@p.iam.gserviceaccount.com"


@pytest.fixture
def iam():
    with FakeIam() as fake:
        yield fake
    auth.use(Settings())  # the next test's requests go as the ADC again


@pytest.fixture
def adc(iam, tmp_path, monkeypatch):
    """Application Default Credentials of a user whose refresh answers "source-token"."""
    path = tmp_path / "adc.json"
    path.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "id",
                "client_secret": "secret",
                "refresh_token": "refresh",
                # a token still valid: google-auth's OAuth endpoint (fixed for this type) is not asked
                "token": "source-token",
                "expiry": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600)),
            }
        )
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    return path


def test_every_way_a_request_is_authorized_goes_as_the_impersonated_account(iam, adc):
    auth.use(Settings(impersonate_service_account=SA, iam_endpoint=iam.url, retry=FAST_RETRY))
    assert auth.impersonating() == SA

    assert auth.access_token() == f"impersonated-{SA}"  # the registry's bearer token
    generate = [i for i, r in enumerate(iam.requests) if r[1].endswith(":generateAccessToken")]
    assert [iam.requests[i][1] for i in generate] == [
        f"/v1/projects/-/serviceAccounts/{SA}:generateAccessToken"
    ]
    assert iam.authorizations[generate[0]] == "Bearer source-token"  # asked with the caller's own

    session = auth.session("https://us-central1-aiplatform.googleapis.com")  # every ApiClient's
    session.post(f"{iam.url}/v3/projects/p:testIamPermissions", json={"permissions": ["a.b.c"]})
    assert iam.authorizations[-1] == f"Bearer impersonated-{SA}"

    client = storage.client(Settings(project="p"))  # google-cloud-storage's
    assert client._credentials.service_account_email == SA


def test_without_it_requests_go_as_the_caller(iam, adc):
    auth.use(Settings(iam_endpoint=iam.url))
    assert auth.impersonating() is None
    creds = auth.credentials()
    assert type(creds).__module__ == "google.oauth2.credentials" and creds.token == "source-token"
    session = auth.session("https://us-central1-aiplatform.googleapis.com")
    session.post(f"{iam.url}/v3/projects/p:testIamPermissions", json={"permissions": ["a.b.c"]})
    assert iam.authorizations == ["Bearer source-token"]


def test_the_variable_and_gclouds_configuration_name_it(tmp_path):
    assert (
        Settings.from_environ({"VERTEX_TRAINER_IMPERSONATE_SERVICE_ACCOUNT": SA}).impersonate_service_account
        == SA
    )
    assert (
        Settings.from_environ({"CLOUDSDK_AUTH_IMPERSONATE_SERVICE_ACCOUNT": SA}).impersonate_service_account
        == SA
    )
    (tmp_path / "configurations").mkdir()
    (tmp_path / "configurations" / "config_default").write_text(
        f"[auth]\nimpersonate_service_account = {SA}\n"
    )
    assert Settings.from_environ({"CLOUDSDK_CONFIG": str(tmp_path)}).impersonate_service_account == SA
    assert (
        Settings.from_environ({"CLOUDSDK_CONFIG": str(tmp_path / "none")}).impersonate_service_account is None
    )


def test_check_says_whom_it_impersonates(iam, adc, tmp_path):
    with FakeServiceUsage() as usage:
        env = edge_env(
            tmp_path,
            GOOGLE_APPLICATION_CREDENTIALS=str(adc),
            VERTEX_TRAINER_IAM_ENDPOINT=iam.url,
            VERTEX_TRAINER_SERVICEUSAGE_ENDPOINT=usage.url,
        )
        run = cli_runner(env)
        result = run("check", "--project", "p", "--impersonate-service-account", SA, "--output", "json")
        assert result.returncode == 0, result.stdout + result.stderr
        first = json.loads(result.stdout)["items"][0]
        assert (first["area"], first["name"], first["status"]) == ("credentials", SA, "OK")
        assert first["detail"].startswith("impersonated service account, from --impersonate-service-account")
        assert first["detail"].endswith("over GOOGLE_APPLICATION_CREDENTIALS")

        missing = run("check", "--project", "p", "--impersonate-service-account")
        assert (
            missing.returncode == 2
            and "--impersonate-service-account needs a service account" in missing.stderr
        )


def test_workload_identity_federation_is_an_external_account(tmp_path, monkeypatch):
    """Keyless CI (GitHub Actions' OIDC token through Workload Identity Federation) is ADC like
    any other: check names it an external account, with the service account it impersonates."""
    from vertex_trainer.readiness.project_check import identity

    (tmp_path / "oidc-token").write_text("a-jwt")
    config = {
        "type": "external_account",
        "audience": "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/github/"
        "providers/github",
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": "https://sts.googleapis.com/v1/token",
        "credential_source": {"file": str(tmp_path / "oidc-token")},
        "service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/projects/-/"
        f"serviceAccounts/{SA}:generateAccessToken",
    }
    (tmp_path / "wif.json").write_text(json.dumps(config))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "wif.json"))
    # google-auth asks STS for the project of an external account that names none (the auth
    # action sets this variable, as here): without it the look-up would leave the machine
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p")
    auth.use(Settings())
    who = identity(Settings(environ={"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "wif.json")}))
    assert (who.kind, who.who, who.how) == (
        "external account (Workload Identity Federation)",
        SA,
        "GOOGLE_APPLICATION_CREDENTIALS",
    )
    assert who.member == f"serviceAccount:{SA}"
