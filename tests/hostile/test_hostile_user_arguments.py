"""A notebook user passes what reads naturally: the spec's path to vt.submit, one override as
set="trainer.epochs=3", a number as the idempotency key. Each raised something no doc names (an
AttributeError "'str' object has no attribute 'tune'", a TypeError from a regex) or was misread
(set="trainer.epochs=3" became 16 one-letter overrides, refused as "--set 't'"). Now a path or
other object is one UserError naming the call, the value and the fix, one string is one override,
and a key that is not text is one UserError naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertex_trainer import api
from vertex_trainer.errors import UserError
from vertex_trainer.settings import Settings

SPEC = "examples/sandbox/digits.yaml"
SETTINGS = Settings(project="my-project", region="us-central1")


@pytest.mark.parametrize("call", ["submit", "pipeline_submit", "cost", "check", "render_job", "plan_submit"])
@pytest.mark.parametrize("given", [SPEC, Path(SPEC)])
def test_a_path_where_the_spec_goes_says_to_load_it(call, given):
    kwargs = {"settings": SETTINGS} if call in ("submit", "pipeline_submit", "cost", "plan_submit") else {}
    with pytest.raises(UserError) as raised:
        getattr(api, call)(given, **kwargs)
    message = str(raised.value)
    assert "spec must be a JobSpec" in message and "examples/sandbox/digits.yaml" in message
    assert f"spec = vt.load_spec('{SPEC}')" in message


def test_a_dict_where_the_spec_goes_names_load_spec():
    with pytest.raises(
        UserError, match=r"(?s)submit: spec must be a JobSpec, not dict .*vt.load_spec\(PATH\)"
    ):
        api.submit({"name": "x"}, dry_run=True, settings=SETTINGS)


def test_one_override_as_a_string_is_one_override():
    spec = api.load_spec(SPEC, set="trainer.epochs=3", settings=SETTINGS)
    assert spec.trainer.epochs == 3


def test_an_idempotency_key_that_is_not_text_is_named():
    spec = api.load_spec(SPEC, settings=SETTINGS)
    with pytest.raises(
        UserError, match=r"--idempotency-key 42 is int, not text\n  hint: .*idempotency_key='42'"
    ):
        api.submit(spec, dry_run=True, idempotency_key=42, settings=SETTINGS)


@pytest.mark.parametrize("given", [{"name": "x", "env": {"TOKEN": "s3cret"}}, None, 3, b"spec.yaml"])
def test_load_spec_given_no_path_names_what_it_got_and_the_fix(given):
    # It was a TypeError from open() ("expected str, bytes or os.PathLike object, not dict"),
    # with no word of what load_spec takes; the mapping's values are not shown (an env secret).
    with pytest.raises(UserError) as raised:
        api.load_spec(given, settings=SETTINGS)
    kind = "None" if given is None else type(given).__name__
    assert f"load_spec: path must be a YAML file's path (a str or a Path), not {kind}" in raised.value.message
    assert "vt.load_spec('job_specs/my-job.yaml')" in (raised.value.hint or "")
    assert "s3cret" not in str(raised.value)
