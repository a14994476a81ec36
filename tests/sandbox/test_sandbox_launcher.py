"""sandbox/launcher.py: which task commands get GCPC's polls at the sandbox's pace, and that the
launchers the project's pipelines run (custom job, model upload, endpoint create, deploy) load
their remote runners with the sandbox's interval in place of GCPC's 20 s. (That a pipeline's
launcher then looks at its job about every second: test_sandbox_pipelines.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vertex_trainer.sandbox import launcher

GCPC = "google_cloud_pipeline_components.container.v1"
CUSTOM_JOB = f"{GCPC}.custom_job.launcher"


def test_a_gcpc_module_command_gets_the_shim_in_front_with_its_arguments_kept():
    argv = [sys.executable, "-u", "-m", CUSTOM_JOB, "--type", "CustomJob", "--payload", "{}"]
    assert launcher.wrap(argv, 1.0) == [
        sys.executable,
        "-u",
        "-m",
        "vertex_trainer.sandbox.launcher",
        "--poll-interval",
        "1.0",
        CUSTOM_JOB,
        "--type",
        "CustomJob",
        "--payload",
        "{}",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        [sys.executable, "-c", "print('-m google_cloud_pipeline_components.x')"],  # not a module run
        [sys.executable, "-m", "trainer.task", "--epochs", "1"],  # another module
        [sys.executable, "-m"],  # nothing after -m
    ],
)
def test_any_other_command_runs_as_written(argv):
    assert launcher.wrap(list(argv), 1.0) == argv


def test_each_launcher_the_pipelines_run_polls_at_the_given_interval():
    # In a child: the constants are module state, and this process's GCPC stays as installed. Each
    # launcher imported in turn, the GCPC modules holding the constant noted after each.
    launchers = [
        CUSTOM_JOB,
        f"{GCPC}.model.upload_model.launcher",
        f"{GCPC}.endpoint.create_endpoint.launcher",
        f"{GCPC}.endpoint.deploy_model.launcher",
    ]
    probe = (
        "import importlib, json, sys; from vertex_trainer.sandbox import launcher\n"
        "seen = {}\n"
        f"for module in {launchers!r}:\n"
        "    importlib.import_module(module); seen[module] = launcher.set_poll_interval(0.25)\n"
        "print(json.dumps({'seen': seen, 'values': {n: sys.modules[n]._POLLING_INTERVAL_IN_SECONDS\n"
        "                                         for names in seen.values() for n in names}}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert f"{GCPC}.gcp_launcher.job_remote_runner" in found["seen"][CUSTOM_JOB], found
    for module in launchers[1:]:  # the model and endpoint steps wait on a long-running operation
        assert f"{GCPC}.gcp_launcher.lro_remote_runner" in found["seen"][module], found
    assert set(found["values"].values()) == {0.25}, found


def test_the_shim_runs_the_module_as_main_with_its_own_argv():
    # The launcher's own argument parser gets its arguments (its --help), and runpy does not warn.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vertex_trainer.sandbox.launcher",
            "--poll-interval",
            "0.5",
            CUSTOM_JOB,
            "--help",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--gcp_resources" in done.stdout and "launcher" in done.stdout.splitlines()[0], done.stdout
    assert "RuntimeWarning" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    "args, says",
    [
        ([], "usage:"),
        (["--poll-interval", "soon", CUSTOM_JOB], "'soon' is not a number of seconds"),
        (["--every", "1", CUSTOM_JOB], "usage:"),
    ],
)
def test_a_bad_command_line_says_how_to_call_it(args, says):
    done = subprocess.run(
        [sys.executable, "-m", "vertex_trainer.sandbox.launcher", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and says in done.stderr, done.stderr
