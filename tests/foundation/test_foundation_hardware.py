"""The hardware catalog and Vertex's rules, family by family."""

from __future__ import annotations

import pytest

from vertex_trainer import hardware as hw
from vertex_trainer.durations import fmt_duration, parse_duration
from vertex_trainer.errors import SpecError

CONTRACT_PRESETS = [
    "cpu",
    "t4x1",
    "l4x1",
    "v100x1",
    "v100x2",
    "v100x4",
    "v100x8",
    "a100x1",
    "a100x2",
    "a100x4",
    "a100x8",
    "a100-80gbx1",
    "a100-80gbx2",
    "a100-80gbx4",
    "a100-80gbx8",
    "h100x8",
    "h100-megax8",
    "h200x8",
    "b200x8",
    "tpu-v5e-1",
    "tpu-v5e-4",
    "tpu-v5e-8",
    "tpu-v3-8",
    "tpu-v2-8",
]


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
    # Multi-host TPU slices: the machine type of one host plus the slice's topology.
    ("ct5lp-hightpu-4t", None, 0, "2x4"),
    ("ct5lp-hightpu-4t", None, 0, "4x4"),
    ("ct5lp-hightpu-4t", None, 0, "16x16"),
    ("ct4p-hightpu-4t", None, 0, "2x2x1"),
    ("ct4p-hightpu-4t", None, 0, "2x2x4"),
    ("a4x-highgpu-4g", "NVIDIA_GB200", 4, None),
    ("g4-standard-48", "NVIDIA_RTX_PRO_6000", 1, None),
    ("g4-standard-384", "NVIDIA_RTX_PRO_6000", 8, None),
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
    ("ct5lp-hightpu-8t", None, 0, "4x4", "tpu_topology", "4x4 runs on ct5lp-hightpu-4t"),
    ("ct5lp-hightpu-4t", None, 0, "2x2x1", "tpu_topology", "2x2x1 runs on ct4p-hightpu-4t (TPU v4)"),
    ("ct4p-hightpu-4t", None, 0, "4x4", "tpu_topology", "2x2x1, 2x2x2"),
    ("ct4p-hightpu-4t", "TPU_V4_POD", 4, "2x2x1", "accelerator_type", "TPU v4 host"),
    ("n1-standard-8", "TPU_V4_POD", 4, None, "accelerator_type", "ct4p-hightpu-4t"),
    ("a4x-highgpu-4g", "NVIDIA_GB200", 8, None, "accelerator_count", "exactly 4"),
    ("a4-highgpu-8g", "NVIDIA_GB200", 4, None, "accelerator_type", "a4x-highgpu-4g"),
    ("g4-standard-48", "NVIDIA_RTX_PRO_6000", 2, None, "accelerator_count", "g4-standard-96"),
    ("n1-standard-8", "NVIDIA_RTX_PRO_6000", 1, None, "accelerator_type", "g4-standard-48"),
    ("a9-supergpu-8g", None, 0, None, "machine_type", "not a machine type"),
]


@pytest.mark.parametrize(
    "machine_type,acc,count,topo,field,fragment",
    INVALID,
    ids=[f"{v[0]}-{v[1]}-{v[2]}-{v[3]}" for v in INVALID],
)
def test_invalid_combinations(machine_type, acc, count, topo, field, fragment):
    with pytest.raises(SpecError) as e:
        check(machine_type, acc, count, topo)
    assert e.value.field == f"hardware.{field}"
    assert fragment in str(e.value)


def sched(
    machine_type="a3-highgpu-8g",
    acc="NVIDIA_H100_80GB",
    strategy="flex-start",
    max_wait=None,
    timeout=None,
    restart=False,
    disable=False,
    replicas=1,
    tpu_topology=None,
):
    hw.check_scheduling(
        hardware_field="hardware",
        machine_type=machine_type,
        accelerator_type=acc,
        strategy=strategy,
        max_wait=max_wait,
        timeout=timeout,
        restart=restart,
        disable_retries=disable,
        replicas=replicas,
        tpu_topology=tpu_topology,
    )


@pytest.mark.parametrize(
    "machine_type,acc",
    [
        ("g2-standard-8", "NVIDIA_L4"),
        ("a2-highgpu-8g", "NVIDIA_TESLA_A100"),
        ("a2-ultragpu-1g", "NVIDIA_A100_80GB"),
        ("a3-highgpu-8g", "NVIDIA_H100_80GB"),
        ("a3-ultragpu-8g", "NVIDIA_H200_141GB"),
        ("a4-highgpu-8g", "NVIDIA_B200"),
    ],
)
def test_flex_start_serves_dws_gpus(machine_type, acc):
    sched(machine_type, acc, max_wait=4 * 3600, timeout=7 * 86400)


@pytest.mark.parametrize(
    "machine_type,acc",
    [
        ("n1-standard-8", "NVIDIA_TESLA_V100"),
        ("n1-standard-8", "NVIDIA_TESLA_T4"),
        ("n1-standard-8", None),
        ("cloud-tpu", "TPU_V3"),
        ("ct5lp-hightpu-4t", None),
    ],
)
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


