"""Every example in README.md and docs/*.md runs as written (issue 24 item 1).

What runs: each fenced ```sh / bash / shell / console block that calls `vertex-trainer`, and each
```python block, as one test named after its page and line.

How it runs:
- A shell block runs with `bash -eo pipefail` (each command must succeed), a python block with
  this environment's python; both in a scratch copy of the repository (symlinks to its top-level
  entries, with its own data/ and runs/), after `make demo`'s first step: the quickstart data in
  data/quickstart. `vertex-trainer` and `python` are this environment's.
- Nothing leaves the machine. A command that would send something (submit, bench, deploy,
  package, pipeline submit, trigger deploy without --local or --dry-run; data convert with
  --runner dataflow) runs with `--dry-run` added, which every sending command has.
- Jobs a block starts in the background (`cmd &`) are stopped when the block ends.
- `gcloud ...` lines are left out: they act on a real project, and the suite has no gcloud.
- In a block in the `$ command` style (a prompt, then what the command prints), only the
  prompted lines run.
- It must exit 0 with no traceback on its output.

A block that needs more says so in an HTML comment on the line right before its fence:

    <!-- docs-test: sandbox -->        run the block as written inside `vertex-trainer dev sandbox
                                       --quiet --bucket B -- ...` (B: each gs:// bucket it names,
                                       else sandbox-demo): the offline cloud, nothing added
    <!-- docs-test: skip REASON -->    do not run it; REASON says why
    <!-- docs-test: checked-by PATH -->
                                       PATH (a test file) runs the block as written, inside a
                                       sandbox it started, and then asserts on what the block did
                                       (the run, the model, the bucket): it runs there instead of
                                       here, once. PATH must exist and name the page (checked
                                       below); a test there checks that it runs every block that
                                       names it (as tests/sandbox/test_sandbox_seed.py does).

Keep the skips few and their reasons concrete: an example that cannot run is one a user cannot
try. Acceptable reasons: placeholders to fill in (SPEC, JOB), a code excerpt that is not a
program, a command that serves until Ctrl-C, a tool the suite does not have (gcloud). A skipped
block's `vertex-trainer` lines are still checked against the CLI's parser
(tests/submit/test_submit_ci.py::test_commands_in_the_docs_use_real_flags).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_support import edge_env

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = ("sh", "bash", "shell", "console")
FENCE = re.compile(
    r"^(?:<!--\s*docs-test:\s*(?P<marker>[^>]*?)\s*-->\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)^```", re.S | re.M
)
# Subcommands that send, and the flags after which they do not.
SENDS = {
    ("submit",): ("--dry-run", "--local"),
    ("bench",): ("--dry-run", "--local"),
    ("deploy",): ("--dry-run",),
    ("package",): ("--dry-run",),
    ("pipeline", "submit"): ("--dry-run",),
    ("trigger", "deploy"): ("--dry-run",),
}
HEAVY = ("--local", "serve ", "dev sandbox", "data synth", "data convert", "bench ")
BIN = Path(sys.executable).parent
TIMEOUT_S = 900
FAST_TIMEOUT_S = 180  # a block of validate, render and dry runs


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    body: str
    marker: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        return self.marker[len("skip") :].strip() if self.marker.startswith("skip") else None

    @property
    def checked_by(self) -> str | None:
        """The test file that runs this block and asserts on it (`checked-by PATH`), or None."""
        if not self.marker.startswith("checked-by"):
            return None
        return self.marker[len("checked-by") :].strip() or None

    @property
    def buckets(self) -> list[str]:
        """The buckets the sandbox it runs in serves: each gs:// bucket it names, else sandbox-demo."""
        return sorted(set(re.findall(r"gs://([a-z0-9][a-z0-9._-]*)", self.body))) or ["sandbox-demo"]

    @property
    def in_sandbox(self) -> bool:
        return self.marker == "sandbox" or self.checked_by is not None

    @property
    def heavy(self) -> bool:
        return self.lang == "python" or self.in_sandbox or any(h in self.body for h in HEAVY)


