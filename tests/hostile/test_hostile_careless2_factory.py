"""A careless user names their Keras model factory by its file (issue 42, H2 round 3):
`trainer.model: models/small_net.py:build`, `./models/small_net.py:build`, or the module without
its function, `models.small_net`.

The refusal (exit 2) was about another field: "image.code: needs image.script or image.module
(neither is set) to run your own script, or trainer.model: package.module:function ...", which
reads as if the code folder were wrong and points at a script job. Now it names trainer.model,
the value, and the spelling meant (`models.small_net:build`); a correct factory, and a bundled
model's name, are unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertex_trainer.errors import SpecError
from vertex_trainer.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "model-factory" / "model-factory.yaml"


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # image.code is relative to the current directory


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("models/small_net.py:build", "models.small_net:build"),
        ("./models/small_net.py:build", "models.small_net:build"),
        ("models.small_net", "models.small_net:FUNCTION"),
        ("models/small_net.py", "models.small_net:FUNCTION"),
    ],
)
def test_a_factory_written_as_a_path_is_named_with_its_spelling(written, meant):
    with pytest.raises(SpecError) as e:
        load_spec(SPEC, sets=[f"trainer.model={written}"])
    text = f"{e.value}\n{e.value.hint}"
    assert text.startswith("trainer.model: is not package.module:function"), text
    assert f"(got '{written}')" in text and f"hint: trainer.model: {meant}" in text
    assert "image.script" not in text


def test_the_right_spelling_and_a_bundled_model_are_unchanged():
    assert load_spec(SPEC).trainer.model == "models.small_net:build"
    with pytest.raises(SpecError, match=r"^image\.code: needs image\.script"):
        load_spec(SPEC, sets=["trainer.model=resnet50"])  # a bundled model beside image.code
