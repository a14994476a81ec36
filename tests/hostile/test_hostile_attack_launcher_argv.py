"""A sandbox pipeline's training step runs GCPC's custom-job launcher as a local process, and its
`--payload` argument is the whole CustomJob: the values of the job's env (API keys, passwords)
with it. A process's command line is shown to every user of the machine (`ps`, /proc/PID/cmdline),
so the sandbox passes the launcher's arguments in a file only this user can read, removed once
read (sandbox/launcher.py `hide_args`); the launcher's module still gets them as its argv."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from vertex_trainer.sandbox import launcher

SECRET = "s3cr3t-api-key"
GCPC = "google_cloud_pipeline_components.container.v1.custom_job.launcher"
PAYLOAD = json.dumps(
    {"worker_pool_specs": [{"container_spec": {"env": [{"name": "API_KEY", "value": SECRET}]}}]}
)
ARGS = ["--type", "CustomJob", "--payload", PAYLOAD, "--project", "p", "--location", "us-central1"]

# Stands in for GCPC's module: records the argv it was given and its process's command line.
SEEN = """\
import json, pathlib, sys
cmdline = pathlib.Path("/proc/self/cmdline").read_bytes().decode().split("\\0")
pathlib.Path(sys.argv[-1]).write_text(json.dumps({"argv": sys.argv, "cmdline": cmdline}))
"""


def test_the_wrapped_command_holds_no_argument_and_the_file_is_this_users_alone(tmp_path):
    run = launcher.hide_args(launcher.wrap([sys.executable, "-u", "-m", GCPC, *ARGS], 0.5), str(tmp_path))
    assert SECRET not in " ".join(run)
    assert run[:7] == [sys.executable, "-u", "-m", launcher.__name__, "--poll-interval", "0.5", "--args-file"]
    assert run[8] == GCPC and len(run) == 9
    path = Path(run[7])
    assert path.parent == tmp_path and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == ARGS


def test_any_other_command_is_left_as_it_is(tmp_path):
    argv = ["sh", "-c", f"echo {SECRET}"]
    assert launcher.hide_args(argv, str(tmp_path)) == argv and list(tmp_path.iterdir()) == []


def test_the_module_gets_its_arguments_and_the_process_shows_none(tmp_path):
    (tmp_path / "fake_gcpc_launcher.py").write_text(SEEN)
    out = tmp_path / "seen.json"
    # What wrap makes of a GCPC module's command (it wraps only GCPC's), with the fake instead.
    wrapped = [sys.executable, "-m", launcher.__name__, "--poll-interval", "0.5", "fake_gcpc_launcher"]
    run = launcher.hide_args([*wrapped, *ARGS, str(out)], str(tmp_path))
    assert SECRET not in " ".join(run)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run(run, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(out.read_text())
    assert seen["argv"][1:] == [*ARGS, str(out)]  # the module's own argv, as GCPC reads it
    assert SECRET not in " ".join(seen["cmdline"])  # what `ps` shows of the process
    assert not any(p.name.startswith("launcher-args-") for p in tmp_path.iterdir())  # read once
