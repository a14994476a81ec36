"""What leaves this machine, over loopback (issue 41, area B): the context uploaded to the staging
bucket and fetched by the fake Cloud Build, and the sdist staged for a python_package job, hold no
credential of the code folder; the build says which stayed out. A folder without such files keeps
the content hash (and so the image tag) it had before the screen existed (packaging/screen.py)."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from vertex_trainer import packaging as p
from vertex_trainer.packaging import owncode
from vertex_trainer.packaging.context import hash_entries
from vertex_trainer.spec import build_spec

pytestmark = pytest.mark.wire

PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    + "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" * 2
    + "\n-----END PRIVATE KEY-----\n"
)
SECRETS = (".env", "sa-key.json", ".ssh/id_rsa", "server.pem", ".git/config")


def _folder(root: Path) -> Path:
    """A code folder with a script, its helper, and the usual secrets beside them."""
    code = root / "code"
    (code / ".ssh").mkdir(parents=True)
    (code / ".git").mkdir()
    (code / "task.py").write_text("import helper\nprint(helper.X)\n")
    (code / "helper.py").write_text("X = 1\n")
    (code / ".env").write_text("API_TOKEN=abc123\n")
    key = {"type": "service_account", "private_key": PEM, "client_email": "a@p.iam.gserviceaccount.com"}
    (code / "sa-key.json").write_text(json.dumps(key))
    (code / ".ssh" / "id_rsa").write_text(PEM)
    (code / "server.pem").write_text(PEM)
    (code / ".git" / "config").write_text("[core]\n")
    return code


def _spec(code: Path, pk, **image):
    data = {
        "name": "own",
        "project": pk.PROJECT,
        "region": pk.REGION,
        "hardware": "cpu",
        "image": {"code": str(code), "script": "task.py", "repository": pk.REPOSITORY, **image},
        "output_dir": f"gs://{pk.BUCKET}/runs/own",
    }
    return build_spec(data)


def _members(archive: bytes) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(archive))) as tar:
        return {m.name for m in tar.getmembers() if m.isfile()}


def test_the_uploaded_context_holds_no_secret(tmp_path, cloudbuild, storage, log, pk, settings):
    spec = _spec(_folder(tmp_path), pk)
    result = p.ensure_artifact(spec, settings=settings, log=log)
    assert result.action == "built"
    uploaded = storage.bucket(pk.BUCKET).blob(result.source_uri.split("/", 3)[3]).download_as_bytes()
    (fetched,) = cloudbuild.sources.values()  # what the builder got is what was uploaded
    assert fetched == uploaded
    names = _members(uploaded)
    assert {"Dockerfile", "code/task.py", "code/helper.py"} <= names
    assert not {f"code/{s}" for s in SECRETS} & names
    said = "\n".join(log)
    assert "left out of image.code as credentials: .env, .ssh/, sa-key.json, server.pem" in said


def test_the_staged_sdist_holds_no_secret(tmp_path, storage, pk, settings):
    spec = _spec(_folder(tmp_path), pk, repository=None, python_package=True)
    result = p.ensure_artifact(spec, settings=settings)
    bucket, obj = result.artifact.package_uris[0][len("gs://") :].split("/", 1)
    names = _members(storage.bucket(bucket).blob(obj).download_as_bytes())
    top = "vertex_trainer_code-1.0/vertex_trainer_script/code/"
    assert {top + "task.py", top + "helper.py"} <= names
    assert not {top + s for s in SECRETS} & names


def test_a_folder_without_secrets_keeps_its_hash(tmp_path, pk):
    """The golden was computed by the packager before the screen (commit f27309a): a folder that
    holds nothing the screen leaves out keeps its tag, and adding secrets beside it changes nothing."""
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / ".github").mkdir()
    (code / "task.py").write_text("import helper\nprint(helper.X)\n")
    (code / "task.py").chmod(0o755)
    (code / "helper.py").write_text("X = 1\n")
    (code / "requirements.txt").write_text("PyYAML>=6\n")
    (code / "pkg" / "__init__.py").write_text("")
    (code / "pkg" / "config.json").write_text('{"layers": 3}\n')
    (code / ".github" / "ci.yml").write_text("name: ci\n")
    (code / ".dockerignore").write_text("notes.txt\n")
    (code / "notes.txt").write_text("x\n")
    spec = _spec(code, pk)
    golden = "sha256:a89799a3f8048307ba8ba4124893af2a8b9c1944d7047d19c16e79b0561066e5"
    assert hash_entries(owncode.code_entries(spec, code, prefix="code/")) == golden
    before = p.plan_build(spec).context_hash
    (code / ".env").write_text("A=1\n")
    (code / "__pycache__").mkdir()
    (code / "__pycache__" / "helper.cpython-311.pyc").write_bytes(b"x")
    assert hash_entries(owncode.code_entries(spec, code, prefix="code/")) == golden
    assert p.plan_build(spec).context_hash == before