def blocks() -> list[Block]:
    """Every runnable-looking block of every page, with the marker before it."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            lang, body = m["lang"], m["body"]
            if lang == "python" or (lang in SHELLS and "vertex-trainer" in body):
                line = text.count("\n", 0, m.start("lang")) + 1
                found.append(
                    Block(str(page.relative_to(ROOT)), line, lang, body, (m["marker"] or "").strip())
                )
    return found


def commands(body: str) -> str:
    """The commands of a shell block: a block in the `$ command` style (a prompt, then what it
    prints) runs its prompted lines only; any other block runs whole."""
    lines = body.replace("\\\n", " ").splitlines()
    if any(line.startswith("$ ") for line in lines):
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    # gcloud acts on a real project (and is not installed here): its lines are left out.
    return "\n".join(line for line in lines if not line.lstrip().startswith("gcloud ")) + "\n"


def with_dry_run(script: str) -> str:
    """`script` with --dry-run added to each vertex-trainer command that would send something."""
    joined = script.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        out.append(_dry_run_line(line))
    return "\n".join(out) + "\n"


def _dry_run_line(line: str) -> str:
    start = line.find("vertex-trainer ")
    if start < 0 or line.lstrip().startswith("#"):
        return line
    # The command ends at a comment, a pipe, a redirection, a list operator or a trailing `&`.
    end = re.search(r"\s(?:#|\||>|&&|;|2>)|\s&\s*$", line[start:])
    stop = start + end.start() if end else len(line)
    stop = start + len(line[start:stop].rstrip())
    words = shlex.split(line[start:stop])[1:]
    args = [w for w in words if not w.startswith("-")]
    for sub, unless in SENDS.items():
        if tuple(args[: len(sub)]) == sub and not any(flag in words for flag in unless):
            return line[:stop] + " --dry-run" + line[stop:]
    if args[:2] == ["data", "convert"] and "--runner" in words and "--dry-run" not in words:
        if words[words.index("--runner") + 1] == "dataflow":
            return line[:stop] + " --dry-run" + line[stop:]
    return line


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    """A scratch copy of the repository (symlinks) with `make demo`'s data in data/quickstart."""
    work = tmp_path_factory.mktemp("docs-examples")
    for entry in ROOT.iterdir():
        if entry.name not in ("data", "runs", ".git") and not entry.name.startswith(".pytest"):
            (work / entry.name).symlink_to(entry)
    make = (ROOT / "Makefile").read_text()
    synth = re.search(r"vertex-trainer data synth \$\(DEMO_DATA\)(.*?)\n\t\$\(BIN\)", make, re.S)
    assert synth, "the Makefile's demo target synthesizes the quickstart data"
    args = shlex.split(synth.group(1).replace("\\\n", " "))
    subprocess.run(
        [str(BIN / "vertex-trainer"), "data", "synth", "data/quickstart", *args],
        cwd=work,
        env=_env(work),
        check=True,
        capture_output=True,
        timeout=TIMEOUT_S,
    )
    return work


