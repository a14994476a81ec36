"""Cloud Build and the registry check, over loopback: the staging upload lands in
gcp-storage-emulator, the create-build request reaches the fake Cloud Build REST API through the
packager's real HTTP client, and a successful build's tag is found (and reused) next time."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from vertex_trainer import packaging as p
from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.settings import Settings

pytestmark = pytest.mark.wire


def test_build_uploads_the_context_and_sends_the_tag(
    make_spec, trainer_dir, cloudbuild, storage, registry, log, pk, settings
):
    spec = make_spec()
    result = p.ensure_artifact(spec, settings=settings, log=log, trainer_dir=trainer_dir)
    plan = p.plan_build(spec, trainer_dir=trainer_dir)

    assert (result.action, result.built, result.pushed) == ("built", True, True)
    assert result.image == plan.target == f"{pk.REPOSITORY}:{plan.tag}"
    assert result.artifact.image_uri == result.image and result.artifact.package_uris == ()

    # The staging upload is in the emulator: <output_dir>/staging/contexts/<tag>.tar.gz
    obj = f"runs/pkg-test/staging/contexts/{plan.tag}.tar.gz"
    assert result.source_uri == f"gs://{pk.BUCKET}/{obj}"
    uploaded = storage.bucket(pk.BUCKET).blob(obj).download_as_bytes()
    assert uploaded == p.archive_bytes(plan, spec)

    # One create request, carrying that object and the content-hash tag.
    (create,) = cloudbuild.creates
    assert create.path == f"/v1/projects/{pk.PROJECT}/locations/{pk.REGION}/builds"
    body = create.body
    assert body["source"] == {"storageSource": {"bucket": pk.BUCKET, "object": obj}}
    assert body["images"] == [result.image]
    assert body["steps"] == [
        {
            "name": "gcr.io/cloud-builders/docker",
            "args": ["build", "--platform", "linux/amd64", "--tag", result.image, "."],
        }
    ]
    assert body["timeout"] == "3600s"
    # The fake fetched the very bytes that were uploaded, and found the Dockerfile in them.
    (fetched,) = cloudbuild.sources.values()
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(fetched))) as tar:
        assert tar.extractfile("Dockerfile").read().decode() == p.render_dockerfile("gpu")

    # Progress was shown, and the log URL reported.
    assert result.log_url and result.log_url.startswith("https://console.cloud.google.com/cloud-build/builds")
    text = "\n".join(log)
    for needle in ("uploading the context", "created", "QUEUED", "WORKING (step 1/1", "SUCCESS"):
        assert needle in text
    assert registry.has(result.image)


def test_the_request_is_a_valid_cloudbuild_v1_build(make_spec, trainer_dir, cloudbuild, settings):
    from google.cloud.devtools import cloudbuild_v1  # the dev extra (pyproject.toml), never skipped

    p.ensure_artifact(make_spec(), settings=settings, trainer_dir=trainer_dir)
    body = cloudbuild.creates[0].body
    # Strict parse: an unknown or misspelled field raises.
    build = cloudbuild_v1.Build.from_json(json.dumps(body), ignore_unknown_fields=False)
    assert build.source.storage_source.object_.endswith(".tar.gz")
    assert list(build.images) == body["images"]
    assert build.timeout.total_seconds() == 3600


def test_an_existing_tag_is_reused_nothing_built_or_uploaded(
    make_spec, trainer_dir, cloudbuild, storage, log, settings
):
    spec = make_spec()
    first = p.ensure_artifact(spec, settings=settings, trainer_dir=trainer_dir)
    objects_before = sorted(b.name for b in storage.list_blobs("test-staging"))
    second = p.ensure_artifact(spec, settings=settings, log=log, trainer_dir=trainer_dir)
    assert (second.action, second.built, second.pushed) == ("reused", False, False)
    assert second.image == first.image and second.reused
    assert len(cloudbuild.creates) == 1
    assert sorted(b.name for b in storage.list_blobs("test-staging")) == objects_before
    assert "reused" in second.summary() and any("exists" in line for line in log)
    assert {k: second.to_json()[k] for k in ("image", "built", "pushed", "context_hash")} == {
        "image": first.image,
        "built": False,
        "pushed": False,
        "context_hash": first.context_hash,
    }


def test_a_trainer_change_builds_a_new_tag(make_spec, trainer_dir, cloudbuild, settings):
    spec = make_spec()
    first = p.ensure_artifact(spec, settings=settings, trainer_dir=trainer_dir)
    (trainer_dir / "task.py").write_text("print('v2')\n")
    second = p.ensure_artifact(spec, settings=settings, trainer_dir=trainer_dir)
    assert second.built and second.image != first.image
    assert [c.body["images"][0] for c in cloudbuild.creates] == [first.image, second.image]


def test_a_failed_build_is_exit_3_with_the_log_url(make_spec, trainer_dir, cloudbuild, registry, settings):
    cloudbuild.fail_with = "step 0: pip install exited 1"
    with pytest.raises(p.BuildFailed) as e:
        p.ensure_artifact(make_spec(), settings=settings, trainer_dir=trainer_dir)
    assert e.value.exit_code == 3
    assert "FAILURE" in str(e.value) and "pip install exited 1" in str(e.value)
    assert "https://console.cloud.google.com/cloud-build/builds" in e.value.hint
    assert registry.manifests == {}


def test_custom_context_builds_through_cloud_build(make_spec, tmp_path, cloudbuild, pk, settings):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM python:3.11.13-slim-bookworm\n")
    spec = make_spec(repository=f"{pk.REPOSITORY}-custom", context=str(ctx))
    result = p.ensure_artifact(spec, settings=settings)
    assert result.built and result.image.startswith(f"{pk.REPOSITORY}-custom:")
    names = tarfile.open(
        fileobj=io.BytesIO(gzip.decompress(next(iter(cloudbuild.sources.values()))))
    ).getnames()
    assert sorted(names) == [".vertex-trainer", ".vertex-trainer/spec.yaml", "Dockerfile"]


def test_missing_staging_bucket_is_a_service_error(make_spec, trainer_dir, cloudbuild, settings):
    spec = make_spec(
        repository="us-central1-docker.pkg.dev/test-project/training/trainer",
        staging_bucket="gs://no-such-bucket/x",
    )
    with pytest.raises(ServiceError) as e:
        p.ensure_artifact(spec, settings=settings, trainer_dir=trainer_dir)
    assert "no-such-bucket" in str(e.value) and e.value.exit_code == 3
    assert cloudbuild.creates == []


def test_cloud_build_needs_a_staging_location(make_spec, trainer_dir, cloudbuild, settings):
    data_spec = make_spec().model_copy(update={"output_dir": "/tmp/local-out"})
    with pytest.raises(UserError) as e:
        p.ensure_artifact(data_spec, settings=settings, trainer_dir=trainer_dir)
    assert "image.staging_bucket" in str(e.value) and e.value.exit_code == 2
    assert cloudbuild.requests == []


def test_dry_run_touches_nothing(make_spec, trainer_dir, no_network):
    result = p.ensure_artifact(make_spec(), settings=Settings(), dry_run=True, trainer_dir=trainer_dir)
    assert result.action == "planned" and not result.built and not result.pushed
    out = result.to_json()
    assert out["dry_run"] is True and out["builder"] == "cloud-build"
    assert [f["path"] for f in out["files"]][:2] == [".dockerignore", "Dockerfile"]
    assert out["size"] == sum(f["size"] for f in out["files"])
    assert no_network == []


# -- the registry check ---------------------------------------------------------------------


def test_registry_check_head_manifest(registry, settings):
    image = "us-central1-docker.pkg.dev/test-project/training/trainer:abc123"
    assert p.registry_tag_exists(image, settings=settings) is False
    registry.add(image)
    assert p.registry_tag_exists(image, settings=settings) is True
    heads = [r for r in registry.requests if r.method == "HEAD"]
    assert heads[-1].path == "/v2/test-project/training/trainer/manifests/abc123"
    assert "application/vnd.oci.image.index.v1+json" in heads[-1].headers["Accept"]


def test_registry_token_challenge_is_answered(registry, settings):
    registry.token = "registry-scoped-token"
    image = "us-central1-docker.pkg.dev/test-project/training/trainer:abc123"
    registry.add(image)
    assert p.registry_tag_exists(image, settings=settings, token="oauth-access-token") is True
    token_calls = [r for r in registry.requests if r.path.startswith("/v2/token")]
    assert (
        len(token_calls) == 1
        and "scope=repository%3Atest-project%2Ftraining%2Ftrainer%3Apull" in token_calls[0].path
    )
    assert registry.requests[-1].headers["Authorization"] == "Bearer registry-scoped-token"


def test_registry_refusal_is_a_service_error(registry, settings):
    registry.token, registry.access_token = "registry-scoped-token", "good-oauth-token"
    with pytest.raises(ServiceError) as e:
        p.registry_tag_exists(
            "us-central1-docker.pkg.dev/test-project/training/trainer:x", settings=settings, token="bad"
        )
    assert "refused" in str(e.value) and "artifactregistry.reader" in e.value.hint


# -- transient failures: one retry policy (gcp.http) for every GET, never for the create --------


def test_a_408_from_the_registry_is_retried(registry, settings, log):
    image = "us-central1-docker.pkg.dev/test-project/training/trainer:abc123"
    registry.add(image)
    registry.inject(408, method="HEAD")
    assert p.registry_tag_exists(image, settings=settings, log=log) is True
    heads = [r for r in registry.requests if r.method == "HEAD"]
    assert len(heads) == 2 and registry.faults == []
    assert any("408" in line and "retrying" in line for line in log)


def test_a_registry_that_stays_unavailable_is_exit_3(registry, settings):
    registry.inject(503, times=10, method="HEAD")
    with pytest.raises(ServiceError) as e:
        p.registry_tag_exists(
            "us-central1-docker.pkg.dev/test-project/training/trainer:abc123", settings=settings
        )
    assert e.value.exit_code == 3 and "after 4 attempts" in str(e.value)
    assert len([r for r in registry.requests if r.method == "HEAD"]) == settings.retry.attempts


def test_a_408_while_following_the_build_is_retried(make_spec, trainer_dir, cloudbuild, settings, log):
    cloudbuild.inject(408, method="GET")
    result = p.ensure_artifact(make_spec(), settings=settings, log=log, trainer_dir=trainer_dir)
    assert result.built and len(cloudbuild.creates) == 1 and cloudbuild.faults == []
    (build,) = cloudbuild.builds.values()
    assert build["status"] == "SUCCESS"
    assert any("following build" in line and "408" in line and "retrying" in line for line in log)


def test_a_transient_failure_of_the_create_is_not_retried(make_spec, trainer_dir, cloudbuild, settings):
    """A second POST could start a second build: the create is sent exactly once."""
    cloudbuild.inject(503, method="POST")
    with pytest.raises(ServiceError) as e:
        p.ensure_artifact(make_spec(), settings=settings, trainer_dir=trainer_dir)
    assert e.value.exit_code == 3 and "1 attempt" in str(e.value)
    assert len(cloudbuild.creates) == 1 and cloudbuild.builds == {}


def test_a_refused_create_names_the_role(make_spec, trainer_dir, cloudbuild, settings):
    cloudbuild.inject(403, method="POST")
    with pytest.raises(ServiceError) as e:
        p.ensure_artifact(make_spec(), settings=settings, trainer_dir=trainer_dir)
    assert "refused the build (HTTP 403)" in str(e.value)
    assert "roles/cloudbuild.builds.editor" in e.value.hint
    assert len(cloudbuild.creates) == 1


def test_submit_packages_first_then_submits_that_tag(
    tmp_path, pk, storage, cloudbuild, registry, edge_env, monkeypatch, capsys
):
    """`vertex-trainer submit` on a spec that names image.repository: build, then create the job
    with that exact tag; the second submit reuses the image and says so."""
    from vertex_trainer import cli
    from vertex_trainer.emulators.vertex import FakeVertex

    # A cloud submit checks that train_data matches an object before it builds (preflight.check_data).
    storage.bucket(pk.BUCKET).blob("data/train-00000-of-00001").upload_from_string(b"records")

    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM python:3.11.13-slim-bookworm\nCOPY app.py /app.py\n")
    (ctx / "app.py").write_text("print('hi')\n")
    spec = tmp_path / "job.yaml"
    import yaml

    spec.write_text(yaml.safe_dump(pk.spec_data(repository=pk.REPOSITORY, context=str(ctx))))

    def submit():
        try:
            cli.main(["submit", str(spec), "--output", "json"])
        except SystemExit as exc:
            assert exc.code in (0, None)
        return capsys.readouterr()

    with FakeVertex() as vertex:
        monkeypatch.setenv("VERTEX_TRAINER_API_ENDPOINT", vertex.url)
        out1, err1 = submit()
        out2, err2 = submit()
        images = [
            job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] for job in vertex.jobs.values()
        ]
    first, second = json.loads(out1), json.loads(out2)
    (create,) = cloudbuild.creates
    tag = create.body["images"][0]
    assert first["image"] == second["image"] == tag and tag.startswith(pk.REPOSITORY + ":")
    assert images == [tag, tag]
    assert "built and pushed with cloud-build" in err1
    assert "reused: already in the registry" in err2
