"""Hostile templates in a spec (spec/templating.py, issue 41): what would run for minutes or make
gigabytes is refused before it does, exit 2 naming the field, while every documented template
renders as before. Each refusal is asserted to come early: the bound is checked before the value
is made (a test that made it would take the memory and the minutes the bound exists to prevent)."""

from __future__ import annotations

import copy
import os

import pytest

from tests.shared import cli_runner
from vertex_trainer.errors import SpecError
from vertex_trainer.spec import build_spec
from vertex_trainer.spec import templating as t

BASE = {
    "name": "base-job",
    "project": "my-project",
    "region": "us-central1",
    "hardware": "cpu",
    "image": {"uri": "us-docker.pkg.dev/my-project/training/trainer:v1"},
    "output_dir": "gs://my-bucket/runs/base",
    "trainer": {
        "model": "tiny-cnn",
        "train_data": "gs://my-bucket/train-*",
        "num_classes": 10,
        "batch_size": 64,
    },
}
CHARS = f"more than {t.MAX_CHARS:,} characters"
STEPS = f"more than {t.MAX_STEPS:,} steps"

HOSTILE = {
    "string times a huge number": ("{{ 'x' * 3000000000 }}", CHARS),
    "a number times a string": ("{{ 3000000000 * 'x' }}", CHARS),
    "a list times a huge number": ("{{ [1] * 3000000000 }}", CHARS),
    "empty strings times a huge number": ("{{ [''] * 3000000000 }}", CHARS),
    "a huge power": ("{{ 10 ** 3000000000 }}", CHARS),
    "nested loops": ("{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}", STEPS),
    "nested loops over a list": (
        "{% set l = range(5000)|list %}{% for a in l %}{% for b in l %}{% endfor %}{% endfor %}",
        STEPS,
    ),
    "loops over a string": (
        "{% set s = 'x' * 60000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}",
        STEPS,
    ),
    "doubling in a namespace": (
        "{% set ns = namespace(x='x') %}{% for i in range(64) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}",
        CHARS,
    ),
    "a recursive macro": ("{% macro f(n) %}{{ f(n) }}{{ f(n) }}{% endmacro %}{{ f(1) }}", "RecursionError"),
    "a doubling macro": (
        "{% macro f(n) %}{% if n %}{{ f(n-1) ~ f(n-1) }}{% else %}x{% endif %}{% endmacro %}{{ f(40) }}",
        STEPS,
    ),
    "concatenating a big value many times": ("{% set a = 'x' * 60000 %}{{ a ~ a ~ a ~ a ~ a }}", CHARS),
    "adding big strings": ("{% set a = 'x' * 60000 %}{{ a + a }}", CHARS),
    "center": ("{{ 'x' | center(3000000000) }}", CHARS),
    "ljust": ("{{ 'x'.ljust(3000000000) }}", CHARS),
    "zfill": ("{{ '1'.zfill(3000000000) }}", CHARS),
    "expandtabs": ("{{ ('\t' * 1000).expandtabs(3000000) }}", CHARS),
    "percent width": ("{{ '%3000000000d' % 1 }}", CHARS),
    "percent star width": ("{{ '%*d' % (3000000000, 1) }}", CHARS),
    "format filter width": ("{{ '%3000000000s' | format('x') }}", CHARS),
    "str.format width": ("{{ '{:>3000000000}'.format('x') }}", CHARS),
    "str.format precision": ("{{ '{:.3000000000f}'.format(1.5) }}", CHARS),
    "str.format nested width": ("{{ '{:{}}'.format('x', 3000000000) }}", "width or precision"),
    "str.format many fields": ("{% set a = 'x' * 60000 %}{{ ('{0}' * 100).format(a) }}", CHARS),
    "replace with an empty old": ("{% set a = 'x' * 60000 %}{{ a | replace('', a) }}", CHARS),
    "replace method": ("{% set a = 'x' * 60000 %}{{ a.replace('x', a) }}", CHARS),
    "join with a big separator": ("{{ range(60000) | join('x' * 60000) }}", CHARS),
    "join method": ("{% set a = 'x' * 60000 %}{{ a.join(['a'] * 1000) }}", CHARS),
    "indent with a big prefix": ("{% set a = '\n' * 60000 %}{{ a | indent('x' * 60000) }}", CHARS),
    "wordwrap with a big wrapstring": ("{{ ('a ' * 30000) | wordwrap(1, wrapstring='x' * 60000) }}", CHARS),
    "batch fill": ("{{ [1] | batch(3000000000, 'x') | list }}", CHARS),
    "slice": ("{{ [1] | slice(3000000000) | list }}", CHARS),
    "tojson indent": ("{{ [[[[1]]]] | tojson(indent=3000000000) }}", CHARS),
    "a big list printed": ("{% set a = 'x' * 60000 %}{{ [a, a, a, a] }}", CHARS),
    "a big list as a string": ("{% set a = 'x' * 60000 %}{{ [a, a, a, a] | string }}", CHARS),
    "to_bytes": ("{{ (1).to_bytes(3000000000, 'big') }}", CHARS),
    "translate": ("{% set a = 'x' * 60000 %}{{ a.translate({120: a}) }}", CHARS),
    "a long range": ("{{ range(100000) | list }}", CHARS),
    "a recursive loop": ("{% for x in [[1]] recursive %}{{ loop(x) }}{% endfor %}", "recursive loops"),
    "lorem ipsum": ("{{ lipsum(3000000000) }}", "lipsum"),
}


