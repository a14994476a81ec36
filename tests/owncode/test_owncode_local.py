"""`submit --local` of a script job (issue 32): your code runs from image.code with the environment
Vertex AI sets (AIP_* directories, CLUSTER_SPEC / TF_CONFIG, two processes for replicas: 2), the
spec's env and its args; a missing directory, script or requirement is exit 2 before anything
starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.docs import harness
from tests.owncode.conftest import script_data
from tests.shared import cli_runner, latest_run, records
from vertex_trainer.api import plan_artifact
from vertex_trainer.errors import SpecError
from vertex_trainer.local import gcsfuse
from vertex_trainer.spec import build_spec
from vertex_trainer.spec.images import code_requirements

HERE = "tests/owncode/test_owncode_local.py"
EXAMPLE_RUN = "submit examples/own-code/own-code.yaml --local"  # README.md, "Your own code"

# Writes what the replica was given, one file per task, where Vertex AI says the model goes.
ENV_DUMP = """
import json, os, sys
import helper
task = json.loads(os.environ["TF_CONFIG"])["task"]
out = os.environ["AIP_MODEL_DIR"]
os.makedirs(out, exist_ok=True)
keys = ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR", "TF_CONFIG", "CLUSTER_SPEC",
        "CLOUD_ML_JOB_ID", "MODE")
record = {"env": {k: os.environ.get(k) for k in keys}, "argv": sys.argv, "cwd": os.getcwd(),
          "helper": helper.GREETING}
with open(os.path.join(out, f"{task['type']}-{task['index']}.json"), "w") as f:
    json.dump(record, f)
