"""Input a new user (or a fuzzer) can give: exit 2, one clear message, never a traceback.

Every problem of a spec is shown at once (unknown keys first, each with its fix); YAML that is
hostile (deep nesting, complex keys, alias bombs, broken bytes) is refused by the loader.
"""

from __future__ import annotations

import re

import pytest

from vertex_trainer.errors import SpecError, SpecProblems, UserError
from vertex_trainer.spec import build_spec, load_spec


def _validate(cli, path):
    result = cli("validate", path)
    assert result.code == 2, (result.code, result.err)
    assert result.out == "" and "Traceback" not in result.err
    return result.err


# -- every problem, each on its own line ----------------------------------------------------------


def test_a_misspelt_key_shows_its_did_you_mean_before_the_missing_field(base_spec, write_spec, cli):
    base_spec["hardwre"] = base_spec.pop("hardware")
    err = _validate(cli, write_spec(base_spec))
    lines = err.splitlines()
    assert lines[0] == "error: 2 problems in the spec:"
    assert lines[1] == "  hardwre: unknown key; did you mean 'hardware'?"
    assert lines[2].startswith("    hint: allowed keys: name, project, region, hardware")
    assert lines[3] == "  hardware: is required"
    assert lines[4].startswith("    hint: a preset name")
    assert "more problem" not in err


def test_every_problem_is_listed_unknown_keys_first(base_spec):
    base_spec.update({"replicas": 0, "nmae": "x", "scheduling": {"stratgy": "spot"}})
    base_spec["trainer"]["batch_size"] = "lots"
    with pytest.raises(SpecProblems) as e:
        build_spec(base_spec)
    fields = [p.field for p in e.value.problems]
    assert fields[:2] == ["nmae", "scheduling.stratgy"]
    assert set(fields[2:]) == {"replicas", "trainer.batch_size"}
    assert e.value.field == "nmae" and e.value.hint is None
    assert "did you mean 'name'" in e.value.message and "did you mean 'strategy'" in e.value.message
    problem_lines = [line for line in e.value.message.splitlines()[1:] if not line.startswith("    ")]
    assert len(problem_lines) == 4 and "valid integer" in str(e.value)


def test_cross_field_problems_are_all_listed(base_spec):
    base_spec.update({"labels": {"Team": "x"}, "output_dir": "s3://bucket/x", "env": {"TF_CONFIG": "{}"}})
    base_spec["trainer"]["batch_size"] = 1001
    with pytest.raises(SpecProblems) as e:
        build_spec(base_spec)
    assert [p.field for p in e.value.problems] == [
        "labels.Team",
        "env.TF_CONFIG",
        "output_dir",
        "trainer.batch_size",
    ]
    assert "hint: use a multiple of 8, e.g. 1008" in e.value.message


def test_one_problem_stays_one_plain_message(base_spec):
    base_spec["replica"] = 2
    with pytest.raises(SpecError) as e:
        build_spec(base_spec)
    assert not isinstance(e.value, SpecProblems) and e.value.problems == (e.value,)
    assert e.value.message == "replica: unknown key; did you mean 'replicas'?"
    assert e.value.hint.startswith("allowed keys: ")


# -- output_dir and data paths --------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["gs://my-bucket", "gs://my-bucket/runs/x", "gs://a.b-c_d/x", "runs/local", "/tmp/runs", "./runs"],
)
def test_good_output_dirs(base_spec, value):
    base_spec["output_dir"] = value
    assert build_spec(base_spec).output_dir == value


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("s3://bucket/x", "s3:// is not supported"),
        ("file:///tmp/x", "file:// is not supported"),
        ("gs://", "names no bucket"),
        ("gs://ab/x", "not a valid bucket name"),
        ("gs://" + "a" * 64 + "/x", "not a valid bucket name"),
        ("gs://bucket/a\nb", "control character"),
    ],
)
def test_bad_output_dirs_name_the_field_and_the_fix(base_spec, value, fragment):
    base_spec["output_dir"] = value
    with pytest.raises(SpecError) as e:
        build_spec(base_spec)
    assert e.value.field == "output_dir" and fragment in e.value.message
    assert e.value.hint == "use gs://BUCKET/PATH; a local path only with --local"


@pytest.mark.parametrize(
    "value",
    [
        "gs://my-bucket/train-*",
        "/gcs/my-bucket/train-*",
        "data/train-*",
        "gs://my-bucket/a-*, /gcs/my-bucket/b-*",
    ],
)
def test_good_data_paths(base_spec, value):
    base_spec["trainer"]["train_data"] = value
    assert build_spec(base_spec).trainer.train_data == value


# -- hostile YAML ---------------------------------------------------------------------------------

