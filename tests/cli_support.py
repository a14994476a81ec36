"""What the CLI tests share: the command that runs vertex-trainer, and the environment of an
edge process pointed at local fakes (fast retries and polls, no gcloud configuration, none of
the caller's Google settings)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

FAST_RETRY = "attempts=4,initial=0.01,maximum=0.05,deadline=10,read_timeout=5"


def cli_command() -> list[str]:
    """The installed `vertex-trainer` script, else the module."""
    script = Path(sys.executable).parent / "vertex-trainer"
    return [str(script)] if script.exists() else [sys.executable, "-m", "vertex_trainer"]


def edge_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """os.environ without VERTEX_TRAINER_*/GOOGLE_*/CLOUDSDK_*/CLOUD_ML_*/STORAGE_EMULATOR*, plus fast
    retries and polls, a private empty gcloud config, and `settings` (e.g.
    VERTEX_TRAINER_API_ENDPOINT=...)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERTEX_TRAINER_", "GOOGLE_", "CLOUDSDK_", "CLOUD_ML_", "STORAGE_EMULATOR"))
    }
    gcloud = tmp_path / "gcloud-config"
    gcloud.mkdir(exist_ok=True)
    env.update(
        {
            "VERTEX_TRAINER_RETRY": FAST_RETRY,
            "VERTEX_TRAINER_POLL_INTERVAL": "0.02",
            "CLOUDSDK_CONFIG": str(gcloud),
            "NO_GCE_CHECK": "true",
            "COLUMNS": "200",
        }
    )
    env.update(settings)
    return env


def gcloud_config(directory: Path, vertex_url: str, project: str = "test-project") -> Path:
    """A private gcloud configuration (CLOUDSDK_CONFIG) that sends `gcloud ai ...` to the fake
    Vertex AI at `vertex_url` without credentials: what `gcloud config set` would write, written
    directly (each gcloud call costs ~0.6 s). Returns `directory`."""
    (directory / "configurations").mkdir(parents=True, exist_ok=True)
    (directory / "active_config").write_text("default")
    (directory / "configurations" / "config_default").write_text(
        f"[api_endpoint_overrides]\naiplatform = {vertex_url}/\n\n"
        "[auth]\ndisable_credentials = true\n\n"
        f"[core]\nproject = {project}\ndisable_usage_reporting = true\n\n"
        "[component_manager]\ndisable_update_check = true\n"
    )
    return directory


@dataclass
class CliResult:
    """What an in-process run of the CLI gave: its exit code, stdout and stderr."""

    code: int
    out: str
    err: str


def run_in_process(*args: object) -> CliResult:
    """The CLI in this process, as the console script runs it (main(); SystemExit -> code)."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from vertex_trainer.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue())
