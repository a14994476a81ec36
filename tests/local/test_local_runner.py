"""run_local with stand-in commands (python -c): the environment each replica sees, output,
failure handling, interruption, and that no process is ever left behind."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.process_support import pid_alive, processes_with_env, wait_gone
from tests.shared import records
from vertex_trainer.errors import UserError
from vertex_trainer.local import (
    CANCELLED,
    FAILED,
    SUCCEEDED,
    build_replicas,
    command_of,
    parse_progress,
    run_local,
)
from vertex_trainer.local.display import Display
from vertex_trainer.settings import Settings

from .conftest import (
    custom_job,
    local_settings,
    python_command,
    settings_without_gcs,
    worker_pool,
)

# A stand-in replica that reports the environment it was given (in a file per replica).
ENV_DUMP = textwrap.dedent("""
    import json, os
    cs = json.loads(os.environ["CLUSTER_SPEC"])
    name = f"{cs['task']['type']}-{cs['task']['index']}"
    keys = ["AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR", "CLUSTER_SPEC",
            "TF_CONFIG", "CLOUD_ML_JOB_ID", "MY_SETTING", "VT_ONLY_IN_SETTINGS",
            "VT_ONLY_IN_PROCESS_ENV"]
    dump = {k: os.environ.get(k) for k in keys}
    with open(os.path.join(os.environ["DUMP_DIR"], name + ".json"), "w") as f:
        json.dump(dump, f)
    print("env written for", name)
    print("progress epoch=1/1 step=5/5 examples_per_sec=100.0 loss=0.5")
