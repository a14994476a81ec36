"""What the scaling tests share: the job they scale, as data."""

from __future__ import annotations


def scale_data(**over) -> dict:
    """4 x a100x8 with `reduction_server: auto`, the bundled trainer; `over` replaces top-level keys
    (None removes one)."""
    data = {
        "name": "scale",
        "project": "my-project",
        "region": "us-central1",
        "hardware": "a100x8",
        "replicas": 4,
        "scaling": {"reduction_server": "auto"},
        "image": {"repository": "us-central1-docker.pkg.dev/my-project/training"},
        "output_dir": "gs://my-bucket/runs/scale",
        "trainer": {"train_data": "gs://my-bucket/data/train-*.tfrecord", "num_classes": 10},
    }
    data.update(over)
    return {k: v for k, v in data.items() if v is not None}
