"""A local run's logs, kept in its records so that `vertex-trainer logs RUN` can show them.

While a run goes, every replica line is appended to `<records>/logs/<replica>.log` (the records
are beside the run's folder: local/layout.py) as `<UTC time, microseconds> <line>`. One writer
stamps every line, strictly increasing, so the files merge back into the exact order the lines
were shown. `logs/runner.json` names the running process; `<records>/result.json` is written when
the run ends (state, exit codes, the failing replica and its last lines). A gs:// output directory
keeps no log record.

Reading (`entries`) merges the files in time order; `follow=True` keeps reading until
result.json appears (or the runner is gone without one), then yields the end as a `JobEvent`
and, when the run did not succeed, a `Failure`.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vertex_trainer.contract import SUCCEEDED, Failure, JobEvent, JobState, LogEntry
from vertex_trainer.local.layout import find_run as _find

LOGS_DIR = "logs"
RESULT_FILE = "result.json"
# What result.json keeps of how a run ended (a LocalResult's fields)
RESULT_FIELDS = (
    "name",
    "state",
    "exit_code",
    "failed_replica",
    "failed_exit_code",
    "log_tail",
    "job_id",
    "replicas",
    "elapsed_s",
)
RUNNER_FILE = "runner.json"
RUNNING, FAILED = "JOB_STATE_RUNNING", "JOB_STATE_FAILED"

Item = LogEntry | JobEvent | Failure


def _stamp(ns: int) -> str:
    secs, frac = divmod(ns, 10**9)
    return f"{datetime.fromtimestamp(secs, timezone.utc):%Y-%m-%dT%H:%M:%S}.{frac // 1000:06d}Z"


class RunLog:
    """The writer: one file per replica under <records>/logs/ (`record` None: no files)."""

    def __init__(self, record: str | None, names: list[str]):
        self.dir = None if record is None else os.path.join(record, LOGS_DIR)
        self._files: dict[str, Any] = {}
        self._last = 0
        if self.dir is None:
            return
        os.makedirs(self.dir, exist_ok=True)
        for stale in [*Path(self.dir).glob("*.log"), Path(self.dir).parent / RESULT_FILE]:
            stale.unlink(missing_ok=True)  # a re-run into the same directory starts afresh
        for name in names:
            self._files[name] = open(os.path.join(self.dir, f"{name}.log"), "a", encoding="utf-8")
        with open(os.path.join(self.dir, RUNNER_FILE), "w", encoding="utf-8") as f:
            json.dump({"pid": os.getpid(), "replicas": names}, f)

    def write(self, items: list[tuple[str, str]]) -> None:
        touched = set()
        for name, line in items:
            f = self._files.get(name)
            if f is None:
                continue
            # Microsecond stamps, strictly increasing: the merge restores the shown order.
            self._last = max(time.time_ns() // 1000 * 1000, self._last + 1000)
            f.write(f"{_stamp(self._last)} {line}\n")
            touched.add(name)
        for name in touched:
            self._files[name].flush()

    def tee(self, display: Any, also: Any = None) -> _Tee:
        """A stand-in for `display` that also records each replica line (and hands each batch
        to `also`, when given)."""
        return _Tee(display, self, also)

    def close(self, result: Any) -> None:
        """Close the files and record how the run ended (`result`: a LocalResult)."""
        for f in self._files.values():
            f.close()
        self._files = {}
        if self.dir is None:
            return
        # (the user's code may have removed a folder it thought its own: the result is kept anyway)
        os.makedirs(os.path.dirname(self.dir), exist_ok=True)
        with open(os.path.join(os.path.dirname(self.dir), RESULT_FILE), "w", encoding="utf-8") as f:
            json.dump({k: getattr(result, k, None) for k in RESULT_FIELDS}, f, indent=2)
            f.write("\n")


class _Tee:
    def __init__(self, display: Any, log: RunLog, also: Any = None):
        self.display, self.log, self.also = display, log, also

    def lines(self, items: list[tuple[str, str]]) -> None:
        self.log.write(items)
        if self.also is not None and items:
            self.also(items)
        self.display.lines(items)

    def tick(self) -> None:
        self.display.tick()


# -- reading ---------------------------------------------------------------------------------------


def find_run(ref: str, *, tmp: str | None = None) -> str | None:
    """The records of a local run (local/layout.py `find_run`: its folder, its records, the base
    folder of a spec's runs (the newest), or a spec's name), or None."""
    found = _find(ref, tmp=tmp)
    return str(found.record) if found is not None else None


def replicas(record: str) -> list[str]:
    """The replicas a local run ran, from its records: the log file each one writes from the
    start, and the names the runner and the result list; sorted as workerpool0-0, ..., 1-10."""
    logs = Path(record) / LOGS_DIR
    names = {p.stem for p in logs.glob("*.log")}
    for listed in (logs / RUNNER_FILE, Path(record) / RESULT_FILE):
        try:
            found = json.loads(listed.read_text(encoding="utf-8")).get("replicas")
        except (OSError, ValueError, AttributeError):
            continue
        names.update(str(n) for n in found or () if isinstance(n, str))
    return sorted(names, key=lambda n: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", n)])


class LocalRun(JobState):
    """A local run as `logs --follow` sees it: its state, and how it ended."""

    state: str

    def __init__(self, record: str, result: dict[str, Any] | None = None, state: str = RUNNING):
        self.record, self.result = record, result or {}
        self.state = self.result.get("state") or state
        self.name = self.result.get("name") or os.path.basename(os.path.dirname(record))

    def failure_message(self) -> str:
        text = f"local run {self.name} ended {self.state.removeprefix('JOB_STATE_')}"
        replica, code = self.result.get("failed_replica"), self.result.get("failed_exit_code")
        if replica:
            text += f": {replica} exited with code {code}"
        elif not self.result:
            text += ": the runner stopped without recording a result (killed?)"
        return text


class _Reader:
    """Reads the replica files incrementally (complete lines only) and merges them in order."""

    def __init__(self, record: str, replica: str | None, since_ns: int | None):
        self.dir = Path(record) / LOGS_DIR
        self.replica, self.since = replica, (_stamp(since_ns) if since_ns is not None else None)
        self.offsets: dict[str, int] = {}

    def read(self) -> list[LogEntry]:
        found = []
        for path in sorted(self.dir.glob("*.log")):
            name = path.stem
            if self.replica and name != self.replica:
                continue
            with open(path, "rb") as f:
                f.seek(self.offsets.get(name, 0))
                data = f.read()
            end = data.rfind(b"\n") + 1  # a line still being written waits for the next read
            self.offsets[name] = self.offsets.get(name, 0) + end
            for raw in data[:end].decode("utf-8", "replace").splitlines():
                stamp, _, message = raw.partition(" ")
                if self.since is None or stamp >= self.since:
                    found.append(LogEntry(timestamp=stamp, replica=name, message=message))
        found.sort(key=lambda e: e.timestamp)  # fixed-width UTC stamps sort as times
        return found


def entries(
    record: str,
    *,
    follow: bool = False,
    replica: str | None = None,
    since_ns: int | None = None,
    interval: float = 0.5,
) -> Iterator[Item]:
    """A local run's entries in time order; with `follow`, until the run has ended."""
    reader = _Reader(record, replica, since_ns)
    yield from reader.read()
    if not follow:
        return
    result = _result(record)
    if result is None:
        yield JobEvent(LocalRun(record), True)
    while result is None and _runner_alive(record):
        time.sleep(interval)
        yield from reader.read()
        result = _result(record)
    yield from reader.read()
    run = LocalRun(record, result, state=FAILED)
    yield JobEvent(run, True)
    if not run.succeeded:
        tail = tuple(result.get("log_tail") or ()) if result else ()
        yield Failure(
            message=run.failure_message(),
            replica=result.get("failed_replica") if result else None,
            lines=tail[-20:],
        )


def _result(record: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(record, RESULT_FILE), encoding="utf-8") as f:
            value = json.load(f)
        return value if isinstance(value, dict) else None
    except (OSError, ValueError):
        return None


def _runner_alive(record: str) -> bool:
    try:
        with open(os.path.join(record, LOGS_DIR, RUNNER_FILE), encoding="utf-8") as f:
            pid = int(json.load(f)["pid"])
        os.kill(pid, 0)
        return True
    except PermissionError:
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False


__all__ = ["SUCCEEDED", "LocalRun", "RunLog", "entries", "find_run", "replicas"]
