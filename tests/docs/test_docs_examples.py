"""Every example in README.md and docs/*.md runs as written (issue 24 item 1).

What runs: each fenced ```sh / bash / shell / console block that calls `vertex-trainer`, and each
```python block, as one test named after its page and line.

How it runs (tests/docs/harness.py):
- A shell block runs with `bash -eo pipefail` (each command must succeed), a python block with
  this environment's python; both in a scratch copy of the repository of their own (symlinks to
  its top-level entries, with its own data/ and runs/), after `make demo`'s first step: the
  quickstart data in data/quickstart (made once per test run). `vertex-trainer` and `python` are
  this environment's.
- Nothing leaves the machine. A command that would send something (submit, bench, deploy,
  package, pipeline submit, trigger deploy without --local or --dry-run; data convert with
  --runner dataflow) runs with `--dry-run` added, which every sending command has.
- Jobs a block starts in the background (`cmd &`) are stopped when the block ends.
- `gcloud ...` lines are left out: they act on a real project, and the suite has no gcloud.
- In a block in the `$ command` style (a prompt, then what the command prints), only the
  prompted lines run.
- It must exit 0 with no traceback on its output.
- The blocks run in parallel, but those that listen on the same fixed port (`fake-vertex --port
  8765`) or write the same fixed file (/tmp/prices.json) run one after the other (harness.unit_of).

A block that needs more says so in an HTML comment on the line right before its fence:

    <!-- docs-test: sandbox -->        run the block as written inside `vertex-trainer dev sandbox
                                       --quiet --bucket B -- ...` (B: each gs:// bucket it names,
                                       else sandbox-demo): the offline cloud, nothing added
    <!-- docs-test: skip REASON -->    do not run it; REASON says why
    <!-- docs-test: checked-by PATH -->
    <!-- docs-test: sandbox checked-by PATH -->
                                       PATH (a test file) runs the block as written, as the
                                       harness would (harness.run_block; the second form inside a
                                       sandbox it started), and then asserts on what the block did
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

from pathlib import Path

import pytest

from tests.docs.harness import (
    ROOT,
    Block,
    blocks,
    quickstart_data,
    run_block,
    with_dry_run,
    workdir,
)


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory) -> Path:
    """`make demo`'s data in data/quickstart, made once per test run (harness.quickstart_data)."""
    return quickstart_data(tmp_path_factory)


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


@pytest.mark.timeout(900)
@pytest.mark.parametrize("block", _params())
def test_the_example_runs_as_written(block: Block, quickstart: Path, tmp_path: Path):
    """`block` in a scratch copy of its own (its runs/ and outputs are its own; the blocks that
    hold a fixed port or file never run at once: harness.unit_of, tests/conftest.py)."""
    run_block(block, workdir(tmp_path / "work", quickstart))


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
