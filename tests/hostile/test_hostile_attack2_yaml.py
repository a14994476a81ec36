"""A spec file from elsewhere (a pull request's, the one a trigger reads) that nests thousands of
levels or holds a megabyte of keys or anchors was refused only after PyYAML's Python scanner had
read it: seconds of CPU for 4 KB of brackets, 12 s for a megabyte of keys. spec.load screens the
text with libyaml's events first and refuses it there, with the same messages; the Python scanner
never sees it. The tests count the Python scanner's work, not the time."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml.scanner

from tests.cli_support import edge_env
from tests.shared import cli_runner

SPEC = (
    "name: fine\nhardware: cpu\nproject: my-project-1\nregion: us-central1\n"
    "output_dir: gs://out-bucket/runs\nimage: {uri: 'us-docker.pkg.dev/my-project-1/t/d:v1'}\n"
)


@pytest.fixture
def scanned(monkeypatch) -> list[int]:
    """How many times PyYAML's Python scanner fetched tokens (one entry per fetch)."""
    calls: list[int] = []
    fetch = yaml.scanner.Scanner.fetch_more_tokens

    def counted(self):
        calls.append(1)
        return fetch(self)

    monkeypatch.setattr(yaml.scanner.Scanner, "fetch_more_tokens", counted)
    return calls


def _validate(tmp_path: Path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return cli_runner(edge_env(tmp_path), cwd=tmp_path)("validate", path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("name: x\ntrainer: " + "[" * 100_000 + "\n", "nests too deeply", id="brackets"),
        pytest.param("name: x\ntrainer: " + "{a: " * 3000 + "\n", "nests too deeply", id="braces"),
        pytest.param(
            "".join("  " * i + f"k{i}:\n" for i in range(300)), "nests too deeply", id="indentation"
        ),
        pytest.param(
            SPEC + "".join(f"k{i}: 1\n" for i in range(45_000)), "more than 20000 values", id="keys"
        ),
        pytest.param(
            SPEC + "x: [" + ",".join(f"&a{i} 1" for i in range(45_000)) + "]\n",
            "more than 20000 values",
            id="anchors",
        ),
    ],
)
def test_a_hostile_spec_is_refused_before_python_scans_it(tmp_path, scanned, text, message):
    result = _validate(tmp_path, text)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not scanned


def test_an_ordinary_spec_is_still_read_by_the_spec_loader(tmp_path, scanned):
    result = _validate(tmp_path, SPEC + "labels: &l {team: ml}\nenv: {MODE: fast}\n")
    assert result.returncode == 0, result.stdout + result.stderr
    assert scanned  # the screen adds to the parse whose messages users see, it replaces nothing


def test_nesting_a_spec_may_have_is_judged_by_the_spec_not_the_screen(tmp_path, scanned):
    result = _validate(tmp_path, "name: x\ntrainer: " + "[" * 100 + "]" * 100 + "\n")
    assert result.returncode == 2
    assert "nests more than 32 levels" in result.stderr
