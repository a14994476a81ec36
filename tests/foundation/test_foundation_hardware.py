"""The hardware catalog and Vertex's rules, family by family."""

from __future__ import annotations

import pytest

from vertex_trainer import hardware as hw
from vertex_trainer.errors import SpecError

CONTRACT_PRESETS = ["cpu", "t4x1", "l4x1", "v100x1", "v100x2", "v100x4", "v100x8", "a100x1", "a100x2", "a100x4",
                    "a100x8", "a100-80gbx1", "a100-80gbx2", "a100-80gbx4", "a100-80gbx8", "h100x8", "h100-megax8",
                    "h200x8", "b200x8", "tpu-v5e-1", "tpu-v5e-4", "tpu-v5e-8", "tpu-v3-8", "tpu-v2-8"]


def check(machine_type, accelerator_type=None, count=0, topology=None):
    hw.check_hardware("hardware", machine_type, accelerator_type, count, topology)


def test_contract_presets_exist_and_are_valid():
    for name in CONTRACT_PRESETS:
        assert name in hw.PRESETS, name
    for preset in hw.PRESETS.values():
        check(preset.machine_type, preset.accelerator_type, preset.accelerator_count, preset.tpu_topology)


VALID = [
    ("n1-standard-4", None, 0, None),
    ("e2-standard-8", None, 0, None),
    ("n1-standard-8", "NVIDIA_TESLA_T4", 1, None),
    ("n1-standard-32", "NVIDIA_TESLA_T4", 4, None),
    ("n1-highmem-8", "NVIDIA_TESLA_V100", 1, None),
    ("n1-standard-96", "NVIDIA_TESLA_V100", 8, None),
    ("n1-standard-16", "NVIDIA_TESLA_P100", 1, None),
    ("n1-standard-4", "NVIDIA_TESLA_P4", 2, None),
    ("g2-standard-4", "NVIDIA_L4", 1, None),
    ("g2-standard-96", "NVIDIA_L4", 8, None),
    ("a2-highgpu-2g", "NVIDIA_TESLA_A100", 2, None),
    ("a2-megagpu-16g", "NVIDIA_TESLA_A100", 16, None),
    ("a2-ultragpu-4g", "NVIDIA_A100_80GB", 4, None),
    ("a3-highgpu-4g", "NVIDIA_H100_80GB", 4, None),
    ("a3-highgpu-8g", "NVIDIA_H100_80GB", 8, None),
    ("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8, None),
    ("a3-ultragpu-8g", "NVIDIA_H200_141GB", 8, None),
    ("a4-highgpu-8g", "NVIDIA_B200", 8, None),
    ("cloud-tpu", "TPU_V2", 8, None),
    ("cloud-tpu", "TPU_V3", 8, None),
    ("ct5lp-hightpu-1t", None, 0, "1x1"),
    ("ct5lp-hightpu-4t", None, 0, "2x2"),
    ("ct5lp-hightpu-8t", None, 0, "2x4"),
]


@pytest.mark.parametrize("machine_type,acc,count,topo", VALID, ids=[f"{v[0]}-{v[1]}-{v[2]}" for v in VALID])
def test_valid_combinations(machine_type, acc, count, topo):
    check(machine_type, acc, count, topo)


INVALID = [
    # (machine, accelerator, count, topology, field, fragment)
    ("n1-standard-8", "NVIDIA_TESLA_T4", 3, None, "accelerator_count", "allowed counts: 1, 2, 4"),
    ("n1-standard-64", "NVIDIA_TESLA_T4", 2, None, "machine_type", "at most 48"),
    ("n1-highmem-16", "NVIDIA_TESLA_V100", 1, None, "machine_type", "at most 12"),
    ("n1-standard-8", "NVIDIA_TESLA_A100", 1, None, "accelerator_type", "a2-highgpu-1g"),
    ("n1-standard-8", None, 2, None, "accelerator_type", "no accelerator_type"),
    ("e2-standard-8", "NVIDIA_TESLA_T4", 1, None, "accelerator_type", "takes no accelerators"),
    ("g2-standard-8", "NVIDIA_L4", 2, None, "accelerator_count", "g2-standard-24"),
    ("g2-standard-8", "NVIDIA_TESLA_T4", 1, None, "accelerator_type", "takes NVIDIA_L4"),
    ("a2-highgpu-8g", "NVIDIA_A100_80GB", 8, None, "accelerator_type", "a2-ultragpu-8g"),
    ("a2-ultragpu-8g", "NVIDIA_A100_80GB", 4, None, "accelerator_count", "a2-ultragpu-4g"),
    ("a3-highgpu-8g", "NVIDIA_H100_80GB", 16, None, "accelerator_count", "exactly 8"),
    ("a3-highgpu-8g", None, 0, None, "accelerator_type", "must be given"),
    ("a3-megagpu-8g", "NVIDIA_H100_80GB", 8, None, "accelerator_type", "a3-highgpu-8g"),
    ("a3-ultragpu-8g", "NVIDIA_H100_80GB", 8, None, "accelerator_type", "takes NVIDIA_H200_141GB"),
    ("a4-highgpu-8g", "NVIDIA_B200", 4, None, "accelerator_count", "exactly 8"),
    ("cloud-tpu", "NVIDIA_TESLA_V100", 8, None, "accelerator_type", "TPU_V2 or TPU_V3"),
    ("n1-standard-8", "TPU_V3", 8, None, "accelerator_type", "cloud-tpu"),
    ("ct5lp-hightpu-1t", None, 0, "2x2", "tpu_topology", "1x1"),
    ("ct5lp-hightpu-4t", "NVIDIA_L4", 1, "2x2", "accelerator_type", "TPU v5e host"),
    ("ct5lp-hightpu-8t", "TPU_V5_LITEPOD", 8, "2x4", "accelerator_type", "implies the chips"),
    ("ct5lp-hightpu-4t", None, 8, "2x2", "accelerator_count", "4 chips"),
    ("n1-standard-8", None, 0, "2x2", "tpu_topology", "only TPU v5e"),
    ("a9-supergpu-8g", None, 0, None, "machine_type", "not a machine type"),
]


@pytest.mark.parametrize("machine_type,acc,count,topo,field,fragment", INVALID,
                         ids=[f"{v[0]}-{v[1]}-{v[2]}-{v[3]}" for v in INVALID])
def test_invalid_combinations(machine_type, acc, count, topo, field, fragment):
    with pytest.raises(SpecError) as e:
        check(machine_type, acc, count, topo)
    assert e.value.field == f"hardware.{field}"
    assert fragment in str(e.value)


def sched(machine_type="a3-highgpu-8g", acc="NVIDIA_H100_80GB", strategy="flex-start", max_wait=None,
          timeout=None, restart=False, disable=False, replicas=1):
    hw.check_scheduling(hardware_field="hardware", machine_type=machine_type, accelerator_type=acc,
                        strategy=strategy, max_wait=max_wait, timeout=timeout, restart=restart,
                        disable_retries=disable, replicas=replicas)


@pytest.mark.parametrize("machine_type,acc", [("g2-standard-8", "NVIDIA_L4"), ("a2-highgpu-8g", "NVIDIA_TESLA_A100"),
                                              ("a2-ultragpu-1g", "NVIDIA_A100_80GB"),
                                              ("a3-highgpu-8g", "NVIDIA_H100_80GB"),
                                              ("a3-ultragpu-8g", "NVIDIA_H200_141GB"), ("a4-highgpu-8g", "NVIDIA_B200")])
def test_flex_start_serves_dws_gpus(machine_type, acc):
    sched(machine_type, acc, max_wait=4 * 3600, timeout=7 * 86400)


@pytest.mark.parametrize("machine_type,acc", [("n1-standard-8", "NVIDIA_TESLA_V100"), ("n1-standard-8", "NVIDIA_TESLA_T4"),
                                              ("n1-standard-8", None), ("cloud-tpu", "TPU_V3"),
                                              ("ct5lp-hightpu-4t", None)])
def test_flex_start_refuses_others(machine_type, acc):
    with pytest.raises(SpecError) as e:
        sched(machine_type, acc)
    assert e.value.field == "scheduling.strategy"


def test_flex_start_timeout_and_max_wait_rules():
    with pytest.raises(SpecError, match="7 days"):
        sched(timeout=7 * 86400 + 1)
    with pytest.raises(SpecError, match="only applies to flex-start"):
        sched(strategy="spot", max_wait=60)
    sched(strategy="spot")
    sched(max_wait=0)  # 0 = wait indefinitely


def test_small_h100_needs_spot_or_flex():
    with pytest.raises(SpecError, match="Spot or Flex Start"):
        sched("a3-highgpu-2g", "NVIDIA_H100_80GB", strategy="standard")
    sched("a3-highgpu-2g", "NVIDIA_H100_80GB", strategy="spot")
    sched("a3-highgpu-2g", "NVIDIA_H100_80GB", strategy="flex-start")


def test_devices_and_precision():
    assert hw.devices_per_machine("a3-highgpu-8g", "NVIDIA_H100_80GB", 8, None) == 8
    assert hw.devices_per_machine("ct5lp-hightpu-8t", None, 0, "2x4") == 8
    assert hw.devices_per_machine("n1-standard-8", None, 0, None) == 1
    assert hw.default_precision("n1-standard-8", "NVIDIA_TESLA_V100") == "mixed_float16"
    assert hw.default_precision("a3-highgpu-8g", "NVIDIA_H100_80GB") == "mixed_bfloat16"
    assert hw.default_precision("ct5lp-hightpu-4t", None) == "mixed_bfloat16"
    assert hw.default_precision("n1-standard-8", None) == "float32"


def test_catalog_rows():
    rows = {r["preset"]: r for r in hw.catalog_rows()}
    assert rows["h100x8"]["accelerator_memory_gb"] == 640
    assert rows["h100x8"]["flex_start"] is True and rows["v100x4"]["flex_start"] is False
    assert rows["tpu-v5e-8"]["accelerator_count"] == 8 and rows["tpu-v5e-8"]["tpu_topology"] == "2x4"
    assert rows["h100x1"]["spot_or_flex_only"] is True


@pytest.mark.parametrize("value,expected", [("NVIDIA_V100", "NVIDIA_TESLA_V100"), ("h100x9", "h100x8"),
                                            ("max_wiat", "max_wait"), ("a100_80gbx8", "a100-80gbx8")])
def test_suggestions(value, expected):
    choices = list(hw.ACCELERATORS) + list(hw.PRESETS) + ["max_wait", "timeout", "strategy"]
    assert hw.suggest(value, choices) == expected


@pytest.mark.parametrize("bad", ["4hours", "-5", "h", "", "1.5h", True])
def test_bad_durations(bad):
    with pytest.raises(ValueError):
        hw.parse_duration(bad)


def test_fmt_duration_round_trips():
    for seconds in (0, 59, 3600, 5400, 7 * 86400, 90061):
        assert hw.parse_duration(hw.fmt_duration(seconds)) == seconds
