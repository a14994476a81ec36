"""The hardware catalog (vertex_trainer/catalog/*.csv) against the v1 API and its own sources."""

from __future__ import annotations

import json
import math
import re
from importlib import resources

from tests.cli_support import edge_env, invoke
from vertex_trainer import catalog, regions
from vertex_trainer import hardware as hw

# AcceleratorType values that Vertex AI training does NOT offer, each with the reason. Every other
# value of the installed enum must have a row in catalog/accelerators.csv.
NOT_OFFERED = {
    # The enum's zero value: "Unspecified accelerator type, which means no accelerator" (a CPU job).
    "ACCELERATOR_TYPE_UNSPECIFIED": "no accelerator",
    # "Deprecated: Nvidia Tesla K80 GPU has reached end of support" (the v1 discovery document,
    # revision 20261106; https://cloud.google.com/compute/docs/eol/k80-eol).
    "NVIDIA_TESLA_K80": "deprecated, end of support",
}


def test_every_training_accelerator_of_the_installed_enum_is_in_the_catalog():
    from google.cloud.aiplatform_v1 import AcceleratorType

    enum = {e.name for e in AcceleratorType}
    missing = sorted(enum - set(NOT_OFFERED) - set(hw.ACCELERATORS))
    assert not missing, f"add to vertex_trainer/catalog/accelerators.csv (with its source): {missing}"
    assert set(NOT_OFFERED) <= enum, "NOT_OFFERED names a value the enum no longer has"
    enum_rows = {a.name for a in hw.accelerators() if a.api_enum}
    assert not enum_rows - enum, "the catalog names accelerators the API does not have"
    # v5p and v6e have no AcceleratorType value: their slice machines imply them (catalog comment).
    assert set(hw.ACCELERATORS) - enum_rows == {"TPU_V5P", "TPU_V6E"}
    for name in ("NVIDIA_GB200", "NVIDIA_RTX_PRO_6000", "TPU_V4_POD"):  # docs/contract.md section 11
        assert name in hw.ACCELERATORS


def test_every_row_cites_a_known_dated_source():
    known = catalog.sources()
    assert all(
        re.fullmatch(r"https://\S+", s.url) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", s.read)
        for s in known.values()
    )
    tables = (
        "accelerators",
        "machines",
        "tpu_topologies",
        "n1_gpus",
        "cpu_families",
        "presets",
        "regions",
        "training_regions",
        "training_images",
        "networking",  # issue 35: multi-node networking, Reduction Server, the models' sizes
        "reducers",
        "model_sizes",
    )
    for name in tables:
        rows = catalog.table(name)
        assert rows, name
        for row in rows:
            assert row["source"] and set(row["source"].split()) <= set(known), (name, row)
    used = {i for name in tables for row in catalog.table(name) for i in row["source"].split()}
    comments = "".join(resources.files(catalog).joinpath(f"{name}.csv").read_text() for name in tables)
    unused = {i for i in set(known) - used if f"(source {i})" not in comments}
    assert not unused, f"sources.csv lists ids that no row or table comment cites: {unused}"


