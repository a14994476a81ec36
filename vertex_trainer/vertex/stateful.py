"""`StatefulResource`: everything on Vertex AI that has a state and ends (python-aiplatform's
`base.StatefulResource`): custom jobs, hyperparameter tuning jobs, pipeline runs, and what the
capacity work adds. They differ by collection, state family, console page and output fields, all
class attributes; the fields, refresh, wait, cancel, describe and to_dict are written once here.

`state` is current when read, as the SDK's is (its `state` property fetches the resource again):
an answer older than `max_age` seconds is asked again, so a notebook that reads `job.state` a
minute after submitting sees RUNNING, not the PENDING of the create. Unlike the SDK's it is not
one GET per read: an answer younger than `max_age` is reused (a summary reads the state several
times), and once the resource has ended its state can no longer change and is never asked again.
`held_state` is the answer held, without a read.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from html import escape
from typing import IO, Any, ClassVar, TypeVar

from vertex_trainer.contract import JOB_STATES, KEY_LABEL, JobState, States
from vertex_trainer.errors import JobFailed
from vertex_trainer.settings import PollPolicy, Settings
from vertex_trainer.vertex.names import job_name, split_name
from vertex_trainer.vertex.service import CollectionClient, aiplatform_sdk
from vertex_trainer.vertex.waiting import wait_until_done

R = TypeVar("R", bound="StatefulResource")
CONSOLE = "https://console.cloud.google.com/vertex-ai/locations/{region}/{page}?project={project}"


class StatefulResource(JobState):
    """One Vertex AI resource with a state that ends: `name`, `id`, `state`, `done`, `succeeded`,
    `error`, `console_url`, `refresh()`, `wait()`, `cancel()`, `to_dict()`, `describe()`,
    `to_sdk()`; `get(name)` attaches to one.

    A subclass sets: `client_class` (its collection's client), `states` (the state family and its
    terminal set), `kind` (what messages call it), `id_pattern` (the ids `get` accepts without a
    full name), `console_page` (under the console's vertex-ai/locations/R/), `output_fields`
    (`to_dict`), `sdk_class` (the google-cloud-aiplatform class `to_sdk` returns)."""

    client_class: ClassVar[type[CollectionClient]] = CollectionClient
    states: ClassVar[States] = JOB_STATES
    kind: ClassVar[str] = "resource"
    id_pattern: ClassVar[str] = r"[0-9]+"
    console_page: ClassVar[str] = "training/{id}"
    output_fields: ClassVar[tuple[str, ...]] = ("name", "state", "console_url", "idempotency_key", "adopted")
    sdk_class: ClassVar[str] = ""
    # The oldest answer `state` reuses before it asks Vertex AI again, in seconds (None: never on
    # its own; `refresh()` only). An instance may set its own.
    max_age: float | None = 1.0

    def __init__(
        self,
        data: dict[str, Any],
        client: CollectionClient,
        *,
        idempotency_key: str | None = None,
        adopted: bool = False,
    ):
        """Args: data: the resource's REST JSON (as get or create answered); client: its
        collection's client; idempotency_key: the key it was created with (default: its key
        label); adopted: True when a create found it instead of creating it."""
        self.data = data  # (stamped: the answer's age counts from here)
        self.client = client
        self.idempotency_key = idempotency_key or (data.get("labels") or {}).get(KEY_LABEL)
        self.adopted = adopted

    @property
    def data(self) -> dict[str, Any]:
        """The resource's REST JSON as Vertex AI last answered it (create, get or list)."""
        return self._data

    @data.setter
    def data(self, value: dict[str, Any]) -> None:
        self._data = value
        self._answered = time.monotonic()

    @classmethod
    def get(
        cls: type[R],
        ref: Any,
        *,
        project: str | None = None,
        region: str | None = None,
        settings: Settings | None = None,
        client: CollectionClient | None = None,
    ) -> R:
        """Fetch one resource.

        Args:
            ref: its resource name, an id (with project and region), or a google-cloud-aiplatform
                SDK object for it (anything with a `resource_name`).
            project, region: where an id is. settings: endpoint and policies.
            client: the collection's client to use (default: one for the name's project and region).

        Returns: the resource, fresh."""
        ref = getattr(ref, "resource_name", ref)
        collection = cls.client_class.collection
        name = job_name(
            str(ref), project, region, collection=collection, what=cls.kind, id_pattern=cls.id_pattern
        )
        if client is None:
            p, r, _ = split_name(name, collection)
            client = cls.client_class(p, r, settings=settings)
        return cls(client.get(name), client)

    # -- fields --------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return str(self.data.get("name", ""))

    @property
    def id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def display_name(self) -> str:
        return str(self.data.get("displayName", ""))

    @property
    def state(self) -> str:
        """The current state (JOB_STATE_RUNNING, ...): asked of Vertex AI again when the answer
        held is older than `max_age` seconds and the resource has not ended (see the module's
        docstring); `held_state` is the answer held, without asking."""
        self._current()
        return self.held_state

    @property
    def held_state(self) -> str:
        """The state in the answer held (`data`), as of the last create, get or refresh."""
        return self.states.name(self._data.get("state"))

    @property
    def age(self) -> float:
        """Seconds since Vertex AI's answer held in `data`."""
        return time.monotonic() - self._answered

    def _current(self) -> None:
        """Refresh when the answer held is older than `max_age` and the resource has not ended."""
        if self.max_age is None or self.held_state in self.states.terminal:
            return
        if self.age >= self.max_age:
            self.refresh()

    @property
    def error(self) -> str | None:
        """The resource's failure message, if it has one (current, as `state`)."""
        self._current()
        return self._held_error()

    def _held_error(self) -> str | None:
        return (self._data.get("error") or {}).get("message") or None

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.data.get("labels") or {})

    @property
    def console_url(self) -> str:
        """The resource's page in the Google Cloud console ("" without a valid name)."""
        try:
            project, region, resource_id = split_name(self.name, self.client_class.collection)
        except ValueError:
            return ""
        return CONSOLE.format(region=region, project=project, page=self.console_page.format(id=resource_id))

    # -- actions -------------------------------------------------------------------------------
    def refresh(self: R) -> R:
        """Fetch the current state from Vertex AI. Returns: self."""
        self.data = self.client.get(self.name)
        self._refreshed()
        return self

    def _refreshed(self) -> None:
        """Called after every refresh (a subclass reports what changed, e.g. trials that ended)."""

    def cancel(self: R) -> R:
        """Ask Vertex AI to cancel it (it passes through CANCELLING) unless it has ended, then
        refresh. Returns: self."""
        if not self.done:
            self.client.cancel(self.name)
        return self.refresh()

    def wait(
        self: R,
        timeout: float | None = None,
        *,
        on_state: Callable[[Any], None] | None = None,
        poll: PollPolicy | None = None,
        check: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        quiet: bool = False,
        stream: IO[str] | None = None,
    ) -> R:
        """Poll until it ends, showing each state change as it comes (`--wait`'s lines: the time
        and the state) on `stream`, unless `quiet` or the caller shows them itself (`on_state`).

        Args:
            timeout: seconds before TimeoutError (None: no limit).
            on_state: called with the resource once at the start and at every state change
                (given, it replaces the lines shown).
            poll: the polling intervals (default: the client's settings).
            check: raise JobFailed (exit 1) unless it succeeded.
            sleep: how to wait between looks.
            quiet: show nothing.
            stream: where the lines go (default: sys.stderr, as the CLI's; a notebook shows it).

        Returns: self, ended."""
        if on_state is None and not quiet:
            on_state = StatePrinter(stream)
        wait_until_done(
            self, poll=poll or self.client.settings.poll, timeout=timeout, on_state=on_state, sleep=sleep
        )
        if check and not self.succeeded:
            raise JobFailed(self.failure_message())
        return self

    def failure_message(self) -> str:
        """`<kind> <name> ended <STATE>: <error>`."""
        text = f"{self.kind} {self.name} ended {self.states.short(self.state)}"
        error = self._held_error()  # (the answer the state came from)
        return f"{text}: {error}" if error else text

    def to_sdk(self) -> Any:
        """The google-cloud-aiplatform SDK object for the same resource (`aiplatform.CustomJob`,
        `HyperparameterTuningJob`, `PipelineJob`), fetched by name; the SDK is imported here, on
        first use. Against a stand-in (settings with a Vertex endpoint) the SDK is pointed at it
        (`aiplatform.init(api_endpoint=..., api_transport="rest")`, anonymous credentials).

        Returns: the SDK object."""
        project, region, _ = split_name(self.name, self.client_class.collection)
        sdk, credentials = aiplatform_sdk(project, region, self.client.settings)
        return getattr(sdk, self.sdk_class).get(
            self.name, project=project, location=region, credentials=credentials
        )

    # -- output --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The resource's `--output json` object: `output_fields`, by name, and, once it ended
        with one, its failure message as "error" (as the status object has it), so a script
        reading the object of a failed run learns why without parsing stderr."""
        out = {field: getattr(self, field) for field in self.output_fields}
        if self.held_state in self.states.terminal and (error := self._held_error()):
            out["error"] = error
        return out

    def describe(self) -> dict[str, Any]:
        """The status object: identity, state, times, error and labels (one answer: current,
        as `state`)."""
        self._current()
        d = self.data
        return {
            "name": self.name,
            "display_name": self.display_name,
            "state": self.held_state,
            "console_url": self.console_url,
            "create_time": d.get("createTime"),
            "start_time": d.get("startTime"),
            "end_time": d.get("endTime"),
            "error": self._held_error(),
            "labels": self.labels,
        }

    def __repr__(self) -> str:
        # The same state vocabulary as `.state` and the JSON output (JOB_STATE_*).
        return (
            f"{type(self).__name__}(display_name={self.display_name!r}, id={self.id!r}, "
            f"state={self.state!r}, console_url={self.console_url!r})"
        )

    def _repr_html_(self) -> str:
        state = self.state  # (current: one answer for the whole table)
        rows = [
            ("name", escape(self.name)),
            ("display name", escape(self.display_name)),
            ("state", f"<b>{escape(self.states.short(state))}</b>"),
            (
                "console",
                f'<a href="{escape(self.console_url)}" target="_blank">open in the Google Cloud console</a>',
            ),
        ]
        error = self._held_error()
        if error:
            rows.append(("error", escape(error)))
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in rows)
        return f"<table>{body}</table>"


class StatePrinter:
    """What `wait()` shows by default: the resource's state when the wait starts (with its name)
    and at each change, one timestamped line each, as `--wait` shows them in a terminal
    (`18:02:11  RUNNING`)."""

    def __init__(self, stream: IO[str] | None = None):
        """Args: stream: where the lines go (default: sys.stderr at the time of each line)."""
        self.stream = stream
        self._first = True

    def __call__(self, resource: StatefulResource, note: str | None = None) -> None:
        """Show `resource`'s state (its held answer: the caller has just looked), and `note`."""
        state = resource.states.short(resource.held_state)
        line = f"{time.strftime('%H:%M:%S')}  {state}"
        if self._first:
            line += f"  {resource.kind} {resource.name}"
            self._first = False
        if note:
            line += f"  ({note})"
        self.write(line)

    def write(self, line: str) -> None:
        """One line on the stream, flushed (a notebook shows it at once)."""
        out = self.stream or sys.stderr
        out.write(line + "\n")
        out.flush()
