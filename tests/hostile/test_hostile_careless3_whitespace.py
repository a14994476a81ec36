"""A careless user's quoted spaces and line breaks in values passed on as they are (issue 42,
HC round 4): an environment variable's value, an argument of your code or image, the trainer's
extra_args.

Every spec model strips the whitespace around text (a name's or a path's stray space), and did
so for these too: `env: {SEP: " "}` ran the job with SEP empty, `env: {PAD: "  x"}` with
PAD=x, a literal block's last line break was cut, and `args: [--sep, " "]` passed `--sep ''`,
though the user quoted the spaces to keep them. Those fields now keep the text as written;
every other text field is stripped as before."""

from __future__ import annotations

import json

from tests.cli_support import edge_env
from tests.shared import T4_JOB, cli_runner, spec_yaml, write_spec
from vertex_trainer.spec import load_spec

HEAD = "name: ' q '\nregion: us-central1\nhardware: cpu\noutput_dir: 'runs/q '\n"


def test_env_values_and_arguments_keep_their_spaces_and_line_breaks(tmp_path):
    script = load_spec(
        write_spec(
            tmp_path,
            HEAD + "image: {code: ., script: task.py}\nargs: [--sep, ' ', --prefix, '  x']\n"
            "env:\n  SEP: ' '\n  PAD: '  x  '\n  PEM: |\n    line one\n    line two\n",
        )
    )
    assert script.args == ("--sep", " ", "--prefix", "  x")
    assert script.env == {"SEP": " ", "PAD": "  x  ", "PEM": "line one\nline two\n"}
    assert (script.name, script.output_dir) == ("q", "runs/q")  # the others stripped as before
    image = load_spec(
        write_spec(
            tmp_path,
            HEAD + "image: {uri: us-docker.pkg.dev/p/r/i:1}\ncommand: [sh, -c, 'echo \"$0\"', ' a ']\n"
            "trainer: {model: tiny-cnn, train_data: x, num_classes: 10, extra_args: ['--tag= a ']}\n",
        )
    )
    assert image.command == ("sh", "-c", 'echo "$0"', " a ")
    assert image.trainer is not None and image.trainer.extra_args == ("--tag= a ",)


def test_the_rendered_job_carries_them(tmp_path):
    spec = write_spec(tmp_path, spec_yaml(T4_JOB, env={"SEP": " ", "PAD": "  x  "}))
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)("render", spec)
    assert done.returncode == 0, done.stderr
    pool = json.loads(done.stdout)["jobSpec"]["workerPoolSpecs"][0]
    env = {e["name"]: e["value"] for e in pool["containerSpec"]["env"]}
    assert env["SEP"] == " " and env["PAD"] == "  x  "
