""" "Did you mean" ranks choices by how people misspell (vertex_trainer/suggest.py, issue 24 item 5)."""

from __future__ import annotations

import pytest

import vertex_trainer as vt
from vertex_trainer import hardware as hw
from vertex_trainer import regions
from vertex_trainer.errors import SpecError
from vertex_trainer.suggest import nearest, suggest


@pytest.mark.parametrize(
    "value,expected",
    [
        ("NVIDIA_A100", "NVIDIA_TESLA_A100"),  # the vendor word left out, not the 80GB variant
        ("NVIDIA_V100", "NVIDIA_TESLA_V100"),
        ("NVIDIA_H100", "NVIDIA_H100_80GB"),  # the fewest extra words: not _MEGA_80GB
        ("nvidia_tesla_t5", "NVIDIA_TESLA_T4"),  # a digit off, any case
        ("A100_80GB", "NVIDIA_A100_80GB"),
    ],
)
def test_accelerators(value, expected):
    assert suggest(value, hw.ACCELERATORS) == expected


@pytest.mark.parametrize(
    "value,expected",
    [("h100x9", "h100x8"), ("h100x7", "h100x8"), ("a100_80gbx8", "a100-80gbx8"), ("tpu_v5e_8", "tpu-v5e-8")],
)
def test_presets(value, expected):
    assert suggest(value, hw.PRESETS) == expected


def test_a_key_without_its_section_names_the_section():
    choices = ["name", "region", "replicas", "trainer.epochs", "trainer.batch_size", "scheduling.max_wait"]
    assert suggest("epochs", choices) == "trainer.epochs"
    assert suggest("batchsize", choices) == "trainer.batch_size"
    assert suggest("replica", choices) == "replicas"


def test_regions_nearest_first():
    assert nearest("us-central9", regions.REGIONS)[0] == "us-central1"
    assert nearest("europe-west9x", regions.REGIONS)[0] == "europe-west9"
    assert len(nearest("us-central9", regions.REGIONS, n=3)) == 3


def test_nothing_close_offers_nothing():
    assert suggest("zzzz", hw.ACCELERATORS) is None and nearest("", ["a"]) == []


def test_set_without_the_section_points_at_it():
    with pytest.raises(SpecError) as e:
        vt.load_spec("job_specs/quickstart-local.yaml", set=["epochs=5"])
    assert "epochs: unknown key; did you mean 'trainer.epochs'?" in e.value.message
    with pytest.raises(SpecError) as e:
        vt.load_spec(
            "job_specs/quickstart-local.yaml",
            set=[
                "hardware={machine_type: a2-highgpu-1g, accelerator_type: NVIDIA_A100, accelerator_count: 1}"
            ],
        )
    assert "did you mean 'NVIDIA_TESLA_A100'?" in str(e.value)
