"""Hostile input to the storage trigger (issue 41, area C): values that reach the generated
main.py or deploy.sh, a render into someone else's folder, and events that would start a run on
other data, without a type, or again and again.

- main.py holds the prefix, marker and bucket as Python literals: a value holding Python,
  quotes, `{{ }}` or unicode compiles, imports without running anything, and reads back as
  itself; a line break is exit 2 at the edge.
- deploy.sh: a name with `$(...)`, backticks or a line break is exit 2 naming the flag; a
  directory name holding them is one shlex-quoted word, and the script, run with a stand-in
  `gcloud` that records its argv, passes it literally and runs nothing else.
- `render -o` never deletes or overwrites what it did not write.
- Events (the rendered function served by the real functions-framework, against the fake
  Vertex AI; tests/trigger/conftest.py): a comma in the folder, another bucket, no type: no run;
  re-uploads of one marker are capped per folder, counted by key.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.trigger.conftest import (
    BUCKET,
    function_env,
    send_event,
    served,
    write_spec,
)
from vertex_trainer import api
from vertex_trainer.automation import event_key
from vertex_trainer.automation.render_manifest import MANIFEST
from vertex_trainer.emulators.vertex import FakeVertex
from vertex_trainer.errors import UserError
from vertex_trainer.settings import Settings

pytestmark = pytest.mark.timeout(180)

# A folder of the sample spec the events use: train_data is "{{ trigger.folder }}/train-*".
PYTHON = "'; import os; os.system(\"touch PWNED\")#"
HOSTILE_VALUES = [
    (f"{PYTHON}/", "_SUCCESS"),
    ('"""; import os; os.system("touch PWNED"); """/', "'''"),
    ("données/日本/{{ 7 + 7 }}/", "_DONE-é"),
    ("a'b\"c/", "{% raw %}x"),
]


@pytest.fixture(scope="module")
def fake():
    with FakeVertex() as server:
        yield server


def render(tmp_path: Path, out: Path, *, prefix: str = "datasets/", marker: str = "_SUCCESS", **options):
    return api.trigger_render(
        write_spec(tmp_path / "spec"),
        out,
        bucket=BUCKET,
        prefix=prefix,
        marker=marker,
        settings=Settings(),
        log=lambda _: None,
        **options,
    )


# -- main.py ------------------------------------------------------------------------------------


def _constant(main_py: Path, name: str):
    """The value main.py assigns to `name` (a literal)."""
    for node in ast.parse(main_py.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} not in {main_py}")


def _shape(tree: ast.Module) -> list[str]:
    """Each top-level statement of main.py, a literal's assignment as its name only."""
    return [
        f"{node.targets[0].id} = <literal>"
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        else ast.dump(node)
        for node in tree.body
    ]


@pytest.mark.parametrize("prefix, marker", HOSTILE_VALUES)
def test_a_prefix_or_marker_holding_python_is_data_in_main_py(tmp_path, prefix, marker):
    out = tmp_path / "fn"
    render(tmp_path, out, prefix=prefix, marker=marker)
    tree = ast.parse((out / "main.py").read_text())  # compiles
    assert [_constant(out / "main.py", n) for n in ("PREFIX", "MARKER", "BUCKET")] == [prefix, marker, BUCKET]
    # The same statements as a plain render's, but for the literals' values: no value became code.
    plain = tmp_path / "plain"
    render(tmp_path, plain)
    assert _shape(tree) == _shape(ast.parse((plain / "main.py").read_text()))
    config = json.loads((out / "trigger.json").read_text())
    assert (config["prefix"], config["marker"]) == (prefix, marker)


