"""`trigger render` and `trigger deploy --dry-run`: the function directory (resolved spec, image
pinned, requirements that cover what the function imports) and the gcloud commands."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.trigger.conftest import BUCKET, DEPLOY, SPEC, function_env, write_spec
from vertex_trainer import api
from vertex_trainer.errors import SpecError, UserError
from vertex_trainer.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
BUILDS = SPEC.replace(
    "image:\n  uri: us-central1-docker.pkg.dev/test-project/training/trainer:v1",
    "image:\n  repository: us-central1-docker.pkg.dev/test-project/training/trainer",
)


def render(tmp_path: Path, text: str = BUILDS + DEPLOY, **options) -> tuple[Path, dict, list[str]]:
    logged: list[str] = []
    out = tmp_path / "function"
    result = api.trigger_render(
        write_spec(tmp_path / "spec", text),
        out,
        bucket=BUCKET,
        prefix="datasets/",
        settings=Settings(),
        log=logged.append,
        **options,
    )
    return out, result, logged


def test_render_writes_a_deployable_function_with_the_image_pinned(tmp_path):
    out, result, logged = render(
        tmp_path,
        BUILDS.replace("labels: {team: vision}", 'labels: {team: vision, run: "{{ run }}"}') + DEPLOY,
        vars={"run": "7"},
        sets=("trainer.epochs=3",),
    )
    assert {
        "main.py",
        "requirements.txt",
        "spec.yaml",
        "trigger.json",
        "deploy.sh",
        "vertex_trainer/api/core.py",
        "vertex_trainer/templates/trigger_main.py.j2",
        "trainer/flags.py",
    } <= set(result["files"])
    assert not any(
        f.startswith(("vertex_trainer/cli/", "vertex_trainer/emulators/")) or "__pycache__" in f
        for f in result["files"]
    )

    spec = yaml.safe_load((out / "spec.yaml").read_text())
    tag = result["image"]
    assert spec["image"] == {"uri": tag} and tag.startswith(
        "us-central1-docker.pkg.dev/test-project/training/trainer:"
    )  # the content-hash tag, pinned
    assert spec["trainer"]["train_data"] == "{{ trigger.folder }}/train-*"  # for the event
    assert spec["trainer"]["epochs"] == 3 and spec["labels"]["run"] == "7"  # --set and --var: now
    assert "build it once" in " ".join(logged)

    config = json.loads((out / "trigger.json").read_text())
    assert (config["bucket"], config["prefix"], config["marker"], config["pipeline"]) == (
        BUCKET,
        "datasets/",
        "_SUCCESS",
        True,
    )
    requirements = (out / "requirements.txt").read_text()
    for name in ("functions-framework", "pydantic", "kfp", "google-cloud-pipeline-components"):
        assert f"{name}=={importlib.metadata.version(name)}" in requirements

    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    render(
        tmp_path,
        BUILDS.replace("labels: {team: vision}", 'labels: {team: vision, run: "{{ run }}"}') + DEPLOY,
        vars={"run": "7"},
        sets=("trainer.epochs=3",),
    )
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # same bytes again


def test_a_spec_without_deploy_needs_no_pipeline_packages(tmp_path):
    out, result, _logged = render(tmp_path, SPEC)
    assert result["pipeline"] is False
    assert "kfp" not in (out / "requirements.txt").read_text()


def test_a_spec_that_ignores_the_event_is_rendered_with_warnings(tmp_path):
    fixed = SPEC.replace('"{{ trigger.folder }}/train-*"', "gs://data-bucket/fixed/train-*").replace(
        '"gs://out-bucket/runs/{{ trigger.folder_name }}-{{ trigger.generation }}"', "gs://out-bucket/runs/x"
    )
    _, result, _logged = render(tmp_path, fixed)
    # each run has its own folder below output_dir (docs/contract.md section 15): no warning for it
    assert not any("output_dir" in w for w in result["warnings"])
    assert any("every run reads the same data" in w for w in result["warnings"])
    _, result, _logged = render(tmp_path / "fixed", fixed + "fixed_output_dir: true\n")
    assert any("every run writes to the same directory" in w for w in result["warnings"])


def test_a_spec_a_marker_would_make_invalid_fails_at_render(tmp_path):
    with pytest.raises(SpecError, match=r"^name"):
        render(tmp_path, SPEC.replace("name: digits", 'name: "{{ trigger.folder }}"'))


def test_a_python_package_spec_is_refused(tmp_path):
    text = SPEC.replace(
        "image:\n  uri: us-central1-docker.pkg.dev/test-project/training/trainer:v1",
        "image:\n  python_package: true\n  staging_bucket: gs://out-bucket/staging",
    )
    with pytest.raises(UserError, match="needs a container image"):
        render(tmp_path, text)


def test_trigger_variables_elsewhere_are_an_error_that_says_where_they_come_from(tmp_path):
    path = write_spec(tmp_path, SPEC)
    with pytest.raises(SpecError, match="trigger render"):
        api.load_spec(path, settings=Settings())


def test_an_unrelated_directory_is_never_overwritten(tmp_path):
    (tmp_path / "function").mkdir()
    (tmp_path / "function" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        render(tmp_path, SPEC)


def test_deploy_dry_run_prints_the_gcloud_commands_and_touches_nothing(tmp_path):
    plan = api.trigger_deploy(
        write_spec(tmp_path, SPEC + DEPLOY),
        bucket=BUCKET,
        prefix="datasets/",
        dry_run=True,
        trigger_location="us",
        settings=Settings(),
        log=lambda _: None,
    )
    script = plan["script"]
    assert not (tmp_path / "FUNCTION_DIR").exists()
    deploy_line = next(line for line in script.splitlines() if line.startswith("gcloud functions deploy"))
    for flag in (
        "--gen2",
        "--retry",
        "--no-allow-unauthenticated",
        "--trigger-location=us",
        "--trigger-event-filters=type=google.cloud.storage.object.v1.finalized",
        f"--trigger-event-filters=bucket={BUCKET}",
        "--entry-point=on_object_finalized",
        "--trigger-service-account=vt-evt-",
        "--service-account=vt-run-",
        "--region=us-central1",
    ):
        assert flag in deploy_line
    for role in (
        "roles/pubsub.publisher",
        "roles/eventarc.eventReceiver",
        "roles/aiplatform.user",
        "roles/storage.legacyBucketReader",
    ):
        assert role in script
    assert "gcloud functions add-invoker-policy-binding" in script  # run.invoker on the function only
    assert "allUsers" not in script


@pytest.mark.gcloud
@pytest.mark.skipif(shutil.which("gcloud") is None, reason="needs the Google Cloud CLI")
def test_the_deploy_commands_flags_exist_in_gcloud(tmp_path):
    plan = api.trigger_deploy(
        write_spec(tmp_path, SPEC + DEPLOY),
        bucket=BUCKET,
        dry_run=True,
        settings=Settings(),
        log=lambda _: None,
    )
    env = {**os.environ, "CLOUDSDK_CONFIG": str(tmp_path / "gcloud")}
    for command in ("gcloud functions deploy", "gcloud functions add-invoker-policy-binding"):
        line = next(x for x in plan["script"].splitlines() if x.startswith(command + " "))
        flags = {w.split("=")[0] for w in line.split() if w.startswith("--")}
        help_text = subprocess.run(
            ["gcloud", *command.split()[1:], "--help"], capture_output=True, text=True, env=env, timeout=60
        ).stdout
        assert {f for f in flags if f not in help_text} == set(), command


def test_requirements_cover_every_distribution_the_function_imports(tmp_path, fake):
    """Run the rendered main.py in a fresh interpreter that can import, of what is installed here,
    only what requirements.txt installs (with its dependencies): as on Cloud Run, where Cloud Build
    installs nothing else. Every other distribution's modules are absent (ModuleNotFoundError), so
    the venv's extras (e.g. PySocks, which requests imports when it is there) do not count. The
    function must start a pipeline for a marker, and every third-party module it imported must
    come from requirements.txt."""
    out, _, _ = render(tmp_path, SPEC + DEPLOY)
    lines = (out / "requirements.txt").read_text().splitlines()
    installed = _closure(line.split("==")[0] for line in lines if line and not line.startswith("#"))
    files = _installed_files()
    absent = tmp_path / "absent.json"  # the files of every distribution Cloud Run would not have
    absent.write_text(
        json.dumps(sorted(f for name, fs in files.items() if name not in installed for f in fs))
    )
    probe = f"""