""")


def _quiet_console():
    from rich.console import Console

    buf = io.StringIO()
    return Console(file=buf, force_terminal=False, width=200), buf


def test_each_replica_sees_the_environment_vertex_documents(tmp_path):
    out = tmp_path / "out"
    pools = [
        worker_pool(command=python_command(ENV_DUMP), env={"MY_SETTING": "42"}),
        worker_pool(command=python_command(ENV_DUMP), replicas=2, env={"MY_SETTING": "42"}),
    ]
    job = custom_job(str(out), pools)
    console, buf = _quiet_console()
    result = run_local(job, None, settings=local_settings(DUMP_DIR=str(tmp_path)), console=console)
    assert result.state == SUCCEEDED and result.exit_code == 0, buf.getvalue()
    assert result.succeeded and result.done

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
    assert result.replicas == ["workerpool0-0", "workerpool1-0", "workerpool1-1"]

    log = buf.getvalue()
    for name in dumps:
        assert f"{name} | env written for {name}" in log
    assert (
        "\nSUCCEEDED in " in log
        and "JOB_STATE_" not in log
        and (
            f"model:   none: nothing was written to AIP_MODEL_DIR ({out}/model/)" in log  # (env dumps only)
        )
    )


def test_replicas_get_the_settings_environment_not_the_process_environment(tmp_path, monkeypatch):
    """The environment is data from the edge (Settings.environ): a variable only this process
    has does not reach a replica; one only the settings carry does."""
    monkeypatch.setenv("VT_ONLY_IN_PROCESS_ENV", "leaked")
    environ = {k: v for k, v in os.environ.items() if k != "VT_ONLY_IN_PROCESS_ENV"}
    settings = Settings(environ=environ | {"DUMP_DIR": str(tmp_path), "VT_ONLY_IN_SETTINGS": "given"})
    job = custom_job(str(tmp_path / "out"), [worker_pool(command=python_command(ENV_DUMP))])
    result = run_local(job, None, settings=settings, console=_quiet_console()[0])
    assert result.state == SUCCEEDED
    seen = json.loads((tmp_path / "workerpool0-0.json").read_text())
    assert seen["VT_ONLY_IN_SETTINGS"] == "given"
    assert seen["VT_ONLY_IN_PROCESS_ENV"] is None


def test_no_module_of_the_local_runner_reads_the_process_environment():
    """The code, not its prose: no `os.environ` / `os.getenv` / `from os import environ`."""
    import ast

    banned = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}
    package = Path(__file__).resolve().parents[2] / "vertex_trainer" / "local"
    offenders = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in banned
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
            ) or (
                isinstance(node, ast.ImportFrom)
                and node.module == "os"
                and banned & {a.name for a in node.names}
            ):
                offenders.append(f"{path.name}:{node.lineno}")
    assert len(list(package.glob("*.py"))) >= 5
    assert offenders == []


def test_importing_the_local_runner_imports_nothing_heavy():
    code = (
        "import sys, vertex_trainer.local; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'rich', 'requests') or m.startswith('google.cloud.storage')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_single_replica_still_gets_a_one_task_cluster(tmp_path):
    job = custom_job(str(tmp_path), [worker_pool(args=["--epochs=1"])])
    (rep,) = build_replicas(job, str(tmp_path), job_id="local-1", base_env={})
    assert rep.argv == (sys.executable, "-m", "trainer.task", "--epochs=1")
    cs, tf = json.loads(rep.env["CLUSTER_SPEC"]), json.loads(rep.env["TF_CONFIG"])
    assert list(cs["cluster"]) == ["workerpool0"] and len(cs["cluster"]["workerpool0"]) == 1
    assert tf["cluster"] == {"chief": cs["cluster"]["workerpool0"]}
    assert tf["task"] == {"type": "chief", "index": 0, "trial": ""}
    # With an empty base environment a replica gets exactly what Vertex AI sets (and unbuffered
    # output): nothing leaks in from anywhere else.
    assert set(rep.env) == {
        "AIP_MODEL_DIR",
        "AIP_CHECKPOINT_DIR",
        "AIP_TENSORBOARD_LOG_DIR",
        "CLUSTER_SPEC",
        "TF_CONFIG",
        "CLOUD_ML_JOB_ID",
        "PYTHONUNBUFFERED",
    }


def test_vertex_variables_win_and_loopback_bypasses_a_proxy(tmp_path):
    pool = worker_pool(env={"AIP_MODEL_DIR": "/elsewhere", "MY_SETTING": "1"})
    base_env = {"https_proxy": "http://proxy:3128", "no_proxy": "internal.example"}
    (rep,) = build_replicas(
        custom_job(str(tmp_path), [pool]),
        str(tmp_path),
        job_id="local-1",
        base_env=base_env,
        project="p",
        region="us-central1",
    )
    assert rep.env["AIP_MODEL_DIR"] == f"{tmp_path}/model/"
    assert rep.env["MY_SETTING"] == "1"
    assert rep.env["CLOUD_ML_PROJECT_ID"] == "p" and rep.env["CLOUD_ML_REGION"] == "us-central1"
    assert rep.env["no_proxy"] == rep.env["NO_PROXY"] == "internal.example,localhost,127.0.0.1,::1"
    assert base_env == {"https_proxy": "http://proxy:3128", "no_proxy": "internal.example"}


def test_commands_for_container_and_python_package_pools():
    assert command_of({"containerSpec": {"args": ["--a=1"]}}, "/py") == ["/py", "-m", "trainer.task", "--a=1"]
    assert command_of({"containerSpec": {"command": ["python3", "-m", "x"], "args": ["b"]}}, "/py") == [
        "/py",
        "-m",
        "x",
        "b",
    ]
    assert command_of(
        {
            "pythonPackageSpec": {
                "pythonModule": "trainer.task",
                "args": ["--c"],
                "packageUris": ["gs://b/p.tar.gz"],
            }
        },
        "/py",
    ) == ["/py", "-m", "trainer.task", "--c"]


def test_parse_progress():
    assert parse_progress("progress epoch=2/5 step=40/100 examples_per_sec=1234.5 loss=0.42") == {
        "epoch": "2/5",
        "step": "40/100",
        "examples_per_sec": "1234.5",
        "loss": "0.42",
    }
    assert parse_progress("Epoch 1/5") is None


def test_live_display_folds_step_progress_and_keeps_each_epochs_last_line():
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=200)
    with Display(console, ["workerpool0-0"], live=True) as display:
        display.line("workerpool0-0", "progress epoch=1/2 step=3/10 examples_per_sec=9.0 loss=1.5")
        display.line("workerpool0-0", "progress epoch=1/2 step=10/10 examples_per_sec=9.0 loss=1.2")
        display.line("workerpool0-0", "hello")
    shown = buf.getvalue()
    assert "step=3/10" not in shown
    assert "step=10/10" in shown and "hello" in shown
    assert display.progress["workerpool0-0"]["loss"] == "1.2"


# Every replica but workerpool1-1 hangs; workerpool1-0 also starts a grandchild that ignores
# SIGTERM. workerpool1-1 waits on a FIFO until the three others report their pids (so all of them,
# the grandchild included, are running), prints them, and fails.
FAILING = textwrap.dedent("""
    import json, os, subprocess, sys, time
    task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
    fifo = os.environ["READY_FIFO"]
    if task["type"] == "workerpool1" and task["index"] == 1:
        print("loading data...", flush=True)
        pids = []
        while len(pids) < 3:
            with open(fifo) as f:
                pids += f.read().split()
        print("PIDS", *pids, flush=True)
        print("ValueError: train_data matched no files: /nope/train-*", flush=True)
        sys.exit(3)
    if task["type"] == "workerpool1":
        subprocess.Popen([sys.executable, "-c",
            "import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "f = open(sys.argv[1], 'w'); f.write(f'{os.getpid()} '); f.close(); time.sleep(600)",
            fifo])
    with open(fifo, "w") as f:
        f.write(f"{os.getpid()} ")
    print("waiting for the cluster", flush=True)
    time.sleep(600)
