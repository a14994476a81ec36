"""Secrets shown (issue 41 item 7, docs/security-notes/redaction.md): env values whose names look
secret, and the values of secret-looking flags, are `***` in everything the tool prints or saves
(dry runs as text and JSON, validate, a local run's records, the report page, the archive's spec
copy), while the job itself receives the real values (the body the fake Vertex AI is sent, a
local replica's environment and argv). And a credentials file that does not load is named with what is
wrong with it, not reported as "no credentials found ... set GOOGLE_APPLICATION_CREDENTIALS"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import cli_runner, latest_run, records
from vertex_trainer.redact import MASK, hidden, looks_secret, redact, redact_args, redact_yaml

SECRETS = {"API_KEY": "s3cr3t-1", "DB_PASSWORD": "s3cr3t-2", "MY_TOKEN": "s3cr3t-3"}
ENV = {**SECRETS, "KEYBOARD": "qwerty"}
ARGS = ["--api-key=s3cr3t-4"]
MASKED = ["--api-key", "API_KEY", "DB_PASSWORD", "MY_TOKEN"]  # as they come in the body
REPOSITORY = "us-central1-docker.pkg.dev/my-project-1/training/digits"  # (a local run builds nothing)

# The job's code (no TensorFlow): what it received, written where its model goes, and a
# metrics.json for the report.
TASK = """
import json, os, sys
model = os.environ["AIP_MODEL_DIR"].rstrip("/")
os.makedirs(model, exist_ok=True)
names = ("API_KEY", "DB_PASSWORD", "MY_TOKEN", "KEYBOARD")
json.dump({"env": {n: os.environ.get(n) for n in names}, "argv": sys.argv[1:]},
          open(os.path.join(model, "seen.json"), "w"))
