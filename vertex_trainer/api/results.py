"""What `submit` returns besides a Vertex AI Job: the DryRun of `dry_run=True` (made from the
submit plan, which it carries) and the LocalJob of `local=True`, a Handle (api/handles.py) like
the others (vertex_trainer.api re-exports both)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vertex_trainer.api.report import report as write_report
from vertex_trainer.contract import LocalRun, short_state
from vertex_trainer.errors import JobFailed
from vertex_trainer.local.failure import exception_line
from vertex_trainer.redact import hidden, redact

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.api.plan import SubmitPlan
    from vertex_trainer.local.run import LocalResult

__all__ = ["DryRun", "LocalJob"]


@dataclass
class DryRun:
    """What submit would do, without doing it: the exact requests, and the body it creates first
    (the CustomJob, or a tuning spec's HyperparameterTuningJob). `plan` is the SubmitPlan it
    was made from (api/plan.py)."""

    job: dict
    requests: list[dict]
    image: str | None
    idempotency_key: str
    local: bool = False
    package: dict | None = None  # the build or upload submit would do first (when the spec builds)
    deploy: dict | None = None  # submit(deploy=True): the requests the deploy would send after
    attempts: list[dict] | None = None  # scheduling.fallback: each attempt's requests
    trials: list[dict] | None = None  # a local tuning study: the trials it would run
    checks: list[dict] | None = None  # a cloud submit's reads before it builds or sends
    output_dir: str | None = None  # the run's own folder below output_dir (docs/contract.md section 15)
    plan: SubmitPlan | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        """The docs/contract.md section 2 submit object of a dry run (with "deploy" when asked),
        as printed: env values and flags whose names look secret are `***`, and "redacted" names
        them (vertex_trainer/redact.py; `job` and `requests` keep the real values, which submit
        sends)."""
        out = {
            "name": None,
            "state": None,
            "console_url": None,
            "image": self.image,
            "idempotency_key": self.idempotency_key,
            "adopted": False,
            "output_dir": self.output_dir,
            "dry_run": True,
            "local": self.local,
            "package": self.package,
            "requests": self.requests,
        }
        if self.deploy is not None:
            out["deploy"] = self.deploy
        if self.attempts is not None:
            out["attempts"] = self.attempts
        if self.trials is not None:
            out["trials"] = self.trials
        if self.checks is not None:
            out["checks"] = self.checks
        names = hidden(out)
        if not names:
            return out
        return {**redact(out), "redacted": list(names)}

    def __repr__(self) -> str:  # the body is in .job and .requests; don't flood a notebook
        steps = ", ".join(r.get("method", "local") for r in self.requests)
        return (
            f"DryRun(local={self.local}, image={self.image!r}, requests=[{steps}], "
            f"idempotency_key={self.idempotency_key!r})"
        )


@dataclass
class LocalJob(LocalRun):
    """A job run on this machine by ``submit(spec, local=True)`` (see vertex_trainer.local): a
    Handle whose run has ended when `submit` returns (contract.LocalRun), so `refresh`, `wait`
    and `cancel` have nothing to ask; `result` is what the run ended with."""

    result: LocalResult
    job: dict
    image: str | None
    idempotency_key: str
    adopted: bool = False
    console_url: None = None

    @property
    def name(self) -> str:
        return self.result.name

    @property
    def state(self) -> str:
        return self.result.state

    @property
    def output_dir(self) -> str | None:
        """Where the run wrote its model (model/), checkpoints, logs and metrics.json."""
        return _str_or_none(self.result.output_dir)

    @property
    def metrics(self) -> dict | None:
        """metrics.json of the run (None when it did not finish)."""
        return self.result.metrics

    def failure_message(self, lines: bool = True) -> str:
        """Why the run did not succeed, for an error message.

        Args:
            lines: add the failing replica's last lines (the CLI's summary has shown them).
        Returns:
            the state, the failing replica, its exit code and the exception it died of, and
            (`lines`) its last lines.
        """
        r = self.result
        text = f"local job {r.name} ended {short_state(r.state)}"
        tail = r.log_tail if not isinstance(r.log_tail, str) else r.log_tail.splitlines()
        if r.failed_replica:
            raised = exception_line(tail or [])
            text += f" ({r.failed_replica} exited with {r.failed_exit_code}" + (
                f": {raised})" if raised else ")"
            )
        if tail and lines:
            text += "\n" + "\n".join(tail)
        return text

    def wait(self, timeout: float | None = None, *, check: bool = True) -> LocalJob:
        """The run has ended (see the class doc): only the check.

        Args:
            timeout: unused (nothing runs any more); for the Handle's signature.
            check: raise JobFailed (exit 1, with the failing replica's exception) unless it
                SUCCEEDED.

        Returns:
            self.
        """
        if check and not self.succeeded:
            raise JobFailed(self.failure_message(lines=False))
        return self

    def to_dict(self) -> dict:
        return self.submit_object(self.output_dir, self.metrics)

    def report(self, path: str | None = None, *, fmt: str | None = None) -> str:
        """Write this run's report (see :func:`vertex_trainer.api.report`).

        Args:
            path: the file to write (default: report-<name>.<fmt> in the working directory).
            fmt: "html" (one page that opens offline) or "png" (the plots as one image);
                default: the suffix of `path`, else html.

        Returns:
            the path written.
        """
        return write_report(self, path, fmt=fmt)

    def __repr__(self) -> str:
        return f"LocalJob(name={self.name!r}, state={self.state!r}, output_dir={self.output_dir!r})"


def _str_or_none(value: object) -> str | None:
    return None if value is None else str(value)