""")


@pytest.mark.timeout(120)
def test_a_failing_replica_stops_the_others_and_leaves_no_process(tmp_path, marker):
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    job = custom_job(
        str(tmp_path / "out"),
        [
            worker_pool(command=python_command(FAILING)),
            worker_pool(command=python_command(FAILING), replicas=2),
        ],
    )
    console, buf = _quiet_console()
    result = run_local(
        job, None, settings=local_settings(VT_MARKER=marker, READY_FIFO=str(fifo)), console=console
    )

    assert result.state == FAILED and result.exit_code == 1 and not result.succeeded
    assert result.failed_replica == "workerpool1-1" and result.failed_exit_code == 3
    assert "ValueError: train_data matched no files: /nope/train-*" in result.log_tail
    assert result.metrics is None
    log = buf.getvalue()
    # Its lines again only when others were printed after them (the error is a line it printed,
    # not a traceback: no exception to name).
    said = "workerpool1-1 exited with code 3"
    assert f"{said} (its last lines are just above)" in log or f"{said}; its last lines:" in log
    assert "ValueError: train_data matched no files" in log
    # The chief, the other worker and the SIGTERM-ignoring grandchild: all gone on return.
    (pids_line,) = [line for line in result.log_tail if line.startswith("PIDS ")]
    pids = [int(p) for p in pids_line.split()[1:]]
    assert len(pids) == 3 and not any(pid_alive(p) for p in pids)
    assert processes_with_env(marker) == []


def test_missing_trainer_module_is_a_user_error(tmp_path):
    job = custom_job(str(tmp_path), [worker_pool(command=["python", "-m", "no_such_module_x"])])
    with pytest.raises(UserError, match="no_such_module_x"):
        run_local(job, None, settings=local_settings(), console=_quiet_console()[0])


def test_a_missing_command_is_a_user_error_and_leaves_no_process(tmp_path, marker):
    job = custom_job(
        str(tmp_path),
        [
            worker_pool(command=python_command("import time; time.sleep(600)")),
            worker_pool(command=["/no/such/command-x"]),
        ],
    )
    with pytest.raises(UserError, match="cannot start '/no/such/command-x'"):
        run_local(job, None, settings=local_settings(VT_MARKER=marker), console=_quiet_console()[0])
    assert processes_with_env(marker) == []


def test_gs_paths_without_emulator_or_credentials_are_refused(tmp_path):
    job = custom_job("gs://bucket/runs/x", [worker_pool(command=python_command("pass"))])
    settings = settings_without_gcs(tmp_path)
    with pytest.raises(UserError, match="gs://") as e:
        run_local(job, None, settings=settings, console=_quiet_console()[0])
    assert "dev gcs-emulator" in str(e.value)
    # A credentials file that is not there is refused too (no fall-through to other sources).
    settings = settings_without_gcs(tmp_path, GOOGLE_APPLICATION_CREDENTIALS=str(tmp_path / "none.json"))
    with pytest.raises(UserError, match=re.escape("none.json")):
        run_local(job, None, settings=settings, console=_quiet_console()[0])
    # An emulator host alone is not enough: TF's gs:// needs the proxy route too.
    settings = settings_without_gcs(tmp_path, STORAGE_EMULATOR_HOST="http://127.0.0.1:1")
    with pytest.raises(UserError, match="https_proxy"):
        run_local(job, None, settings=settings, console=_quiet_console()[0])
    assert not list(tmp_path.glob("**/custom_job.json"))  # refused before anything was written


def test_default_output_keeps_stdout_clean(tmp_path, capfd):
    job = custom_job(
        str(tmp_path),
        [
            worker_pool(
                command=python_command(
                    "print('hello'); print('progress epoch=1/1 step=1/1 examples_per_sec=1.0 loss=1.0')"
                )
            )
        ],
    )
    result = run_local(job, None, settings=local_settings())
    captured = capfd.readouterr()
    assert result.state == SUCCEEDED
    assert captured.out == ""
    assert "workerpool0-0 | hello" in captured.err


RUNNER = textwrap.dedent("""
    import json, os, sys
    from vertex_trainer.local import run_local
    from vertex_trainer.settings import Settings
    job = json.loads(sys.argv[1])
    r = run_local(job, None, settings=Settings(environ=dict(os.environ)))
    print("STATE", r.state, r.exit_code, flush=True)
    sys.exit(r.exit_code)