json.dump({"eval_accuracy": 0.5}, open(os.path.join(os.path.dirname(model), "metrics.json"), "w"))
print("trained")
"""


def _spec(tmp_path: Path, **changes) -> Path:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "task.py").write_text(TASK)
    data = {
        "name": "digits",
        "hardware": "cpu",
        "image": {"code": str(code), "script": "task.py", "repository": REPOSITORY},
        "output_dir": str(tmp_path / "runs"),
        "env": ENV,
        "args": ARGS,
        **changes,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _cloud_spec(tmp_path: Path, **changes) -> Path:
    """The spec of a job on Vertex AI (a project, a region, a gs:// output_dir)."""
    return _spec(
        tmp_path, project="my-project-1", region="us-central1", output_dir="gs://out-bucket/runs", **changes
    )


def _shown(text: str) -> None:
    """Nothing secret in `text`; the value named like a secret but not one stays readable."""
    assert "s3cr3t" not in text, text
    assert "qwerty" in text and MASK in text, text


# -- the rule ----------------------------------------------------------------------------------


def test_names_that_look_secret_are_words_of_the_name_not_substrings():
    secret = [
        "API_KEY", "DB_PASSWORD", "MY_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN",
        "GITHUB_TOKEN", "DB_PWD", "SMTP_PASSWD", "MYSQL_PASS", "AZURE_STORAGE_SAS", "AZURE_CONN_STR",
        "DB_CONNECTION_STRING", "PRIVATE_KEY_PEM", "AUTH_HEADER", "SENTRY_DSN", "SLACK_WEBHOOK_URL",
        "GOOGLE_APPLICATION_CREDENTIALS", "apiKey", "APIKey", "GHTOKEN", "DBPASSWORD", "api-key",
        "db.password", "client_secret",
    ]  # fmt: skip
    visible = [
        "KEYBOARD", "MONKEY", "TF_CPP_MIN_LOG_LEVEL", "TOKENIZER_PATH", "MAX_TOKENS", "PWD",
        "PIN_MEMORY", "BATCH_SIZE", "PASSTHROUGH", "CUDA_VISIBLE_DEVICES", "KEYS_DIR_COUNT",
    ]  # fmt: skip
    assert [n for n in secret if not looks_secret(n)] == []
    assert [n for n in visible if looks_secret(n)] == []


def test_flags_and_assignments_named_like_secrets_have_their_values_masked():
    args = ["--api-key=a", "--token", "b", "--verbose", "--password", "--epochs=3", "DB_PASSWORD=c"]
    args += ["--out", "x", "db.password=d", "--db=postgres://me:pw@db/x", "--key"]
    found: list[str] = []
    assert redact_args(args, found) == [
        "--api-key=***", "--token", "***", "--verbose", "--password", "--epochs=3", "DB_PASSWORD=***",
        "--out", "x", "db.password=***", "--db=postgres://me:***@db/x", "--key",
    ]  # fmt: skip
    assert found == ["--api-key", "--token", "DB_PASSWORD", "db.password", "--db"]


def test_redact_copies_and_masks_every_env_and_args_of_any_body():
    body = {
        "jobSpec": {
            "workerPoolSpecs": [
                {"containerSpec": {"env": [{"name": n, "value": v} for n, v in ENV.items()], "args": ARGS}},
                {"pythonPackageSpec": {"env": [{"name": "HF_TOKEN", "value": "s3cr3t-5"}]}},
            ]
        },
        "env": dict(ENV),  # a spec's mapping
        "trainer": {"extra_args": ["--wandb-key", "s3cr3t-6"]},
        "worker_pool_specs": [{"container_spec": {"env": [{"name": "X_SECRET", "value": "s3cr3t-7"}]}}],
    }
    before = json.dumps(body)
    masked = redact(body)
    assert json.dumps(body) == before  # the original is untouched: it is what is sent
    _shown(json.dumps(masked))
    assert hidden(body) == (
        "API_KEY",
        "DB_PASSWORD",
        "MY_TOKEN",
        "--api-key",
        "HF_TOKEN",
        "--wandb-key",
        "X_SECRET",
    )
    text = yaml.safe_dump({"name": "x", "env": ENV}, sort_keys=False)
    assert yaml.safe_load(redact_yaml(text))["env"] == {**dict.fromkeys(SECRETS, MASK), "KEYBOARD": "qwerty"}
    plain = "name: x\nenv: {KEYBOARD: qwerty}\n"
    assert redact_yaml(plain) == plain  # nothing masked: the text as it was


# -- what is printed ---------------------------------------------------------------------------


def test_a_local_dry_run_and_validate_show_no_secret(tmp_path):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    spec = _spec(tmp_path)
    text = run("submit", spec, "--local", "--dry-run")
    assert text.returncode == 0, text.stderr
    _shown(text.stdout)
    assert f"# values that look secret are shown as *** ({', '.join(MASKED)})" in text.stdout
    dry = run("submit", spec, "--local", "--dry-run", "--output", "json")
    assert dry.returncode == 0, dry.stderr
    _shown(dry.stdout)
    out = json.loads(dry.stdout)
    assert out["redacted"] == MASKED
    pool = out["requests"][0]["body"]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert pool["args"] == ["--api-key=***"]
    assert {e["name"]: e["value"] for e in pool["env"]} == {
        **dict.fromkeys(SECRETS, MASK),
        "KEYBOARD": "qwerty",
    }
    checked = run("validate", spec, "--local")
    assert checked.returncode == 0, checked.stderr
    assert "s3cr3t" not in checked.stdout + checked.stderr and "--api-key=***" in checked.stdout
    assert not (tmp_path / "runs").exists()  # a dry run and validate run nothing


def test_a_cloud_dry_run_shows_no_secret_and_the_api_keeps_what_it_would_send(tmp_path):
    from vertex_trainer import api

    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    spec = _cloud_spec(tmp_path)
    for output in ("text", "json"):
        dry = run("submit", spec, "--dry-run", "--output", output)
        assert dry.returncode == 0, dry.stderr
        _shown(dry.stdout + dry.stderr)
    # The DryRun object holds what submit would send (a program may send it): the real values.
    dry_run = api.submit(api.load_spec(str(spec)), dry_run=True)
    sent = json.dumps(dry_run.requests)
    assert all(v in sent for v in SECRETS.values()) and "s3cr3t-4" in sent
    assert "s3cr3t" not in json.dumps(dry_run.to_dict())
    # render prints the body you send yourself (gcloud ai custom-jobs create): exact.
    rendered = run("render", spec, "--format", "json")
    assert rendered.returncode == 0, rendered.stderr
    assert all(v in rendered.stdout for v in SECRETS.values())


def test_a_pipeline_dry_run_shows_no_secret(tmp_path):
    """The PipelineJob carries the training step's worker pools (proto field names) in its
    compiled spec: masked there too."""
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    spec = _cloud_spec(tmp_path, image={"uri": "us-docker.pkg.dev/my-project-1/t/d:v1"}, deploy={})
    for output in ("text", "json"):
        dry = run("pipeline", "submit", spec, "--dry-run", "--output", output)
        assert dry.returncode == 0, dry.stderr
        _shown(dry.stdout)
    assert json.loads(dry.stdout)["redacted"] == MASKED


# -- what is run, saved and reported ------------------------------------------------------------


def test_a_local_run_receives_the_real_values_and_saves_and_reports_none(tmp_path):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    spec = _spec(tmp_path)
    result = run("submit", spec, "--local")
    assert result.returncode == 0, result.stderr
    assert "s3cr3t" not in result.stdout + result.stderr
    folder = latest_run(tmp_path / "runs")
    seen = json.loads((folder / "model" / "seen.json").read_text())
    assert seen == {"env": ENV, "argv": ARGS}  # the replica got the real values
    kept = records(folder)
    for name in ("custom_job.json", "spec.yaml"):
        _shown((kept / name).read_text())
    assert yaml.safe_load((kept / "spec.yaml").read_text())["env"]["API_KEY"] == MASK
    page = tmp_path / "report.html"
    shown = run("report", folder, "-o", page)
    assert shown.returncode == 0, shown.stderr
    _shown(page.read_text())


def test_the_report_masks_a_record_written_before_redaction(tmp_path):
    """A run recorded by an earlier version (or a cloud job's CustomJob, read from Vertex AI)
    holds the values: the page masks them as it shows them."""
    from vertex_trainer.reporting import page as report_page
    from vertex_trainer.reporting.run_data import RunData

    env = [{"name": "API_KEY", "value": "s3cr3t-1"}, {"name": "KEYBOARD", "value": "qwerty"}]
    job = {"jobSpec": {"workerPoolSpecs": [{"containerSpec": {"env": env}}]}}
    data = RunData(source="x", name="x", spec_yaml=yaml.safe_dump({"name": "x", "env": ENV}), custom_job=job)
    _shown(report_page.html(data))


@pytest.mark.wire
def test_the_job_on_vertex_ai_receives_the_real_values(fake, tmp_path):
    run = cli_runner(edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url), cwd=tmp_path)
    spec = _cloud_spec(tmp_path, image={"uri": "us-docker.pkg.dev/my-project-1/t/d:v1"})
    for output in ("text", "json"):
        created = run("submit", spec, "--output", output, "--idempotency-key", f"k-{output}")
        assert created.returncode == 0, created.stderr
        assert "s3cr3t" not in created.stdout + created.stderr
    body = fake.calls("create")[0].body
    container = body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert {e["name"]: e["value"] for e in container["env"]} == ENV and container["args"] == ARGS