@pytest.mark.wire
def test_the_rendered_main_py_imports_without_running_the_value(tmp_path, fake):
    out = tmp_path / "fn"
    prefix, marker = HOSTILE_VALUES[0]
    render(tmp_path, out, prefix=prefix, marker=marker)
    work = tmp_path / "cwd"
    work.mkdir()
    probe = textwrap.dedent(f"""\
        import importlib.util, json
        spec = importlib.util.spec_from_file_location("main", {str(out / "main.py")!r})
        main = importlib.util.module_from_spec(spec); spec.loader.exec_module(main)
        print(json.dumps([main.PREFIX, main.MARKER]))
    """)
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=work,
        env=function_env(fake.url, tmp_path),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [prefix, marker]
    assert not (work / "PWNED").exists() and not (out / "PWNED").exists()


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("prefix", 'x"""\nimport os\n', "line break"),
        ("prefix", "a\rb/", "line break"),
        ("prefix", "a\x1b[31m/", "control"),
        ("prefix", "a\u202egnp.exe/", "invisible"),
        ("prefix", "a,gs://other-bucket/", "splits its data paths"),
        ("prefix", "data/*/", "wildcards"),
        ("prefix", "a\\b/", "wildcards"),
        ("prefix", "a/../b/", "'..'"),
        ("marker", "_SUCCESS\nimport os", "line break"),
        ("marker", "a,b", "splits"),
        ("marker", "x/_SUCCESS", "last name part"),
    ],
)
def test_what_no_object_name_may_hold_is_exit_2_naming_the_flag(tmp_path, flag, value, message):
    out = tmp_path / "fn"
    with pytest.raises(UserError, match=message) as refused:
        render(tmp_path, out, **{flag: value})
    assert refused.value.message.startswith(f"--{flag} ")
    assert "\n" not in refused.value.message and "\x1b" not in refused.value.message
    assert not out.exists()


@pytest.mark.parametrize(
    "bucket",
    ["ab", "a" * 64, "Data-Bucket", "-data", "data..bucket", "192.168.5.4", "goog-data", "my-google-data"],
)
def test_a_bucket_outside_google_s_grammar_is_exit_2(tmp_path, bucket):
    with pytest.raises(UserError, match=r"^--bucket "):
        api.trigger_render(
            write_spec(tmp_path / "spec"), tmp_path / "fn", bucket=bucket, settings=Settings(), log=print
        )


# -- deploy.sh ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option, flag, value",
    [
        ("function", "--function", "vt-$(touch PWNED)"),
        ("function", "--function", "vt-`touch PWNED`"),
        ("function", "--function", "vt-${HOME}"),
        ("function", "--function", "vt-digits\nrm -rf ~"),
        ("function", "--function", "Vt-Digits"),
        ("runtime_service_account", "--runtime-service-account", "a$(touch PWNED)@p.iam.gserviceaccount.com"),
        ("trigger_service_account", "--trigger-service-account", "trigger`id`@p.iam.gserviceaccount.com"),
        ("trigger_service_account", "--trigger-service-account", "evt-account@p.iam.gserviceaccount.com\n#"),
        ("trigger_location", "--trigger-location", "us;touch PWNED"),
    ],
)
def test_a_name_that_would_reach_the_shell_is_exit_2_naming_the_flag(tmp_path, option, flag, value):
    with pytest.raises(UserError) as refused:
        api.trigger_deploy(
            write_spec(tmp_path / "spec"),
            bucket=BUCKET,
            dry_run=True,
            settings=Settings(),
            log=lambda _: None,
            **{option: value},
        )
    assert refused.value.message.startswith(f"{flag} ")
    assert "\n" not in refused.value.message


def test_the_cli_refuses_a_function_name_with_a_substitution_and_prints_no_script(tmp_path):
    from tests.cli_support import edge_env
    from tests.shared import cli_runner

    run = cli_runner(edge_env(tmp_path))
    spec = write_spec(tmp_path / "spec")
    done = run("trigger", "deploy", spec, "--bucket", BUCKET, "--dry-run", "--function", "x$(touch PWNED)")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: --function 'x$(touch PWNED)' is not a function name")
    assert "Traceback" not in done.stderr


FAKE_GCLOUD = """\
#!{python}
import json, os, sys
with open(os.environ["GCLOUD_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:3] == ["storage", "service-agent"]:
    print("service-123@gs-project-accounts.iam.gserviceaccount.com")
elif sys.argv[1:3] == ["projects", "describe"]:
    print("123456789012")
"""


def test_deploy_sh_passes_a_hostile_directory_name_as_one_literal_word(tmp_path):
    """The directory name is a user's value that may hold anything a path can: the script runs
    with a stand-in gcloud on PATH and no PWNED appears; gcloud gets the literal name."""
    out = tmp_path / "fn $(touch PWNED) `touch PWNED` ${HOME} 'q' \"d\""
    render(tmp_path, out, prefix=f"{PYTHON}/")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gcloud = bin_dir / "gcloud"
    gcloud.write_text(FAKE_GCLOUD.format(python=sys.executable))
    gcloud.chmod(0o755)
    log = tmp_path / "gcloud.jsonl"
    done = subprocess.run(
        ["bash", str(out / "deploy.sh")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "GCLOUD_LOG": str(log)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    deploy = next(c for c in calls if c[:2] == ["functions", "deploy"])
    assert f"--source={out}" in deploy  # the literal name, one argument
    publisher = next(c for c in calls if "--role=roles/pubsub.publisher" in c)  # the script's own variable
    assert "--member=serviceAccount:service-123@gs-project-accounts.iam.gserviceaccount.com" in publisher
    assert not list(tmp_path.rglob("PWNED"))
    assert PYTHON not in (out / "deploy.sh").read_text()  # the prefix never reaches the shell


# -- render -o ----------------------------------------------------------------------------------


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def test_render_into_a_folder_with_a_foreign_trigger_json_deletes_nothing(tmp_path):
    mine = tmp_path / "project"
    (mine / "trainer").mkdir(parents=True)
    (mine / "trainer" / "model.py").write_text("# my model\n")
    (mine / "main.py").write_text("print('my app')\n")
    (mine / "trigger.json").write_text('{"mine": true}\n')
    before = _snapshot(mine)
    with pytest.raises(UserError, match=f"holds no render's manifest \\({MANIFEST}\\)") as refused:
        render(tmp_path, mine)
    assert "nothing was written or removed" in refused.value.message
    assert _snapshot(mine) == before


def test_a_manifest_that_is_not_a_render_s_is_not_trusted(tmp_path):
    mine = tmp_path / "project"
    mine.mkdir()
    (mine / "main.py").write_text("print('my app')\n")
    (mine / MANIFEST).write_text(json.dumps({"tool": "vertex-trainer trigger render", "files": {}}))
    before = _snapshot(mine)
    with pytest.raises(UserError, match="not one a render wrote"):
        render(tmp_path, mine)
    assert _snapshot(mine) == before


def test_a_render_again_replaces_only_its_own_unchanged_files(tmp_path):
    out = tmp_path / "fn"
    render(tmp_path, out)
    (out / "NOTES.md").write_text("mine\n")  # the user's own file beside the render: kept
    render(tmp_path, out, marker="_DONE")
    assert (out / "NOTES.md").read_text() == "mine\n"
    assert _constant(out / "main.py", "MARKER") == "_DONE"

    (out / "main.py").write_text((out / "main.py").read_text() + "# my edit\n")
    before = _snapshot(out)
    with pytest.raises(UserError, match=r"main\.py' was changed since it was rendered"):
        render(tmp_path, out)
    assert _snapshot(out) == before


def test_a_file_the_previous_render_wrote_and_this_one_does_not_is_removed_only_unchanged(tmp_path):
    from vertex_trainer.automation.render_manifest import manifest_text

    out = tmp_path / "fn"
    render(tmp_path, out)
    files = json.loads((out / MANIFEST).read_text())["files"]
    for name in ("vertex_trainer/retired.py", "vertex_trainer/edited.py"):
        (out / name).write_text("# written by an older render\n")
    import hashlib

    old = hashlib.sha256(b"# written by an older render\n").hexdigest()
    (out / MANIFEST).write_text(
        manifest_text({**files, "vertex_trainer/retired.py": old, "vertex_trainer/edited.py": old})
    )
    (out / "vertex_trainer/edited.py").write_text("# the user's edit\n")
    render(tmp_path, out)
    assert not (out / "vertex_trainer/retired.py").exists()
    assert (out / "vertex_trainer/edited.py").read_text() == "# the user's edit\n"


def test_render_never_writes_through_a_symbolic_link(tmp_path):
    out = tmp_path / "fn"
    render(tmp_path, out)
    outside = tmp_path / "outside.py"
    outside.write_text("precious\n")
    (out / "main.py").unlink()
    (out / "main.py").symlink_to(outside)
    with pytest.raises(UserError, match="symbolic link"):
        render(tmp_path, out)
    assert outside.read_text() == "precious\n"


# -- events -------------------------------------------------------------------------------------


def _jobs_for(server: FakeVertex, generation_keys) -> list[dict]:
    return [j for j in server.jobs.values() if j["labels"].get("vertex-trainer-key") in generation_keys]


@pytest.fixture(scope="module")
def capped_function(tmp_path_factory, fake):
    """The function rendered with --max-runs-per-folder 2, served by functions-framework."""
    root = tmp_path_factory.mktemp("hostile-fn")
    out = root / "function"
    render(root, out, max_runs_per_folder=2)
    with served(out, function_env(fake.url, root)) as (url, lines, _errors):
        yield url, lines, out


@pytest.mark.wire
def test_an_object_name_that_would_inject_a_second_data_path_starts_nothing(fake, capped_function):
    url, lines, _ = capped_function
    before = len(fake.jobs)
    hostile = [
        "datasets/a,gs://other-bucket/x/_SUCCESS",  # the trainer splits train_data on commas
        "datasets/a/*/_SUCCESS",  # a glob: every folder below a
        "datasets/a/../b/_SUCCESS",
        "datasets/a//_SUCCESS",
        "datasets/a\tb/_SUCCESS",
        "datasets/$(touch PWNED)/_SUCCESS",  # a spec may paste {{ trigger.folder }} into sh -c
        "datasets/x;touch PWNED/_SUCCESS",
        "datasets/it's data/_SUCCESS",
    ]
    for name in hostile:
        answer = send_event(url, name, 11)
        assert answer.status_code == 200, answer.text  # acknowledged: never redelivered
    assert len(fake.jobs) == before
    records = lines.await_records(len(hostile), lambda r: r.get("object") in hostile)
    assert {r["action"] for r in records} == {"ignored"} and {r["severity"] for r in records} == {"WARNING"}
    comma = next(r for r in records if "," in r["object"])
    assert "splits its data paths on ','" in comma["ignored"]
    shell = next(r for r in records if "$(" in r["object"])
    assert "a folder's name is letters, digits and" in shell["ignored"]
    # What a folder may be named: letters of any script, digits, - _ . = + @ % ~ : and /
    assert send_event(url, "datasets/2026-11/année=1+x@y~z:v%20/_SUCCESS", 19).status_code == 200
    assert len(fake.jobs) == before + 1


@pytest.mark.wire
def test_another_bucket_or_a_bucket_named_twice_starts_nothing(fake, capped_function):
    url, _, _ = capped_function
    before = len(fake.jobs)
    assert send_event(url, "datasets/other/_SUCCESS", 12, bucket="other-bucket").status_code == 200
    assert len(fake.jobs) == before


@pytest.mark.wire
def test_an_event_without_a_type_or_with_two_buckets_starts_nothing(fake, capped_function):
    """Through the function's own body (functions-framework refuses an HTTP CloudEvent without
    ce-type before the function sees it; a direct caller of the API does not)."""
    _, _, out = capped_function
    settings = Settings.from_environ(function_env(fake.url, out.parent))
    data = {"bucket": BUCKET, "name": "datasets/typeless/_SUCCESS", "generation": "13"}
    before = len(fake.jobs)
    seen: list[dict] = []
    untyped = api.on_object_finalized(
        {"attributes": {"id": "1"}, "data": data}, out, settings=settings, emit=seen.append
    )
    assert untyped["action"] == "ignored" and "without a type" in untyped["ignored"]
    attributes = {
        "id": "2",
        "type": "google.cloud.storage.object.v1.finalized",
        "source": "//storage.googleapis.com/projects/_/buckets/other-bucket",
    }
    twice = api.on_object_finalized(
        {"attributes": attributes, "data": data}, out, settings=settings, emit=seen.append
    )
    assert twice["action"] == "ignored" and "more than one bucket" in twice["message"]
    assert len(fake.jobs) == before


@pytest.mark.wire
def test_re_uploads_of_one_marker_are_capped_per_folder_and_counted_by_key(fake, capped_function):
    url, lines, _ = capped_function
    name = "datasets/reupload/_SUCCESS"
    sent = [(21, "r1"), (21, "r1-again"), (22, "r2"), (23, "r3"), (24, "r4"), (22, "r2-again")]
    for generation, event_id in sent:
        assert send_event(url, name, generation, event_id=event_id).status_code == 200
    keys = {event_key(BUCKET, name, str(g)) for g in (21, 22, 23, 24)}
    jobs = _jobs_for(fake, keys)
    assert sorted(j["labels"]["vertex-trainer-key"] for j in jobs) == sorted(
        event_key(BUCKET, name, g) for g in ("21", "22")
    )  # two runs: the cap; a redelivery adopted, never counted again
    assert len({j["labels"]["vertex-trainer-folder"] for j in jobs}) == 1
    records = lines.await_records(len(sent), lambda r: r.get("object") == name)
    assert [r["action"] for r in records] == ["started", "adopted", "started", "capped", "capped", "adopted"]
    capped = records[3]
    assert capped["severity"] == "WARNING" and "at most 2 (--max-runs-per-folder)" in capped["message"]
    # Another folder has its own count.
    assert send_event(url, "datasets/another/_SUCCESS", 25).status_code == 200
    assert len(_jobs_for(fake, {event_key(BUCKET, "datasets/another/_SUCCESS", "25")})) == 1


@pytest.mark.wire
def test_runs_older_than_the_window_do_not_count(fake, capped_function):
    """Two runs of the folder two days ago (the window is 24h): a new upload still runs."""
    from vertex_trainer.automation.storage_events import folder_label

    url, _, _ = capped_function
    label = folder_label(BUCKET, "datasets/", "weekly")
    for n in (1, 2):
        name = f"projects/test-project/locations/us-central1/customJobs/{900 + n}"
        fake.jobs[name] = {
            "name": name,
            "displayName": "digits",
            "state": "JOB_STATE_SUCCEEDED",
            "createTime": f"2020-01-0{n}T00:00:00Z",
            "labels": {"vertex-trainer-key": f"ev-old-{n}", "vertex-trainer-folder": label},
            "jobSpec": {"workerPoolSpecs": []},
        }
    assert send_event(url, "datasets/weekly/_SUCCESS", 31).status_code == 200
    assert len(_jobs_for(fake, {event_key(BUCKET, "datasets/weekly/_SUCCESS", "31")})) == 1


@pytest.mark.wire
def test_two_uploads_at_the_same_instant_the_newer_run_cancels_itself(tmp_path, fake):
    """The race the look before cannot see: another upload's run is created between this event's
    look and its create. The look after sees both; the newer one (this) is cancelled."""
    from vertex_trainer.automation import ObjectEvent, TriggerConfig, decide
    from vertex_trainer.automation.event_runs import FolderCap, folder_set, spec_vars

    out = tmp_path / "fn"
    render(tmp_path, out, max_runs_per_folder=1)
    settings = Settings.from_environ(function_env(fake.url, tmp_path))
    config = TriggerConfig.load(out)

    def event_of(generation: str):
        event = ObjectEvent.from_cloud_event(
            {
                "attributes": {"id": generation, "type": "google.cloud.storage.object.v1.finalized"},
                "data": {"bucket": BUCKET, "name": "datasets/race/_SUCCESS", "generation": generation},
            }
        )
        return decide(config, event)

    def spec_of(decision):  # as the function loads it (api.on_object_finalized)
        return api.load_spec(
            out / config.spec_file,
            set=folder_set(decision),
            vars=spec_vars(config, decision),
            settings=settings,
        )

    def start(decision):
        return api.submit(
            spec_of(decision), idempotency_key=decision.key, settings=settings, log=lambda _: None
        )

    mine = event_of("41")
    cap = FolderCap(config, mine, spec_of(mine), settings)
    assert cap.before() is None  # no run of the folder yet
    start(event_of("40"))  # the other upload's run lands now
    run = start(mine)
    why = cap.after(run)
    assert why is not None and "at most 1" in why
    assert run.refresh().state in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    other = _jobs_for(fake, {event_key(BUCKET, "datasets/race/_SUCCESS", "40")})
    assert [j["state"] for j in other] != ["JOB_STATE_CANCELLED"]


def test_the_cap_flags_are_checked_at_the_edge(tmp_path):
    for options, flag in (
        ({"max_runs_per_folder": 0}, "--max-runs-per-folder"),
        ({"max_runs_per_folder": 10**6}, "--max-runs-per-folder"),
        ({"folder_window": "soon"}, "--folder-window"),
        ({"folder_window": "10s"}, "--folder-window"),
    ):
        with pytest.raises(UserError, match=f"^{flag} "):
            render(tmp_path, tmp_path / "fn", **options)
    render(tmp_path, tmp_path / "fn", max_runs_per_folder=5, folder_window="7d")
    config = json.loads((tmp_path / "fn" / "trigger.json").read_text())
    assert (config["max_runs_per_folder"], config["folder_window"]) == (5, "7d")
    assert yaml.safe_load((tmp_path / "fn" / "spec.yaml").read_text())["name"] == "digits"
