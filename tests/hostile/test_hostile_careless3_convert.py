"""A careless user's image tree holding files whose names break rejected.txt's lines (issue 42,
HC round 4).

`data convert` lists each file it does not store in rejected.txt, one `<path>\\t<reason>` line
each, and wrote the path raw: a file named with a line break (an export from another system, a
name pasted from a chat) made two lines of one rejection, the second a path that does not
exist; a tab in the name, three fields. A script reading the list (to delete or fix those files)
then acted on the wrong names. Now a field that holds a character that is not printable, or starts
with a double quote, is written as a JSON string: one line per file, read back exactly."""

from __future__ import annotations

import json

from PIL import Image

from tests.cli_support import edge_env
from tests.shared import cli_runner

ODD = ["two\nlines.txt", "a\ttab.txt", "bell\x07.txt", "line\u2028sep.txt"]
PLAIN = ["notes.txt", "café.txt", '"quoted.txt']  # (a field starting with a quote is JSON)


def field(text: str) -> str:
    return json.loads(text) if text.startswith('"') else text


def test_every_rejected_file_is_one_line_that_reads_back_to_its_name(tmp_path):
    photos = tmp_path / "photos" / "cat"
    photos.mkdir(parents=True)
    Image.new("RGB", (16, 16), (200, 0, 0)).save(photos / "0.png")
    for name in ODD + PLAIN:
        (photos / name).write_text("not an image\n")
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)(
        "data", "convert", "photos", "records", "--shards", "1"
    )
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "records" / "rejected.txt").read_text(encoding="utf-8")
    lines = text.splitlines()  # (str.splitlines also splits at U+2028 and the other line breaks)
    assert len(lines) == len(ODD + PLAIN)
    rows = [line.split("\t") for line in lines]
    assert all(len(row) == 2 for row in rows)
    names = {field(path).rsplit("/", 1)[-1] for path, _ in rows}
    assert names == set(ODD + PLAIN)
    assert {path for path, _ in rows if not path.startswith('"')} == {f"photos/cat/{n}" for n in PLAIN}


def test_a_field_that_starts_with_a_quote_is_written_as_json_and_reads_back():
    from vertex_trainer.dataprep.pipeline import one_field

    assert one_field('"q.txt') == '"\\"q.txt"' and one_field("café.txt") == "café.txt"
    for text in ['"q.txt', '"', "plain", "a\nb", "a\tb", "\x1b[2J", "a\\b"]:
        assert field(one_field(text)) == text and "\t" not in one_field(text)
        assert len(one_field(text).splitlines()) == 1


def test_a_file_named_with_a_backslash_is_converted_or_rejected_not_skipped(tmp_path):
    """Beam's `*` never matches a backslash: `cat/a\\b.png` was neither stored nor rejected, the
    dataset one image short with nothing said. A folder below a class folder is still not read."""
    photos = tmp_path / "photos" / "cat"
    (photos / "sub").mkdir(parents=True)
    for name in ("0.png", "back\\slash.png", "sub/nested.png"):
        Image.new("RGB", (16, 16), (200, 0, 0)).save(photos / name)
    (photos / "notes\\x.txt").write_text("not an image\n")
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)(
        "data", "convert", "photos", "records", "--shards", "1"
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "records" / "manifest.json").read_text())
    assert manifest["splits"]["train"]["examples"] == 2
    rejected = (tmp_path / "records" / "rejected.txt").read_text().splitlines()
    assert [line.split("\t")[0] for line in rejected] == ["photos/cat/notes\\x.txt"]
