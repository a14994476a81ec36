"""Issue 35 items 1, 2 and 5: Reduction Server (spec rules, the rendered reducer pool against the
v1 API, the plugin in the GPU image, its price, local runs without it), the networking catalog,
and the scaling estimate of `cost` / `cost --compare`. Pure: no TensorFlow, no network."""

from __future__ import annotations

import json
import math

import pytest

from vertex_trainer import catalog, pricing, render
from vertex_trainer.contract import Artifact
from vertex_trainer.cost import compare as cost_compare
from vertex_trainer.cost import estimate as cost
from vertex_trainer.cost import scaling_model
from vertex_trainer.errors import SpecError
from vertex_trainer.local import cluster
from vertex_trainer.packaging.templates import render_dockerfile
from vertex_trainer.spec import build_spec
from vertex_trainer.spec import scaling as spec_scaling

from .conftest import scale_data

ARTIFACT = Artifact("us-central1-docker.pkg.dev/my-project/training/trainer:abc")
REDUCER_IMAGE = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"


def spec_of(**over):
    return build_spec(scale_data(**over))


def test_four_a100_machines_with_auto_reducers_render_a_valid_v1_custom_job():
    from google.cloud import aiplatform_v1

    job = render.custom_job(spec_of(), ARTIFACT)
    pools = job["jobSpec"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == ["1", "3", "13"]
    # 4 x a2-highgpu-8g at 100 Gbps = 400 Gbps; n1-highcpu-16 gives 32: ceil(400 / 32) = 13.
    assert pools[2] == {
        "machineSpec": {"machineType": "n1-highcpu-16"},
        "replicaCount": "13",
        "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
        "containerSpec": {"imageUri": REDUCER_IMAGE},
    }
    parsed = aiplatform_v1.CustomJob.from_json(json.dumps(job))  # strict: unknown fields raise
    reducers = parsed.job_spec.worker_pool_specs[2]
    assert reducers.machine_spec.machine_type == "n1-highcpu-16"
    assert reducers.replica_count == 13
    assert reducers.container_spec.image_uri == REDUCER_IMAGE
    assert not reducers.machine_spec.accelerator_count


def test_the_reducers_image_is_the_nearest_multi_region_and_a_number_is_taken_as_given():
    job = render.custom_job(spec_of(region="europe-west4", scaling={"reduction_server": 5}), ARTIFACT)
    pool = job["jobSpec"]["workerPoolSpecs"][2]
    assert pool["replicaCount"] == "5"
    assert pool["containerSpec"]["imageUri"].startswith("europe-docker.pkg.dev/vertex-ai-restricted/")
    # 5 x 32 Gbps < 400 Gbps of workers: valid, with a warning naming what auto would use.
    (short,) = spec_scaling.warnings(spec_of(scaling={"reduction_server": 5}))
    assert "160 Gbps" in short and "400 Gbps" in short and "use 13" in short
    assert spec_scaling.warnings(spec_of()) == []  # auto covers the workers; the bundled image


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"hardware": "tpu-v5e-8", "replicas": 1}, "TPU"),
        ({"hardware": "a100x8", "replicas": 1}, "2 or more machines"),
        ({"hardware": {"machine_type": "n1-standard-8"}, "replicas": 2}, "has no GPU"),
    ],
)
def test_reduction_server_is_refused_where_it_cannot_help(over, words):
    with pytest.raises(SpecError) as e:
        spec_of(**over)
    assert e.value.exit_code == 2
    assert "scaling.reduction_server" in str(e.value) and words in str(e.value)


def test_an_image_of_your_own_gets_a_warning_naming_the_plugin_a_prebuilt_one_none():
    mine = spec_of(image={"uri": "us-central1-docker.pkg.dev/my-project/training/mine:1"})
    (warning,) = spec_scaling.warnings(mine)
    assert "google-reduction-server" in warning and "cannot" in warning
    prebuilt = spec_of(image={"uri": "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest"})
    assert spec_scaling.warnings(prebuilt) == []


def test_the_gpu_image_carries_the_plugin_and_only_it():
    gpu = render_dockerfile("gpu")
    assert "apt-get install -y --no-install-recommends google-reduction-server" in gpu
    assert "https://packages.cloud.google.com/apt google-fast-socket main" in gpu
    assert gpu.index("google-reduction-server") < gpu.index("USER 10001")  # installed as root
    assert "google-reduction-server" not in render_dockerfile("cpu")
    assert "google-reduction-server" not in render_dockerfile("tpu")


def test_cost_prices_the_reducers_as_cpu_machines_from_the_snapshot():
    book = pricing.load_snapshot()
    spec = spec_of()
    est = cost.estimate(spec, book)

    def price(machine_type, acc=None, n=0):
        return pricing.machine_price(
            book,
            machine_type=machine_type,
            accelerator_type=acc,
            accelerator_count=n,
            region="us-central1",
            strategy="standard",
        ).hourly

    workers = 4 * price("a2-highgpu-8g", "NVIDIA_TESLA_A100", 8)
    reducers = 13 * price("n1-highcpu-16")
    assert reducers == pytest.approx(13 * (16 * 0.03635265 + 14.4 * 0.00487255))
    assert est.attempts[0].hourly == pytest.approx(workers + reducers)
    assert any(n.startswith("reducers (Reduction Server): 8.47 USD/h") for n in est.notes)
    # cost --compare prices the reducers in its rows too: the spec's own row is the attempt's price.
    (own,) = [r for r in cost_compare.alternatives(spec, book, est) if r.current]
    assert own.hourly == pytest.approx(est.attempts[0].hourly)
    # What an ended job cost reads the same pools from the rendered body.
    body = render.custom_job(spec, ARTIFACT)
    ended = {
        **body,
        "name": "projects/1/locations/us-central1/customJobs/2",
        "startTime": "2026-12-01T00:00:00Z",
        "endTime": "2026-12-01T02:00:00Z",
    }
    assert cost.job_cost(ended, book)["usd"] == round(2 * (workers + reducers), 2)


