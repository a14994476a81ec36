"""How the examples of README.md and docs/*.md are found and run (tests/docs/test_docs_examples.py
says what runs and why; this module is the how, shared with the tests that run a `checked-by`
block themselves and assert on what it did).

- `blocks()`: every runnable-looking fenced block, with the marker on the line before it.
- `workdir(tmp, data)`: a scratch copy of the repository for one block (symlinks to its top-level
  entries, its own runs/ and data/, data/quickstart the test run's one quickstart dataset).
- `quickstart_data(tmp_path_factory)`: `make demo`'s first step (the Makefile's own `data synth`
  arguments), made once per test run and shared by every pytest-xdist worker (a file lock).
- `shared_run(block, tmp_path_factory)`: a block whose run two tests read, run once per test run
  in a scratch copy of its own, shared the same way (README.md's quickstart trains once).
- `run_block(block, cwd)`: the block as the harness runs it (bash -eo pipefail, or python; inside
  `vertex-trainer dev sandbox` when marked; --dry-run added to sending commands otherwise), in its
  own process group; it must exit 0 with no traceback.
- `unit_of(block)`: the pytest-xdist unit a block's test belongs to: the blocks that listen on the
  same fixed loopback port (`fake-vertex --port 8765`) or write the same fixed file share one, so
  that they never run at once; every other block is a unit of its own.
"""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

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
# What two blocks must not hold at once: a fixed loopback port, a fixed file outside the workdir.
_PORT = re.compile(r"--port[ =](\d+)|(?:localhost|127\.0\.0\.1):(\d+)")
_FIXED_FILE = re.compile(r"(?<![\w./-])(/tmp/[\w.-]+)")


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
        """The test file that runs this block and asserts on it (`[sandbox] checked-by PATH`)."""
        m = re.match(r"(?:sandbox\s+)?checked-by\s+(\S+)$", self.marker)
        return m.group(1) if m else None

    @property
    def buckets(self) -> list[str]:
        """The buckets the sandbox it runs in serves: each gs:// bucket it names, else sandbox-demo."""
        return sorted(set(re.findall(r"gs://([a-z0-9][a-z0-9._-]*)", self.body))) or ["sandbox-demo"]

    @property
    def in_sandbox(self) -> bool:
        return self.marker == "sandbox" or self.marker.startswith("sandbox ")

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


def checked_block(page: str, command: str, here: str) -> Block:
    """The one block of `page` that names the test file `here` (`checked-by`) and runs `command`."""
    found = [b for b in blocks() if b.checked_by == here and command in b.body]
    assert [b.page for b in found] == [page], f"{page}: no single checked-by block runs {command!r}"
    return found[0]


def unit_of(block: Block) -> str | None:
    """The pytest-xdist unit of `block`'s test: `docs:port-8765` for the blocks that listen on or
    call loopback port 8765, `docs:file-/tmp/prices.json` for those writing that file; None (a unit
    of its own) for a block that holds nothing fixed. (The blocks that serve on port 8090 are run by
    tests/serving, one unit: `checked-by`.)"""
    port = _PORT.search(block.body)
    if port:
        return f"docs:port-{port.group(1) or port.group(2)}"
    fixed = _FIXED_FILE.search(block.body)
    return f"docs:file-{fixed.group(1)}" if fixed else None


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
    return "\n".join(_dry_run_line(line) for line in joined.splitlines()) + "\n"


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


def script_of(block: Block) -> tuple[list[str], str]:
    """The command that runs `block`, and the text of the file it runs."""
    if block.lang == "python":
        return [sys.executable], block.body
    body = commands(block.body)
    body = body if block.in_sandbox else with_dry_run(body)
    # Background jobs the example starts end with it.
    return ["bash", "-eo", "pipefail"], "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + body


