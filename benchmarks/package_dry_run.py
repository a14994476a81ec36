"""How long `vertex-trainer package SPEC --dry-run` takes on an unchanged context.

Two figures:
  * in process: packaging.ensure_artifact(spec, settings=..., dry_run=True) -- assemble the context,
    render the Dockerfile, hash every file, name the tag (what render and submit --dry-run pay);
  * command line: the whole `vertex-trainer package SPEC --dry-run --output json` process,
    Python start-up and imports included.

Usage:
  .venv/bin/python benchmarks/package_dry_run.py [SPEC] [--runs N] [--cli-runs N]
      [--trainer-root DIR]   # a directory holding trainer/ and requirements.txt, used instead
                             # of the installed trainer (put first on PYTHONPATH)
Prints a Markdown table row set; goal: well under a second.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec", nargs="?", default=str(REPO / "job_specs" / "resnet50-a100x8.yaml"))
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--cli-runs", type=int, default=7)
    ap.add_argument("--trainer-root", default=None)
    args = ap.parse_args()

    env = dict(os.environ)
    if args.trainer_root:
        root = str(Path(args.trainer_root).resolve())
        sys.path.insert(0, root)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")

    from vertex_trainer import packaging
    from vertex_trainer.settings import Settings
    from vertex_trainer.spec import load_spec

    spec = load_spec(args.spec)
    settings = Settings()  # a dry run sends nothing: no endpoint is used
    first_start = time.perf_counter()
    result = packaging.ensure_artifact(spec, settings=settings, dry_run=True)
    first = time.perf_counter() - first_start
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        again = packaging.ensure_artifact(spec, settings=settings, dry_run=True)
        times.append(time.perf_counter() - start)
        assert again.image == result.image, "the tag moved on an unchanged context"

    cli_times = []
    cmd = [sys.executable, "-m", "vertex_trainer", "package", args.spec, "--dry-run", "--output", "json"]
    for _ in range(args.cli_runs):
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
        cli_times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
        assert json.loads(proc.stdout)["image"] == result.image

    plan = result.plan
    print(
        f"spec: {Path(args.spec).name}; context: {len(plan.entries)} files, {plan.size} bytes; "
        f"tag {result.image.rsplit(':', 1)[1]}"
    )
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print()
    print("| measurement | median | p90 | runs |")
    print("|---|---|---|---|")
    q = statistics.quantiles
    print(f"| ensure_artifact(dry_run=True), first call (template compile) | {first * 1000:.1f} ms | - | 1 |")
    print(
        f"| ensure_artifact(dry_run=True), unchanged context | {statistics.median(times) * 1000:.2f} ms "
        f"| {q(times, n=10)[-1] * 1000:.2f} ms | {len(times)} |"
    )
    print(
        f"| `vertex-trainer package SPEC --dry-run --output json` (whole process) "
        f"| {statistics.median(cli_times) * 1000:.0f} ms | {max(cli_times) * 1000:.0f} ms (max) "
        f"| {len(cli_times)} |"
    )


if __name__ == "__main__":
    main()
