"""scikit-learn's 8x8 digits, for the sandbox demo (docs/sandbox.md): upload them, ask the endpoint.

    python examples/sandbox/digits.py upload gs://sandbox-demo/digits
    python examples/sandbox/digits.py predict examples/sandbox/digits.yaml JOB [--count 297]

`upload` writes the 1,797 digits as PNG TFRecords in the layout the trainer reads (1,500 for
training in 3 shards, 297 held out for validation), through google-cloud-storage: with the
sandbox's variables (STORAGE_EMULATOR_HOST) they land in the emulated bucket. No TensorFlow is
needed: the records are encoded by vertex_trainer.dataprep.records.

`predict` is the Python API on the same variables: the job's deployment (`job.deploy(spec)`,
which adopts the one `submit --deploy` made, or deploys now), then `deployment.predict(...)` with
the held-out digits as PNG bytes; prints a few answers and the endpoint's accuracy.

Needs scikit-learn and Pillow (both installed by `make`).
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import sys

TRAIN, SHARDS = 1500, 3


def digits() -> tuple[list[bytes], list[int]]:
    """Every digit as a 3-channel PNG and its label, in a fixed shuffled order."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    data = load_digits()
    pixels = np.clip(data.images * 16, 0, 255).astype(np.uint8)
    order = np.random.default_rng(0).permutation(len(pixels))
    images, labels = [], []
    for i in order:
        buf = io.BytesIO()
        Image.fromarray(np.stack([pixels[i]] * 3, axis=-1)).save(buf, format="PNG")
        images.append(buf.getvalue())
        labels.append(int(data.target[i]))
    return images, labels


def upload(target: str) -> None:
    from vertex_trainer.dataprep import records
    from vertex_trainer.gcp import storage
    from vertex_trainer.settings import Settings

    settings = Settings.from_environ(os.environ)
    if not settings.storage_emulator:
        sys.exit("STORAGE_EMULATOR_HOST is not set: run this inside the sandbox's environment")
    bucket_name, prefix = storage.split_uri(target.rstrip("/"))
    bucket = storage.client(settings).bucket(bucket_name)
    images, labels = digits()
    splits = [("train", list(range(TRAIN)), SHARDS), ("validation", list(range(TRAIN, len(images))), 1)]
    for split, idx, shards in splits:
        for s in range(shards):
            part = idx[s::shards]
            data = b"".join(records.frame(records.image_example(
                images[i], labels[i], image_format="PNG", height=8, width=8, channels=3)) for i in part)
            name = records.join(prefix, records.shard_name(split, s, shards))
            bucket.blob(name).upload_from_string(data, content_type="application/octet-stream")
            print(f"gs://{bucket_name}/{name}: {len(part)} digits")


def predict(spec_path: str, job_name: str, count: int) -> None:
    from vertex_trainer import api

    spec = api.load_spec(spec_path)
    job = api.Job.get(job_name)
    deployment = job.deploy(spec)
    images, labels = digits()
    held_out = list(zip(images[TRAIN:], labels[TRAIN:]))[:count]
    instances = [{"b64": base64.b64encode(image).decode()} for image, _ in held_out]
    predictions = deployment.predict(instances)
    right = sum(p["class"] == label for p, (_, label) in zip(predictions, held_out))
    for p, (_, label) in list(zip(predictions, held_out))[:5]:
        print(f"digit {label}: predicted {p['class']} (p={max(p['probabilities']):.2f})")
    print(f"endpoint {deployment.endpoint}: {right}/{len(held_out)} held-out digits right "
          f"({right / len(held_out):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("upload", help="write the digits as TFRecords to gs://BUCKET/PREFIX")
    up.add_argument("target")
    ask = sub.add_parser("predict", help="send the held-out digits to the job's endpoint")
    ask.add_argument("spec")
    ask.add_argument("job")
    ask.add_argument("--count", type=int, default=297)
    args = parser.parse_args()
    if args.command == "upload":
        upload(args.target)
    else:
        predict(args.spec, args.job, args.count)


if __name__ == "__main__":
    main()