def env_for(work: Path) -> dict[str, str]:
    """The environment a block runs in: a user's shell in `work` with this environment's tools."""
    env = edge_env(work)
    # A user's retries and timeouts, not the suite's fast ones: a first prediction waits for the
    # model to load, which takes longer than a fake's answer on a busy machine.
    env.pop("VERTEX_TRAINER_RETRY", None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["GITHUB_RUN_ID"] = "1234"  # the CI pages' examples read the run id GitHub Actions sets
    return env


def _shared(tmp_path_factory) -> Path:
    """The folder every pytest-xdist worker of this test run sees (the workers' basetemp's parent)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def quickstart_data(tmp_path_factory) -> Path:
    """`make demo`'s data (the Makefile's `data synth` arguments), made once per test run: the
    pytest-xdist workers share one copy (the first one to ask makes it, under a file lock)."""
    shared = _shared(tmp_path_factory)
    out = shared / "docs-quickstart-data" / "quickstart"
    with open(shared / "docs-quickstart-data.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out.parent / "done").exists():
            make = (ROOT / "Makefile").read_text()
            synth = re.search(r"vertex-trainer data synth \$\(DEMO_DATA\)(.*?)\n\t\$\(BIN\)", make, re.S)
            assert synth, "the Makefile's demo target synthesizes the quickstart data"
            args = shlex.split(synth.group(1).replace("\\\n", " "))
            out.parent.mkdir(exist_ok=True)
            subprocess.run(
                [str(BIN / "vertex-trainer"), "data", "synth", str(out), *args],
                cwd=out.parent,
                env=env_for(out.parent),
                check=True,
                capture_output=True,
                timeout=TIMEOUT_S,
            )
            (out.parent / "done").touch()
    return out


def shared_run(block: Block, tmp_path_factory) -> tuple[Path, str, str]:
    """`block` run once per test run as `run_block` runs it, in a scratch copy of its own (`workdir`,
    with the quickstart data): (that copy, stdout, stderr). The pytest-xdist workers share it as
    they share `quickstart_data`: the first test to ask runs it, under a file lock, and the others
    read what it printed and left. For a block two tests read (README.md's quickstart: its own test,
    and the serving test, which serves the model it trained); neither writes into the copy."""
    shared = _shared(tmp_path_factory)
    name = "docs-run-" + re.sub(r"[^\w.-]", "-", block.id)
    folder = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "done").exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed first try left
            work = workdir(folder / "work", quickstart_data(tmp_path_factory))
            out, err = run_block(block, work)
            (folder / "stdout").write_text(out)
            (folder / "stderr").write_text(err)
            (folder / "done").touch()
    return folder / "work", (folder / "stdout").read_text(), (folder / "stderr").read_text()


def workdir(work: Path, data: Path) -> Path:
    """`work` made a scratch copy of the repository: symlinks to its top-level entries but data/
    and runs/, and data/quickstart the shared quickstart dataset `data` (read-only by the blocks)."""
    work.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name not in ("data", "runs", ".git") and not entry.name.startswith(".pytest"):
            (work / entry.name).symlink_to(entry)
    (work / "data").mkdir()
    (work / "data" / "quickstart").symlink_to(data, target_is_directory=True)
    return work


def run_block(
    block: Block, cwd: Path, *, env: dict[str, str] | None = None, timeout: float | None = None
) -> tuple[str, str]:
    """Run `block` in `cwd` as the harness does; (stdout, stderr). It must exit 0 with no
    traceback. `env` replaces the user's shell environment (e.g. a sandbox's exports)."""
    command, text = script_of(block)
    script = cwd / ("example.py" if block.lang == "python" else "example.sh")
    script.write_text(text)
    argv = [*command, str(script)]
    if block.in_sandbox and env is None:
        buckets = [a for b in block.buckets for a in ("--bucket", b)]
        argv = [str(BIN / "vertex-trainer"), "dev", "sandbox", "--quiet", *buckets, "--", *argv]
    run_env = env_for(cwd) if env is None else {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}
    # Its own process group: whatever the block leaves running (a server it started with `&`)
    # ends with it, and nothing holds the pipes after.
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=run_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout or (TIMEOUT_S if block.heavy else FAST_TIMEOUT_S))
    finally:
        end_group(proc)
    shown = f"--- {block.id} ran:\n{text}\n--- stdout:\n{out[-4000:]}\n--- stderr:\n{err[-4000:]}"
    assert proc.returncode == 0, shown
    assert "Traceback (most recent call last)" not in out + err, shown
    return out, err


def end_group(proc: subprocess.Popen) -> None:
    """Stop `proc`'s process group: SIGTERM, then SIGKILL for what lingers."""
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
