"""A careless user points the tool at a local stand-in without the scheme (issue 42, A1):
`VERTEX_TRAINER_API_ENDPOINT=localhost:8080` (or 127.0.0.1:PORT, as an emulator prints it
elsewhere). It was taken for a Google endpoint: the command asked for Google Cloud credentials
("no Google Cloud credentials found"), or with credentials would send them on, as if no stand-in
had been named. Now every endpoint variable must be an http:// or https:// URL: exit 2 naming the
variable, its value and the fix, before anything is read or sent.
"""

from __future__ import annotations

import pytest

from tests.cli_support import edge_env, invoke
from vertex_trainer.errors import UserError
from vertex_trainer.settings import Settings

ENDPOINTS = (
    "VERTEX_TRAINER_API_ENDPOINT",
    "VERTEX_TRAINER_LOGGING_ENDPOINT",
    "VERTEX_TRAINER_CLOUDBUILD_ENDPOINT",
    "VERTEX_TRAINER_REGISTRY_ENDPOINT",
    "VERTEX_TRAINER_QUOTAS_ENDPOINT",
    "VERTEX_TRAINER_BILLING_ENDPOINT",
    "VERTEX_TRAINER_SERVICEUSAGE_ENDPOINT",
    "VERTEX_TRAINER_IAM_ENDPOINT",
    "VERTEX_TRAINER_MONITORING_ENDPOINT",
)


def test_an_endpoint_without_its_scheme_is_exit_2_naming_it(tmp_path):
    env = edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT="localhost:8080")
    done = invoke(["status", "projects/p/locations/us-central1/customJobs/1"], env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stdout == ""
    assert "$VERTEX_TRAINER_API_ENDPOINT='localhost:8080' is not a URL" in done.stderr
    assert "hint: e.g. VERTEX_TRAINER_API_ENDPOINT=http://localhost:8080" in done.stderr
    assert "credentials" not in done.stderr.replace("no credentials", "")


@pytest.mark.parametrize("name", ENDPOINTS)
def test_each_endpoint_variable_is_checked_and_urls_pass(name):
    with pytest.raises(UserError) as refused:
        Settings.from_environ({name: "127.0.0.1:9"})
    assert f"${name}='127.0.0.1:9' is not a URL" in refused.value.message
    for url in ("http://127.0.0.1:9", "https://example.test/"):
        assert Settings.from_environ({name: url}) is not None
    assert (
        Settings.from_environ({"STORAGE_EMULATOR_HOST": "127.0.0.1:9"}).storage_url() == "http://127.0.0.1:9"
    )
