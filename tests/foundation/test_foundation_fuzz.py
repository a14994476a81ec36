"""Fuzz the spec loader: whatever comes in, the answer is a JobSpec or a UserError (exit 2).

Mutated spec mappings (wrong types at every path, hostile text, huge and non-finite numbers,
nested junk, lists where mappings belong), random `--set`/`--var` input, and broken bytes as
the YAML file. Bounded and derandomized, so CI sees the same few hundred cases every run.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vertex_trainer.errors import UserError
from vertex_trainer.spec import JobSpec, build_spec, load_spec, spec_hash

# Not traced for coverage (pytest-cov's no_cover): a few hundred specs through the same loader
# lines the unit tests measure; tracing them doubled this module's CPU (6 s -> 13 s).
pytestmark = pytest.mark.no_cover

FUZZ = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

RICH = {
    "name": "rich-job",
    "project": "my-project",
    "region": "us-central1",
    "hardware": {
        "machine_type": "a3-highgpu-8g",
        "accelerator_type": "NVIDIA_H100_80GB",
        "accelerator_count": 8,
    },
    "replicas": 2,
    "boot_disk": {"type": "pd-ssd", "size_gb": 200},
    "image": {
        "repository": "us-docker.pkg.dev/p/r/trainer",
        "builder": "docker",
        "variant": "gpu",
        "pip_packages": ["pandas==2.2.3"],
        "staging_bucket": "gs://my-bucket/staging",
    },
    "scheduling": {"strategy": "flex-start", "max_wait": "4h", "timeout": "1d"},
    "output_dir": "gs://my-bucket/runs/{{ name }}",
    "service_account": "trainer@my-project.iam.gserviceaccount.com",
    "labels": {"team": "vision", "tier": 1},
    "env": {"TF_CPP_MIN_LOG_LEVEL": 1, "DEBUG": True},
    "trainer": {
        "model": "resnet50",
        "train_data": "gs://my-bucket/train-*",
        "eval_data": "/gcs/my-bucket/val-*",
        "num_classes": 1000,
        "image_size": 224,
        "epochs": 90,
        "batch_size": 4096,
        "learning_rate": 0.1,
        "warmup_epochs": 5,
        "precision": "auto",
        "steps_per_epoch": 400,
        "steps_per_execution": 200,
        "optimizer": "adamw",
        "cache": False,
        "extra_args": ["--seed=3"],
    },
}

HOSTILE_TEXT = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "a\nb",
    "\r\n",
    "\t",
    "x" * 70_000,
    "é" * 40,
    "\ud800",
    "🙂" * 30,
    "\u202e",
    "{{ nope }}",
    "{{ 1/0 }}",
    "{% for %}",
    "{{ ''.__class__ }}",
    "{{ env.HOME }}",
    "{{ name }}",
    "gs://",
    "gs://B",
    "s3://b/x",
    "http://x/y",
    "file:///etc/passwd",
    "../../etc/passwd",
    "/gcs/",
    "h100x8",
    "tpu-v5e-8",
    "flex-start",
    "-" * 300,
    "${HOME}",
    "$(id)",
    "`id`",
    "a;b",
    "9" * 5000,
    "1e999",
    "nan",
    "inf",
    "-1",
    "0x10",
    "true",
    "null",
    "~",
    "[",
    "{",
    "'",
    '"',
    "\\",
    "--",
    "--seed",
    "us-central1",
    "NVIDIA_TESLA_T4",
    "4h",
    "0",
    "8d",
    "1h30m",
    "sha256:" + "a" * 64,
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=5000),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), -0.0, 1e308]),
    st.text(max_size=40),
    st.sampled_from(HOSTILE_TEXT),
)
keys = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["name", "trainer", "hardware", "extra", "<<"]),
    st.integers(-2, 2),
    st.booleans(),
    st.none(),
)
junk = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated_specs(draw, bases):
    spec = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(spec))))
        if not path:
            continue
        parent = spec
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        op = draw(st.sampled_from(["replace", "replace", "delete", "add-key", "listify", "wrap"]))
        if op == "replace":
            parent[last] = draw(junk)
        elif op == "delete":
            del parent[last]
        elif op == "add-key" and isinstance(parent, dict):
            parent[draw(keys)] = draw(junk)
        elif op == "listify":
            parent[last] = [parent[last]]
        elif op == "wrap":
            parent[last] = {draw(keys): parent[last]}
    return spec


def _outcome(fn) -> str:
    """'ok' or 'user_error'; any other exception fails the test (and hypothesis shrinks it)."""
    try:
        result = fn()
    except UserError as e:
        text = str(e)
        text.encode("utf-8")  # printable by the CLI
        assert text and "Traceback" not in text
        return "user_error"
    assert isinstance(result, JobSpec)
    # What every command does next with a spec works too.
    assert yaml.safe_load(result.to_yaml()) == result.to_dict()
    assert len(spec_hash(result)) == 20
    # A spec without trainer: runs an image's own command (image.uri) or the user's code
    # (image.code, docs/own-code.md): nothing to turn into trainer flags.
    if result.trainer is not None:
        assert all(isinstance(a, str) for a in result.trainer.to_args())
    else:
        assert not result.runs_bundled_trainer
    return "ok"


def test_fuzz_mutated_specs(base_spec):
    seen: Counter = Counter()

    @FUZZ
    @given(mutated_specs([base_spec, RICH]))
    def run(data):
        seen[_outcome(lambda: build_spec(data))] += 1

    run()
    assert seen["ok"] and seen["user_error"] > 100, seen


def test_fuzz_set_var_project_region(base_spec):
    seen: Counter = Counter()
    assignment = st.tuples(
        st.one_of(
            st.text(max_size=20),
            st.sampled_from(
                [
                    "trainer.batch_size",
                    "hardware.accelerator_count",
                    "labels.x",
                    "scheduling",
                    "trainer",
                    "a..b",
                    ".",
                ]
            ),
        ),
        st.one_of(
            st.text(max_size=30),
            st.sampled_from(HOSTILE_TEXT + ["[1, 2]", "{a: 1}", "!!binary eA==", "&a [*a]", "? [a]\n: 1"]),
        ),
    )

    @FUZZ
    @given(
        st.sampled_from([base_spec, RICH]),
        st.lists(assignment, max_size=3),
        st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=3),
        st.one_of(st.none(), st.text(max_size=20)),
        st.one_of(st.none(), st.text(max_size=20)),
    )
    def run(base, sets, variables, project, region):
        raw = [f"{k}={v}" for k, v in sets]
        seen[
            _outcome(lambda: build_spec(base, sets=raw, vars=variables, project=project, region=region))
        ] += 1

    run()
    assert seen["ok"] and seen["user_error"] > 100, seen


def _yaml_edits(draw, text: bytes) -> bytes:
    data = bytearray(text)
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        chunk = draw(
            st.one_of(
                st.binary(min_size=1, max_size=4),
                st.sampled_from(
                    [
                        b":",
                        b"-",
                        b"[",
                        b"{",
                        b"&a",
                        b"*a",
                        b"? ",
                        b"\n  ",
                        b"\t",
                        b"!!",
                        b"'",
                        b'"',
                        b"#",
                        b"\x00",
                        b"\xff",
                        b"<<: *a\n",
                    ]
                ),
            )
        )
        if op == "insert":
            data[pos:pos] = chunk
        elif op == "delete":
            del data[pos : pos + len(chunk)]
        else:
            data[pos : pos + len(chunk)] = chunk
    return bytes(data)


def test_fuzz_broken_yaml_bytes(tmp_path, base_spec):
    texts = [yaml.safe_dump(b, sort_keys=False).encode() for b in (base_spec, RICH)]
    seen: Counter = Counter()

    @FUZZ
    @given(st.data())
    def run(data):
        if data.draw(st.booleans()):
            raw = _yaml_edits(data.draw, data.draw(st.sampled_from(texts)))
        else:
            raw = data.draw(st.binary(max_size=300))
        path = tmp_path / "job.yaml"
        path.write_bytes(raw)
        seen[_outcome(lambda: load_spec(path))] += 1

    run()
    assert seen["user_error"] > 100, seen


# -- the real command line ------------------------------------------------------------------------


def _cli_cases(base: dict) -> dict[str, str]:
    return {
        "deep.yaml": "name: x\ntrainer: " + "[" * 2000 + "]" * 2000 + "\n",
        "complex-key.yaml": "name: x\n? [a, b]\n: 1\n",
        "s3.yaml": yaml.safe_dump({**base, "output_dir": "s3://bucket/x"}),
        "misspelt.yaml": yaml.safe_dump(
            {**{k: v for k, v in base.items() if k != "hardware"}, "hardwre": "a100x8"}
        ),
        "junk-types.yaml": yaml.safe_dump(
            {**base, "trainer": [1, {"a": None}], "labels": "x", "replicas": 1e300}
        ),
        "alias-bomb.yaml": "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        "e: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n",
        "valid.yaml": yaml.safe_dump(RICH),
    }


def test_hostile_files_through_the_real_cli(tmp_path, base_spec):
    exe = Path(sys.executable).with_name("vertex-trainer")
    cases = _cli_cases(base_spec)
    codes = {}
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        proc = subprocess.run(
            [str(exe), "validate", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"},
        )
        assert "Traceback" not in proc.stderr, (name, proc.stderr)
        codes[name] = proc.returncode
        if proc.returncode == 2:
            assert proc.stderr.startswith("error: ") and proc.stdout == "", (name, proc.stderr)
    assert codes == {**{name: 2 for name in cases}, "valid.yaml": 0}, codes
