"""scikit-learn's 8x8 digits, for the sandbox demo (docs/sandbox.md): upload them, ask the endpoint.

    python examples/sandbox/digits.py upload gs://sandbox-demo/digits
    python examples/sandbox/digits.py predict examples/sandbox/digits.yaml JOB [--count 297]
    python examples/sandbox/digits.py marker gs://sandbox-demo/incoming/digits-1
    python examples/sandbox/digits.py await-runs --count 1
    python examples/sandbox/digits.py ask-endpoint digits-seed [--count 297]

`upload` writes the 1,797 digits as PNG TFRecords in the layout the trainer reads (1,500 for
training in 3 shards, 297 held out for validation), through google-cloud-storage: with the
sandbox's variables (STORAGE_EMULATOR_HOST) they land in the emulated bucket. No TensorFlow is
needed: the records are encoded by vertex_trainer.dataprep.records.

`predict` is the Python API on the same variables: the job's deployment (`job.deploy(spec)`,
which adopts the one `submit --deploy` made, or deploys now), then `deployment.predict(...)` with
the held-out digits as PNG bytes; prints a few answers and the endpoint's accuracy.

`marker` writes the folder's `_SUCCESS` object (the upload is complete: with `dev sandbox
--function`, that starts the run). `await-runs` waits until the project has COUNT pipeline runs
and all have ended, and prints each run's state and its tasks'. `ask-endpoint` sends the
held-out digits to the endpoint of that display name.

Needs numpy and Pillow (both installed by `make`); the digits are data/digits.csv.gz.
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

    pixels, target = load_digits()
    pixels = np.clip(pixels * 16, 0, 255).astype(np.uint8)
    order = np.random.default_rng(0).permutation(len(pixels))
    images, labels = [], []
    for i in order:
        buf = io.BytesIO()
        Image.fromarray(np.stack([pixels[i]] * 3, axis=-1)).save(buf, format="PNG")
        images.append(buf.getvalue())
        labels.append(int(target[i]))
    return images, labels


def load_digits():  # -> (images: float array N x 8 x 8 of 0-16, labels: int array N)
    """The 1,797 digits of data/digits.csv.gz (64 pixel columns, then the label; data/README.md)."""
    import numpy as np

    table = np.loadtxt(
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "digits.csv.gz"), delimiter=","
    )
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(int)


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
            data = b"".join(
                records.frame(
                    records.image_example(
                        images[i], labels[i], image_format="PNG", height=8, width=8, channels=3
                    )
                )
                for i in part
            )
            name = records.join(prefix, records.shard_name(split, s, shards))
            bucket.blob(name).upload_from_string(data, content_type="application/octet-stream")
            print(f"gs://{bucket_name}/{name}: {len(part)} digits")


def predict(spec_path: str, job_name: str, count: int) -> None:
    from vertex_trainer import api

    spec = api.load_spec(spec_path)
    job = api.Job.get(job_name)
    deployment = job.deploy(spec)
    images, labels = digits()
    held_out = list(zip(images[TRAIN:], labels[TRAIN:], strict=True))[:count]
    instances = [{"b64": base64.b64encode(image).decode()} for image, _ in held_out]
    predictions = deployment.predict(instances)
    right = sum(p["class"] == label for p, (_, label) in zip(predictions, held_out, strict=True))
    for p, (_, label) in list(zip(predictions, held_out, strict=True))[:5]:
        print(f"digit {label}: predicted {p['class']} (p={max(p['probabilities']):.2f})")
    print(
        f"endpoint {deployment.endpoint}: {right}/{len(held_out)} held-out digits right "
        f"({right / len(held_out):.3f})"
    )


def marker(folder: str) -> None:
    from vertex_trainer.gcp import storage
    from vertex_trainer.settings import Settings

    bucket_name, prefix = storage.split_uri(folder.rstrip("/"))
    blob = storage.client(Settings.from_environ(os.environ)).bucket(bucket_name).blob(f"{prefix}/_SUCCESS")
    blob.upload_from_string(b"")
    print(f"gs://{bucket_name}/{prefix}/_SUCCESS: generation {blob.generation}")


def await_runs(count: int, timeout: float) -> None:
    import time

    from vertex_trainer.settings import Settings
    from vertex_trainer.vertex.pipelines import PipelinesClient

    settings = Settings.from_environ(os.environ)
    client = PipelinesClient(settings.project, settings.region or "us-central1", settings=settings)
    done = ("PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED")
    deadline = time.monotonic() + timeout
    while True:
        runs = client.list()
        if len(runs) >= count and all(r.get("state") in done for r in runs):
            break
        if time.monotonic() > deadline:
            sys.exit(
                f"{len(runs)} pipeline run(s) after {timeout:.0f} s, states {[r.get('state') for r in runs]}"
            )
        time.sleep(2)
    for run in sorted(runs, key=lambda r: r["createTime"]):
        print(f"run {run['name'].rsplit('/', 1)[-1]}: {run['state']}")
        for task in (run.get("jobDetail") or {}).get("taskDetails", [])[1:]:
            print(f"  {task['taskName']:<14} {task['state']}")
    if any(r["state"] != "PIPELINE_STATE_SUCCEEDED" for r in runs):
        sys.exit(1)


def ask_endpoint(display_name: str, count: int) -> None:
    from vertex_trainer.settings import Settings
    from vertex_trainer.vertex.models import RegistryClient

    settings = Settings.from_environ(os.environ)
    client = RegistryClient(settings.project, settings.region or "us-central1", settings=settings)
    endpoint = client.find_endpoint(display_name)
    if endpoint is None:
        sys.exit(f"no endpoint named {display_name!r}")
    images, labels = digits()
    held_out = list(zip(images[TRAIN:], labels[TRAIN:], strict=True))[:count]
    instances = [{"b64": base64.b64encode(image).decode()} for image, _ in held_out]
    predictions = client.predict(endpoint["name"], instances)["predictions"]
    right = sum(p["class"] == label for p, (_, label) in zip(predictions, held_out, strict=True))
    print(
        f"endpoint {endpoint['name']}: {right}/{len(held_out)} held-out digits right "
        f"({right / len(held_out):.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("upload", help="write the digits as TFRecords to gs://BUCKET/PREFIX")
    up.add_argument("target")
    ask = sub.add_parser("predict", help="send the held-out digits to the job's endpoint")
    ask.add_argument("spec")
    ask.add_argument("job")
    ask.add_argument("--count", type=int, default=297)
    mark = sub.add_parser("marker", help="write FOLDER/_SUCCESS (the folder is complete)")
    mark.add_argument("folder")
    runs = sub.add_parser("await-runs", help="wait until COUNT pipeline runs exist and have ended")
    runs.add_argument("--count", type=int, default=1)
    runs.add_argument("--timeout", type=float, default=900)
    asking = sub.add_parser("ask-endpoint", help="send the held-out digits to an endpoint")
    asking.add_argument("endpoint")
    asking.add_argument("--count", type=int, default=297)
    args = parser.parse_args()
    if args.command == "upload":
        upload(args.target)
    elif args.command == "marker":
        marker(args.folder)
    elif args.command == "await-runs":
        await_runs(args.count, args.timeout)
    elif args.command == "ask-endpoint":
        ask_endpoint(args.endpoint, args.count)
    else:
        predict(args.spec, args.job, args.count)


if __name__ == "__main__":
    main()
