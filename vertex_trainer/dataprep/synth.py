"""`data synth`'s records on the host, without TensorFlow (issue 31: 4.5 s of CPU and 600 MB
only to encode and write what `records` encodes and writes by hand).

`trainer.datagen.synthesize` makes the images and labels: the one generator, which the tests and
benchmarks also call in their TensorFlow processes (the container's trainer cannot import this
package, nor this package the trainer, so `api.synthesize_data` joins the two). It takes two
things it would otherwise take from TensorFlow, and this module gives them:

- `encode_jpeg`: one record, `records.image_example` (the same features as `tf.train.Example`);
- `shard_writer(settings)`: one shard file in TFRecord framing (`records.write_record`), a local
  file or, for gs://, an object uploaded through the project's Cloud Storage client (the emulator
  when `Settings.storage_emulator` is set, as for every command).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from vertex_trainer.dataprep import records
from vertex_trainer.errors import UserError
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings

__all__ = ["WriteFailed", "encode_jpeg", "shard_names", "shard_writer"]


class WriteFailed(Exception):
    """A shard could not be written to Cloud Storage: what went wrong in one line, and the fix
    when this module knows it better than the caller (a missing bucket, no permission)."""

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def encode_jpeg(image: bytes, label: int, /, *, height: int, width: int, filename: str) -> bytes:
    """One serialized Example of an RGB JPEG (trainer.datagen's `Encode`)."""
    return records.image_example(
        image, label, image_format="JPEG", height=height, width=width, channels=3, filename=filename
    )


def shard_writer(settings: Settings) -> Callable[[str, Iterable[bytes]], None]:
    """write(path, records) (trainer.datagen's `WriteShard`): a local TFRecord file, or a gs://
    object (one client for every shard of the run, made at the first gs:// shard).

    Raises OSError (a local path) or WriteFailed (gs://: no credentials, no network, no bucket,
    no permission)."""
    clients: list[Any] = []

    def write(path: str, items: Iterable[bytes]) -> None:
        if not path.startswith("gs://"):
            with open(path, "wb") as handle:
                for record in items:
                    records.write_record(handle, record)
            return
        # A shard can be large (1024 px images): spool it to disk, not memory, then upload it.
        with tempfile.TemporaryFile() as spool:
            size = sum(records.write_record(spool, record) for record in items)
            _upload(settings, clients, path, spool, size)

    return write


def shard_names(settings: Settings, folder: str) -> list[str]:
    """The names (below `folder`) of the train-* and validation-* objects directly in the gs://
    folder, for the check of an earlier dataset's shards before a synth writes there. Raises
    WriteFailed as a write there would (no credentials, no bucket, no permission)."""
    bucket, prefix = storage.split_uri(folder.rstrip("/"))
    start = f"{prefix}/" if prefix else ""
    with _as_write_failed(bucket, f"list gs://{bucket}/{start}"):
        gcs = storage.client(settings)
        names = [
            b.name[len(start) :]
            for part in ("train-", "validation-")
            for b in gcs.list_blobs(bucket, prefix=start + part)
        ]
    return [n for n in names if "/" not in n]


@contextmanager
def _as_write_failed(bucket: str, what: str) -> Iterator[None]:
    """Cloud Storage's failures inside the block as WriteFailed, in one line with the fix
    (`what`: "write gs://B/NAME", for the permission's words)."""
    import requests
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    try:
        yield
    except UserError as e:  # no Application Default Credentials
        raise WriteFailed(e.message) from None
    except gexc.NotFound:
        raise WriteFailed(
            f"bucket gs://{bucket} does not exist",
            hint=f"create it (gcloud storage buckets create gs://{bucket}) or pass a bucket that exists",
        ) from None
    except gexc.Forbidden:
        raise WriteFailed(
            f"no permission to {what}",
            hint="the account needs roles/storage.objectCreator on the bucket"
            + (" (and objectViewer, to list it)" if what.startswith("list") else ""),
        ) from None
    except (gexc.GoogleAPIError, auth_exc.GoogleAuthError, requests.RequestException) as e:
        text = getattr(e, "message", None) or str(e) or type(e).__name__
        raise WriteFailed((text.strip().splitlines() or [type(e).__name__])[0]) from None


def _upload(settings: Settings, clients: list[Any], path: str, spool: Any, size: int) -> None:
    from google.cloud.storage.retry import DEFAULT_RETRY

    policy = settings.retry
    # Overwriting the whole object with the same bytes is idempotent: retried as the settings say.
    retry = DEFAULT_RETRY.with_timeout(policy.deadline).with_delay(
        initial=policy.initial, maximum=policy.maximum, multiplier=policy.multiplier
    )
    bucket, name = storage.split_uri(path)
    with _as_write_failed(bucket, f"write gs://{bucket}/{name}"):
        if not clients:
            clients.append(storage.client(settings))
        spool.seek(0)
        # With the size known, a shard up to 8 MB is one multipart request (larger: resumable).
        clients[0].bucket(bucket).blob(name).upload_from_file(
            spool,
            size=size,
            content_type="application/octet-stream",
            retry=retry,
            timeout=(policy.connect_timeout, policy.read_timeout),
        )
