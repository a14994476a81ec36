"""The skeleton the sandbox's runners share (job_runs.py, pipelines.py, tuning.py).

A fake service hands every created resource to its runner's `start(body)`; the runner keeps a
table of runs under a lock, runs each on a thread of its own, refuses new runs once `stop` has
begun, and answers `cancel`, `wait` and `stop`. What a run does is the subclass's: `_new` (its
record), `_run` (the work, on its thread), `_refuse` (what a refused run reports) and, optionally,
`_cancelled` (more to stop than the run's cancel event) and `_stopped` (clean-up after `stop`).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

from vertex_trainer.gcp.auth import emulator_headers
from vertex_trainer.log import Log
from vertex_trainer.regions import region_of


def now() -> str:
    """The current time as the Vertex AI REST API writes it (RFC 3339, UTC, microseconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def internal_error(exc: Exception) -> str:
    """The error text of a run the sandbox itself failed (`exc`: the bug): never left RUNNING."""
    return f"Internal error in the sandbox: {type(exc).__name__}: {exc}"


@dataclass(eq=False)
class Run:
    """One run: `name` (projects/P/locations/L/<collection>/ID) and `body` (what was created)."""

    name: str
    body: dict[str, Any]
    cancel: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    @property
    def job_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def project(self) -> str:
        return self.name.split("/")[1]

    @property
    def location(self) -> str:
        return region_of(self.name)


R = TypeVar("R", bound=Run)


class Runner(Generic[R]):
    """A runner hook (`start`, `cancel`) with `wait` and `stop` for the sandbox and tests.

    `kind` names the runs' threads (`<kind>-<id>`); `echo` receives the runner's lines."""

    kind = "run"
    stop_timeout_s = 60.0

    def __init__(self, *, echo: Log | None = None):
        self.echo = echo if echo is not None else (lambda text: None)
        self._runs: dict[str, R] = {}
        self._lock = threading.Lock()
        self._closed = False

    # -- the hook ---------------------------------------------------------------------------
    def start(self, body: dict[str, Any]) -> None:
        """Run a created resource (`body`: a copy of it, as created) on a thread of its own."""
        run = self._new(body)
        with self._lock:
            if self._closed:  # the sandbox is stopping: nothing new starts
                self._refuse(run)
                return
            self._runs[run.name] = run
            run.thread = threading.Thread(
                target=self._main, args=(run,), daemon=True, name=f"{self.kind}-{run.job_id}"
            )
        run.thread.start()

    def cancel(self, name: str) -> None:
        """Resource `name` is CANCELLING: stop its work (its end is reported once it is gone)."""
        run = self._get(name)
        if run is not None:
            run.cancel.set()
            self._cancelled(run)

    # -- for the sandbox and tests ----------------------------------------------------------
    def wait(self, name: str, timeout: float | None = None) -> bool:
        """Block until run `name` has ended here (`timeout`: seconds, None for ever); False when
        it did not end in time or was never started here."""
        run = self._get(name)
        return run is not None and run.ended.wait(timeout)

    def stop(self, timeout: float | None = None) -> None:
        """Refuse new runs, cancel every run still going and wait for each (`timeout` seconds
        each, the runner's `stop_timeout_s` by default)."""
        with self._lock:
            self._closed = True
            runs = list(self._runs.values())
        for run in runs:
            self.cancel(run.name)
        for run in runs:
            if run.thread is not None:
                run.thread.join(self.stop_timeout_s if timeout is None else timeout)
        self._stopped()

    # -- for subclasses ---------------------------------------------------------------------
    def _new(self, body: dict[str, Any]) -> R:
        raise NotImplementedError

    def _run(self, run: R) -> None:
        raise NotImplementedError

    def _refuse(self, run: R) -> None:
        raise NotImplementedError

    def _cancelled(self, run: R) -> None:
        """More to stop than the run's cancel event (none by default)."""

    def _stopped(self) -> None:
        """Clean-up once `stop` has waited for every run (none by default)."""

    def _get(self, name: str) -> R | None:
        with self._lock:
            return self._runs.get(name)

    def _main(self, run: R) -> None:
        try:
            self._run(run)
        finally:
            run.ended.set()


def call(
    base_url: str, method: str, path: str, body: Any = None, *, timeout: float = 60, token: str | None = None
) -> tuple[int, Any]:
    """One JSON request to a loopback fake (no proxy): `base_url` + `path`, `method`, `body`
    (None for none), `timeout` seconds, `token` (the sandbox's) as its Bearer credential. Returns
    (HTTP status, the JSON answer or an error's JSON body, else None); status 0 when the fake
    cannot be reached."""
    request = urllib.request.Request(
        base_url + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json", **emulator_headers(token)},
    )
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except ValueError:
            return exc.code, None
    except OSError:
        return 0, None