@pytest.mark.parametrize(
    "value,expected",
    [
        ("NVIDIA_V100", "NVIDIA_TESLA_V100"),
        ("h100x9", "h100x8"),
        ("max_wiat", "max_wait"),
        ("a100_80gbx8", "a100-80gbx8"),
    ],
)
def test_suggestions(value, expected):
    choices = list(hw.ACCELERATORS) + list(hw.PRESETS) + ["max_wait", "timeout", "strategy"]
    assert hw.suggest(value, choices) == expected


@pytest.mark.parametrize("bad", ["4hours", "-5", "h", "", "1.5h", True])
def test_bad_durations(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_fmt_duration_round_trips():
    for seconds in (0, 59, 3600, 5400, 7 * 86400, 90061):
        assert parse_duration(fmt_duration(seconds)) == seconds


@pytest.mark.parametrize(
    "machine_type,acc",
    [
        ("a4x-highgpu-4g", "NVIDIA_GB200"),
        ("g4-standard-48", "NVIDIA_RTX_PRO_6000"),
        ("ct4p-hightpu-4t", None),
    ],
)
def test_flex_start_refuses_what_dws_does_not_list(machine_type, acc):
    with pytest.raises(SpecError) as e:
        sched(machine_type, acc)
    assert e.value.field == "scheduling.strategy" and "NVIDIA_B200" in str(
        e.value
    )  # the hint lists what it serves


def test_tpu_slice_is_one_replica_and_the_topology_gives_the_hosts():
    for preset, chips, hosts in (
        ("tpu-v5e-8", 8, 1),
        ("tpu-v5e-16", 16, 4),
        ("tpu-v5e-256", 256, 64),
        ("tpu-v4-8", 4, 1),
        ("tpu-v4-32", 16, 4),
    ):
        p = hw.PRESETS[preset]
        assert hw.tpu_slice(p.machine_type, p.tpu_topology).chips == chips
        assert hw.machines_per_replica(p.machine_type, p.tpu_topology) == hosts
        assert hw.devices_per_machine(p.machine_type, None, 0, p.tpu_topology) == chips
        sched(p.machine_type, None, strategy="spot", replicas=1)
    with pytest.raises(SpecError) as e:
        sched("ct5lp-hightpu-4t", None, strategy="spot", replicas=4, tpu_topology="2x2")
    assert e.value.field == "replicas" and "one replica" in str(e.value)
    assert "tpu-v5e-" in e.value.hint and "tpu-v4" not in e.value.hint  # a larger slice of the same TPU
    assert hw.machines_per_replica("a3-highgpu-8g", None) == 1


def test_new_machines_boot_from_hyperdisk_and_a4x_is_arm():
    assert hw.boots_from_hyperdisk("a4x-highgpu-4g") and hw.boots_from_hyperdisk("g4-standard-96")
    assert hw.boots_from_hyperdisk("a4-highgpu-8g") and not hw.boots_from_hyperdisk("a3-highgpu-8g")
    assert not hw.boots_from_hyperdisk("n1-standard-8") and not hw.boots_from_hyperdisk("no-such-machine")
    assert hw.machine("a4x-highgpu-4g").arch == "arm64" and hw.machine("g4-standard-48").arch == "amd64"


def test_catalog_rows_cite_their_sources():
    rows = {r["preset"]: r for r in hw.catalog_rows()}
    # tpu-vm (cited by the v5e and v6e rows) was re-read 2026-12-02; v5p and v6e are new that day.
    read = {"tpu-v5e-16": "2026-12-02", "tpu-v5p-8": "2026-12-02", "tpu-v6e-16": "2026-12-02"}
    for name in ("gb200x4", "rtx-pro-6000x1", "rtx-pro-6000x8", "tpu-v4-8", *read):
        assert rows[name]["sources"] and all(u.startswith("https://") for u in rows[name]["sources"]), name
        assert rows[name]["read"] == read.get(name, "2026-12-01"), name
    assert rows["gb200x4"]["accelerator_count"] == 4 and rows["gb200x4"]["accelerator_memory_gb"] == 4 * 186
    assert rows["tpu-v5e-16"]["hosts"] == 4 and rows["tpu-v5e-16"]["accelerator_count"] == 16
    assert rows["tpu-v4-8"]["training"] == "unconfirmed" and rows["h100x8"]["training"] == "offered"


def test_public_lookups_for_other_layers():
    m = hw.machine("a4x-highgpu-4g")
    assert (m.accelerator, m.counts, m.vcpus, m.memory_gb) == ("NVIDIA_GB200", (4,), 140, 884)
    assert hw.accelerator("NVIDIA_GB200").kind == "gpu" and hw.accelerator("NVIDIA_TESLA_K80") is None
    assert {a.name for a in hw.accelerators()} == set(hw.ACCELERATORS)
    assert [p.name for p in hw.presets()] == list(hw.PRESETS)
    assert "ct4p-hightpu-4t" in {m.name for m in hw.machines()}
    assert hw.machine("n1-standard-7") is None and hw.machine("e2-standard-7").vcpus == 7