""")

HANG = textwrap.dedent("""
    import os, time
    print("READY", os.getpid(), flush=True)
    time.sleep(600)
""")


def _runner_of_two(tmp_path, marker, replica: str) -> subprocess.Popen:
    """run_local in a child process, two replicas running the Python `replica`; its output
    (the replicas' lines, through the runner's console) on stdout."""
    job = custom_job(
        str(tmp_path / "out"),
        [worker_pool(command=python_command(replica)), worker_pool(command=python_command(replica))],
    )
    env = dict(os.environ, VT_MARKER=marker, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, json.dumps(job)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _start_runner(tmp_path, marker):
    """run_local in a child process with two hanging replicas; returns once both are up."""
    proc = _runner_of_two(tmp_path, marker, HANG)
    ready = []
    for line in proc.stdout:  # the replicas' lines, through the runner's console
        if "| READY " in line:
            ready.append(int(line.split()[-1]))
            if len(ready) == 2:
                return proc, ready
    raise AssertionError(f"the replicas did not start (runner exit {proc.wait()})")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_every_replica(tmp_path, sig, marker):
    proc, pids = _start_runner(tmp_path, marker)
    proc.send_signal(sig)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, rest
    assert f"STATE {CANCELLED} 1" in rest
    assert "Interrupted: stopping all replicas" in rest
    assert not any(pid_alive(p) for p in pids)
    assert processes_with_env(marker) == []


# A replica that, like the trainer, answers SIGTERM by going on (saving, finishing an epoch): its
# dying words must stay off the screen and must not hold the run.
STUBBORN = textwrap.dedent("""
    import os, signal, time
    def on_term(*_):
        for i in range(2000):
            print(f"DYING line {i}", flush=True)
            time.sleep(0.005)
    signal.signal(signal.SIGTERM, on_term)
    print("READY", os.getpid(), flush=True)
    time.sleep(600)
