"""/gcs/BUCKET/ reads what the bucket holds (issue 32 item 4, local/gcsfill.py): before a script
job's replicas start, the objects its /gcs/ paths name are fetched from the bucket in use (here the
gcp-storage-emulator) into the run's stand-in; when a gs:// run ends, only what the run wrote or
changed is uploaded."""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.owncode.conftest import script_data
from tests.shared import cli_runner
from vertex_trainer.errors import UserError
from vertex_trainer.local import gcsfill, gcsfuse
from vertex_trainer.local.cluster import FuseRef
from vertex_trainer.settings import Settings

pytestmark = pytest.mark.wire

# Reads the data folder as Google's samples do (a /gcs/ path given in args), writes one result.
READER = """
import json, os, sys
data, results = sys.argv[1], sys.argv[2]
rows = open(os.path.join(data, "train.csv")).read().splitlines()
os.makedirs(results, exist_ok=True)
with open(os.path.join(results, "summary.json"), "w") as f:
    json.dump({"listed": sorted(os.listdir(data)), "rows": rows,
               "other": os.path.exists("/gcs/" + data.split("/")[2] + "/other")}, f)
"""


def _open(url: str, data: bytes | None = None, method: str = "GET") -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(urllib.request.Request(url, data=data, method=method), timeout=30) as resp:
        body: bytes = resp.read()
        return body


def _put(emu, bucket: str, name: str, data: bytes) -> None:
    query = urllib.parse.urlencode({"uploadType": "media", "name": name})
    _open(f"{emu.endpoint}/upload/storage/v1/b/{bucket}/o?{query}", data, "POST")


def _generation(emu, bucket: str, name: str) -> str:
    meta = json.loads(_open(f"{emu.endpoint}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}"))
    return str(meta["generation"])


def test_a_script_reads_the_buckets_objects_and_only_what_it_wrote_is_uploaded(
    tmp_path, gcs_emulator, gcs_bucket, gcs_env
):
    _put(gcs_emulator, gcs_bucket, "data/train.csv", b"x,y\n1,2\n")
    _put(gcs_emulator, gcs_bucket, "data/eval.csv", b"x,y\n3,4\n")
    _put(gcs_emulator, gcs_bucket, "other/big.bin", b"not named by the job")
    before = _generation(gcs_emulator, gcs_bucket, "data/train.csv")
    code = tmp_path / "code"
    code.mkdir()
    (code / "task.py").write_text(READER)
    data = script_data(
        code,
        output_dir=f"gs://{gcs_bucket}/runs/own",
        args=[f"/gcs/{gcs_bucket}/data", f"/gcs/{gcs_bucket}/results"],
    )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    result = cli_runner(edge_env(tmp_path, **gcs_env), cwd=tmp_path)("submit", path, "--local")
    assert result.returncode == 0, result.stderr
    assert "/gcs: 2 object(s) (16 B) fetched into the stand-in" in result.stderr

    summary = json.loads(gcs_emulator.read_object(gcs_bucket, "results/summary.json"))
    assert summary == {"listed": ["eval.csv", "train.csv"], "rows": ["x,y", "1,2"], "other": False}
    # The fetched objects were not sent back: same generation, and nothing new beside them.
    assert _generation(gcs_emulator, gcs_bucket, "data/train.csv") == before
    assert "/gcs: 1 file(s) the replicas wrote uploaded" in result.stderr
    assert sorted(gcs_emulator.list_objects(gcs_bucket, "data/")) == ["data/eval.csv", "data/train.csv"]


# Deletes two fetched files; before that, replaces one of those objects in the bucket (another
# writer, through the emulator's JSON API), which must then be kept.
DELETER = """
import os, sys, urllib.parse, urllib.request
data = sys.argv[1]
bucket = data.split("/")[2]
query = urllib.parse.urlencode({"uploadType": "media", "name": "data/replaced.csv"})
url = os.environ["STORAGE_EMULATOR_HOST"] + f"/upload/storage/v1/b/{bucket}/o?{query}"
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
opener.open(urllib.request.Request(url, data=b"a newer object", method="POST"), timeout=30).read()
os.remove(os.path.join(data, "gone.csv"))
os.remove(os.path.join(data, "replaced.csv"))
"""


def test_a_fetched_file_the_script_deletes_is_deleted_from_the_bucket_unless_it_changed_there(
    tmp_path, gcs_emulator, gcs_bucket, gcs_env
):
    for name in ("data/gone.csv", "data/replaced.csv", "data/kept.csv"):
        _put(gcs_emulator, gcs_bucket, name, name.encode())
    code = tmp_path / "code"
    code.mkdir()
    (code / "task.py").write_text(DELETER)
    data = script_data(code, output_dir=f"gs://{gcs_bucket}/runs/own", args=[f"/gcs/{gcs_bucket}/data"])
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    result = cli_runner(edge_env(tmp_path, **gcs_env), cwd=tmp_path)("submit", path, "--local")
    assert result.returncode == 0, result.stderr
    assert "/gcs: 3 object(s) (" in result.stderr
    expected = (
        "/gcs: 1 object(s) the replicas deleted deleted from their buckets; 1 kept: changed in the bucket"
    )
    assert expected in result.stderr, result.stderr
    assert sorted(gcs_emulator.list_objects(gcs_bucket, "data/")) == ["data/kept.csv", "data/replaced.csv"]
    assert gcs_emulator.read_object(gcs_bucket, "data/replaced.csv") == b"a newer object"


