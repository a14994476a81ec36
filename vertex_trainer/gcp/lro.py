"""Long-running operations (google.longrunning.Operation over REST): poll until `done`.

Vertex AI (models.upload, endpoints.create/deployModel), Cloud Build and others answer a create
with an Operation; `wait_operation` follows it to its end with the adaptive poll policy, and turns
an operation that ended with an error into a ServiceError (exit 3) carrying the service's message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from vertex_trainer.errors import ServiceError
from vertex_trainer.gcp.http import ApiClient, ApiError
from vertex_trainer.settings import PollPolicy


def wait_operation(
    api: ApiClient,
    operation: dict[str, Any],
    *,
    poll: PollPolicy,
    what: str,
    version: str = "v1",
    timeout: float | None = None,
    on_poll: Callable[[dict[str, Any]], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll `operation` (the create's answer) until done; return its `response` (may be {}).

    `on_poll` sees the operation after every read (for progress from its metadata)."""
    name = operation.get("name", "")
    deadline = None if timeout is None else time.monotonic() + timeout
    intervals = poll.intervals()
    while not operation.get("done"):
        if not name:
            raise ServiceError(f"{what}: the service answered an operation without a name")
        if deadline is not None and time.monotonic() > deadline:
            raise ServiceError(
                f"{what}: operation {name} did not finish within {timeout:.0f}s",
                hint="it keeps running on the service; run the command again to pick it up",
            )
        sleep(next(intervals))
        operation = api.json(f"{what} (operation)", "GET", f"{version}/{name}")
        if on_poll:
            on_poll(operation)
    error = operation.get("error")
    if error:
        err = ApiError(
            int(error.get("code") or 0),
            str(error.get("status") or ""),
            str(error.get("message") or ""),
            tuple(error.get("details") or ()),
        )
        raise ServiceError(f"{what} failed: {err.message or err}", hint=f"operation {name}")
    return operation.get("response") or {}
