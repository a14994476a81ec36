"""Cloud Storage: the one client factory, content-addressed uploads, reads and bucket metadata.

With `Settings.storage_emulator` set (STORAGE_EMULATOR_HOST at the edge) every call goes to the
emulator with anonymous credentials (a sandbox's token when `Settings.emulator_token` holds one);
otherwise to Cloud Storage with Application Default Credentials. google-cloud-storage (0.25 s to
import) is imported only by the functions that need it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from vertex_trainer.errors import ServiceError
from vertex_trainer.gcp import auth
from vertex_trainer.gcp.http import ApiClient, ApiError, default_hint
from vertex_trainer.log import Log
from vertex_trainer.settings import RetryPolicy, Settings

# A JSON record read from a bucket (a run's metrics.json and result.json, a dataset's
# manifest.json): whoever can write the bucket writes it, so at most this many bytes are read.
MAX_JSON_BYTES = 16 << 20


def split_uri(uri: str) -> tuple[str, str]:
    """gs://bucket/name -> (bucket, name)."""
    if not uri.startswith("gs://"):
        raise ValueError(f"not a gs:// URI: {uri!r}")
    bucket, _, name = uri[len("gs://") :].partition("/")
    return bucket, name


def bucket_of(path: str | None) -> str | None:
    """The bucket of a gs:// or /gcs/ (Cloud Storage FUSE) path, else None."""
    if not path:
        return None
    for prefix in ("gs://", "/gcs/"):
        if path.startswith(prefix):
            return path[len(prefix) :].split("/", 1)[0] or None
    return None


def client(settings: Settings, project: str | None = None) -> Any:  # google.cloud.storage.Client (untyped)
    """A google.cloud.storage.Client for the emulator or the real service."""
    import google.cloud.storage as storage

    if settings.storage_emulator:  # anonymous, or a sandbox's token (gcp/auth.py)
        return storage.Client(
            project=project or settings.project or "vertex-trainer",
            credentials=auth.emulator_credentials(settings.emulator_token),
            client_options={"api_endpoint": settings.storage_url()},
        )
    return storage.Client(project=project, credentials=auth.credentials())


def upload_once(
    settings: Settings,
    bucket: str,
    name: str,
    data: bytes,
    *,
    project: str | None,
    content_type: str = "application/gzip",
) -> bool:
    """Upload unless the (content-addressed) object exists. Returns True if it uploaded."""
    from google.api_core import exceptions as gexc
    from google.cloud.storage.retry import DEFAULT_RETRY

    blob = client(settings, project).bucket(bucket).blob(name)
    try:
        if blob.exists(retry=DEFAULT_RETRY):
            return False
        # The name is a content hash, so a retried upload is idempotent.
        blob.upload_from_string(data, content_type=content_type, retry=DEFAULT_RETRY)
    except gexc.NotFound:
        raise ServiceError(
            f"staging bucket gs://{bucket} does not exist",
            hint="create it in the job's region, or set image.staging_bucket",
        ) from None
    except gexc.Forbidden as exc:
        raise ServiceError(
            f"no permission to write gs://{bucket}/{name}: {exc.message}",
            hint="the account needs roles/storage.objectCreator on the bucket",
        ) from None
    except gexc.GoogleAPIError as exc:
        raise ServiceError(f"uploading gs://{bucket}/{name} failed: {exc}") from None
    return True


def read_bytes(settings: Settings, uri: str, limit: int | None = None) -> bytes | None:
    """The object's bytes (with `limit`, its first limit + 1 at most: one more than the limit
    tells a longer object), or None when it does not exist.

    On the storage emulator the object's metadata is read first: gcp-storage-emulator logs an
    error (on the sandbox's stderr, even with --quiet) for every download of a missing object,
    and a missing object is an ordinary answer here (e.g. a script job's metrics.json). Cloud
    Storage answers the download's 404 quietly: one request there."""
    from google.api_core import exceptions as gexc

    bucket, name = split_uri(uri)
    try:
        objects = client(settings).bucket(bucket)
        if settings.storage_emulator and objects.get_blob(name) is None:
            return None
        # A fresh Blob, not get_blob's (which carries the metadata's generation and checksums):
        # downloading through that one sat in the client's retry loop for 105-113 s on the
        # metrics.json of every sandbox job (py-spy: retry_target under download_as_bytes), which
        # made each job end two minutes after its replicas. The fresh Blob reads at once.
        blob = objects.blob(name)
        data: bytes = blob.download_as_bytes(**({} if limit is None else {"start": 0, "end": limit}))
        return data
    except gexc.NotFound:
        return None
    except gexc.RequestRangeNotSatisfiable:  # (a ranged read from byte 0: an empty object, which
        return b""  # Cloud Storage answers with 416, per RFC 9110; the emulator with its b"")


