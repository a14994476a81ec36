"""Following a Vertex AI resource (a CustomJob, PipelineJob, tuning job) until it ends."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from vertex_trainer.contract import short_state
from vertex_trainer.settings import PollPolicy


def wait_until_done(
    resource: Any,
    *,
    poll: PollPolicy,
    timeout: float | None = None,
    on_state: Callable[[Any], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Refresh `resource` (it has `.refresh()`, `.done`, `.state`, `.name`) until it is done.

    Polls adaptively (start fast, slow down while nothing changes, look again soon after a
    change); `on_state` sees the resource once at the start and at every state change; raises
    TimeoutError after `timeout` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    last = resource.state
    if on_state:
        on_state(resource)
    intervals = poll.intervals()
    while not resource.done:
        sleep(bounded(next(intervals), deadline, resource, timeout))
        resource.refresh()
        if resource.state != last:
            last, intervals = resource.state, poll.intervals()  # something is happening
            if on_state:
                on_state(resource)


def bounded(delay: float, deadline: float | None, resource: Any, timeout: float | None) -> float:
    """`delay`, cut to what is left before `deadline` (a time.monotonic() time; None: no limit).

    Args: delay: the pause wanted; deadline; resource: what is followed (`.name`, `.state`, for
    the message); timeout: the seconds the deadline was set from (for the message).
    Returns: the pause to take. Raises TimeoutError when nothing is left."""
    if deadline is None:
        return delay
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError(f"{resource.name} is still {short_state(resource.state)} after {timeout}s")
    return min(delay, remaining)