""")


@pytest.mark.timeout(120)
def test_ctrl_c_with_two_replicas_stops_both_at_once_and_keeps_their_dying_output_off_screen(
    tmp_path, marker
):
    """issue 24 item 3: no more lines on screen after "stopping all replicas", and the run ends
    well before the SIGTERM grace a replica that goes on would otherwise get."""
    import time

    from vertex_trainer.local.supervisor import STOP_GRACE_S

    proc = _runner_of_two(tmp_path, marker, STUBBORN)
    pids = []
    for line in proc.stdout:
        if "| READY " in line:
            pids.append(int(line.split()[-1]))
            if len(pids) == 2:
                break
    assert len(pids) == 2, f"the replicas did not start (runner exit {proc.wait()})"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 1 and f"STATE {CANCELLED} 1" in rest, rest
    assert "Interrupted: stopping all replicas" in rest
    assert "DYING" not in rest, rest  # the screen: nothing after the note
    assert took < STOP_GRACE_S, f"the run took {took:.1f} s to stop"
    logs = "".join(p.read_text() for p in (records(tmp_path / "out") / "logs").glob("*.log"))
    assert "DYING line 0" in logs  # the run's log keeps them
    assert not any(pid_alive(p) for p in pids) and processes_with_env(marker) == []


@pytest.mark.timeout(120)
def test_replicas_die_with_a_killed_runner(tmp_path, marker):
    proc, pids = _start_runner(tmp_path, marker)
    proc.kill()  # SIGKILL: no clean-up code runs; PR_SET_PDEATHSIG must do it
    proc.wait(timeout=10)
    assert wait_gone(pids, timeout=30) == []
    assert processes_with_env(marker) == []


def test_staged_package_uris_do_not_require_cloud_storage(tmp_path):
    """A python-package job's packageUris are gs:// on Vertex; locally the installed code runs."""
    pool = {
        "replicaCount": "1",
        "machineSpec": {"machineType": "n1-standard-4"},
        "pythonPackageSpec": {
            "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/x",
            "packageUris": ["gs://staging/trainer-0.1.tar.gz"],
            "pythonModule": "json.tool",
            "args": ["--help"],
        },
    }
    result = run_local(
        custom_job(str(tmp_path), [pool]),
        None,
        settings=settings_without_gcs(tmp_path),
        console=_quiet_console()[0],
    )
    assert result.state == SUCCEEDED


def test_the_run_record_is_saved_beside_the_runs_folder(tmp_path):
    """docs/contract.md section 15: <base>/.vertex-trainer/<run>/, never inside the run's folder."""
    run = tmp_path / "run-1"
    job = custom_job(str(run), [worker_pool(command=python_command("print('ok')"))])
    result = run_local(job, "name: from-spec\n", settings=local_settings(), console=_quiet_console()[0])
    assert result.state == SUCCEEDED and result.record_dir == str(records(run))
    assert json.loads((records(run) / "custom_job.json").read_text()) == job
    assert (records(run) / "spec.yaml").read_text() == "name: from-spec\n"
    kept = json.loads((records(run) / "run.json").read_text())
    assert kept["run"] == "run-1" and kept["job_id"] == result.job_id and kept["output_dir"] == str(run)
    assert not (run / "vertex-trainer").exists() and not (run / ".vertex-trainer").exists()