@pytest.mark.parametrize("template,message", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_template_is_refused_naming_its_field(template, message):
    spec = copy.deepcopy(BASE)
    spec["labels"] = {"ok": "fine", "bomb": template}
    with pytest.raises(SpecError) as e:
        build_spec(spec)
    assert e.value.field == "labels.bomb", e.value
    assert message in str(e.value), e.value


def test_a_spec_whose_templates_together_make_too_much_is_refused():
    spec = copy.deepcopy(BASE)
    spec["env"] = {f"V{i}": "{{ 'x' * 60000 }}" for i in range(20)}  # each within the bound
    with pytest.raises(SpecError) as e:
        build_spec(spec)
    assert f"more than {t.MAX_TOTAL:,} characters in all" in str(e.value)


def test_the_time_bound_stops_a_slow_template(monkeypatch):
    monkeypatch.setattr(t, "MAX_SECONDS", 0.0)  # the mechanism, without waiting for it
    spec = copy.deepcopy(BASE)
    spec["labels"] = {"slow": "{% for i in range(3) %}{{ i }}{% endfor %}"}
    with pytest.raises(SpecError) as e:
        build_spec(spec)
    assert e.value.field == "labels.slow" and "take more than 0 s to render" in str(e.value)


def test_validate_of_a_bomb_is_exit_2_naming_the_field(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(
        "name: bomb\nproject: p\nregion: us-central1\nhardware: cpu\noutput_dir: runs/x\n"
        "image: {uri: us-docker.pkg.dev/p/r/t:v1}\n"
        "trainer: {model: tiny-cnn, train_data: 'd/train-*', num_classes: 2, batch_size: 8}\n"
        "labels: {x: \"{{ 'x' * 3000000000 }}\"}\n"
    )
    proc = cli_runner(dict(os.environ))("validate", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "labels.x" in proc.stderr and CHARS in proc.stderr, proc.stderr


DOCUMENTED = {
    "{{ env.USER }}": "alice",
    "{{ env.USER | default('local') }}": "alice",
    "{{ env.NOPE | default('local') }}": "local",
    "{{ name }}-{{ run }}": "base-job-7",
    "{{ trigger.folder }}/{{ trigger.folder_name }}": "gs://b/data/day1/day1",
    "{{ trigger.bucket }} {{ trigger.object }} {{ trigger.generation }}": "b data/day1/_SUCCESS 12",
    "{{ env.USER | upper }}-{{ 'A-B' | lower | replace('-', '_') }}": "ALICE-a_b",
    "{{ run | int + 1 }}": "8",
    "{{ env.USER ~ '-' ~ run }}": "alice-7",
    "{% if env.USER == 'alice' %}a{% else %}b{% endif %}": "a",
    "{% for x in ['a', 'b'] %}{{ x }}{% endfor %}": "ab",
    "{{ '%s-%03d' | format(env.USER, 7) }}": "alice-007",
    "{{ '{}-{}'.format(env.USER, run) }}": "alice-7",
    "{{ ['a', 'b'] | join(',') }}": "a,b",
    "{{ 'x' * 3 }}": "xxx",
    "{{ 2 ** 10 }}": "1024",
}


@pytest.mark.parametrize("template,expected", DOCUMENTED.items(), ids=DOCUMENTED.keys())
def test_documented_templates_render_as_before(template, expected):
    spec = copy.deepcopy(BASE)
    spec["labels"] = {"x": "y"}
    spec["env"] = {"VALUE": template}
    trigger = {
        "bucket": "b",
        "object": "data/day1/_SUCCESS",
        "generation": "12",
        "folder": "gs://b/data/day1",
        "folder_name": "day1",
    }
    built = build_spec(spec, vars={"run": "7", "trigger": trigger}, environ={"USER": "alice"})
    assert built.env["VALUE"] == expected
