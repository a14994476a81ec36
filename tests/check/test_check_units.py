"""The pieces of `check` and `setup` on their own (issue 33), no sandbox: the stand-ins' answers,
a 403 that names a disabled API or a denied permission (exit 2, not 3), the permission table
against docs/ci.md's least-privilege table, check without credentials and without a spec."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

from tests.cli_support import edge_env
from tests.shared import FAST_POLL, FAST_RETRY, cli_runner
from vertex_trainer import api
from vertex_trainer.emulators.iam import FakeIam
from vertex_trainer.emulators.serviceusage import FakeServiceUsage
from vertex_trainer.errors import ServiceError
from vertex_trainer.gcp import access
from vertex_trainer.gcp.http import ApiClient, ApiError, Denied, denial
from vertex_trainer.readiness import permissions
from vertex_trainer.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_service_usage_answers_states_and_enables():
    with FakeServiceUsage(disabled={"aiplatform.googleapis.com"}) as fake:
        client = ApiClient(fake.url, retry=FAST_RETRY)
        wanted = ["aiplatform.googleapis.com", "storage.googleapis.com"]
        assert access.enabled_services(client, "p", wanted) == {
            "aiplatform.googleapis.com": False,
            "storage.googleapis.com": True,
        }
        access.enable_services(client, "p", ["aiplatform.googleapis.com"], poll=FAST_POLL)
        assert fake.enabled("aiplatform.googleapis.com")
        refused = requests.post(
            f"{fake.url}/v1/projects/p/services:batchEnable", json={"serviceIds": ["nope"]}
        )
        assert refused.status_code == 400 and refused.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_iam_denies_until_a_role_that_carries_the_permission_is_granted():
    with FakeIam(denied={"iam.serviceAccounts.actAs", "aiplatform.customJobs.create"}) as fake:
        client = ApiClient(fake.url, retry=FAST_RETRY)
        sa = "t@p.iam.gserviceaccount.com"
        asked = ["iam.serviceAccounts.actAs"]
        assert access.service_account_permissions(client, "p", sa, asked) == set()
        assert access.project_permissions(client, "p", ["aiplatform.customJobs.get"]) == {
            "aiplatform.customJobs.get"
        }
        resource = access.service_account_resource("p", sa)
        assert access.add_binding(
            client, resource, "roles/iam.serviceAccountUser", "user:a@b.c", version="v1"
        )
        assert not access.add_binding(
            client, resource, "roles/iam.serviceAccountUser", "user:a@b.c", version="v1"
        )
        assert access.service_account_permissions(client, "p", sa, asked) == set(asked)
        assert access.project_permissions(client, "p", ["aiplatform.customJobs.create"]) == set()
        with pytest.raises(ServiceError, match="does not exist"):
            access.add_binding(client, "projects/p", "roles/no.such", "user:a@b.c", version="v3")


def test_a_repository_is_created_once():
    with FakeIam() as fake:
        client = ApiClient(fake.url, retry=FAST_RETRY)
        name = access.repository_name("p", "us-central1", "training")
        assert access.repository(client, name) is None
        access.create_repository(client, "p", "us-central1", "training", poll=FAST_POLL)
        assert access.repository(client, name) == {
            "name": name,
            "format": "DOCKER",
            "mode": "STANDARD_REPOSITORY",
        }
        with pytest.raises(ServiceError, match="already exists"):
            access.create_repository(client, "p", "us-central1", "training", poll=FAST_POLL)


@pytest.mark.parametrize(
    "message,expected",
    [
        (
            "Vertex AI API has not been used in project 123 before or it is disabled. Enable it by "
            "visiting https://console.developers.google.com/apis/api/aiplatform.googleapis.com/overview",
            ("aiplatform.googleapis.com", None),
        ),
        (
            "Permission 'aiplatform.customJobs.create' denied on resource",
            (None, "aiplatform.customJobs.create"),
        ),
        ("The caller does not have permission", (None, None)),
    ],
)
def test_a_403_names_the_api_or_the_permission(message, expected):
    assert denial(ApiError(403, "PERMISSION_DENIED", message)) == expected
    assert denial(ApiError(404, "NOT_FOUND", message)) == (None, None)


def test_a_denied_permission_is_exit_2_naming_it_and_check():
    with FakeIam(denied={"aiplatform.customJobs.create"}) as fake:
        fake.inject(403)  # the stand-in's own envelope: no permission named -> a plain ServiceError
        client = ApiClient(fake.url, retry=FAST_RETRY)
        with pytest.raises(ServiceError) as plain:
            access.project_permissions(client, "p", ["a.b.c"])
        assert plain.value.exit_code == 3
    err = client.error(
        "create the job", "v1/projects/p/x", ApiError(403, "PERMISSION_DENIED", "Permission 'a.b.c' denied")
    )
    assert isinstance(err, Denied) and err.exit_code == 2 and err.permission == "a.b.c"
    assert "permission a.b.c denied" in err.message and "vertex-trainer check" in err.message
    assert "\n" not in err.message


def _docs_table() -> set[tuple[str, str]]:
    text = (ROOT / "docs" / "ci.md").read_text()
    section = text.split("## What the deploying identity needs", 1)[1].split("\n## ", 1)[0]
    return {(m[1], m[2]) for m in re.finditer(r"^\| `(roles/[^`]+)` \| ([^|]+?) \|", section, re.M)}


def test_the_least_privilege_table_of_the_docs_is_the_codes():
    assert _docs_table() == set(permissions.roles())
    assert len(permissions.roles()) >= 8  # the table holds every role the code names


def test_the_table_names_each_permission_once_per_place():
    for command, needs in permissions.COMMANDS.items():
        assert needs, command
        assert all(n.on in permissions.ON and n.role.startswith("roles/") for n in needs)
        assert all(re.match(r"^[a-z]+(\.[a-zA-Z]+){2}$", n.permission) for n in needs), command


def test_without_credentials_check_fails_on_them_with_the_login_fix(tmp_path):
    run = cli_runner(edge_env(tmp_path, GOOGLE_APPLICATION_CREDENTIALS=str(tmp_path / "none.json")))
    result = run("check", "--project", "my-project")
    assert result.returncode == 2, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("FAIL  credentials Application Default Credentials:")
    assert "fix: run `gcloud auth application-default login`" in lines[1]


def test_without_a_spec_check_looks_at_the_project_alone(tmp_path):
    with FakeServiceUsage() as usage, FakeIam(denied={"aiplatform.customJobs.list"}) as iam:
        settings = Settings(
            vertex_endpoint="http://127.0.0.1:9",
            serviceusage_endpoint=usage.url,
            iam_endpoint=iam.url,
            retry=FAST_RETRY,
            project="p",
            environ={"GOOGLE_CLOUD_PROJECT": "p"},
        )
        result = api.project_check(None, settings=settings)
    assert not result.ok
    rows = [(i.status, i.area, i.name) for i in result.items]
    assert rows == [
        ("OK", "credentials", "anonymous"),
        ("OK", "project", "p"),
        ("OK", "api", "aiplatform.googleapis.com"),
        ("OK", "api", "storage.googleapis.com"),
        ("OK", "api", "logging.googleapis.com"),
        ("OK", "permission", "projects/p"),
        ("FAIL", "permission", "aiplatform.customJobs.list"),
    ]
    assert result.items[1].detail == "from $GOOGLE_CLOUD_PROJECT"
    assert result.items[-1].fix == (
        "gcloud projects add-iam-policy-binding p --member=MEMBER --role=roles/aiplatform.user"
    )


def test_the_quota_and_the_resources_the_spec_names(fake, tmp_path):
    """An accelerator short of quota is a FAIL with the page to ask for more; a TensorBoard that
    does not exist is a FAIL; what check does not look up (a KMS key) is a WARN, never silence."""
    from vertex_trainer.emulators.quotas import FakeQuotas

    spec_text = """\