def test_a_failed_run_leaves_the_good_runs_folder_and_record_as_they_were(tmp_path):
    """Issue 15's promise (the record beside a model describes that model), kept by the folders:
    every run has its own folder and its own record, so a failed later run touches neither."""
    good = custom_job(str(tmp_path / "good"), [worker_pool(command=python_command("print('ok')"))])
    first = run_local(good, "name: good\n", settings=local_settings(), console=_quiet_console()[0])
    bad = custom_job(str(tmp_path / "bad"), [worker_pool(command=python_command("raise SystemExit(3)"))])
    second = run_local(bad, "name: bad\n", settings=local_settings(), console=_quiet_console()[0])
    assert (first.state, second.state) == (SUCCEEDED, "JOB_STATE_FAILED")
    assert (records(tmp_path / "good") / "spec.yaml").read_text() == "name: good\n"
    assert json.loads((records(tmp_path / "good") / "custom_job.json").read_text()) == good
    assert json.loads((records(tmp_path / "good") / "result.json").read_text())["state"] == SUCCEEDED
    assert (records(tmp_path / "bad") / "spec.yaml").read_text() == "name: bad\n"
    assert json.loads((records(tmp_path / "bad") / "result.json").read_text())["exit_code"] == 1


def test_the_recorded_spec_reproduces_the_run(tmp_path):
    import yaml

    from vertex_trainer import render
    from vertex_trainer.spec import build_spec

    spec = build_spec(
        {
            "name": "record",
            "region": "us-central1",
            "hardware": "cpu",
            "image": {"uri": "us-docker.pkg.dev/p/r/trainer:local"},
            "output_dir": str(tmp_path),
            "trainer": {"train_data": "data/train-*", "num_classes": 2},
        }
    )
    job = render.custom_job(spec, idempotency_key="k")
    job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"] = python_command("print('ok')")
    result = run_local(job, spec, settings=local_settings(), console=_quiet_console()[0])
    assert result.state == SUCCEEDED
    assert result.output_dir == str(tmp_path / "record-k")  # the key's own folder below output_dir
    record = records(tmp_path / "record-k")
    assert json.loads((record / "custom_job.json").read_text()) == job
    assert build_spec(yaml.safe_load((record / "spec.yaml").read_text())) == spec


def test_local_run_checks_the_bundled_trainer_flags_first(tmp_path):
    from vertex_trainer import api
    from vertex_trainer.errors import SpecError
    from vertex_trainer.spec import build_spec

    spec = build_spec(
        {
            "name": "flags",
            "region": "us-central1",
            "hardware": "cpu",
            "image": {"uri": "us-docker.pkg.dev/p/r/trainer:v1"},
            "output_dir": str(tmp_path / "out"),
            "trainer": {"model": "resnet-50", "train_data": "data/train-*", "num_classes": 2},
        }
    )
    with pytest.raises(SpecError, match="invalid choice: 'resnet-50'"):
        api.submit(spec, local=True)
    assert not (tmp_path / "out").exists()  # refused before anything ran or was written


def test_tensorflow_start_up_banner_is_kept_in_the_log_not_on_screen(tmp_path):
    """Issue 15: absl prints TF's banner before TF_CPP_MIN_LOG_LEVEL applies; the terminal hides
    it, the run's log file keeps it."""
    banner = (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        "I0000 00:00:1796025139.247204    9302 port.cc:153] oneDNN custom operations are on.\n"
    )
    script = f"import sys; sys.stderr.write({banner!r}); print('trainer: real output')"
    job = custom_job(str(tmp_path), [worker_pool(command=python_command(script))])
    console, buf = _quiet_console()
    result = run_local(job, None, settings=local_settings(), console=console)
    assert result.state == SUCCEEDED
    shown = buf.getvalue()
    assert "trainer: real output" in shown and "oneDNN" not in shown and "absl" not in shown
    kept = (records(tmp_path) / "logs" / "workerpool0-0.log").read_text()
    assert "oneDNN custom operations" in kept and "trainer: real output" in kept