HOSTILE_YAML = [
    ("deep-lists", "name: x\ntrainer: " + "[" * 2000 + "]" * 2000 + "\n", "nests too deeply"),
    ("deep-maps", "name: x\ntrainer: " + "{a: " * 2000 + "1" + "}" * 2000 + "\n", "nests too deeply"),
    ("deep-but-parseable", "name: x\ntrainer: " + "[" * 100 + "]" * 100 + "\n", "nests more than 32 levels"),
    (
        "complex-key",
        "name: x\n? [a, b]\n: 1\n",
        "line 2, column 3: invalid YAML: a key must be text, not a list",
    ),
    ("mapping-key", "name: x\n? {a: 1}\n: 1\n", "a key must be text, not a mapping"),
    ("boolean-key", "name: x\nenv:\n  ON: '1'\n", "a key must be text, not true (yes/no/on/off"),
    ("number-key", "name: x\nlabels:\n  1: a\n", "a key must be text, not the number 1"),
    ("huge-number", "name: x\nreplicas: " + "9" * 5000 + "\n", "a number has more than 4300 digits"),
    ("broken-binary-number", "name: x\nreplicas: 0b_\n", "a number cannot be read"),
    ("recursive-alias", "name: &a [*a]\n", "nests more than 32 levels"),
    (
        "alias-bomb",
        "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
        "more than 20000 values",
    ),
    ("nul-escape", 'name: "a\\0b"\n', "name: contains a NUL byte"),
    ("raw-nul", "name: a\x00b\n", "invalid YAML"),
    ("lone-surrogate", 'name: "\\ud800"\n', "lone UTF-16 surrogate"),
    ("binary-tag", "name: !!binary aGVsbG8=\n", "name: is a bytes"),
    ("python-tag", "name: !!python/object/apply:os.system [echo]\n", "invalid YAML"),
    ("two-documents", "name: a\n---\nname: b\n", "invalid YAML"),
    ("a-list", "- name: x\n", "a spec is a mapping of keys"),
    ("a-scalar", "hello\n", "a spec is a mapping of keys"),
    ("empty", "# nothing\n", "the spec is empty"),
]


# 2,000 levels of nesting walk the loader's lines thousands of times: not traced for coverage
# (pytest-cov's no_cover; deep-lists took 1 s of CPU, 5 s traced), the 100-level case is.
_UNTRACED = {"deep-lists", "deep-maps"}


@pytest.mark.parametrize(
    "text, fragment",
    [
        pytest.param(*c[1:], id=c[0], marks=[pytest.mark.no_cover] if c[0] in _UNTRACED else [])
        for c in HOSTILE_YAML
    ],
)
def test_hostile_yaml_is_one_clear_message(text, fragment, write_spec, cli):
    err = _validate(cli, write_spec(text))
    assert err.startswith("error: ") and fragment in err, err


@pytest.mark.parametrize("raw", [b"\xff\xfe\x00garbage", b"name: \xc3\x28\n"], ids=["utf16-bom", "bad-utf8"])
def test_broken_bytes(raw, tmp_path, cli):
    path = tmp_path / "job.yaml"
    path.write_bytes(raw)
    assert "not UTF-8 text" in _validate(cli, path)


def test_a_huge_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("# " + "x" * (1 << 20) + "\n")
    with pytest.raises(UserError, match="a job spec is a short YAML file"):
        load_spec(path)


def test_yaml_merge_keys_work_and_duplicates_still_fail(write_spec):
    text = (
        "name: merged\nproject: my-project\nregion: us-central1\nhardware: a100x8\n"
        "image: {uri: 'us-docker.pkg.dev/p/r/t:v1'}\n"
        "trainer: {train_data: 'gs://my-bucket/t-*', num_classes: 10, batch_size: 64}\n"
        "labels:\n  <<: {team: a, tier: b}\n  team: vision\n"
    )
    spec = load_spec(write_spec(text))
    assert spec.labels == {"team": "vision", "tier": "b"}  # the mapping's own key wins over the merge
    with pytest.raises(UserError, match="duplicate key 'team'"):
        load_spec(write_spec(text + "  team: again\n", name="dup.yaml"))


def test_python_api_data_is_checked_the_same_way(base_spec):
    base_spec["labels"] = {("a", "b"): "x"}
    with pytest.raises(SpecError, match="labels: a key must be text, not a tuple"):
        build_spec(base_spec)
    nested: list = []
    nested.append(nested)  # a list that holds itself
    with pytest.raises(SpecError, match="nests more than 32 levels"):
        build_spec({**base_spec, "labels": {}, "env": {"A": nested}})
    with pytest.raises(UserError, match="a spec is a mapping"):
        build_spec(["name", "x"])  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="characters long"):
        build_spec({**base_spec, "labels": {}, "name": "x" * 70_000})


def test_hostile_set_values_are_checked_like_the_file(base_spec):
    with pytest.raises(SpecError, match=re.escape("labels.team: contains a NUL byte")):
        build_spec(base_spec, sets=['labels.team="a\\0b"'])
    with pytest.raises(SpecError) as e:  # too many digits for a number: kept as text, then checked
        build_spec(base_spec, sets=["labels.team=" + "9" * 5000])
    assert e.value.field == "labels.team" and "invalid label value" in e.value.message
    with pytest.raises(SpecError, match="nests more than 32 levels"):
        build_spec(base_spec, sets=["env.A=" + "[" * 40 + "]" * 40])
