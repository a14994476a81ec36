"""The event-driven flow on this machine, end to end, with no cloud account (docs/events.md).

    .venv/bin/python examples/events/local_e2e.py [--spec SPEC] [--keep DIR]

1. starts gcp-storage-emulator (Cloud Storage) and the fake Vertex AI on loopback;
2. renders the spec's Cloud Run function (`vertex-trainer trigger render`) and serves it with
   functions-framework, exactly as Cloud Run does;
3. uploads a dataset folder (two train shards and the validation shard, then the _SUCCESS marker:
   a run's data must be there before it is created) to the emulator and, playing
   Eventarc, POSTs each object's finalized CloudEvent (binary mode, the object's own metadata as
   StorageObjectData) to the function; then redelivers the marker's event once;
4. prints what the function did with each event, and the one run it started.

The emulator emits no events itself: step 3 is what Eventarc does between a real bucket and the
function. Nothing is trained (the fake Vertex AI only records the job).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUCKET, RUNS_BUCKET, PREFIX = "my-datasets-bucket", "my-runs-bucket", "datasets/"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(ROOT / "examples/events/digits-on-upload.yaml"))
    parser.add_argument("--keep", help="render the function here and keep it (default: a temp dir)")
    args = parser.parse_args()

    from vertex_trainer import api
    from vertex_trainer.emulators.gcs import GcsEmulator
    from vertex_trainer.emulators.vertex import FakeVertex
    from vertex_trainer.gcp import storage
    from vertex_trainer.settings import Settings

    with GcsEmulator() as gcs, FakeVertex() as vertex, tempfile.TemporaryDirectory() as tmp:
        for bucket in (BUCKET, RUNS_BUCKET):
            gcs.create_bucket(bucket)
        print(f"Cloud Storage emulator  {gcs.endpoint}  (gs://{BUCKET}, gs://{RUNS_BUCKET})")
        print(f"fake Vertex AI          {vertex.url}")

        function_dir = Path(args.keep or Path(tmp) / "function")
        api.trigger_render(
            args.spec,
            function_dir,
            bucket=BUCKET,
            prefix=PREFIX,
            sets=(f"output_dir=gs://{RUNS_BUCKET}/runs/{{{{ trigger.folder_name }}}}",),
            project="my-project",
            settings=Settings(),
            log=lambda line: print("  " + line),
        )
        env = {
            **os.environ,
            "VERTEX_TRAINER_API_ENDPOINT": vertex.url,
            "STORAGE_EMULATOR_HOST": gcs.endpoint,
            "GUNICORN_LOG_LEVEL": "info",
            "VERTEX_TRAINER_POLL_INTERVAL": "0.05",
            "PYTHONUNBUFFERED": "1",
        }
        with serve(function_dir, env) as (url, outcomes):
            print(f"function                {url}  (rendered to {function_dir})\n")
            client = storage.client(Settings(storage_emulator=gcs.endpoint)).bucket(BUCKET)
            uploads = [
                f"{PREFIX}mnist/train-00000-of-00002",
                f"{PREFIX}mnist/train-00001-of-00002",
                f"{PREFIX}mnist/validation-00000-of-00001",
                f"{PREFIX}mnist/_SUCCESS",
            ]
            for name in uploads:
                client.blob(name).upload_from_string(b"" if name.endswith("_SUCCESS") else b"records")
                data = object_metadata(gcs.endpoint, BUCKET, name)
                show(f"upload gs://{BUCKET}/{name}", post_event(url, data), outcomes)
            show(f"redeliver {name}", post_event(url, data), outcomes)  # Eventarc: at least once

        print("\nruns started:")
        for job in vertex.jobs.values():
            args_ = job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
            print(
                f"  CustomJob {job['name']}\n    {next(a for a in args_ if a.startswith('--train-data'))}"
                f"\n    labels {job['labels']}"
            )
        for name, run in vertex.pipelines.runs.items():
            print(f"  PipelineJob {name} ({len(run['pipelineSpec']['root']['dag']['tasks'])} steps)")
        return 0 if len(vertex.jobs) + len(vertex.pipelines.runs) == 1 else 1


def object_metadata(endpoint: str, bucket: str, name: str) -> dict:
    """The object resource: what Eventarc sends as StorageObjectData."""
    url = f"{endpoint}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}"
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=30) as resp:
        return json.loads(resp.read())


def post_event(url: str, data: dict) -> int:
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "ce-specversion": "1.0",
        "ce-type": "google.cloud.storage.object.v1.finalized",
        "ce-source": f"//storage.googleapis.com/projects/_/buckets/{data['bucket']}",
        "ce-subject": f"objects/{data['name']}",
        "ce-id": data["id"],
        "ce-time": data["updated"],
        "ce-bucket": data["bucket"],
    }
    request = urllib.request.Request(url, data=json.dumps(data).encode(), headers=headers, method="POST")
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=120) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def show(what: str, status: int, outcomes) -> None:
    record = outcomes.next()
    print(f"{what}\n  -> HTTP {status}: {record.get('message')}")


class serve:
    """functions-framework serving the function directory on a free loopback port."""

    def __init__(self, directory: Path, env: dict):
        self.directory, self.env = directory, env

    def __enter__(self):
        self.proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "functions-framework"),
                "--target=on_object_finalized",
                "--source=main.py",
                "--signature-type=cloudevent",
                "--host=127.0.0.1",
                "--port=0",
            ],
            cwd=self.directory,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.outcomes = Outcomes(self.proc.stdout)
        for line in self.proc.stderr:  # gunicorn says where it listens
            m = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", line)
            if m:
                threading.Thread(target=self.proc.stderr.read, daemon=True).start()
                return m.group(1), self.outcomes
        raise SystemExit("the function did not start")

    def __exit__(self, *exc) -> None:
        self.proc.send_signal(2)  # SIGINT: gunicorn's quick shutdown
        self.proc.wait(timeout=10)


class Outcomes:
    """The function's one JSON log line per event (its stdout), awaited in order."""

    def __init__(self, stream):
        self._records: list[dict] = []
        self._ready = threading.Condition()
        self._taken = 0
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if "action" in record:
                with self._ready:
                    self._records.append(record)
                    self._ready.notify_all()

    def next(self) -> dict:
        with self._ready:
            self._ready.wait_for(lambda: len(self._records) > self._taken, timeout=60)
            self._taken += 1
            return self._records[self._taken - 1] if len(self._records) >= self._taken else {}


if __name__ == "__main__":
    sys.exit(main())