def test_the_archives_spec_copy_masks_and_the_job_keeps_its_values(tmp_path):
    """The resolved spec that rides along in the uploaded archive (`.vertex-trainer/spec.yaml`,
    docs/packager.md)."""
    import io
    import tarfile

    from vertex_trainer import api
    from vertex_trainer.packaging import SPEC_ENTRY, BuildPlan, archive_bytes

    spec = api.load_spec(str(_spec(tmp_path)))
    plan = BuildPlan(kind="image", entries=(), context_hash="sha256:" + "0" * 64, target="t", source="s")
    with tarfile.open(fileobj=io.BytesIO(archive_bytes(plan, spec))) as archive:
        member = archive.extractfile(SPEC_ENTRY)
        assert member is not None
        _shown(member.read().decode())
    assert spec.env == ENV  # the spec itself (and so the job) keeps them


# -- the credentials message -------------------------------------------------------------------


def _credentials_error(tmp_path: Path, **env: str):
    """`status` of a job on Vertex AI itself (no emulator): it needs credentials first."""
    run = cli_runner(edge_env(tmp_path, **env), cwd=tmp_path)
    result = run("status", "projects/p/locations/us-central1/customJobs/1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


@pytest.mark.parametrize(
    ("content", "wrong"),
    [
        (None, "no such file"),
        ("dir", "is a directory, not a credentials file"),
        ("{not json", "is not JSON"),
        ("[1, 2]", "holds a JSON array, not a credentials object"),
        ('{"client_email": "a@b"}', 'has no "type"'),
        ('{"type": "magic"}', "\"type\": \"magic\" is not a kind of credentials google-auth knows"),
        ('{"type": "service_account"}', "is not valid service_account credentials"),
    ],
)
def test_a_credentials_file_that_does_not_load_is_named_with_what_is_wrong(tmp_path, content, wrong):
    path = tmp_path / "key.json"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    err = _credentials_error(tmp_path, GOOGLE_APPLICATION_CREDENTIALS=str(path))
    first = err.splitlines()[0]
    assert first.startswith(f"error: GOOGLE_APPLICATION_CREDENTIALS={path}: {wrong}"), err
    assert "no Google Cloud credentials found" not in err and "nothing was sent" in first
    assert "hint: " in err and "unset GOOGLE_APPLICATION_CREDENTIALS" in err


def test_a_junk_gcloud_credentials_file_is_named_too(tmp_path):
    config = tmp_path / "gcloud-config"
    config.mkdir()
    adc = config / "application_default_credentials.json"
    adc.write_text("junk")
    err = _credentials_error(tmp_path)
    assert err.splitlines()[0].startswith(
        f"error: gcloud's Application Default Credentials file {adc}: is not JSON"
    )
    assert "gcloud auth application-default login" in err


def test_no_credentials_at_all_still_says_how_to_log_in(tmp_path):
    err = _credentials_error(tmp_path)
    assert err.splitlines()[0].startswith("error: no Google Cloud credentials found"), err