name: gpu-job
project: my-proj
region: us-central1
hardware: t4x1
image: {uri: us-docker.pkg.dev/my-proj/r/t:v1}
tensorboard: projects/my-proj/locations/us-central1/tensorboards/123
service_account: trainer@my-proj.iam.gserviceaccount.com
output_dir: gs://my-bucket/runs
encryption_key: projects/my-proj/locations/us-central1/keyRings/k/cryptoKeys/c
"""
    (tmp_path / "gpu.yaml").write_text(spec_text)
    with FakeServiceUsage() as usage, FakeIam() as iam, FakeQuotas() as quotas:
        quotas.set("aiplatform.googleapis.com/custom_model_training_nvidia_t4_gpus", "us-central1", 0)
        settings = Settings(
            vertex_endpoint=fake.url,
            serviceusage_endpoint=usage.url,
            iam_endpoint=iam.url,
            quotas_endpoint=quotas.url,
            retry=FAST_RETRY,
            project="my-proj",
        )
        spec = api.load_spec(tmp_path / "gpu.yaml", settings=settings)
        result = api.project_check(spec, settings=settings)
    by_name = {i.name: i for i in result.items}
    quota = by_name["custom_model_training_nvidia_t4_gpus in us-central1"]
    assert (
        quota.status == "FAIL" and "quota 0" in quota.detail and quota.fix.startswith("ask for more at http")
    )
    board = by_name["projects/my-proj/locations/us-central1/tensorboards/123"]
    assert (board.status, board.detail) == ("FAIL", "does not exist")
    key = by_name["encryption_key projects/my-proj/locations/us-central1/keyRings/k/cryptoKeys/c"]
    assert key.status == "WARN"
    assert "cloudquotas.googleapis.com" in by_name and not result.ok


def test_a_submit_denied_one_permission_names_the_others_it_would_meet(tmp_path):
    from vertex_trainer.api.project import after_denial

    (tmp_path / "job.yaml").write_text(
        "name: j\nproject: my-proj\nregion: us-central1\nhardware: cpu\n"
        "image: {uri: us-docker.pkg.dev/my-proj/r/t:v1}\n"
        "trainer: {model: tiny-cnn, train_data: gs://my-bucket/x, num_classes: 2}\n"
    )
    with FakeIam(denied={"aiplatform.customJobs.create", "logging.logEntries.list"}) as iam:
        settings = Settings(vertex_endpoint="http://127.0.0.1:9", iam_endpoint=iam.url, retry=FAST_RETRY)
        spec = api.load_spec(tmp_path / "job.yaml", settings=settings)
        client = ApiClient(iam.url, retry=FAST_RETRY)
        met = client.error(
            "create",
            "v1/x",
            ApiError(403, "PERMISSION_DENIED", "Permission 'aiplatform.customJobs.create' denied"),
        )
        told = after_denial(spec, met, settings=settings)
    assert isinstance(told, Denied) and told.exit_code == 2
    assert "permission aiplatform.customJobs.create denied" in told.message
    assert "also denied: logging.logEntries.list; `vertex-trainer check`" in told.message
