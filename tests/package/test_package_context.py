"""The build context and its content hash: deterministic, location-free, .dockerignore-aware."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

import pytest

from vertex_trainer import packaging as p
from vertex_trainer.errors import UserError


def plan(spec, trainer_dir, **kw):
    return p.plan_build(spec, trainer_dir=trainer_dir, **kw)


def test_hash_is_stable_twice_in_a_row(make_spec, trainer_dir):
    spec = make_spec(repository="us-central1-docker.pkg.dev/test-project/training/trainer")
    a, b = plan(spec, trainer_dir), plan(spec, trainer_dir)
    assert a.context_hash == b.context_hash and a.target == b.target
    assert a.target == f"us-central1-docker.pkg.dev/test-project/training/trainer:{a.tag}"
    assert len(a.tag) == 24 and a.context_hash == "sha256:" + a.context_hash[7:]


def test_hash_is_the_same_across_machines(make_spec, trainer_dir, tmp_path):
    """Another checkout: another absolute path, other mtimes, other umask -> same hash and bytes."""
    spec = make_spec()
    other = tmp_path / "elsewhere" / "deep" / "trainer_image"
    shutil.copytree(trainer_dir.parent, other)
    later = time.time() + 86400 * 365
    for root, _dirs, files in os.walk(other):
        for f in files:
            path = os.path.join(root, f)
            os.utime(path, (later, later))
            os.chmod(path, 0o600)  # a stricter umask; no exec bit change
    a, b = plan(spec, trainer_dir), plan(spec, other / "trainer")
    assert a.context_hash == b.context_hash
    assert p.archive_bytes(a, spec) == p.archive_bytes(b, spec)
    blob = p.archive_bytes(a, spec)
    assert str(trainer_dir).encode() not in gzip.decompress(blob)


def _golden_entries():
    from vertex_trainer.packaging.context import ContextEntry, entry_from_bytes

    return [
        entry_from_bytes("Dockerfile", b"FROM scratch\n"),
        entry_from_bytes("app/run.sh", b"#!/bin/sh\necho hi\n", 0o755),
        ContextEntry("app/link", 0, hashlib.sha256(b"run.sh").hexdigest(), 0o777, link="run.sh"),
    ]


def test_the_hash_and_archive_formats_are_frozen():
    """Every image tag ever pushed is this hash: a change here re-tags (and rebuilds) every
    trainer. The values were computed by the packager before it was split into modules."""
    from vertex_trainer.packaging.context import entry_from_bytes

    entries = _golden_entries()
    assert (
        p.hash_entries(entries) == "sha256:3992f927e9ad71a55da9ab1c6b206083dfb8d599ce20371bee7a85535a1e0128"
    )
    assert p.hash_entries(reversed(entries)) == p.hash_entries(entries)
    buf = io.BytesIO()
    p.write_archive(entries, buf, extra=[entry_from_bytes(p.SPEC_ENTRY, b"name: x\n")])
    assert (
        hashlib.sha256(gzip.decompress(buf.getvalue())).hexdigest()
        == "99dade31190c3d765d874e03137c93aa58634964d6fdd9298b5acd4a4546461b"
    )


def test_hash_changes_when_a_trainer_file_changes(make_spec, trainer_dir):
    spec = make_spec()
    before = plan(spec, trainer_dir).context_hash
    (trainer_dir / "data.py").write_text("BATCH = 64\n")
    after_edit = plan(spec, trainer_dir).context_hash
    (trainer_dir / "augment.py").write_text("FLIP = True\n")
    after_add = plan(spec, trainer_dir).context_hash
    (trainer_dir / "augment.py").chmod(0o755)
    after_chmod = plan(spec, trainer_dir).context_hash
    assert len({before, after_edit, after_add, after_chmod}) == 4


@pytest.mark.parametrize(
    "junk",
    [
        "__pycache__/task.cpython-311.pyc",
        "data.pyc",
        "service-account-key.json",
        ".env",
        ".env.local",
        "tests/test_task.py",
        "test_data.py",
        ".pytest_cache/v/cache",
        ".venv/bin/python",
        ".git/HEAD",
        "models/.ipynb_checkpoints/cnn-checkpoint.py",
        "secrets.pem",
    ],
)
def test_excluded_files_do_not_change_the_hash(make_spec, trainer_dir, junk):
    spec = make_spec()
    before = plan(spec, trainer_dir)
    path = trainer_dir / junk
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("anything\n")
    after = plan(spec, trainer_dir)
    assert after.context_hash == before.context_hash
    assert not any(junk.split("/")[-1] in e.name for e in after.entries)


def test_context_layout_and_archive(make_spec, trainer_dir):
    spec = make_spec()
    pl = plan(spec, trainer_dir)
    names = [e.name for e in pl.entries]
    assert names == sorted(names)
    assert names == [
        ".dockerignore",
        "Dockerfile",
        "trainer_image/requirements.txt",
        "trainer_image/trainer/__init__.py",
        "trainer_image/trainer/data.py",
        "trainer_image/trainer/models/__init__.py",
        "trainer_image/trainer/models/cnn.py",
        "trainer_image/trainer/task.py",
    ]
    blob = p.archive_bytes(pl, spec)
    assert blob[4:8] == b"\0\0\0\0", "gzip header must carry no timestamp"
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        members = tar.getmembers()
        files = {m.name: m for m in members if m.isfile()}
        assert set(files) == set(names) | {p.SPEC_ENTRY}
        assert all(m.mtime == p.FIXED_MTIME and m.uid == 0 and m.gid == 0 and m.uname == "" for m in members)
        assert all(m.mode in (0o644, 0o755) for m in files.values())
        saved = tar.extractfile(p.SPEC_ENTRY).read().decode()
        assert "name: pkg-test" in saved and "repository:" in saved
        assert tar.extractfile("Dockerfile").read().decode() == p.render_dockerfile("gpu")


def test_the_saved_spec_does_not_change_the_tag(make_spec, trainer_dir):
    a = make_spec()
    b = p.plan_build(make_spec(), trainer_dir=trainer_dir)
    c_spec = make_spec()
    c_spec = c_spec.model_copy(update={"name": "another-run", "labels": {"run": "2"}})
    assert plan(a, trainer_dir).context_hash == b.context_hash == plan(c_spec, trainer_dir).context_hash
    assert p.archive_bytes(b, a) != p.archive_bytes(b, c_spec)  # but each archive records its spec


def test_image_settings_change_the_tag(make_spec, trainer_dir):
    repo = "us-central1-docker.pkg.dev/test-project/training/trainer"
    tags = {
        plan(make_spec(repository=repo), trainer_dir).tag,
        plan(make_spec(repository=repo, variant="cpu"), trainer_dir).tag,
        plan(make_spec(repository=repo, pip_packages=["pandas==2.2.3"]), trainer_dir).tag,
        plan(make_spec(repository=repo, base_image_digest="sha256:" + "1" * 64), trainer_dir).tag,
    }
    assert len(tags) == 4


@pytest.mark.parametrize(
    "hardware,variant",
    [("cpu", "cpu"), ("t4x1", "gpu"), ("a100x8", "gpu"), ("tpu-v5e-8", "tpu"), ("tpu-v3-8", "tpu")],
)
def test_auto_variant_follows_the_hardware(make_spec, trainer_dir, hardware, variant):
    spec = make_spec(hardware=hardware, repository="us-docker.pkg.dev/p1234/r/trainer")
    assert p.resolve_variant(spec) == variant
    assert plan(spec, trainer_dir).variant == variant


def test_pip_packages_land_in_their_own_requirements_file(make_spec, trainer_dir):
    spec = make_spec(repository="us-docker.pkg.dev/p1234/r/trainer", pip_packages=["pandas==2.2.3", "scipy"])
    extra = {e.name: e for e in plan(spec, trainer_dir).entries}["trainer_image/requirements-extra.txt"]
    assert extra.read() == b"pandas==2.2.3\nscipy\n"


def test_custom_context_uses_its_own_dockerignore(make_spec, tmp_path):
    ctx = tmp_path / "ctx"
    (ctx / "src").mkdir(parents=True)
    (ctx / "Dockerfile").write_text("FROM python:3.11.13-slim-bookworm\nCOPY src/ /src/\n")
    (ctx / ".dockerignore").write_text("*.log\n!keep.log\n")
    (ctx / "src" / "main.py").write_text("print(1)\n")
    (ctx / "build.log").write_text("noise\n")
    (ctx / "keep.log").write_text("kept\n")
    spec = make_spec(repository="us-docker.pkg.dev/p1234/r/custom", context=str(ctx))
    first = p.plan_build(spec)
    assert [e.name for e in first.entries] == [".dockerignore", "Dockerfile", "keep.log", "src/main.py"]
    assert first.variant is None and first.source == str(ctx)
    (ctx / "build.log").write_text("more noise\n")
    (ctx / ".vertex-trainer").mkdir()
    (ctx / ".vertex-trainer" / "spec.yaml").write_text("old\n")
    assert p.plan_build(spec).context_hash == first.context_hash
    (ctx / "src" / "main.py").write_text("print(2)\n")
    assert p.plan_build(spec).context_hash != first.context_hash


def test_custom_context_without_dockerfile_is_a_user_error(make_spec, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError) as e:
        p.plan_build(make_spec(repository="us-docker.pkg.dev/p1234/r/x", context=str(tmp_path / "empty")))
    assert e.value.exit_code == 2 and "Dockerfile" in str(e.value)


def test_custom_context_refuses_bundled_only_settings(make_spec, tmp_path):
    with pytest.raises(UserError) as e:
        p.plan_build(
            make_spec(
                repository="us-docker.pkg.dev/p1234/r/x", context=str(tmp_path), pip_packages=["pandas"]
            )
        )
    assert "image.pip_packages" in str(e.value)


DOCKERIGNORE_CASES = [
    # (patterns, path, excluded?) -- Docker's semantics
    ("*", "a.txt", True),
    ("*", "dir/a.txt", True),  # a match on a parent dir counts
    ("*\n!dir/", "dir/a.txt", False),
    ("*\n!dir/\ndir/*.log", "dir/x.log", True),  # last match wins
    ("*.log\n!keep.log", "keep.log", False),
    ("*.log", "sub/x.log", False),  # * does not cross directories
    ("**/*.log", "sub/deeper/x.log", True),
    ("**/*.log", "x.log", True),  # **/ also matches zero directories
    ("/abs/path", "abs/path/file", True),  # leading slash is ignored
    ("dir/./sub/../x", "dir/x", True),  # patterns are cleaned
    ("# comment\n\n  spaced.txt  ", "spaced.txt", True),
    ("file?.txt", "file1.txt", True),
    ("file?.txt", "file12.txt", False),
    ("[a-c].txt", "b.txt", True),
    ("[!a-c].txt", "b.txt", False),
    ("**", "any/thing", True),
]


@pytest.mark.parametrize("patterns,path,excluded", DOCKERIGNORE_CASES)
def test_dockerignore_semantics(patterns, path, excluded):
    assert p.DockerIgnore(patterns).excluded(path) is excluded


def test_planning_is_offline_and_starts_no_process(make_spec, trainer_dir, no_network, monkeypatch):
    spec = make_spec()
    for i in range(40):  # a few dozen files
        (trainer_dir / f"module_{i}.py").write_text(f"VALUE = {i}\n" * 200)

    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    artifact = p.plan_artifact(spec, trainer_dir=trainer_dir)
    assert artifact.image_uri.endswith(":" + plan(spec, trainer_dir).tag)
    assert no_network == []


def test_planning_imports_no_http_or_cloud_library(trainer_dir, pk):
    """plan_artifact is what render and --dry-run pay for: no requests, google-auth, storage
    client or TensorFlow (the speed itself is measured in benchmarks/package_dry_run.py)."""
    code = (
        "import json, sys\n"
        "from vertex_trainer.spec import build_spec\n"
        "spec = build_spec(json.loads(sys.argv[1]))\n"
        "before = set(sys.modules)\n"
        "from vertex_trainer.packaging import plan_artifact\n"
        "plan_artifact(spec, trainer_dir=sys.argv[2])\n"
        "heavy = ('requests', 'urllib3', 'google.auth', 'google.cloud.storage', 'tensorflow')\n"
        "print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith(heavy))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(pk.spec_data()), str(trainer_dir)],
        capture_output=True,
        text=True,
        cwd=pk.REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_without_requirements_txt_the_trainer_extra_is_used(make_spec, trainer_dir):
    """An installed wheel carries no trainer_image/requirements.txt: the `trainer` extra of the
    vertex-trainer distribution stands in, without the TensorFlow family."""
    (trainer_dir.parent / "requirements.txt").unlink()
    entries = {e.name: e for e in plan(make_spec(), trainer_dir).entries}
    text = entries["trainer_image/requirements.txt"].read().decode()
    assert text.startswith("# generated from the vertex-trainer[trainer] extra")
    pins = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert any(ln.startswith("tensorboard") for ln in pins) and any(ln.startswith("Pillow") for ln in pins)
    assert not any(ln.startswith(("tensorflow", "tf-keras")) for ln in pins)