import importlib.util, json, os, sys
startup = set(sys.modules)  # what the interpreter loaded before the function (site hooks)
ABSENT = set(json.load(open({str(absent)!r})))
blocked = set()

class NotOnCloudRun:
    def find_spec(self, name, path=None, target=None):
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            found = finder.find_spec(name, path, target)
            if found is not None:
                break
        else:
            return None
        if found.origin and os.path.abspath(found.origin) in ABSENT:
            blocked.add(name)
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return found

sys.meta_path.insert(0, NotOnCloudRun())
spec = importlib.util.spec_from_file_location("main", {str(out / 'main.py')!r})
main = importlib.util.module_from_spec(spec); spec.loader.exec_module(main)
event = {{"attributes": {{"type": "google.cloud.storage.object.v1.finalized", "id": "1"}},
         "data": {{"bucket": {BUCKET!r}, "name": "datasets/probe/_SUCCESS", "generation": "1"}}}}
outcome = main.api.on_object_finalized(event, main.HERE, settings=main.SETTINGS, emit=lambda r: None)
assert outcome["action"] == "started", outcome
print(json.dumps({{"blocked": sorted(blocked), "loaded": sorted({{getattr(m, "__file__", None) or ""
                  for n, m in list(sys.modules.items()) if n not in startup}})}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env=function_env(fake.url, tmp_path),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]  # it runs with requirements.txt alone
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    loaded = {os.path.abspath(f) for f in seen["loaded"] if f}
    assert not any(f.startswith(str(ROOT / "vertex_trainer")) for f in loaded)  # the vendored copy ran
    needed = {name for name, fs in files.items() if fs & loaded} - {"vertex-trainer"}
    assert needed and needed - installed == set(), seen["blocked"]


def _installed_files() -> dict[str, set[str]]:
    """distribution -> the files it installed (from its RECORD)."""
    out: dict[str, set[str]] = {}
    for dist in importlib.metadata.distributions():
        files = dist.files or []
        out.setdefault(_canonical(dist.metadata["Name"]), set()).update(
            os.path.abspath(str(dist.locate_file(f))) for f in files if str(f).endswith(".py")
        )
    return out


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _closure(names) -> set[str]:
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = _canonical(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen
