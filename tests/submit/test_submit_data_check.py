"""The data is there before money is spent (issue 40 item 5): a cloud submit lists each gs:// or
/gcs/ data pattern of the trainer against Cloud Storage (gcp-storage-emulator here) and refuses
one that matches no object, exit 2 naming the field, before anything is built or created; the
matching is the trainer's (tf.io.gfile.glob: fnmatch with FNM_PATHNAME, held to the C library's
own below); `--dry-run` lists the checks and sends nothing."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import random
import threading

import pytest

from tests.cli_support import edge_env
from tests.shared import PROJECT, REGION, spec_yaml, storage_emulator, write_spec
from tests.shared import put_object as put
from vertex_trainer.emulators._http import JsonHandler, LoopbackServer, envelope
from vertex_trainer.errors import UserError
from vertex_trainer.gcp.gcs_glob import fixed_prefix, glob_regex
from vertex_trainer.preflight import DataCheck, check_data, data_checks
from vertex_trainer.settings import RetryPolicy, Settings
from vertex_trainer.spec import build_spec

pytestmark = pytest.mark.wire

DATA = "gs://data-bucket/q"
CPU_JOB = {"hardware": "cpu", "scheduling": None, "output_dir": "gs://out-bucket/runs/x"}


# -- the trainer's matching ----------------------------------------------------------------------


def _libc_fnmatch():
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is None or not hasattr(libc, "fnmatch"):
        pytest.skip("no C library fnmatch here")
    return lambda pattern, path: libc.fnmatch(pattern.encode(), path.encode(), 1) == 0  # FNM_PATHNAME


@pytest.mark.parametrize(
    "pattern,path,matches",
    [
        ("q/train-*", "q/train-00000-of-00004", True),
        ("q/train-*", "q/train-a/x.tfrecord", False),  # * stops at /
        ("q/*/x.tfrecord", "q/train-a/x.tfrecord", True),
        ("q/**", "q/a/b", False),  # ** is two *s, not recursive
        ("q/*", "q/.hidden", True),  # a leading dot is matched (no FNM_PERIOD)
        ("q/train-0000[0-2]-of-*", "q/train-00002-of-00004", True),
        ("q/train-0000[!0-2]-of-*", "q/train-00002-of-00004", False),
        ("q/train-0000[^0-2]-of-*", "q/train-00003-of-00004", True),
        ("q/t?ain", "q/t/ain", False),
        ("q/a\\*", "q/a*", True),
        ("q/a\\*", "q/ab", False),
        ("q/data.tfrecord", "q/data.tfrecord", True),
    ],
)
def test_patterns_match_as_the_trainer_matches(pattern, path, matches):
    fnmatch = _libc_fnmatch()
    regex = glob_regex(pattern)
    assert regex is not None
    assert bool(regex.fullmatch(path)) is matches is fnmatch(pattern, path)


def test_the_matcher_agrees_with_the_c_library_or_declines():
    """Random patterns over the characters that matter: the regex gives fnmatch's answer, or
    glob_regex declines (None: the pattern is not checked, never wrongly refused)."""
    fnmatch = _libc_fnmatch()
    rng = random.Random(7)
    checked = 0
    for _ in range(20_000):
        pattern = "".join(rng.choice("ab/.-]![^\\*?[") for _ in range(rng.randint(1, 7)))
        path = "".join(rng.choice("ab/.-]![^\\") for _ in range(rng.randint(0, 6)))
        regex = glob_regex(pattern)
        if regex is None:
            continue
        checked += 1
        assert bool(regex.fullmatch(path)) is fnmatch(pattern, path), (pattern, path)
    assert checked > 10_000


def test_the_listing_prefix_is_the_text_before_the_first_wildcard():
    assert fixed_prefix("q/train-*") == "q/train-"
    assert fixed_prefix("q/[ab]/x-?") == "q/"
    assert fixed_prefix("q/a\\*b") == "q/a"
    assert fixed_prefix("q/data.tfrecord") == "q/data.tfrecord"
    assert glob_regex("q/[[:digit:]]") is None and glob_regex("q/[a/b]") is None
    assert glob_regex("q/[ab") is None  # an unclosed [: not checked


# -- which patterns a submit checks --------------------------------------------------------------


def _spec(**trainer):
    return build_spec(
        {
            "name": "data-check",
            "project": PROJECT,
            "region": REGION,
            "hardware": "cpu",
            "image": {"uri": "us-docker.pkg.dev/p/r/trainer:v1"},
            "output_dir": "gs://out-bucket/runs/x",
            "trainer": {"train_data": f"{DATA}/train-*", "num_classes": 10, "model": "tiny-cnn", **trainer},
        }
    )


ONLINE = Settings(vertex_endpoint="https://us-central1-aiplatform.googleapis.com")


def test_each_pattern_the_trainer_reads_is_checked():
    spec = _spec(train_data=f"{DATA}/train-*, /gcs/data-bucket/r/more-*", eval_data=f"{DATA}/val-*")
    assert data_checks(spec, ONLINE) == (
        DataCheck("trainer.train_data", f"{DATA}/train-*"),
        DataCheck("trainer.train_data", "/gcs/data-bucket/r/more-*"),
        DataCheck("trainer.eval_data", f"{DATA}/val-*"),
    )
    # synthetic data with a set epoch reads no file and evaluates nothing
    assert data_checks(_spec(eval_data=f"{DATA}/val-*", synthetic_data=True, steps_per_epoch=5), ONLINE) == ()
    # offline (Vertex AI a stand-in, no storage emulator): nothing to read
    assert data_checks(spec, Settings(vertex_endpoint="http://127.0.0.1:1")) == ()


def test_a_script_job_has_no_data_to_check(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    spec = build_spec(
        {
            "name": "script",
            "project": PROJECT,
            "region": REGION,
            "hardware": "cpu",
            "image": {"repository": "us-docker.pkg.dev/p/r/own", "code": str(tmp_path), "script": "train.py"},
            "output_dir": "gs://out-bucket/runs/x",
            "args": ["--data=gs://data-bucket/nothing-*"],
        }
    )
    assert data_checks(spec, ONLINE) == ()


# -- against gcp-storage-emulator -----------------------------------------------------------------


@pytest.fixture
def gcs():
    """gcp-storage-emulator in this process with out-bucket and data-bucket; yields its URL."""
    with storage_emulator("out-bucket", "data-bucket") as url:
        yield url


@pytest.fixture
def run(fake, gcs, tmp_path):
    """`vertex-trainer ARGS` in this process against the fake Vertex AI and the storage emulator."""
    from tests.shared import cli_runner

    return cli_runner(edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url, STORAGE_EMULATOR_HOST=gcs))


def _file(tmp_path, **changes):
    return write_spec(tmp_path, spec_yaml(None, **{**CPU_JOB, **changes}))


def _trainer(**fields):
    return {"trainer": {"train_data": f"{DATA}/train-*", **fields}}


def test_data_that_matches_nothing_stops_the_submit_naming_the_field(fake, gcs, run, tmp_path):
    put(gcs, f"{DATA}/other-00000")  # the prefix exists; no name matches
    refused = run("submit", _file(tmp_path, **_trainer()))
    assert refused.returncode == 2, refused.stderr
    assert (
        f"trainer.train_data: {DATA}/train-* matches no object; nothing was built or created"
        in refused.stderr
    )
    assert "gcloud storage ls" in refused.stderr and "Traceback" not in refused.stderr
    assert fake.jobs == {} and fake.calls("create") == []

    put(gcs, f"{DATA}/train-00000-of-00001")
    accepted = run("submit", _file(tmp_path, **_trainer()), "-o", "json")
    assert accepted.returncode == 0, accepted.stderr
    assert list(fake.jobs) == [json.loads(accepted.stdout)["name"]]


def test_each_pattern_of_a_comma_list_must_match(fake, gcs, run, tmp_path):
    put(gcs, f"{DATA}/train-00000")
    spec = _file(tmp_path, **_trainer(train_data=f"{DATA}/train-*,gs://data-bucket/r/more-*"))
    refused = run("submit", spec)
    assert refused.returncode == 2, refused.stderr
    assert "trainer.train_data: gs://data-bucket/r/more-* matches no object" in refused.stderr
    assert "train-* matches" not in refused.stderr and fake.jobs == {}

    put(gcs, "gs://data-bucket/r/more-1")
    assert run("submit", spec).returncode == 0 and len(fake.jobs) == 1


def test_a_gcs_fuse_path_is_checked_as_its_gs_object(fake, gcs, run, tmp_path):
    put(gcs, f"{DATA}/train-00000")
    spec = _file(tmp_path, **_trainer(eval_data="/gcs/data-bucket/q/val-*"))
    refused = run("submit", spec)
    assert refused.returncode == 2, refused.stderr
    assert "trainer.eval_data: /gcs/data-bucket/q/val-* matches no object" in refused.stderr
    put(gcs, f"{DATA}/val-00000")
    assert run("submit", spec).returncode == 0 and len(fake.jobs) == 1


def test_a_star_does_not_reach_into_folders(fake, gcs, run, tmp_path):
    """The trainer's `*` stops at /, and it drops folders: train-* over train-a/x.tfrecord gives it
    no file."""
    put(gcs, f"{DATA}/train-a/x.tfrecord")
    refused = run("submit", _file(tmp_path, **_trainer()))
    assert refused.returncode == 2, refused.stderr
    assert (
        f"trainer.train_data: {DATA}/train-* (the folder {DATA}/train-a) matches only folders, no object"
        in refused.stderr
    )
    accepted = run("submit", _file(tmp_path, **_trainer(train_data=f"{DATA}/train-*/*.tfrecord")))
    assert accepted.returncode == 0, accepted.stderr


def test_the_dry_run_lists_the_checks_and_reads_nothing(fake, run, tmp_path):
    spec = _file(tmp_path, **_trainer(eval_data="/gcs/data-bucket/q/val-*"))  # nothing uploaded
    text = run("submit", spec, "--dry-run")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[1].startswith("# 1. check the data:")
    assert lines[2:4] == [
        f"#    would check: trainer.train_data {DATA}/train-* matches at least one object",
        "#    would check: trainer.eval_data /gcs/data-bucket/q/val-* matches at least one object",
    ]
    assert lines[4].startswith("# 2. look for a job already created")
    as_json = json.loads(run("submit", spec, "--dry-run", "-o", "json").stdout)
    assert as_json["checks"] == [
        {"check": "data", "field": "trainer.train_data", "pattern": f"{DATA}/train-*"},
        {"check": "data", "field": "trainer.eval_data", "pattern": "/gcs/data-bucket/q/val-*"},
    ]
    assert fake.connections == 0


def test_a_tuning_job_and_a_fallback_plan_are_checked_before_anything_is_created(fake, gcs, run, tmp_path):
    tune = {
        "tune": {
            "metric": "accuracy",
            "goal": "maximize",
            "max_trials": 2,
            "parameters": {"learning_rate": {"min": 0.001, "max": 0.1, "scale": "log"}},
        }
    }
    tuning = run("submit", _file(tmp_path, **_trainer(eval_data=f"{DATA}/val-*"), **tune))
    assert tuning.returncode == 2, tuning.stderr
    assert tuning.stderr.count(f"trainer.train_data: {DATA}/train-* matches no object") == 1
    assert "trainer.eval_data" in tuning.stderr
    fallback = {"scheduling": {"strategy": "standard", "fallback": [{"strategy": "spot"}]}}
    planned = run("submit", _file(tmp_path, **_trainer(), **fallback))
    assert planned.returncode == 2, planned.stderr
    assert planned.stderr.count("matches no object") == 1
    assert fake.requests == [] and fake.jobs == {}


def test_a_pipeline_submit_is_checked_before_it_is_compiled_or_created(fake, run, tmp_path):
    refused = run("pipeline", "submit", _file(tmp_path, **_trainer()))
    assert refused.returncode == 2, refused.stderr
    assert f"trainer.train_data: {DATA}/train-* matches no object" in refused.stderr
    assert fake.requests == []
    listed = run("pipeline", "submit", _file(tmp_path, **_trainer()), "--dry-run")
    assert f"# - would check: trainer.train_data {DATA}/train-* matches at least one object" in listed.stdout


# -- a listing that cannot say: warn, never refuse ------------------------------------------------

QUICK = RetryPolicy(attempts=3, initial=0.01, maximum=0.02, deadline=5)


def test_a_listing_stopped_by_its_bound_warns_instead_of_refusing(gcs):
    for i in range(5):
        put(gcs, f"{DATA}/train-{i}.txt")
    said: list[str] = []
    checks = (DataCheck("trainer.train_data", f"{DATA}/train-*.tfrecord"),)
    check_data(checks, settings=Settings(storage_emulator=gcs, retry=QUICK), log=said.append, cap=3)
    assert said == [
        f"warning: trainer.train_data: {DATA}/train-*.tfrecord: no match among the first 3 objects "
        "under its prefix; not checked further (the trainer lists them all)"
    ]
    with pytest.raises(UserError, match="matches no object"):  # the whole prefix read: refused
        check_data(checks, settings=Settings(storage_emulator=gcs, retry=QUICK), log=said.append, cap=10)


class _Storage(LoopbackServer):
    """A Cloud Storage front for objects.list: answers the faults injected (a 403 with Cloud
    Storage's own message), else the listing of `names`."""

    def __init__(self, names: list[str]):
        self.host, self.port, self._server = "127.0.0.1", 0, None
        self.faults, self._lock, self.names, self.seen = [], threading.Lock(), names, []

    def start(self) -> _Storage:
        front = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                front.seen.append(self.path)
                status = front._take_fault("GET")
                if status == 403:
                    return self.send_json(
                        403,
                        envelope(
                            403,
                            "dev@example.com does not have storage.objects.list access to the Google "
                            "Cloud Storage bucket. Permission 'storage.objects.list' denied on resource "
                            "(or it may not exist).",
                        ),
                    )
                if status is not None:
                    return self.send_envelope(status, "Backend Error")
                self.send_json(200, {"kind": "storage#objects", "items": [{"name": n} for n in front.names]})

        return self._serve(Handler)


def test_a_denied_listing_names_the_permission_and_refuses_nothing():
    with _Storage([]) as front:
        front.inject(403, times=5)
        said: list[str] = []
        check_data(
            (DataCheck("trainer.train_data", f"{DATA}/train-*"),),
            settings=Settings(storage_emulator=front.url, retry=QUICK),
            log=said.append,
        )
    assert len(said) == 1 and said[0].startswith(f"warning: trainer.train_data: {DATA}/train-* not checked")
    assert "permission storage.objects.list denied on gs://data-bucket" in said[0]
    assert len(front.seen) == 1  # a refusal is not retried


def test_a_transient_error_is_retried():
    with _Storage(["q/train-00000"]) as front:
        front.inject(503)
        said: list[str] = []
        check_data(
            (DataCheck("trainer.train_data", f"{DATA}/train-*"),),
            settings=Settings(storage_emulator=front.url, retry=QUICK),
            log=said.append,
        )
    assert said == [] and len(front.seen) == 2
    assert "prefix=q%2Ftrain-" in front.seen[0]


# -- the sandbox (docs/sandbox.md): nothing built, nothing created ---------------------------------


def test_a_sandbox_submit_whose_data_matches_nothing_builds_and_creates_nothing(tmp_path):
    import os

    from vertex_trainer.sandbox import Sandbox

    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERTEX_TRAINER_", "AIP_"))}
    with Sandbox(env, buckets=["sandbox-data"], project="sandbox", region=REGION) as box:
        spec = write_spec(
            tmp_path,
            spec_yaml(
                None,
                project="sandbox",
                hardware="cpu",
                scheduling=None,
                image={
                    "uri": None,
                    "repository": f"{REGION}-docker.pkg.dev/sandbox/training/trainer",
                    "builder": "cloud-build",
                },
                output_dir="gs://sandbox-data/runs/demo",
                trainer={"train_data": "gs://sandbox-data/q/train-*"},
            ),
        )
        from tests.shared import cli_runner

        run = cli_runner(edge_env(tmp_path, **box.env()))
        planned = run("submit", spec, "--dry-run").stdout  # the image is not built yet: submit would
        assert "package: if" in planned and "build it with cloud-build" in planned
        refused = run("submit", spec)
        assert refused.returncode == 2, refused.stderr
        assert (
            "trainer.train_data: gs://sandbox-data/q/train-* matches no object; nothing was built or created"
            in refused.stderr
        )
        assert box.cloudbuild.creates == [] and box.vertex.jobs == {}
        assert box.gcs.list_objects("sandbox-data") == []  # no build context staged either
