"""Wall-clock latency of vertex-trainer commands, side by side with gcloud's equivalents.

    .venv/bin/python benchmarks/cli_latency.py [--runs 7] [--out benchmarks/RESULTS-cli.md]

Every command runs in a fresh process; the figure is the median of --runs runs, vertex-trainer
and gcloud alternating within each round so both see the same machine load. `submit` and
`gcloud ai custom-jobs create` both talk to the same fake Vertex AI server on loopback (started
here, in-process), through a private gcloud configuration (endpoint override, no credentials).
gcloud rows are skipped when gcloud is not on PATH.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vertex_trainer.emulators.vertex import FakeVertex  # noqa: E402

SPEC = """\
name: bench-job
project: bench-project
region: us-central1
hardware: a100x8
image:
  uri: us-docker.pkg.dev/bench-project/training/trainer:v1
scheduling: {strategy: spot, timeout: 1d}
output_dir: gs://bench-bucket/runs/bench
labels: {team: bench}
trainer:
  model: resnet50
  train_data: gs://bench-bucket/imagenet/train-*
  eval_data: gs://bench-bucket/imagenet/validation-*
  num_classes: 1000
  epochs: 1
  batch_size: 2048
"""


def vertex_trainer() -> list[str]:
    script = Path(sys.executable).parent / "vertex-trainer"
    return [str(script)] if script.exists() else [sys.executable, "-m", "vertex_trainer"]


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, timeout=120)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS-cli.md")
    args = parser.parse_args()

    gcloud = shutil.which("gcloud")
    work = Path(tempfile.mkdtemp(prefix="vt-bench-"))
    with FakeVertex() as fake:
        spec = work / "job.yaml"
        spec.write_text(SPEC)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VERTEX_TRAINER_", "CLOUDSDK_"))}
        config = work / "gcloud"
        (config / "configurations").mkdir(parents=True)
        (config / "active_config").write_text("default")
        (config / "configurations" / "config_default").write_text(
            f"[api_endpoint_overrides]\naiplatform = {fake.url}/\n\n[auth]\ndisable_credentials = true\n\n"
            "[core]\nproject = bench-project\ndisable_usage_reporting = true\n\n"
            "[component_manager]\ndisable_update_check = true\n")
        env.update(VERTEX_TRAINER_API_ENDPOINT=fake.url, CLOUDSDK_CONFIG=str(config))
        vt = vertex_trainer()
        gcloud_config = work / "gcloud-job.yaml"
        gcloud_config.write_text(subprocess.run([*vt, "render", str(spec), "--format", "gcloud"], env=env,
                                                capture_output=True, text=True, check=True).stdout)
        create = [gcloud, "ai", "custom-jobs", "create", f"--config={gcloud_config}",
                  "--region=us-central1", "--display-name=bench-job", "--format=json"] if gcloud else None
        rows = [
            ("--help", [*vt, "--help"], [gcloud, "ai", "custom-jobs", "create", "--help"] if gcloud else None),
            ("submit --help", [*vt, "submit", "--help"], None),
            ("validate SPEC", [*vt, "validate", str(spec)], None),
            ("render SPEC (json)", [*vt, "render", str(spec)], None),
            ("render SPEC --format gcloud", [*vt, "render", str(spec), "--format", "gcloud"], None),
            ("submit SPEC --dry-run", [*vt, "submit", str(spec), "--dry-run"], None),
            ("submit SPEC (list + create, fake server)", [*vt, "submit", str(spec), "--output", "json"], create),
        ]
        # Warm up: the fake imports aiplatform_v1 on its first request; the OS caches files.
        for _, ours, theirs in rows:
            timed(ours, env, work)
            if theirs:
                timed(theirs, env, work)
        results = []
        for label, ours, theirs in rows:
            a, b = [], []
            for _ in range(args.runs):
                a.append(timed(ours, env, work))
                if theirs:
                    b.append(timed(theirs, env, work))
            results.append((label, statistics.median(a), statistics.median(b) if b else None,
                            " ".join(a if not a.startswith("--config=") else "--config=FILE"
                                     for a in theirs[1:5]) if theirs else ""))
            print(f"{label:45} {results[-1][1]:.3f}s" +
                  (f"   gcloud {results[-1][2]:.3f}s" if b else ""), flush=True)
        jobs = len(fake.jobs)

    lines = [
        "# CLI latency: vertex-trainer vs gcloud",
        "",
        f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node() or 'this machine'} "
        f"({os.cpu_count()} cores, Python {platform.python_version()}), median of {args.runs} fresh "
        "processes each, alternating. `submit` and `gcloud ai custom-jobs create` both created jobs on "
        f"the same fake Vertex AI server on loopback ({jobs} jobs in total).",
        "",
        "Command: `.venv/bin/python benchmarks/cli_latency.py --runs " + str(args.runs) + "`",
        "",
        "| command | vertex-trainer (s) | gcloud equivalent | gcloud (s) | ratio |",
        "|---|---:|---|---:|---:|",
    ]
    for label, ours, theirs, what in results:
        ratio = f"{ours / theirs:.2f}" if theirs else ""
        lines.append(f"| `{label}` | {ours:.3f} | {('`gcloud ' + what + '`') if what else '-'} | "
                     f"{f'{theirs:.3f}' if theirs else '-'} | {ratio} |")
    lines += ["", "gcloud has no equivalent of validate, render or a dry run (`-`)."]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
