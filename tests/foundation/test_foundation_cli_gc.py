"""The quick commands run without the cyclic garbage collector; every other command has it
(vertex_trainer/cli/__init__.py QUICK, gc_paused; benchmarks/RESULTS-cli.md, issue 26 item 4).

`validate` makes about 70 collector passes over the objects its imports and pydantic's model
building create, and one more over everything at exit; none frees anything that matters in a
sub-second process. A long command (a local run, --wait, logs --follow) must keep the collector.
These tests count collections through gc.callbacks: no timing.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

from tests.cli_support import run_in_process

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "job_specs" / "resnet50-a100x8.yaml"

PROBE = """
import atexit, gc, json, sys
passes, seen = [], {}
gc.callbacks.append(lambda phase, info: passes.append(info["generation"]) if phase == "start" else None)
# Registered before main(), so it runs after what main() registers (atexit is last in, first out).
atexit.register(lambda: print(json.dumps({**seen, "frozen_at_exit": gc.get_freeze_count()}), file=sys.stderr))


class Out:  # the command's answer is its last act: the passes made before its first line
    def __init__(self, real):
        self.real = real

    def write(self, text):
        seen.setdefault("before_answer", len(passes) - before)
        return self.real.write(text)

    def flush(self):
        self.real.flush()


from vertex_trainer.cli import main
before = len(passes)
sys.stdout = Out(sys.stdout)
try:
    main(sys.argv[1:])
except SystemExit:
    pass
seen.update(enabled_after=gc.isenabled())
"""


def _probe(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT)
    return json.loads(proc.stderr.strip().splitlines()[-1])


def test_validate_makes_no_collector_pass_and_leaves_the_collector_on():
    seen = _probe("validate", str(SPEC))
    assert seen["before_answer"] == 0
    assert seen["enabled_after"] is True
    assert seen["frozen_at_exit"] > 0  # the exit-time pass skips what the process leaves


def test_a_long_command_keeps_the_collector_and_its_exit_pass():
    seen = _probe("submit", "--help")  # looks submit up: the collector is back on at once
    assert seen["enabled_after"] is True
    assert seen["frozen_at_exit"] == 0


def test_a_command_outside_quick_runs_with_the_collector_on():
    from vertex_trainer import cli

    assert "spec_cmds" in cli.QUICK and "jobs" not in cli.QUICK
    click_group = typer_group(cli)
    with cli.gc_paused():
        assert gc.isenabled() is False
        click_group.get_command(None, "validate")
        assert gc.isenabled() is False  # a quick command keeps it off
        click_group.get_command(None, "submit")
        assert gc.isenabled() is True  # submit (a local run, --wait) gets it back at once
    assert gc.isenabled() is True


def test_gc_paused_leaves_a_collector_someone_else_turned_off_alone():
    from vertex_trainer import cli

    gc.disable()
    try:
        with cli.gc_paused():
            typer_group(cli).get_command(None, "submit")
            assert gc.isenabled() is False  # not ours to turn on
        assert gc.isenabled() is False
    finally:
        gc.enable()


def test_validate_in_process_answers_as_before_and_restores_the_collector():
    result = run_in_process("validate", SPEC)
    assert result.code == 0, result.err
    assert result.out.startswith(f"OK  {SPEC}: ")
    assert gc.isenabled() is True


def typer_group(cli):
    """The click group the console script runs (the lazy one)."""
    import typer

    return typer.main.get_command(cli.app)