def holds_objects(settings: Settings, uri: str) -> bool:
    """True when at least one object's name starts with `<uri>/` (a folder with something in it);
    one list request of one item."""
    bucket, prefix = split_uri(uri.rstrip("/"))
    blobs = client(settings).list_blobs(bucket, prefix=f"{prefix}/" if prefix else None, max_results=1)
    return any(True for _ in blobs)


def read_json(settings: Settings, uri: str, limit: int = MAX_JSON_BYTES) -> dict[str, Any] | None:
    """A JSON object stored at `uri`, or None when it is absent, over `limit` bytes (no more is
    downloaded), or not a JSON object (`json_object`)."""
    data = read_bytes(settings, uri, limit)
    if data is None or len(data) > limit:
        return None
    return json_object(data)


def object_json(
    api: ApiClient, uri: str, *, emulator: bool = False, limit: int = MAX_JSON_BYTES
) -> dict[str, Any] | None:
    """`read_json` through the JSON API's ApiClient (`storage_api`): one request, and none of
    google-cloud-storage's import (~0.25 s), for a look a cloud submit takes on its way (a run's
    record). None when the object is absent, over `limit` bytes (no more is read) or not a JSON
    object; ServiceError (or UserError, a denial) when it cannot be read. `emulator`: ask for
    the metadata first (gcp-storage-emulator logs an error for a download of a missing object)."""
    from urllib.parse import quote

    bucket, name = split_uri(uri)
    path = f"storage/v1/b/{bucket}/o/{quote(name, safe='')}"
    if emulator and api.call("read object metadata", "GET", path, allow=(404,)).status_code == 404:
        return None
    response = api.call(
        "read object",
        "GET",
        path,
        params={"alt": "media"},
        headers={"Range": f"bytes=0-{limit}"},
        stream=True,
        allow=(404, 416),
    )
    with response:
        if response.status_code == 404:
            return None
        data = bytearray()  # (416: a range of an empty object, as Cloud Storage answers it: b"")
        for chunk in () if response.status_code == 416 else response.iter_content(1 << 16):
            data += chunk  # (a server that ignores Range: read no further than the bound)
            if len(data) > limit:
                return None
    return json_object(bytes(data))


def json_object(data: bytes | str) -> dict[str, Any] | None:
    """The JSON object `data` holds; None when it is not JSON (nested past what Python's parser
    takes too: RecursionError) or not an object."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def storage_api(
    settings: Settings,
    *,
    log: Log | None = None,
    retry: RetryPolicy | None = None,
    final: Callable[[str, ApiError], bool] | None = None,
) -> ApiClient:
    """The Cloud Storage JSON API through the shared ApiClient (for metadata reads and listings);
    `final` picks the refusals the caller tells apart (ApiClient's hook: `Refused`, no retry)."""
    return ApiClient.of(
        settings,
        settings.storage_url(),
        retry=retry,
        log=log,
        service="Cloud Storage",
        hints=default_hint("Cloud Storage", "storage.googleapis.com"),
        final=final,
    )


def bucket_metadata(api: ApiClient, bucket: str) -> dict[str, Any] | None:
    """{"location", "locationType"} of a bucket; None when it does not exist.

    Raises ServiceError when it cannot be read (403, persistent network errors)."""
    response = api.call(
        "read bucket metadata",
        "GET",
        f"storage/v1/b/{bucket}",
        params={"fields": "location,locationType"},
        allow=(404,),
    )
    if response.status_code == 404:
        return None
    meta: dict[str, Any] = response.json()
    return meta
