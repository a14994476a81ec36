"""What the CLI tests share: the command that runs vertex-trainer, and the environment of an
edge process pointed at local fakes (fast retries and polls, no gcloud configuration, none of
the caller's Google settings)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

FAST_RETRY = "attempts=4,initial=0.01,maximum=0.05,deadline=10,read_timeout=5"


def cli_command() -> list[str]:
    """The installed `vertex-trainer` script, else the module."""
    script = Path(sys.executable).parent / "vertex-trainer"
    return [str(script)] if script.exists() else [sys.executable, "-m", "vertex_trainer"]


def edge_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """os.environ without VERTEX_TRAINER_*/GOOGLE_*/CLOUDSDK_*/CLOUD_ML_*, plus fast retries and
    polls, a private empty gcloud config, and `settings` (e.g. VERTEX_TRAINER_API_ENDPOINT=...)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VERTEX_TRAINER_", "GOOGLE_", "CLOUDSDK_", "CLOUD_ML_"))}
    gcloud = tmp_path / "gcloud-config"
    gcloud.mkdir(exist_ok=True)
    env.update({"VERTEX_TRAINER_RETRY": FAST_RETRY, "VERTEX_TRAINER_POLL_INTERVAL": "0.02",
                "CLOUDSDK_CONFIG": str(gcloud), "NO_GCE_CHECK": "true", "COLUMNS": "200"})
    env.update(settings)
    return env
