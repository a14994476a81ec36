"""`report` on a run folder whose spec.yaml someone else wrote (a shared bucket folder, a run
copied from elsewhere): YAML aliases that refer to themselves, or expand ("billion laughs"), were
walked by the masking of secrets (redact.redact_yaml): a RecursionError traceback, or a hang
while gigabytes were built. The page now shows such text as it is, in a moment."""

from __future__ import annotations

import html
import shutil
from pathlib import Path

import pytest

from vertex_trainer import api
from vertex_trainer.redact import redact_yaml

DATA = Path(__file__).resolve().parents[1] / "report" / "data"


@pytest.fixture
def run(tmp_path) -> Path:
    shutil.copytree(DATA / ".vertex-trainer", tmp_path / ".vertex-trainer")
    run = Path(shutil.copytree(DATA / "quickstart", tmp_path / "quickstart"))
    shutil.rmtree(run / "logs")  # no TensorBoard files: no TensorFlow needed
    return run


def laughs(levels: int) -> str:
    """Each anchor a list of nine aliases of the one before: 9**levels values once expanded."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "name: hostile\nenv: {API_KEY: abc}\n" + "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("name: hostile\nloop: &a [*a]\n", id="alias-to-itself"),
        pytest.param("name: hostile\nloop: &a {x: *a}\n", id="mapping-to-itself"),
        pytest.param(laughs(5), id="billion-laughs"),
    ],
)
def test_report_shows_a_hostile_spec_yaml_as_written(run, tmp_path, text):
    (run.parent / ".vertex-trainer" / run.name / "spec.yaml").write_text(text, encoding="utf-8")
    out = api.report(str(run), str(tmp_path / "page.html"), fmt="html")
    page = html.unescape(Path(out).read_text(encoding="utf-8"))
    assert text.strip() in page
    assert len(page) < 200_000


def test_masking_still_applies_to_a_spec_with_aliases():
    text = "name: ok\nenv: &env {API_KEY: abc, MODE: fast}\nagain: {env: *env}\n"
    shown = redact_yaml(text)
    assert "abc" not in shown
    assert "MODE: fast" in shown
