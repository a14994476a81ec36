"""`profile`'s rules without a run: xprof's step tables of the hardware this machine lacks (GPU,
TPU) grouped as the docstring says, the verdict in the trainer's words and by the trainer's own
thresholds and rule, the exit-2 answers (no trace, an empty one, no xprof)."""

from __future__ import annotations

import ast
import math
import sys
from pathlib import Path

import pytest

from vertex_trainer import lazy
from vertex_trainer.performance import step_profile as profile

THROUGHPUT = Path(__file__).resolve().parents[2] / "trainer_image" / "trainer" / "throughput.py"


def _table(hardware: str, rows: list[dict[str, float | str]]) -> dict:
    """A step-time table as xprof's input_pipeline_analyzer gives it (gviz JSON)."""
    ids = list(rows[0])
    return {
        "cols": [{"id": i, "label": i, "type": "number"} for i in ids],
        "p": {"hardware_type": hardware},
        "rows": [{"c": [{"v": r[i]} for i in ids]} for r in rows],
    }


def test_a_gpu_steps_columns_are_grouped_host_compute_apart_from_the_device():
    row = {
        "stepnum": "train 8",
        "deviceComputeTimeMs": 6.0,
        "deviceToDeviceTimeMs": 0.5,
        "deviceCollectivesTimeMs": 0.5,
        "hostComputeTimeMs": 1.0,
        "kernelLaunchTimeMs": 0.5,
        "infeedTimeMs": 0.5,
        "outfeedTimeMs": 0.0,
        "compileTimeMs": 0.0,
        "otherTimeMs": 1.0,
        "tooltip": "ignored",
        "stepTimeMs": 10.0,
    }
    names, step, cats, hardware = profile.breakdown(_table("GPU", [row, row | {"stepnum": "train 16"}]))
    assert (names, step, hardware) == (["train 8", "train 16"], 10.0, "GPU")
    assert {c.name: c.fraction for c in cats} == {
        "compute": 0.6,
        "host": 0.15,  # kernel launch + all others: the host round trip
        "input": 0.05,
        "communication": 0.1,
        "host_compute": 0.1,
    }
    assert profile.steps_per_execution(names) == 8


def test_a_tpu_steps_idle_waiting_for_the_host_is_the_round_trip():
    row = {
        "stepnum": "3",
        "tcComputeTimeMs": 4.0,
        "scv0ComputeTimeMs": 0.0,
        "scv0InfeedTimeMs": 0.0,
        "tcInfeedTimeMs": 1.0,
        "tcOutfeedTimeMs": 0.0,
        "tcIdleTimeMs": 4.0,
        "hostTransferTimeMs": 1.0,
    }
    _, step, cats, _ = profile.breakdown(_table("TPU", [row]))
    assert step == 10.0  # no stepTimeMs column: the parts' sum
    assert {c.name: c.fraction for c in cats} == {"compute": 0.4, "host": 0.4, "input": 0.1, "transfer": 0.1}
    bound, line = profile.verdict(cats, 1, steps_per_epoch=1000)
    assert bound == "host"
    needed = profile.steps_per_execution_for(0.4, 1)
    assert line == (
        "host-bound: 40% of the time between executions at steps_per_execution=1: use "
        f"trainer.steps_per_execution: 0 (auto: 100 here) or >= {needed}"
    )
    assert 0.4 / (0.4 + needed * 0.6) <= profile.HOST_TARGET  # that many steps per round trip suffice


def _cats(**shares: float) -> list[profile.Category]:
    return [profile.Category(k, profile.LABELS[k], v, v) for k, v in shares.items()]


def test_the_verdict_is_the_trainers_rule_and_words():
    assert profile.verdict(_cats(compute=0.7, input=0.2, host=0.1), 4)[1] == (
        "input-bound: 20% of the time waiting for data, 10% between executions: try a machine "
        "type with more vCPUs, or --read-parallelism/--data-threads"
    )
    assert profile.verdict(_cats(compute=0.9, input=0.05, host=0.05), 4)[1] == (
        "compute-bound: 5% of the time waiting for data, 5% between executions; the device is busy "
        "90% of the step time"
    )
    # the round trip beyond what a whole epoch per execution can hide
    line = profile.verdict(_cats(compute=0.02, host=0.98), 1, steps_per_epoch=16)[1]
    assert line.endswith("use trainer.steps_per_execution: 16 (the whole epoch) and fewer, longer epochs")
    assert profile.verdict([], 1) == (None, None)


def _trainer_module() -> tuple[dict[str, object], ast.Module]:
    """trainer/throughput.py's constants and its steps_per_execution_for, without TensorFlow."""
    tree = ast.parse(THROUGHPUT.read_text())
    names: dict[str, object] = {"math": math}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            names[node.targets[0].id] = node.value.value  # type: ignore[attr-defined]
    return names, tree


def test_the_thresholds_and_the_fix_are_the_trainers_own():
    names, tree = _trainer_module()
    assert (names["INPUT_BOUND"], names["HOST_BOUND"], names["HOST_TARGET"]) == (
        profile.INPUT_BOUND,
        profile.HOST_BOUND,
        profile.HOST_TARGET,
    )
    (function,) = [
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "steps_per_execution_for"
    ]
    exec(compile(ast.Module([function], []), str(THROUGHPUT), "exec"), names)
    for fraction in (0.01, 0.1, 0.31, 0.5, 0.9, 0.99, 1.0):
        for spe in (1, 8, 32):
            assert profile.steps_per_execution_for(fraction, spe) == names["steps_per_execution_for"](
                fraction, spe
            )


