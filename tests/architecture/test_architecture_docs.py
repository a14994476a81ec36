"""The project's documents are in the project: every `docs/contract.md section N` the tree cites
exists, every `docs/*.md` it names is there, and nothing cites a document that only exists
outside the repository (STYLE: "a comment cites docs/..., never a file outside")."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = (".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".cfg", ".txt", "Makefile", "Dockerfile")
OUTSIDE = re.compile(r"\b(?:FACTS\.md|CONTRACT\.md|shared/STYLE\.md|CONTRACT section \d+)")
CITED = re.compile(r"docs/contract\.md,?\s+sections?\s+(\d+)(?:\s*(?:-|and)\s*(\d+))?")
DOC = re.compile(r"\bdocs/([\w-]+\.md)")


def _tree() -> dict[Path, str]:
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {
        ROOT / f: (ROOT / f).read_text(errors="replace")
        for f in files
        if f.endswith(TEXT) and (ROOT / f).is_file()
    }


def _sections() -> set[int]:
    text = (ROOT / "docs" / "contract.md").read_text()
    return {int(n) for n in re.findall(r"^## (\d+)\. ", text, re.M)}


def test_every_cited_contract_section_exists():
    sections = _sections()
    assert sections == set(range(1, max(sections) + 1))  # numbered without gaps
    missing = []
    for path, text in _tree().items():
        for first, last in CITED.findall(text):
            for n in range(int(first), int(last or first) + 1):
                if n not in sections:
                    missing.append(f"{path.relative_to(ROOT)}: section {n}")
    assert not missing, missing


def test_every_docs_page_named_exists():
    missing = sorted(
        {
            f"{path.relative_to(ROOT)}: docs/{name}"
            for path, text in _tree().items()
            for name in DOC.findall(text)
            if not (ROOT / "docs" / name).exists()
        }
    )
    assert not missing, missing


def test_nothing_cites_a_document_outside_the_repository():
    here = Path(__file__).resolve()
    found = [
        f"{path.relative_to(ROOT)}: {m}"
        for path, text in _tree().items()
        if path != here
        for m in OUTSIDE.findall(text)
    ]
    assert not found, found


def test_the_checks_see_citations():
    """The scans above really read the tree (so they can fail)."""
    tree = _tree()
    assert sum(len(CITED.findall(t)) for t in tree.values()) > 50
    assert OUTSIDE.findall("see shared/FACTS.md") and CITED.findall("docs/contract.md sections 8 and 11")


def test_the_cli_reference_is_generated_from_the_cli_and_current():
    """docs/cli.md is what `make docs` prints now (run it after changing a command), in a bare
    environment: the reference does not depend on this machine's settings."""
    import os
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "vertex_trainer.cli.reference"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(ROOT / "nonexistent")},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (ROOT / "docs" / "cli.md").read_text(), "docs/cli.md is stale: run `make docs`"
    for command in ("## `submit`", "### `data synth`", "| `--idempotency-key KEY` |"):
        assert command in proc.stdout