def _env(work: Path) -> dict[str, str]:
    env = edge_env(work)
    # A user's retries and timeouts, not the suite's fast ones: a first prediction waits for the
    # model to load, which takes longer than a fake's answer on a busy machine.
    env.pop("VERTEX_TRAINER_RETRY", None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["GITHUB_RUN_ID"] = "1234"  # the CI pages' examples read the run id GitHub Actions sets
    return env


def _script(block: Block) -> tuple[list[str], str]:
    """The command that runs `block`, and the text of the file it runs (tests that check a
    `checked-by` block run it with this too)."""
    if block.lang == "python":
        return [sys.executable], block.body
    body = commands(block.body)
    body = body if block.in_sandbox else with_dry_run(body)
    # Background jobs the example starts end with it.
    return ["bash", "-eo", "pipefail"], "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + body


def _params():
    """One test per distinct runnable block: a block that stands word for word on two pages (the
    README repeats a page's example) runs once, under its first place."""
    out, seen = [], set()
    for block in blocks():
        marks = [pytest.mark.trainer, pytest.mark.slow] if block.heavy else []
        same = (block.lang, block.body, block.in_sandbox)
        if block.skip_reason is not None or block.checked_by is not None or same in seen:
            continue
        seen.add(same)
        out.append(pytest.param(block, id=block.id, marks=marks))
    return out


@pytest.mark.timeout(TIMEOUT_S)
@pytest.mark.parametrize("block", _params())
def test_the_example_runs_as_written(block: Block, workdir: Path, tmp_path: Path):
    command, text = _script(block)
    script = tmp_path / ("example.py" if block.lang == "python" else "example.sh")
    script.write_text(text)
    argv = [*command, str(script)]
    if block.in_sandbox:
        argv = [
            str(BIN / "vertex-trainer"),
            "dev",
            "sandbox",
            "--quiet",
            *[a for b in block.buckets for a in ("--bucket", b)],
            "--",
            *argv,
        ]
    # Its own process group: whatever the block leaves running (a server it started with `&`)
    # ends with it, and nothing holds the pipes after.
    proc = subprocess.Popen(
        argv,
        cwd=workdir,
        env=_env(workdir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S if block.heavy else FAST_TIMEOUT_S)
    finally:
        _end_group(proc)
    shown = f"--- {block.id} ran:\n{text}\n--- stdout:\n{out[-4000:]}\n--- stderr:\n{err[-4000:]}"
    assert proc.returncode == 0, shown
    assert "Traceback (most recent call last)" not in out + err, shown


def _end_group(proc: subprocess.Popen) -> None:
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:
            try:  # the leader is gone; members may linger a moment
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return


# -- the harness itself ---------------------------------------------------------------------------


def test_every_skip_says_why_and_markers_are_known():
    found = blocks()
    assert found, "no examples found"
    for block in found:
        assert block.marker in ("", "sandbox") or (block.skip_reason or "").strip() or block.checked_by, (
            f"{block.id}: unknown or empty docs-test marker {block.marker!r}"
        )
        if block.checked_by:  # that file runs it (and fails when it does not run every such block)
            assert (ROOT / block.checked_by).is_file(), f"{block.id}: no test file {block.checked_by}"
            assert block.id.split(":")[0] in (ROOT / block.checked_by).read_text(), (
                f"{block.id}: {block.checked_by} does not read {block.id.split(':')[0]}"
            )


def test_sending_commands_get_dry_run_and_nothing_else_does():
    script = (
        "vertex-trainer submit job_specs/a.yaml --wait   # create and follow it\n"
        "vertex-trainer submit job_specs/a.yaml --local\n"
        "vertex-trainer bench job_specs/b.yaml --output json | head\n"
        "vertex-trainer validate job_specs/a.yaml\n"
        "vertex-trainer trigger deploy x.yaml --bucket b \\\n    --prefix p/\n"
        "vertex-trainer data convert gs://a gs://b --runner dataflow --project p\n"
        "vertex-trainer serve runs/quickstart/model --port 8080 &\n"
    )
    assert with_dry_run(script).splitlines() == [
        "vertex-trainer submit job_specs/a.yaml --wait --dry-run   # create and follow it",
        "vertex-trainer submit job_specs/a.yaml --local",
        "vertex-trainer bench job_specs/b.yaml --output json --dry-run | head",
        "vertex-trainer validate job_specs/a.yaml",
        "vertex-trainer trigger deploy x.yaml --bucket b      --prefix p/ --dry-run",
        "vertex-trainer data convert gs://a gs://b --runner dataflow --project p --dry-run",
        "vertex-trainer serve runs/quickstart/model --port 8080 &",
    ]


def test_a_block_repeated_word_for_word_runs_once_under_its_first_place():
    runnable = [b for b in blocks() if b.skip_reason is None and b.checked_by is None]
    ids = [p.id for p in _params()]
    assert len(ids) == len({(b.lang, b.body, b.in_sandbox) for b in runnable})
    for b in runnable:  # every runnable block is run, here or under its twin's id
        twin = next(x for x in runnable if (x.lang, x.body, x.in_sandbox) == (b.lang, b.body, b.in_sandbox))
        assert twin.id in ids
