"""Wall-clock latency of vertex-trainer commands, side by side with gcloud's equivalents.

    .venv/bin/python benchmarks/cli_latency.py [--runs 7] [--out benchmarks/RESULTS-cli.md]

Every command runs in a fresh process; the figure is the median of --runs runs, vertex-trainer
and gcloud alternating within each round so both see the same machine load (the load average
is recorded, and the CPU seconds of each process beside the wall time: on a busy machine the
CPU time is the steadier figure). `--help` and `validate` are compared with gcloud's
`ai custom-jobs create --help` (issue 26: both within 0.2x of it). `submit` and
`gcloud ai custom-jobs create` both talk to the same fake Vertex AI server on loopback (started
here, in-process), through a private gcloud configuration (endpoint override, no credentials).
gcloud rows are skipped when gcloud is not on PATH. The last table is `python -X importtime`'s
view of `--help` and `validate`: where the import time goes, by package.

Two "floor" rows time what any typer + pydantic command pays before this project's code runs:
the interpreter with the venv's site (.pth files, the editable install's finder), then the
imports validate cannot do without (typer, typer's pydantic adapters, pydantic's plugin loader,
PyYAML). `validate --local` runs the templated quickstart spec (jinja2 is loaded for it) on two
empty shards. `--only WORD` measures the rows whose label contains WORD (e.g. `--only validate`).

`--instructions` counts instead of timing: each of the rows set against gcloud (`--help`,
validate, the floor, `submit` to the fake) and each gcloud command they are set against runs once
under valgrind's callgrind (`--trace-children=yes`, PYTHONHASHSEED=0), and the figure is the
instructions executed by the process and its children (for `submit` and `create`: the client's,
not the fake server's, which runs in this process). Unlike seconds it does not
move with the machine's load (the same command gives the same count to within a few per mille),
so it is the figure to compare trees with on a shared machine; it ignores what time the OS
spends on files and pages (`valgrind` must be on PATH; about a minute a row).

Python may not write bytecode caches in this environment (PYTHONDONTWRITEBYTECODE): every module
whose cache is stale would be compiled on every run, which an installed package never does; the
commands run without that variable, so the warm-up writes the caches once (gcloud ships its own).
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import re
import resource
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

from tests.cli_support import gcloud_config  # noqa: E402  (the parity tests' gcloud configuration)
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


# What validate cannot avoid: typer (its parameters are parsed through pydantic TypeAdapters),
# pydantic's plugin loader (imported with the first validator, even with plugins disabled) and
# PyYAML. The environment switch is the CLI's own (cli/common.py no_pydantic_plugins).
FLOOR = (
    "import os; os.environ['PYDANTIC_DISABLE_PLUGINS'] = '1'; "
    "import typer, typer._adapters, pydantic.plugin._loader, yaml"
)


def vertex_trainer(tree: Path | None = None) -> list[str]:
    """The console script; with `tree`, `python -m vertex_trainer` from that copy of the package."""
    script = Path(sys.executable).parent / "vertex-trainer"
    if tree is None and script.exists():
        return [str(script)]
    return [sys.executable, "-m", "vertex_trainer"]


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_times(argv: list[str], env: dict[str, str], cwd: Path, runs: int = 3) -> dict[str, float]:
    """`python -X importtime` of a command: the self time of each package's modules (the
    vertex_trainer modules by subpackage), the least of `runs` runs, in ms."""
    best: dict[str, float] = collections.defaultdict(lambda: float("inf"))
    for _ in range(runs):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "vertex_trainer", *argv],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
        ).stderr
        seen: dict[str, float] = collections.defaultdict(float)
        for m in re.finditer(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", err):
            parts = m[2].split(".")
            seen[".".join(parts[:2]) if parts[0] == "vertex_trainer" else parts[0]] += int(m[1]) / 1000
        for name, ms in seen.items():
            best[name] = min(best[name], ms)
    return dict(best)


def instructions(argv: list[str], env: dict[str, str], cwd: Path) -> int:
    """Instructions executed by `argv` and its child processes, counted by valgrind's callgrind."""
    result = subprocess.run(
        ["valgrind", "--tool=callgrind", "--trace-children=yes", "--callgrind-out-file=/dev/null", *argv],
        env={**env, "PYTHONHASHSEED": "0"},
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=1800,
    )
    counts = [int(n) for n in re.findall(r"Collected : (\d+)", result.stderr)]
    if result.returncode != 0 or not counts:
        raise SystemExit(f"valgrind {' '.join(argv)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return sum(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None, help="default: benchmarks/RESULTS-cli.md")
    parser.add_argument(
        "--only",
        metavar="WORD",
        help="only the rows whose label contains WORD "
        "(prints the figures; writes --out only when given explicitly)",
    )
    parser.add_argument(
        "--tree",
        type=Path,
        help="measure the vertex_trainer package in this directory "
        "(e.g. an older commit's, from `git archive`) instead of this checkout's",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions (valgrind) "
        "of the rows set against gcloud instead of timing them; prints, writes nothing",
    )
    args = parser.parse_args()
    out = args.out or ROOT / "benchmarks" / "RESULTS-cli.md"

    gcloud = shutil.which("gcloud")
    work = Path(tempfile.mkdtemp(prefix="vt-bench-"))
    with FakeVertex() as fake:
        spec = work / "job.yaml"
        spec.write_text(SPEC)
        local_spec = work / "quickstart-local.yaml"  # templated name; --local needs its data
        local_spec.write_text((ROOT / "job_specs" / "quickstart-local.yaml").read_text())
        (work / "data" / "quickstart").mkdir(parents=True)
        for shard in ("train-00000-of-00001", "validation-00000-of-00001"):
            (work / "data" / "quickstart" / shard).touch()
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("VERTEX_TRAINER_", "CLOUDSDK_")) and k != "PYTHONDONTWRITEBYTECODE"
        }
        config = gcloud_config(work / "gcloud", fake.url, project="bench-project")
        env.update(VERTEX_TRAINER_API_ENDPOINT=fake.url, CLOUDSDK_CONFIG=str(config))
        if args.tree:
            env["PYTHONPATH"] = str(args.tree.resolve())  # ahead of the editable install's finder
        vt = vertex_trainer(args.tree)
        job_config = work / "gcloud-job.yaml"
        job_config.write_text(
            subprocess.run(
                [*vt, "render", str(spec), "--format", "gcloud"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        create = (
            [
                gcloud,
                "ai",
                "custom-jobs",
                "create",
                f"--config={job_config}",
                "--region=us-central1",
                "--display-name=bench-job",
                "--format=json",
            ]
            if gcloud
            else None
        )
        gcloud_help = [gcloud, "ai", "custom-jobs", "create", "--help"] if gcloud else None
        rows = [
            ("--help", [*vt, "--help"], gcloud_help),
            ("submit --help", [*vt, "submit", "--help"], None),
            ("validate SPEC", [*vt, "validate", str(spec)], gcloud_help),
            ("validate --local SPEC (templated)", [*vt, "validate", str(local_spec), "--local"], gcloud_help),
            ("floor: python (site, .pth files)", [sys.executable, "-c", "pass"], gcloud_help),
            ("floor: + typer, pydantic, PyYAML imports", [sys.executable, "-c", FLOOR], gcloud_help),
            ("render SPEC (json)", [*vt, "render", str(spec)], None),
            ("render SPEC --format gcloud", [*vt, "render", str(spec), "--format", "gcloud"], None),
            ("submit SPEC --dry-run", [*vt, "submit", str(spec), "--dry-run"], None),
            (
                "submit SPEC (list + create, fake server)",
                [*vt, "submit", str(spec), "--output", "json"],
                create,
            ),
        ]
        if args.only:
            rows = [row for row in rows if args.only in row[0]]
        if args.instructions:
            # The rows set against gcloud (whether or not gcloud is here to count).
            rows = [
                row for row in rows if row[0].startswith(("--help", "validate", "floor", "submit SPEC ("))
            ]
            for _, ours, theirs in rows:
                timed(ours, env, work)  # writes the bytecode caches a stale module lacks
                if theirs:
                    timed(theirs, env, work)
            counted: dict[str, int] = {}  # each gcloud command once
            for label, ours, theirs in rows:
                ratio = ""
                if theirs:
                    key = " ".join(
                        a if not a.startswith("--config=") else "--config=FILE" for a in theirs[1:]
                    )
                    if key not in counted:
                        counted[key] = instructions(theirs, env, work)
                        print(f"{'gcloud ' + key:45} {counted[key] / 1e6:9.1f} M instructions", flush=True)
                count = instructions(ours, env, work)
                if theirs:
                    ratio = f"   ratio {count / counted[key]:.3f}"
                print(f"{label:45} {count / 1e6:9.1f} M instructions{ratio}", flush=True)
            return
        # Warm up: the fake imports aiplatform_v1 on its first request; the OS caches files.
        for _, ours, theirs in rows:
            timed(ours, env, work)
            if theirs:
                timed(theirs, env, work)
        results = []
        load_before = os.getloadavg()[0]
        for label, ours, theirs in rows:
            a, b = [], []
            for _ in range(args.runs):
                a.append(timed(ours, env, work))
                if theirs:
                    b.append(timed(theirs, env, work))
            wall, cpu = (statistics.median(x[i] for x in a) for i in (0, 1))
            their_wall, their_cpu = (
                (statistics.median(x[i] for x in b) for i in (0, 1)) if b else (None, None)
            )
            results.append(
                (
                    label,
                    wall,
                    cpu,
                    their_wall,
                    their_cpu,
                    " ".join(a if not a.startswith("--config=") else "--config=FILE" for a in theirs[1:5])
                    if theirs
                    else "",
                )
            )
            print(
                f"{label:45} {wall:.3f}s (CPU {cpu:.3f}s)"
                + (
                    f"   gcloud {their_wall:.3f}s (CPU {their_cpu:.3f}s)   ratio {wall / their_wall:.2f} "
                    f"(CPU {cpu / their_cpu:.2f})"
                    if b
                    else ""
                ),
                flush=True,
            )
        load_after = os.getloadavg()[0]
        jobs = len(fake.jobs)
        if args.only and args.out is None:
            print(f"load average {load_before:.1f} -> {load_after:.1f}")
            return
        imports = {
            "--help": import_times(["--help"], env, work),
            "validate": import_times(["validate", str(spec)], env, work),
        }

    lines = [
        "# CLI latency: vertex-trainer vs gcloud",
        "",
        f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node() or 'this machine'} "
        f"({os.cpu_count()} cores, Python {platform.python_version()}), median of {args.runs} fresh "
        "processes each, alternating. `submit` and `gcloud ai custom-jobs create` both created jobs on "
        f"the same fake Vertex AI server on loopback ({jobs} jobs in total). Load average (1 min) "
        f"{load_before:.1f} at the start, {load_after:.1f} at the end.",
        "",
        "Command: `.venv/bin/python benchmarks/cli_latency.py --runs " + str(args.runs) + "`",
        "",
        "| command | vertex-trainer (s) | CPU (s) | gcloud equivalent | gcloud (s) | CPU (s) "
        "| ratio | CPU ratio |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for label, ours, cpu, theirs, their_cpu, what in results:
        ratio = f"{ours / theirs:.2f}" if theirs else ""
        cpu_ratio = f"{cpu / their_cpu:.2f}" if their_cpu else ""
        lines.append(
            f"| `{label}` | {ours:.3f} | {cpu:.3f} | {('`gcloud ' + what + '`') if what else '-'} | "
            f"{f'{theirs:.3f}' if theirs else '-'} | {f'{their_cpu:.3f}' if their_cpu else '-'} | "
            f"{ratio} | {cpu_ratio} |"
        )
    lines += [
        "",
        "gcloud has no equivalent of validate, render or a dry run (`-`); `--help`, "
        "`validate` and the floor rows are set against its `ai custom-jobs create --help`.",
        "",
        "## Where the import time goes (`python -X importtime`, least of 3 runs, ms)",
        "",
        "| package | `--help` | `validate SPEC` |",
        "|---|---:|---:|",
    ]
    names = sorted(
        set(imports["--help"]) | set(imports["validate"]), key=lambda n: -imports["validate"].get(n, 0)
    )
    for name in names[:15]:
        lines.append(
            f"| {name} | {imports['--help'].get(name, 0):.1f} | {imports['validate'].get(name, 0):.1f} |"
        )
    lines.append(
        f"| (all) | {sum(imports['--help'].values()):.1f} | {sum(imports['validate'].values()):.1f} |"
    )
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
