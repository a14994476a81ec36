"""A dataset from elsewhere (an archive of photos, a bucket's folders) whose class folder's name
holds a line break or an escape character: `data convert` wrote labels.txt with one line more
than there are classes (`dog\\nbird` became two labels, and every label after it was one off for
whoever reads labels.txt by line), and printed the name raw in its summary (ESC c resets the
terminal). Now it is exit 2 naming the folder as Python writes it, before anything is written."""

from __future__ import annotations

import pytest

from tests.cli_support import edge_env
from tests.shared import cli_runner


@pytest.fixture
def convert(tmp_path):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    return lambda *args: run("data", "convert", *args)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("dog\nbird", id="newline"),
        pytest.param("evil\x1bc", id="terminal-reset"),
        pytest.param("cr\rlf", id="carriage-return"),
        pytest.param("csi\x9b2J", id="c1-control"),
        pytest.param("line\u2028sep", id="unicode-line-separator"),
    ],
)
def test_a_class_folder_with_a_control_character_is_exit_2(convert, tmp_path, name):
    for c in ("cat", name):
        (tmp_path / "photos" / c).mkdir(parents=True)
        (tmp_path / "photos" / c / "a.jpg").write_bytes(b"\xff\xd8\xff")
    done = convert("photos", "records", "--shards", "1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"class folder {name!r} in photos has a control character" in done.stderr
    assert not any(ch in done.stderr for ch in "\x1b\x9b\r\u2028"), repr(done.stderr)
    assert not (tmp_path / "records").exists()


def test_an_eval_folder_is_named_escaped_too(convert, tmp_path):
    (tmp_path / "photos" / "cat").mkdir(parents=True)
    (tmp_path / "val" / "cat\x1bc").mkdir(parents=True)
    done = convert("photos", "records", "--eval-dir", "val", "--shards", "1")
    assert done.returncode == 2
    assert "class folder 'cat\\x1bc' in val" in done.stderr and "\x1b" not in done.stderr