"""


def _local(tmp_path: Path, data: dict, *extra: str):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    return run("submit", path, "--local", *extra)


def test_replicas_get_vertex_ais_environment_the_env_and_the_args(tmp_path, code_dir):
    (code_dir / "task.py").write_text(ENV_DUMP)
    out = tmp_path / "out"
    data = script_data(
        code_dir, replicas=2, output_dir=str(out), env={"MODE": "own"}, args=["--lr={{ 1 / 4 }}"]
    )
    result = _local(tmp_path, data)
    assert result.returncode == 0, result.stderr
    run = latest_run(out)  # the submission's own folder below output_dir
    chief = json.loads((run / "model" / "chief-0.json").read_text())
    worker = json.loads((run / "model" / "worker-0.json").read_text())
    for record in (chief, worker):
        assert record["argv"][1:] == ["--lr=0.25"]
        assert record["cwd"] == str(code_dir.resolve())  # as /opt/code in the image
        assert record["helper"] == "hello from helper"  # the script's siblings import
        env = record["env"]
        assert env["MODE"] == "own"
        assert env["AIP_MODEL_DIR"] == f"{run}/model/"
        assert env["AIP_CHECKPOINT_DIR"] == f"{run}/checkpoints/"
        assert env["AIP_TENSORBOARD_LOG_DIR"] == f"{run}/logs/"
    tf_config = json.loads(worker["env"]["TF_CONFIG"])
    assert set(tf_config["cluster"]) == {"chief", "worker"} and tf_config["task"] == {
        "type": "worker",
        "index": 0,
        "trial": "",
    }
    cluster_spec = json.loads(chief["env"]["CLUSTER_SPEC"])
    assert set(cluster_spec["cluster"]) == {"workerpool0", "workerpool1"}
    assert cluster_spec["task"]["type"] == "workerpool0"
    assert chief["env"]["CLOUD_ML_JOB_ID"] == worker["env"]["CLOUD_ML_JOB_ID"]


def test_a_module_runs_with_dash_m_from_the_code(tmp_path, code_dir):
    (code_dir / "trainer" / "task.py").write_text(ENV_DUMP)
    out = tmp_path / "out"
    data = script_data(code_dir, image={"script": None, "module": "trainer.task"}, output_dir=str(out))
    result = _local(tmp_path, data)
    assert result.returncode == 0, result.stderr
    record = json.loads((latest_run(out) / "model" / "chief-0.json").read_text())
    assert record["argv"][1:] == ["--epochs=2"] and record["cwd"] == str(code_dir.resolve())


def test_a_missing_requirement_is_exit_2_naming_it_and_pip(tmp_path, code_dir):
    out = tmp_path / "out"
    data = script_data(
        code_dir, output_dir=str(out), image={"requirements": ["no-such-dist-vt32==1.0", "PyYAML>=1"]}
    )
    result = _local(tmp_path, data)
    assert result.returncode == 2, result.stderr
    assert "no-such-dist-vt32==1.0 (not installed)" in result.stderr
    assert "-m pip install no-such-dist-vt32==1.0" in result.stderr
    assert "PyYAML" not in result.stderr.split("hint")[0]  # installed: not named
    assert "Traceback" not in result.stderr and not out.exists()  # nothing started


def test_a_requirement_at_the_wrong_version_is_named(tmp_path, code_dir):
    (code_dir / "requirements.txt").write_text("PyYAML<1\n")
    result = _local(tmp_path, script_data(code_dir, output_dir=str(tmp_path / "out")))
    assert result.returncode == 2 and "PyYAML<1 (" in result.stderr and "installed)" in result.stderr


def test_a_requirements_txt_that_is_not_utf8_is_exit_2_naming_the_file_and_the_byte(tmp_path, code_dir):
    (code_dir / "requirements.txt").write_bytes(b"PyYAML>=6\nnumpy # caf\xe9\n")  # Latin-1
    out = tmp_path / "out"
    result = _local(tmp_path, script_data(code_dir, output_dir=str(out)))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    message = "image.code: requirements.txt: not UTF-8 text (invalid continuation byte at byte 21: b'\\xe9')"
    assert message in result.stderr
    assert "iconv -f latin1 -t utf-8" in result.stderr and not out.exists()
    # The image's build reads it the same way: the same exit 2 before anything is built.
    with pytest.raises(SpecError) as e:
        plan_artifact(build_spec(script_data(code_dir)))
    assert e.value.field == "image.code" and "not UTF-8 text" in e.value.message
    # UTF-8 with a byte-order mark (Windows' editors write one) is read, as pip reads it.
    (code_dir / "requirements.txt").write_bytes(b"\xef\xbb\xbfPyYAML>=6\n")
    assert code_requirements(build_spec(script_data(code_dir))) == ["PyYAML>=6"]


@pytest.mark.parametrize(
    ("image", "field"),
    [({"script": "train.py"}, "image.script"), ({"code": "no/such/dir"}, "image.code")],
)
def test_a_missing_script_or_directory_is_exit_2(tmp_path, code_dir, image, field):
    out = tmp_path / "out"
    result = _local(tmp_path, script_data(code_dir, image=image, output_dir=str(out)))
    assert result.returncode == 2, result.stderr
    assert f"{field}:" in result.stderr and not out.exists()


def test_validate_local_checks_the_requirements(tmp_path, code_dir):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(script_data(code_dir, image={"requirements": ["no-such-dist-vt32"]})))
    result = cli_runner(edge_env(tmp_path), cwd=tmp_path)("validate", path, "--local")
    assert result.returncode == 2 and "no-such-dist-vt32 (not installed)" in result.stderr


def test_this_file_runs_every_block_of_the_docs_that_names_it() -> None:
    named = {b.id for b in harness.blocks() if b.checked_by == HERE}
    assert named == {harness.checked_block("README.md", EXAMPLE_RUN, HERE).id}


@pytest.mark.trainer
@pytest.mark.slow
def test_the_example_trains_with_two_replicas(tmp_path, tmp_path_factory):
    """README.md's own-code block, run here as the docs harness runs it (`checked-by`): the example,
    a Keras script written to Vertex AI's code requirements (TF_CONFIG, AIP_MODEL_DIR,
    BackupAndRestore, model.save), trains here with replicas: 2, unchanged; then its gcloud form
    and a dry run as a python package."""
    block = harness.checked_block("README.md", EXAMPLE_RUN, HERE)
    work = harness.workdir(tmp_path / "work", harness.quickstart_data(tmp_path_factory))
    stdout, _ = harness.run_block(block, work)
    out = latest_run(work / "runs" / "own-code")  # below the spec's output_dir, from the repository's root
    assert (out / "model" / "model.keras").is_file()  # the chief's
    assert (out / "checkpoints" / "worker-0-model" / "model.keras").is_file()  # the worker's scratch save
    logs = records(out) / "logs"
    assert "Epoch 2/2" in (logs / "workerpool0-0.log").read_text()
    assert "Epoch 2/2" in (logs / "workerpool1-0.log").read_text()
    assert "gcloud ai custom-jobs create" in stdout  # render --format gcloud
    assert "pythonPackageSpec" in stdout and "gs://my-bucket/own" in stdout  # the dry run


def test_gcs_fuse_paths_are_refused_before_the_run_naming_the_fields(tmp_path, code_dir):
    # A machine that cannot give replicas a /gcs: here, one without util-linux's unshare on its
    # PATH (the CLI in a process of its own, so that its look for unshare is its own).
    out = tmp_path / "out"
    data = script_data(
        code_dir,
        output_dir=str(out),
        args=["--epochs=2", "--data=/gcs/vt32-no-such-bucket/train"],
        env={"EXPORT": "/gcs/vt32-no-such-bucket/export"},
    )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    no_unshare = tmp_path / "bin"
    no_unshare.mkdir()
    run = cli_runner(edge_env(tmp_path, PATH=str(no_unshare)), cwd=tmp_path, process=True)
    result = run("submit", path, "--local")
    assert result.returncode == 2, result.stderr
    assert "args[1] '--data=/gcs/vt32-no-such-bucket/train'" in result.stderr
    assert "env.EXPORT" in result.stderr and "Cloud Storage FUSE" in result.stderr
    assert not out.exists() and not Path("/gcs/vt32-no-such-bucket").exists()


def test_the_bundled_trainers_fuse_paths_name_its_fields():
    from vertex_trainer import render
    from vertex_trainer.local.cluster import fuse_paths
    from vertex_trainer.spec import build_spec

    spec = build_spec(
        {
            "name": "x",
            "hardware": "cpu",
            "trainer": {
                "train_data": "/gcs/vt32-no-such-bucket/train-*",
                "num_classes": 2,
                "extra_args": ["--export=/gcs/vt32-no-such-bucket/x"],
            },
        }
    )
    assert fuse_paths(render.custom_job(spec), spec) == [
        ("trainer.train_data", "--train-data=/gcs/vt32-no-such-bucket/train-*"),
        ("trainer.extra_args", "--export=/gcs/vt32-no-such-bucket/x"),
    ]


def test_only_the_bundled_trainers_unmounted_gcs_args_are_read_as_gs():
    from vertex_trainer import render
    from vertex_trainer.local.cluster import fuse_paths, trainer_reads_gs
    from vertex_trainer.spec import build_spec

    trainer = {
        "train_data": "/gcs/vt32-no-such-bucket/train-*",
        "eval_data": "gs://vt32-bucket/gcs/validation-*",  # a gcs/ folder in a gs:// URL: not FUSE
        "num_classes": 2,
        "extra_args": ["--export=/gcs/vt32-no-such-bucket/x,/gcs/vt32-other/y"],
    }
    spec = build_spec({"name": "x", "hardware": "cpu", "trainer": trainer, "env": {"P": "/gcs/vt32-b/p"}})
    job = render.custom_job(spec)
    assert [field for field, _ in fuse_paths(job, spec)] == [
        "trainer.train_data",
        "trainer.extra_args",
        "env.P",
    ]
    read, lines = trainer_reads_gs(job, spec)
    args = read["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert "--train-data=gs://vt32-no-such-bucket/train-*" in args
    assert "--eval-data=gs://vt32-bucket/gcs/validation-*" in args
    assert "--export=gs://vt32-no-such-bucket/x,gs://vt32-other/y" in args
    assert fuse_paths(read, spec) == [("env.P", "/gcs/vt32-b/p")]  # env stays: still refused without a mount
    assert lines[0].startswith("trainer.train_data: /gcs/vt32-no-such-bucket/train-* is read as gs://")
    assert len(lines) == 3 and job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] != args  # a copy
    # A pool with its own command is not the bundled trainer: nothing is rewritten.
    job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"] = ["python", "train.py"]
    assert trainer_reads_gs(job, spec) == (job, [])


@pytest.mark.skipif(gcsfuse.unavailable() is not None, reason=f"no /gcs mount here: {gcsfuse.unavailable()}")
def test_gcs_paths_are_the_local_runs_stand_in_bucket(tmp_path, code_dir):
    """/gcs/BUCKET/path is <output_dir>/.vertex-trainer/gcs/BUCKET/path for every replica of the
    run (each in a mount namespace of its own), and nothing else on the machine sees it. With no
    bucket to fetch the path from (no emulator, no credentials), the run is refused until the
    stand-in has the path (here: created, as the message says)."""
    (code_dir / "task.py").write_text(
        "import json, os, sys\n"
        "task = json.loads(os.environ['TF_CONFIG'])['task']\n"
        "path = sys.argv[1] + f\"/{task['type']}.txt\"\n"
        "os.makedirs(sys.argv[1], exist_ok=True)\n"
        "open(path, 'w').write('written at ' + path)\n"
    )
    (code_dir / "requirements.txt").unlink()
    out = tmp_path / "out"
    data = script_data(code_dir, replicas=2, output_dir=str(out), args=["/gcs/vt32-bucket/exports"])
    standin = out / ".vertex-trainer" / "gcs" / "vt32-bucket" / "exports"  # shared by the runs below out
    refused = _local(tmp_path, data)
    assert refused.returncode == 2, refused.stderr
    assert "args[0] '/gcs/vt32-bucket/exports'" in refused.stderr
    assert f"mkdir -p {standin}" in refused.stderr
    assert not list(out.glob(".vertex-trainer/*/logs"))  # no replica started
    standin.mkdir(parents=True)
    result = _local(tmp_path, data)
    assert result.returncode == 0, result.stderr
    assert (standin / "chief.txt").read_text() == "written at /gcs/vt32-bucket/exports/chief.txt"
    assert (standin / "worker.txt").is_file()
    assert not Path("/gcs/vt32-bucket").exists()  # the mount was the replicas' own


def test_the_bundled_trainers_gcs_data_is_read_as_gs_and_needs_a_route_to_the_bucket(tmp_path):
    """Its /gcs/ paths are data it opens itself: read as gs:// (tests/local/test_local_gcs.py
    trains so through the emulator); with neither an emulator nor credentials, exit 2 before
    anything starts, naming the ways out."""
    path = tmp_path / "spec.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "x",
                "hardware": "cpu",
                "output_dir": str(tmp_path / "out"),
                "trainer": {"train_data": "/gcs/vt32-no-such-bucket/train-*", "num_classes": 2},
            }
        )
    )
    result = cli_runner(edge_env(tmp_path), cwd=tmp_path)("submit", path, "--local")
    assert result.returncode == 2, result.stderr
    bucket = "vt32-no-such-bucket"
    assert f"trainer.train_data: /gcs/{bucket}/train-* is read as gs://{bucket}/train-* here" in result.stderr
    assert "vertex-trainer dev gcs-emulator" in result.stderr and "Cloud Storage FUSE" not in result.stderr
    assert not (tmp_path / "out").exists()