def test_tables_agree_with_each_other():
    for m in hw.machines():
        assert all(a in hw.ACCELERATORS for a in m.accelerators), m.name
        if m.family == "tpu-slice":
            assert m.tpu_topologies and m.tpu_chips, m.name
    for s in hw.TPU_SLICES.values():
        m = hw.machine(s.machine_type)
        assert s.chips == math.prod(int(x) for x in s.topology.split("x")), s
        assert s.hosts == max(1, s.chips // m.tpu_chips) and s.chips <= s.hosts * m.tpu_chips, s
    assert set(regions.TRAINING) == set(hw.ACCELERATORS)  # every accelerator says where it trains
    assert all(r in regions.REGIONS for rs in regions.TRAINING.values() for r in rs)
    assert all(regions.quota_metric(a, "standard") for a in hw.ACCELERATORS)
    served = {a.name for a in hw.accelerators() if a.flex_start}  # the Flex Start table (source dws)
    assert served == {
        "NVIDIA_L4",
        "NVIDIA_TESLA_A100",
        "NVIDIA_A100_80GB",
        "NVIDIA_H100_80GB",
        "NVIDIA_H100_MEGA_80GB",
        "NVIDIA_H200_141GB",
        "NVIDIA_B200",
    }


def test_new_accelerators_warn_where_the_docs_are_not_conclusive():
    # TPU v4: Cloud TPU serves it only in us-central2, not a Vertex AI training region.
    v4 = regions.availability_warning("us-central1", "TPU_V4_POD")
    assert "no Vertex AI training region" in v4 and "us-central2" in v4
    # RTX PRO 6000: in the API, on no Vertex AI training page yet; GB200: listed, regions uncertain.
    assert "the service decides" in regions.availability_warning("us-central1", "NVIDIA_RTX_PRO_6000")
    assert regions.availability_warning("us-central1", "NVIDIA_GB200") is None
    assert "may not offer NVIDIA_GB200" in regions.availability_warning("europe-west4", "NVIDIA_GB200")
    assert regions.availability_warning("us-central1", "NVIDIA_H100_80GB") is None


def test_hardware_command_lists_the_new_accelerators_with_their_sources(tmp_path):
    env = edge_env(tmp_path)
    text = invoke(["hardware"], env=env)  # in this process (tests/cli_support.py)
    assert text.returncode == 0, text.stderr
    for needle in (
        "gb200x4",
        "a4x-highgpu-4g",
        "rtx-pro-6000x8",
        "g4-standard-384",
        "tpu-v4-8",
        "ct4p-hightpu-4t",
        "tpu-v5e-16",
        "# sources:",
        "https://cloud.google.com/compute/docs/gpus (read 2026-12-01)",
    ):
        assert needle in text.stdout, needle
    gb200 = next(line for line in text.stdout.splitlines() if line.startswith("#   NVIDIA_GB200:"))
    assert "us-central1" in gb200 and "configure-compute" in gb200
    out = invoke(["hardware", "--output", "json"], env=env)
    rows = {r["preset"]: r for r in json.loads(out.stdout)}
    for name, acc in (
        ("gb200x4", "NVIDIA_GB200"),
        ("rtx-pro-6000x1", "NVIDIA_RTX_PRO_6000"),
        ("tpu-v4-8", "TPU_V4_POD"),
    ):
        assert rows[name]["accelerator_type"] == acc and rows[name]["sources"] and rows[name]["read"]
        assert rows[name]["regions"]["read"] and rows[name]["regions"]["sources"]
    assert rows["tpu-v5e-16"]["hosts"] == 4 and rows["cpu"]["regions"] is None


def test_multi_host_slices_render_as_one_replica_with_any_trainer(base_spec):
    from vertex_trainer import render
    from vertex_trainer.contract import Artifact
    from vertex_trainer.spec import build_spec

    base_spec.update(hardware="tpu-v5e-16")
    base_spec["trainer"]["batch_size"] = 256
    spec = build_spec(base_spec)  # image.uri: the image's own trainer decides how it spans the hosts
    assert spec.total_devices == 16
    pools = render.custom_job(spec, None, "key")["jobSpec"]["workerPoolSpecs"]
    assert len(pools) == 1 and pools[0]["replicaCount"] == "1"
    assert pools[0]["machineSpec"] == {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "4x4"}
    # The bundled trainer spans a multi-host slice too (issue 35; tests/tpu): one replica, 4 hosts.
    base_spec["image"] = {"repository": "us-central1-docker.pkg.dev/my-project/training/trainer"}
    spec = build_spec(base_spec)
    assert spec.runs_bundled_trainer and spec.total_devices == 16
    built = Artifact(f"{base_spec['image']['repository']}:abc")
    pools = render.custom_job(spec, built, "key")["jobSpec"]["workerPoolSpecs"]
    assert len(pools) == 1 and pools[0]["machineSpec"]["tpuTopology"] == "4x4"


def test_arm_machines_warn_that_the_image_must_be_arm64(base_spec):
    from vertex_trainer.spec import build_spec
    from vertex_trainer.spec.rules import warnings

    base_spec.update(hardware="gb200x4")
    base_spec["trainer"]["batch_size"] = 256
    assert any("linux/arm64" in w for w in warnings(build_spec(base_spec)))
    base_spec.update(hardware="b200x8")
    assert not any("arm64" in w for w in warnings(build_spec(base_spec)))