def test_local_runs_skip_the_reducers_with_one_line():
    job = render.custom_job(spec_of(), ARTIFACT)
    kept, line = cluster.without_reducers(job)
    assert [p["replicaCount"] for p in kept["jobSpec"]["workerPoolSpecs"]] == ["1", "3"]
    assert line == "reducers: 13 Reduction Server replicas skipped (they run on Vertex AI only)"
    plain = render.custom_job(spec_of(scaling=None), ARTIFACT)
    assert cluster.without_reducers(plain) == (plain, None)


def test_the_networking_and_reducer_tables_cite_dated_sources():
    known = catalog.sources()
    for name in ("networking", "reducers", "model_sizes"):
        for row in catalog.table(name):
            assert set(row["source"].split()) <= set(known), (name, row)
    h100 = spec_scaling.network(spec_of(hardware="h100x8", scaling=None).hardware)
    assert h100 is not None and (h100.gbps, h100.gpu_networking, h100.vertex) == (
        1000,
        "gpudirect-tcpx",
        "none",
    )
    v100 = spec_of(
        hardware={
            "machine_type": "n1-standard-16",
            "accelerator_type": "NVIDIA_TESLA_V100",
            "accelerator_count": 2,
        },
        scaling=None,
    ).hardware
    assert spec_scaling.network(v100).gbps == 100


def test_ring_all_reduce_moves_twice_what_reduction_server_moves_in_the_limit():
    size = 100e6
    ring = scaling_model.allreduce_seconds(size, 16, 100, reduction_server=False)
    rs = scaling_model.allreduce_seconds(size, 16, 100, reduction_server=True)
    assert ring == pytest.approx(2 * 15 / 16 * size * 8 / 100e9)
    assert rs == pytest.approx(size * 8 / 100e9)
    assert 1.8 < ring / rs < 2  # "up to 2x algorithm bandwidth"
    assert scaling_model.allreduce_seconds(size, 1, 100, reduction_server=False) == 0


def test_compare_two_h100_machines_beside_one_says_one_machine_for_longer_is_cheaper():
    spec = spec_of(
        hardware="h100x8",
        replicas=2,
        scaling=None,
        trainer={
            "train_data": "gs://my-bucket/data/train-*.tfrecord",
            "num_classes": 10,
            "train_examples": 1_281_167,
            "epochs": 90,
            "batch_size": 1024,
        },
    )
    book = pricing.load_snapshot()
    est = cost.estimate(spec, book, throughput=cost.Throughput(40_000.0, "--throughput"))
    s = est.scaling
    assert s is not None and s.machines == 2 and s.gbps == 1000 and not s.reduction_server
    assert s.allreduce_bytes == 25_600_000 * 4
    # The job's throughput stays the given one; one machine's is solved from it.
    assert s.compute_s == pytest.approx(512 / (40_000 / s.speedup))
    assert 0 < s.efficiency < 1 and s.speedup == pytest.approx(2 * s.efficiency)
    c = cost_compare.compare(spec, book, est)
    m = c.machines
    assert m is not None and m.hours == est.attempts[0].expected_hours
    assert m.one_hours == pytest.approx(m.hours * s.speedup)
    assert m.one_hourly == pytest.approx(est.attempts[0].hourly / 2)
    assert m.one_cost < m.cost
    assert "one machine for longer is cheaper" in c.recommendation.reason
    out = c.to_json()["machines"]
    assert out["estimate"] is True and out["one_machine"]["expected_cost"] == round(m.one_cost, 2)


def test_a_published_reference_is_scaled_by_the_estimate_not_by_the_machines():
    spec = spec_of(
        trainer={
            "train_data": "gs://my-bucket/d/train-*.tfrecord",
            "num_classes": 10,
            "train_examples": 1_000_000,
        }
    )
    book = pricing.load_snapshot()
    ref = cost.throughput_of(spec)
    assert ref is not None and ref.published
    est = cost.estimate(spec, book, throughput=ref)
    s = est.scaling
    assert s is not None and s.reduction_server and s.speedup < 4
    linear_hours = 1_000_000 / ref.examples_per_sec / 3600
    assert est.attempts[0].expected_hours == pytest.approx(linear_hours * 4 / s.speedup, rel=1e-3)
    assert math.isclose(s.gbps, 100)  # 13 reducers x 32 Gbps / 4 machines > 100: the workers' NIC bounds it


@pytest.mark.parametrize(
    ("hardware", "want", "words"),
    [
        ("h100x8", "gpudirect-tcpxo", "has no gpudirect-tcpxo: its GPU-to-GPU network is gpudirect-tcpx"),
        ("a100x8", "gpudirect-rdma", "its GPU-to-GPU network is none"),
        ("h100x8", "gpudirect-tcpx", "a Vertex AI CustomJob has no setting for it"),
    ],
)
def test_a_gpu_network_stack_the_family_or_a_custom_job_lacks_is_refused(hardware, want, words):
    with pytest.raises(SpecError) as e:
        spec_of(hardware=hardware, scaling={"gpu_networking": want})
    assert e.value.exit_code == 2 and "scaling.gpu_networking" in str(e.value) and words in str(e.value)
    auto = spec_of(hardware=hardware, scaling={"gpu_networking": "auto"})
    pools = render.custom_job(auto, ARTIFACT)["jobSpec"]["workerPoolSpecs"]
    assert len(pools) == 2 and "env" not in pools[0]["containerSpec"]  # auto: nothing rendered
