"""run_local with stand-in commands (python -c): the environment each replica sees, output,
failure handling, interruption, and that no process is ever left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from vertex_trainer.errors import UserError
from vertex_trainer.local import (
    CANCELLED, FAILED, SUCCEEDED, build_replicas, command_of, parse_progress, run_local,
)

from .conftest import custom_job, pid_alive, processes_with_env, python_command, worker_pool

# A stand-in replica that reports the environment it was given (in a file per replica).
ENV_DUMP = textwrap.dedent("""
    import json, os
    cs = json.loads(os.environ["CLUSTER_SPEC"])
    name = f"{cs['task']['type']}-{cs['task']['index']}"
    keys = ["AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR", "CLUSTER_SPEC",
            "TF_CONFIG", "CLOUD_ML_JOB_ID", "MY_SETTING"]
    dump = {k: os.environ.get(k) for k in keys}
    with open(os.path.join(os.environ["DUMP_DIR"], name + ".json"), "w") as f:
        json.dump(dump, f)
    print("env written for", name)
    print("progress epoch=1/1 step=5/5 examples_per_sec=100.0 loss=0.5")
""")


def _quiet_console():
    from rich.console import Console
    import io

    buf = io.StringIO()
    return Console(file=buf, force_terminal=False, width=200), buf


def test_each_replica_sees_the_environment_vertex_documents(tmp_path, monkeypatch):
    monkeypatch.setenv("DUMP_DIR", str(tmp_path))
    out = tmp_path / "out"
    pools = [worker_pool(command=python_command(ENV_DUMP), env={"MY_SETTING": "42"}),
             worker_pool(command=python_command(ENV_DUMP), replicas=2,
                         env={"MY_SETTING": "42"})]
    job = custom_job(str(out), pools)
    console, buf = _quiet_console()
    result = run_local(job, None, console=console)
    assert result.state == SUCCEEDED and result.exit_code == 0, buf.getvalue()

    dumps = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("workerpool*.json")}
    assert sorted(dumps) == ["workerpool0-0", "workerpool1-0", "workerpool1-1"]
    print(json.dumps(dumps["workerpool1-1"], indent=1))  # shown with -s: what a replica sees

    cluster = json.loads(dumps["workerpool0-0"]["CLUSTER_SPEC"])["cluster"]
    assert list(cluster) == ["workerpool0", "workerpool1"]
    assert len(cluster["workerpool0"]) == 1 and len(cluster["workerpool1"]) == 2
    addresses = cluster["workerpool0"] + cluster["workerpool1"]
    assert len(set(addresses)) == 3
    assert all(a.startswith("127.0.0.1:") and int(a.split(":")[1]) > 0 for a in addresses)

    job_ids = {d["CLOUD_ML_JOB_ID"] for d in dumps.values()}
    assert len(job_ids) == 1 and job_ids.pop() == result.job_id
    for name, d in dumps.items():
        pool, index = name.removeprefix("workerpool").split("-")
        # CustomJobSpec.baseOutputDirectory: <base>/model/, /checkpoints/, /logs/
        assert d["AIP_MODEL_DIR"] == f"{out}/model/"
        assert d["AIP_CHECKPOINT_DIR"] == f"{out}/checkpoints/"
        assert d["AIP_TENSORBOARD_LOG_DIR"] == f"{out}/logs/"
        assert d["MY_SETTING"] == "42"
        cs = json.loads(d["CLUSTER_SPEC"])
        assert cs["cluster"] == cluster
        assert cs["task"] == {"type": f"workerpool{pool}", "index": int(index), "trial": ""}
        assert cs["environment"] == "cloud"
        assert cs["job"]["workerPoolSpecs"] == pools
        tf = json.loads(d["TF_CONFIG"])
        assert tf["cluster"] == {"chief": cluster["workerpool0"], "worker": cluster["workerpool1"]}
        assert tf["task"]["type"] == ("chief" if pool == "0" else "worker")
        assert tf["task"]["index"] == int(index)
    assert result.model_dir == f"{out}/model/" and result.output_dir == str(out)

    log = buf.getvalue()
    for name in dumps:
        assert f"{name} | env written for {name}" in log
    assert "JOB_STATE_SUCCEEDED" in log and f"model:   {out}/model/" in log


def test_single_replica_still_gets_a_one_task_cluster(tmp_path):
    job = custom_job(str(tmp_path), [worker_pool(args=["--epochs=1"])])
    (rep,) = build_replicas(job, str(tmp_path), job_id="local-1")
    assert rep.argv == [sys.executable, "-m", "trainer.task", "--epochs=1"]
    cs, tf = json.loads(rep.env["CLUSTER_SPEC"]), json.loads(rep.env["TF_CONFIG"])
    assert list(cs["cluster"]) == ["workerpool0"] and len(cs["cluster"]["workerpool0"]) == 1
    assert tf["cluster"] == {"chief": cs["cluster"]["workerpool0"]}
    assert tf["task"] == {"type": "chief", "index": 0, "trial": ""}


def test_commands_for_container_and_python_package_pools():
    assert command_of({"containerSpec": {"args": ["--a=1"]}}, "/py") == \
        ["/py", "-m", "trainer.task", "--a=1"]
    assert command_of({"containerSpec": {"command": ["python3", "-m", "x"], "args": ["b"]}},
                      "/py") == ["/py", "-m", "x", "b"]
    assert command_of({"pythonPackageSpec": {"pythonModule": "trainer.task", "args": ["--c"],
                                             "packageUris": ["gs://b/p.tar.gz"]}}, "/py") == \
        ["/py", "-m", "trainer.task", "--c"]


def test_parse_progress():
    assert parse_progress("progress epoch=2/5 step=40/100 examples_per_sec=1234.5 loss=0.42") == \
        {"epoch": "2/5", "step": "40/100", "examples_per_sec": "1234.5", "loss": "0.42"}
    assert parse_progress("Epoch 1/5") is None


def test_a_failing_replica_stops_the_others_and_leaves_no_process(tmp_path, monkeypatch):
    marker = f"VT_TEST_{uuid.uuid4().hex}"
    monkeypatch.setenv("VT_MARKER", marker)
    # workerpool0 and one worker hang (the second even starts a grandchild that ignores
    # SIGTERM); the other worker fails after a moment with a clear error.
    script = textwrap.dedent("""
        import json, os, subprocess, sys, time, signal
        task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
        if task["type"] == "workerpool1" and task["index"] == 1:
            print("loading data...", flush=True)
            time.sleep(1.0)
            print("ValueError: train_data matched no files: /nope/train-*", flush=True)
            sys.exit(1)
        if task["type"] == "workerpool1":
            subprocess.Popen([sys.executable, "-c",
                "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
        print("waiting for the cluster", flush=True)
        time.sleep(600)
    """)
    job = custom_job(str(tmp_path / "out"), [
        worker_pool(command=python_command(script)),
        worker_pool(command=python_command(script), replicas=2),
    ])
    console, buf = _quiet_console()
    t0 = time.monotonic()
    result = run_local(job, None, console=console)
    took = time.monotonic() - t0

    assert result.state == FAILED and result.exit_code == 1
    assert result.failed_replica == "workerpool1-1"
    assert "ValueError: train_data matched no files: /nope/train-*" in result.log_tail
    assert took < 15, f"took {took:.1f}s"
    log = buf.getvalue()
    assert "workerpool1-1 exited with code 1; its last lines:" in log
    assert "ValueError: train_data matched no files" in log
    assert processes_with_env(marker) == []


def test_missing_trainer_module_is_a_user_error(tmp_path):
    job = custom_job(str(tmp_path), [worker_pool(command=["python", "-m", "no_such_module_x"])])
    with pytest.raises(UserError, match="no_such_module_x"):
        run_local(job, None, console=_quiet_console()[0])


def test_gs_paths_without_emulator_or_credentials_are_refused(tmp_path, monkeypatch):
    for k in ("STORAGE_EMULATOR_HOST", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    job = custom_job("gs://bucket/runs/x", [worker_pool(command=python_command("pass"))])
    with pytest.raises(UserError, match="gs://") as e:
        run_local(job, None, console=_quiet_console()[0])
    assert "dev gcs-emulator" in str(e.value)
    # An emulator host alone is not enough: TF's gs:// needs the proxy route too.
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:1")
    with pytest.raises(UserError, match="https_proxy"):
        run_local(job, None, console=_quiet_console()[0])


def test_json_output_keeps_stdout_clean(tmp_path, capfd):
    job = custom_job(str(tmp_path), [worker_pool(command=python_command(
        "print('hello'); print('progress epoch=1/1 step=1/1 examples_per_sec=1.0 loss=1.0')"))])
    result = run_local(job, None, output_format="json")
    captured = capfd.readouterr()
    assert result.state == SUCCEEDED
    assert captured.out == ""
    assert "workerpool0-0 | hello" in captured.err


RUNNER = textwrap.dedent("""
    import sys, json
    from vertex_trainer.local import run_local
    job = json.loads(sys.argv[1])
    r = run_local(job, None)
    print("STATE", r.state, r.exit_code, flush=True)
    sys.exit(r.exit_code)
""")

HANG = textwrap.dedent("""
    import os, time
    print("READY", os.getpid(), flush=True)
    time.sleep(600)
""")


def _start_runner(tmp_path, marker):
    job = custom_job(str(tmp_path / "out"), [worker_pool(command=python_command(HANG)),
                                             worker_pool(command=python_command(HANG))])
    env = dict(os.environ, VT_MARKER=marker, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, json.dumps(job)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=os.getcwd())
    ready = []
    deadline = time.monotonic() + 30
    while len(ready) < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "READY" in line:
            ready.append(int(line.split()[-1]))
    assert len(ready) == 2, "replicas did not start"
    return proc, ready


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_every_replica(tmp_path, sig):
    marker = f"VT_TEST_{uuid.uuid4().hex}"
    proc, pids = _start_runner(tmp_path, marker)
    proc.send_signal(sig)
    rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1, rest
    assert f"STATE {CANCELLED} 1" in rest
    assert not any(pid_alive(p) for p in pids)
    assert processes_with_env(marker) == []


def test_replicas_die_with_a_killed_runner(tmp_path):
    marker = f"VT_TEST_{uuid.uuid4().hex}"
    proc, pids = _start_runner(tmp_path, marker)
    proc.kill()  # SIGKILL: no clean-up code runs; PR_SET_PDEATHSIG must do it
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(pid_alive(p) for p in pids)
    assert processes_with_env(marker) == []


def test_staged_package_uris_do_not_require_cloud_storage(tmp_path, monkeypatch):
    """A python-package job's packageUris are gs:// on Vertex; locally the installed code runs."""
    for k in ("STORAGE_EMULATOR_HOST", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    pool = {"replicaCount": "1", "machineSpec": {"machineType": "n1-standard-4"},
            "pythonPackageSpec": {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/x",
                                  "packageUris": ["gs://staging/trainer-0.1.tar.gz"],
                                  "pythonModule": "json.tool", "args": ["--help"]}}
    result = run_local(custom_job(str(tmp_path), [pool]), None, console=_quiet_console()[0])
    assert result.state == SUCCEEDED


def test_the_run_record_is_saved_beside_the_outputs(tmp_path):
    import yaml

    from vertex_trainer import render
    from vertex_trainer.spec import build_spec

    spec = build_spec({"name": "record", "region": "us-central1", "hardware": "cpu",
                       "image": {"uri": "us-docker.pkg.dev/p/r/trainer:local"}, "output_dir": str(tmp_path),
                       "trainer": {"train_data": "data/train-*", "num_classes": 2}})
    job = render.custom_job(spec, idempotency_key="k")
    job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"] = python_command("print('ok')")
    result = run_local(job, spec, console=_quiet_console()[0])
    assert result.state == SUCCEEDED
    assert json.loads((tmp_path / "vertex-trainer" / "custom_job.json").read_text()) == job
    assert build_spec(yaml.safe_load((tmp_path / "vertex-trainer" / "spec.yaml").read_text())) == spec


def test_local_run_checks_the_bundled_trainer_flags_first(tmp_path):
    from vertex_trainer import api
    from vertex_trainer.errors import SpecError
    from vertex_trainer.spec import build_spec

    spec = build_spec({"name": "flags", "region": "us-central1", "hardware": "cpu",
                       "image": {"uri": "us-docker.pkg.dev/p/r/trainer:v1"}, "output_dir": str(tmp_path / "out"),
                       "trainer": {"model": "resnet-50", "train_data": "data/train-*", "num_classes": 2}})
    with pytest.raises(SpecError, match="invalid choice: 'resnet-50'"):
        api.submit(spec, local=True)
    assert not (tmp_path / "out").exists()  # refused before anything ran or was written