def _ref(bucket: str, rest: str, field: str = "args[0]") -> FuseRef:
    return FuseRef(field, f"--data=/gcs/{bucket}/{rest}", f"/gcs/{bucket}/{rest}")


def test_one_object_a_glob_and_the_record_of_what_earlier_runs_fetched(tmp_path, gcs_emulator, gcs_bucket):
    for name in ("d/train-0.csv", "d/train-1.csv", "d/train.csv", "d/train.csv.bak", "d/eval.csv"):
        _put(gcs_emulator, gcs_bucket, name, name.encode())
    settings = Settings(storage_emulator=gcs_emulator.endpoint)
    standin = tmp_path / "gcs"
    refs = [_ref(gcs_bucket, "d/train.csv"), _ref(gcs_bucket, "d/train-*", "env.DATA")]
    first = gcsfill.prefill(refs, standin, settings, route="emulator")
    got = sorted(p.relative_to(standin / gcs_bucket).as_posix() for p in standin.rglob("*") if p.is_file())
    assert got == ["d/train-0.csv", "d/train-1.csv", "d/train.csv"]
    assert first.downloaded == 3
    # An earlier run changed one file: it is kept; the others, unchanged, are not fetched again.
    (standin / gcs_bucket / "d" / "train.csv").write_text("written by a run")
    again = gcsfill.prefill(refs, standin, settings, route="emulator", record=first.fetched)
    assert (again.downloaded, again.kept) == (0, 1)
    assert (standin / gcs_bucket / "d" / "train.csv").read_text() == "written by a run"
    assert sorted(again.fetched) == [f"{gcs_bucket}/d/train-0.csv", f"{gcs_bucket}/d/train-1.csv"]
    # ... and the upload at the end would send only that one.
    sent: list[str] = []
    assert gcsfuse.upload(standin, lambda b, o, p: sent.append(o), again.fetched) == 1
    assert sent == ["d/train.csv"]


def test_more_than_the_bound_and_a_missing_bucket_are_refused_before_any_download(
    tmp_path, gcs_emulator, gcs_bucket
):
    for i in range(3):
        _put(gcs_emulator, gcs_bucket, f"all/{i}.txt", b"12345")
    settings = Settings(storage_emulator=gcs_emulator.endpoint)
    standin = tmp_path / "gcs"
    with pytest.raises(UserError) as too_many:
        gcsfill.prefill([_ref(gcs_bucket, "")], standin, settings, route="emulator", max_objects=2)
    assert f"args[0] '--data=/gcs/{gcs_bucket}/': more than 2 object(s)" in too_many.value.message
    assert "at most 2 objects and 1.0 GiB in all" in too_many.value.message
    with pytest.raises(UserError) as too_big:
        gcsfill.prefill([_ref(gcs_bucket, "all")], standin, settings, route="emulator", max_bytes=10)
    assert "3 object(s), 15 B" in too_big.value.message
    with pytest.raises(UserError) as missing:
        gcsfill.prefill([_ref("vt32-no-such-bucket", "x.csv")], standin, settings, route="emulator")
    assert "args[0] '--data=/gcs/vt32-no-such-bucket/x.csv'" in missing.value.message
    assert "cannot be listed" in missing.value.message
    assert not standin.exists() or not any(standin.rglob("*"))
    assert not os.path.exists(Path(standin, gcs_bucket))


def test_an_object_and_a_folder_of_the_same_name_are_shown_as_cloud_storage_fuse_shows_them(
    tmp_path, gcs_emulator, gcs_bucket
):
    # gs://B/data/sub is an object and the folder of data/sub/c.txt. Cloud Storage FUSE
    # (its semantics page, "Name conflicts") shows the folder under the name and the object as the
    # file "sub\n" beside it (a line feed, which no object name can hold, ends its name).
    _put(gcs_emulator, gcs_bucket, "data/sub", b"the object")
    _put(gcs_emulator, gcs_bucket, "data/sub/c.txt", b"c")
    _put(gcs_emulator, gcs_bucket, "data/other.txt", b"o")
    settings = Settings(storage_emulator=gcs_emulator.endpoint)
    standin = tmp_path / "gcs"
    fill = gcsfill.prefill([_ref(gcs_bucket, "data")], standin, settings, route="emulator")
    data = standin / gcs_bucket / "data"
    assert (data / "sub" / "c.txt").read_bytes() == b"c" and (data / "other.txt").read_bytes() == b"o"
    assert (data / "sub\n").read_bytes() == b"the object"
    assert fill.downloaded == 3
    line = fill.line()
    assert line is not None and "\n" not in line
    assert f"gs://{gcs_bucket}/data/sub is an object and a folder" in line and "data/sub\\n" in line
    # Unchanged, nothing goes back; changed, the file "sub\n" is the object data/sub again.
    sent: list[str] = []
    assert gcsfuse.upload(standin, lambda b, o, p: sent.append(o), fill.fetched) == 0
    (data / "sub\n").write_bytes(b"changed by the run")
    assert gcsfuse.upload(standin, lambda b, o, p: sent.append(o), fill.fetched) == 1
    assert sent == ["data/sub"]
    (data / "sub\n").unlink()
    generation = _generation(gcs_emulator, gcs_bucket, "data/sub")
    assert gcsfuse.deleted(standin, fill.fetched) == [(gcs_bucket, "data/sub", generation)]
