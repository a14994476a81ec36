"""The fake Vertex AI TensorBoard instances (REST, v1), mounted in FakeVertex (`fake.tensorboards`):

- ``POST   /v1/{parent}/tensorboards``          create (Tensorboard) -> Operation (response: the Tensorboard)
- ``GET    /v1/{parent}/tensorboards``          list (``filter``: ``labels.k="v"``, ``display_name="X"``
  terms joined by AND, the subset of AIP-160 the clients send; pageSize, pageToken)
- ``GET    /v1/{parent}/tensorboards/ID``       get
- ``DELETE /v1/{parent}/tensorboards/ID``       delete -> Operation

Bodies are parsed strictly with ``aiplatform_v1.Tensorboard`` (an unknown field is a 400); the
output-only fields a client sends are dropped, as the service ignores them. The service picks the
id (a long number; the create takes none). A new instance is listed at once (a create whose answer
is lost has still made it; `race` makes another client's create land first). A CustomJob that
names a `tensorboard` is refused unless the instance exists in the job's region (`check_job`), as
the service refuses it.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timezone
from typing import Any

from vertex_trainer.emulators._http import Collection, collection_routes
from vertex_trainer.emulators.vertex_models import ServiceError, _filter, _parse, list_page

_OUTPUT_ONLY = (
    "name",
    "createTime",
    "updateTime",
    "blobStoragePathPrefix",
    "runCount",
    "satisfiesPzs",
    "satisfiesPzi",
)
_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1.Tensorboard"
_CREATED = "type.googleapis.com/google.cloud.aiplatform.v1.CreateTensorboardOperationMetadata"
_DELETED = "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class TensorboardService(Collection):
    """The state and handlers; `operations` (vertex_models.ModelService) runs the operations."""

    ROUTES = collection_routes("tensorboards", "tensorboard", end="delete")

    def __init__(self, lock: Any, operations: Any):
        super().__init__(lock)
        self._operations = operations
        self.tensorboards: dict[str, dict[str, Any]] = {}  # name -> Tensorboard (REST JSON)
        self._ids = itertools.count(6_000_000_000_000_000_001)
        self.page_size = 50
        self.racing = 0  # creates still to be preceded by another client's (`race`)

    # -- test controls -------------------------------------------------------------------------
    def add(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        """Store an instance directly (as if made earlier, by hand or by another tool)."""
        with self._lock:
            return dict(self._store(parent, body))

    def race(self, times: int = 1) -> None:
        """The next `times` creates are each preceded by another client's create of the same
        body (a second submit that raced past the same empty list): two instances are made."""
        with self._lock:
            self.racing += times

    # -- jobs that name one (FakeVertex's create asks) -----------------------------------------
    def check_job(self, parent: str, job: dict[str, Any]) -> None:
        """Refuse (400) a CustomJob whose jobSpec.tensorboard is not an instance of its region."""
        name = (job.get("jobSpec") or {}).get("tensorboard")
        if not name:
            return
        with self._lock:
            known = name in self.tensorboards
        if not known or not str(name).startswith(parent + "/tensorboards/"):
            location = parent.rsplit("/", 1)[-1]
            raise ServiceError(400, f"Tensorboard {name} does not exist or is not in location {location}.")

    # -- the service ---------------------------------------------------------------------------
    def _store(self, parent: str, body: Any) -> dict[str, Any]:
        data = _parse("Tensorboard", body)
        for field in _OUTPUT_ONLY:
            data.pop(field, None)
        if not data.get("displayName"):
            raise ServiceError(
                400,
                "List of found errors:\t1.Field: tensorboard.display_name; Message: "
                "Required field is not set.\t",
            )
        tensorboard_id = str(next(self._ids))
        name = f"{parent}/tensorboards/{tensorboard_id}"
        now = _now()
        data.update(
            name=name,
            createTime=now,
            updateTime=now,
            etag=f"AMEw9yP{tensorboard_id[-6:]}",
            blobStoragePathPrefix=f"cloud-ai-platform-tensorboard-{tensorboard_id[-8:]}/{tensorboard_id}",
        )
        self.tensorboards[name] = data
        return data

    def _create(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            if self.racing:
                self.racing -= 1
                self._store(parent, body)  # the other client's, made first
            data = self._store(parent, body)
            created: dict[str, Any] = self._operations._start(
                "tensorboard-create", data["name"], {"@type": _TYPE, **data}, _CREATED
            )
            return created

    def _get(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            data = self.tensorboards.get(name)
            if data is None:
                raise ServiceError(404, f'The Tensorboard "{name}" does not exist.')
            return dict(data)

    def _list(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        keep = _filter(query.get("filter", ""))
        with self._lock:
            found = [dict(t) for n, t in self.tensorboards.items() if n.startswith(parent + "/") and keep(t)]
        return list_page(found, query, "tensorboards", size=self.page_size)

    def _delete(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            if name not in self.tensorboards:
                raise ServiceError(404, f'The Tensorboard "{name}" does not exist.')

            def gone() -> None:
                self.tensorboards.pop(name, None)

            deleted: dict[str, Any] = self._operations._start(
                "tensorboard-delete",
                name,
                {"@type": "type.googleapis.com/google.protobuf.Empty"},
                _DELETED,
                on_done=gone,
            )
            return deleted
