"""A careless user's key with no value (issue 42, HC round 4): `labels: {run: }`, `env:` with a
variable and nothing after its colon, `replicas:`.

YAML reads a key with no value (or `~`, `null`) as null, and the refusal spoke Python to a YAML
user: "labels.run: Input should be a valid string (got None)", no hint. It now says the field is
empty and why, and the fix: write the value ('' for empty text), or leave the key out where the
field may be left out."""

from __future__ import annotations

import pytest

from vertex_trainer.errors import SpecError
from vertex_trainer.spec import load_spec

HEAD = "name: q\nregion: us-central1\nhardware: cpu\noutput_dir: runs/q\n"
TRAINER = "trainer: {model: tiny-cnn, train_data: x, num_classes: 10}\n"


@pytest.mark.parametrize(
    ("body", "field", "hint"),
    [
        (
            TRAINER + "labels: {run: }\n",
            "labels.run",
            "write its value ('' for empty text), or leave the key out",
        ),
        (
            TRAINER + "env:\n  DEBUG:\n",
            "env.DEBUG",
            "write its value ('' for empty text), or leave the key out",
        ),
        (TRAINER + "replicas: ~\n", "replicas", "write its value, or leave the key out; machines"),
        (
            "trainer: {model: tiny-cnn, train_data: , num_classes: 10}\n",
            "trainer.train_data",
            "write its value ('' for empty text); TFRecord",
        ),
    ],
)
def test_a_key_with_no_value_is_named_empty_with_the_fix(tmp_path, body, field, hint):
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + body)
    with pytest.raises(SpecError) as e:
        load_spec(path)
    assert str(e.value).startswith(
        f"{field}: is empty (YAML reads a key with no value, ~ or null as nothing)"
    )
    assert "None" not in str(e.value) and e.value.hint and e.value.hint.startswith(hint)
