"""The verdict rules on constructed series (pure): each reading from the figures that define it,
the fix that fits a bundled-trainer job and a script job, and the figures from raw series."""

from __future__ import annotations

import dataclasses

import pytest

from vertex_trainer.vertex.utilization import (
    ROUND_TRIP_SPE,
    THRESHOLDS,
    Figure,
    PoolUse,
    TrainerFlags,
    replica_of,
    summarize,
    trainer_flags,
    verdict,
)

BUSY = THRESHOLDS.accelerator_busy
CPU_BUSY = THRESHOLDS.cpu_busy
BUNDLED = TrainerFlags(bundled=True, steps_per_execution="1", precision="float32")
SCRIPT = TrainerFlags(bundled=False)


def flat(value: float) -> Figure:
    return Figure(value, value, 3)


def pool(accelerator=None, cpu=None, memory=None) -> PoolUse:
    return PoolUse("workerpool0", 1, accelerator=accelerator, memory=memory, cpu=cpu)


def test_idle_accelerator_with_busy_cpus_is_input_bound():
    found = verdict(pool(flat(BUSY / 2), flat(min(1.0, CPU_BUSY + 0.2))), BUNDLED)
    assert found.kind == "input-bound"
    assert any("vCPUs" in fix for fix in found.fixes) and any("cache" in fix for fix in found.fixes)


def test_idle_accelerator_with_an_idle_host_is_host_bound_and_names_steps_per_execution():
    found = verdict(pool(flat(BUSY / 2), flat(CPU_BUSY / 3)), BUNDLED)
    assert found.kind == "host-bound"
    assert found.fixes == (f"trainer.steps_per_execution: 1 -> 0 (auto) or >= {ROUND_TRIP_SPE}",)
    auto = verdict(
        pool(flat(BUSY / 2), flat(CPU_BUSY / 3)), dataclasses.replace(BUNDLED, steps_per_execution=None)
    )
    assert "is auto here" in auto.fixes[0]


def test_a_script_job_gets_the_compile_line_to_add():
    found = verdict(pool(flat(BUSY / 2), flat(CPU_BUSY / 3)), SCRIPT)
    assert found.kind == "host-bound"
    assert f"model.compile(..., steps_per_execution={ROUND_TRIP_SPE})" in found.fixes[0]


def test_a_busy_accelerator_is_compute_bound_with_precision_and_batch_fixes():
    roomy = flat(THRESHOLDS.memory_headroom / 2)
    found = verdict(pool(flat(min(1.0, BUSY + 0.1)), flat(CPU_BUSY / 3), roomy), BUNDLED)
    assert found.kind == "compute-bound"
    assert "mixed precision" in found.fixes[0]
    assert "larger" in found.fixes[1] and "learning rate scaled" in found.fixes[1]
    # mixed precision already on (auto) and no headroom: nothing cheap is left to say
    tight = flat(min(1.0, THRESHOLDS.memory_headroom + 0.2))
    on = dataclasses.replace(BUNDLED, precision="auto")
    assert verdict(pool(flat(min(1.0, BUSY + 0.1)), None, tight), on).fixes == (
        "nothing cheap left: more accelerators, or a faster kind",
    )


@pytest.mark.parametrize(("accelerator", "cpu", "kind"), [(None, None, "no-data"), (None, 0.3, "cpu-only")])
def test_without_accelerator_figures(accelerator, cpu, kind):
    found = verdict(pool(accelerator, flat(cpu) if cpu is not None else None), SCRIPT)
    assert found.kind == kind


def test_the_threshold_itself_counts_as_busy():
    assert verdict(pool(flat(BUSY), flat(CPU_BUSY)), BUNDLED).kind == "compute-bound"
    assert verdict(pool(flat(BUSY - 0.01), flat(CPU_BUSY)), BUNDLED).kind == "input-bound"


def _series(task: str, values: list[float], **metric_labels: str) -> dict:
    return {
        "metric": {"type": "x", "labels": metric_labels},
        "resource": {"type": "cloudml_job", "labels": {"job_id": "1", "task_name": task} if task else {}},
        "points": [{"value": {"doubleValue": v}} for v in values],
    }


def test_figures_are_per_pool_means_and_peaks_over_every_replica():
    cpu = [
        _series("workerpool0-0", [0.2, 0.4]),
        _series("workerpool1-0", [0.9]),
        _series("workerpool1-1", [0.5]),
    ]
    accel = [_series("workerpool0-0", [0.6, 0.8])]
    pools = {p.pool: p for p in summarize({"cpu": cpu, "accelerator": accel})}
    assert pools["workerpool0"].cpu == Figure(pytest.approx(0.3), 0.4, 2)
    assert pools["workerpool0"].accelerator == Figure(pytest.approx(0.7), 0.8, 2)
    assert pools["workerpool1"].replicas == 2 and pools["workerpool1"].cpu == Figure(
        pytest.approx(0.7), 0.9, 2
    )
    assert pools["workerpool1"].accelerator is None


def test_series_without_a_task_name_fall_back_to_the_metric_labels_then_the_job():
    assert replica_of(_series("", [1.0], task_type="master", task_index="0")) == ("master", "master-0")
    assert replica_of(_series("", [1.0])) == ("job", "job")


def test_trainer_flags_tell_the_bundled_trainer_from_a_script_job():
    bundled = {
        "jobSpec": {
            "workerPoolSpecs": [
                {"containerSpec": {"imageUri": "i", "args": ["--model=resnet50", "--steps-per-execution=8"]}}
            ]
        }
    }
    assert trainer_flags(bundled) == TrainerFlags(True, "8", None)
    script = {
        "jobSpec": {"workerPoolSpecs": [{"containerSpec": {"imageUri": "i", "command": ["python", "t.py"]}}]}
    }
    assert trainer_flags(script) == TrainerFlags(False)
    package = {
        "jobSpec": {"workerPoolSpecs": [{"pythonPackageSpec": {"pythonModule": "trainer.task", "args": []}}]}
    }
    assert trainer_flags(package).bundled


def test_a_job_without_figures_says_why():
    from vertex_trainer.performance.utilization_text import utilization_lines
    from vertex_trainer.vertex.utilization import Utilization

    use = Utilization(
        "projects/p/locations/r/customJobs/1", "1", "JOB_STATE_PENDING", None, None, notes=("why",)
    )
    assert utilization_lines(use)[1:] == ["no figures yet", "note: why"]
