"""A local run for people: the summary `submit --local` prints on stdout (its progress went to
stderr), with the metrics the run's own display names."""

from __future__ import annotations

import json
from typing import Any

from vertex_trainer.contract import short_state
from vertex_trainer.local.display import SUMMARY_METRICS

__all__ = ["SUMMARY_METRICS", "local_summary", "model_words"]


def model_words(r: Any) -> str | None:
    """Where the model is, or that nothing was written there (a script that saved no model)."""
    if r.model_dir is None:
        return None
    if r.model_written is False:
        return f"none: nothing was written to AIP_MODEL_DIR ({r.model_dir})"
    return str(r.model_dir)


def local_summary(result: Any) -> str:
    """local/state/model/output/metrics lines of an api LocalJob (`submit --local`)."""
    r = result.result
    rows = [
        ("local", result.name),
        ("state", f"{short_state(result.state)} in {r.elapsed_s:.1f}s"),
        ("output", result.output_dir),
    ]
    if result.succeeded:
        rows.insert(2, ("model", model_words(r)))
        metrics = result.metrics or {}
        shown = {k: metrics[k] for k in SUMMARY_METRICS if k in metrics}
        rows.append(("metrics", json.dumps(shown) if shown else "none (no metrics.json in the output)"))
    return "\n".join(f"{k:8} {v}" for k, v in rows if v)