def test_no_trace_is_exit_2_saying_how_to_make_one(run_cli, tmp_path):
    (tmp_path / "run" / "logs" / "train").mkdir(parents=True)
    proc = run_cli("profile", str(tmp_path / "run"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        f"no TensorFlow profiler trace (plugins/profile/*/*.xplane.pb) under {tmp_path / 'run'}"
        in proc.stderr
    )
    assert 'hint: profile some steps: set trainer.profile_steps: "A,B"' in proc.stderr
    proc = run_cli("profile", str(tmp_path / "missing" / "run"))
    assert proc.returncode == 2 and "no such directory" in proc.stderr


def _empty_trace(root: Path) -> Path:
    session = root / "logs" / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    (session / "host.xplane.pb").write_bytes(b"")
    return session


def test_a_trace_that_captured_nothing_is_exit_2(run_cli, tmp_path):
    session = _empty_trace(tmp_path / "run")
    proc = run_cli("profile", str(tmp_path / "run"))
    assert proc.returncode == 2, proc.stderr
    assert f"the trace in {session} holds no step and no op" in proc.stderr


def test_without_xprof_profile_names_the_extra(tmp_path, monkeypatch):
    from vertex_trainer import api
    from vertex_trainer.errors import UserError

    _empty_trace(tmp_path)
    for name in ("xprof", "xprof.convert", "xprof.convert.raw_to_tool_data"):
        monkeypatch.setitem(sys.modules, name, None)  # as an environment without it
    with pytest.raises(UserError) as e:
        api.profile(str(tmp_path))
    assert e.value.exit_code == 2 and e.value.hint.startswith("pip install 'vertex-trainer[profile]'")
    assert lazy.LIBRARIES["xprof"].extra == "profile"


def test_on_a_cpu_the_host_between_executions_is_measured_from_the_steps_events():
    def event(name: str, ts: float, dur: float, **args: str) -> dict:
        return {"ph": "X", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 7, "args": args}

    events = [
        event("train 2", 0, 1000, epoch_num="0"),
        event("train_function", 300, 600),
        event("train 3", 1100, 900, epoch_num="0"),  # 100 us of the loop between the two
        event("train_function", 1200, 700),
        event("train_function", 5000, 700),  # outside the profiled steps: not counted
        {**event("train_function", 100, 100), "tid": 8},  # another thread
    ]
    window, outside = profile.between_executions(events, ["train 2", "train 3"])
    assert (window, outside) == (2.0, 0.7)  # ms: 2000 us of steps and loop, 1300 us executing
    cats = profile.measured_host(_cats(compute=0.6, input=0.2, host=0.2), 2, window, outside)
    assert {c.name: c.fraction for c in cats} == {"host": 0.35, "compute": 0.4875, "input": 0.1625}
    assert [c.ms_per_step for c in cats] == [round(c.fraction * 1.0, 4) for c in cats]
    assert profile.between_executions(events, ["train 9"]) is None


def test_a_sandbox_jobs_logs_are_copied_out_of_the_storage_emulator(tmp_path):
    """What `tensorboard JOB` serves for a sandbox job: its logs/ objects, as files in a folder."""
    from tests.shared import put_object, storage_emulator
    from vertex_trainer.performance.tensorboard_server import copy_prefix
    from vertex_trainer.settings import Settings

    objects = {"train/events.out.tfevents.1": b"e1", "plugins/profile/s/host.xplane.pb": b"x" * 10}
    with storage_emulator("sandbox") as url:
        for name, data in objects.items():
            put_object(url, f"gs://sandbox/runs/r1/logs/{name}", data)
        put_object(url, "gs://sandbox/runs/r1/metrics.json", b"{}")  # beside logs/: not copied
        copied = copy_prefix(Settings(storage_emulator=url), "gs://sandbox/runs/r1/logs", tmp_path)
    assert copied == 2
    assert {
        str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()
    } == objects


def test_keras_3s_profiled_batches_are_split_into_executions_and_the_host_between():
    """Keras 3 marks each profiled execution "Profiled batch" (no epoch): xprof's step table skips
    them, the trace's events still tell the host's share; the verdict claims no input split."""
    events = [
        {"ph": "X", "name": "Profiled batch", "ts": 0, "dur": 1000, "tid": 3, "args": {"step_num": "2"}},
        {"ph": "X", "name": "multi_step_on_iterator", "ts": 100, "dur": 800, "tid": 3},
        {"ph": "X", "name": "Profiled batch", "ts": 1000, "dur": 1000, "tid": 3, "args": {"step_num": "4"}},
        {"ph": "X", "name": "multi_step_on_iterator", "ts": 1050, "dur": 900, "tid": 3},
    ]
    assert profile.between_executions(events, [profile.BATCH_MARKER]) == (2.0, 0.3)
    assert profile.steps_per_execution(["Profiled batch 2", "Profiled batch 4"]) == 2
    bound, line = profile.verdict(_cats(execution=0.95, host=0.05), 2)
    assert bound is None and line.startswith("not host-bound: 5% of the time between executions; ")
    assert profile.verdict(_cats(execution=0.7, host=0.3), 2)[0] == "host"
