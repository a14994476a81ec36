"""`profile RUN` copies the trace's files into a scratch folder before xprof reads them
(performance/profile_trace.py `fetch`), and the trace is whoever wrote the run's folder or bucket.
A gs:// trace file was downloaded whole into memory and only then measured against the bound
(MAX_TRACE_BYTES, 2 GiB): an object of any size was read. A local one was copied whatever it was:
a FIFO named like a trace file was a traceback (shutil.SpecialFileError), a link to /dev/zero a
copy without end. Now a gs:// object is read no further than the bound, a local file's size is
looked at first and only a regular file is copied: past the bound, or not a file, exit 2 naming it.
"""

from __future__ import annotations

import os
import shutil

import pytest

from vertex_trainer import api
from vertex_trainer.errors import UserError
from vertex_trainer.gcp import storage
from vertex_trainer.performance import profile_trace
from vertex_trainer.settings import Settings

SESSION = "logs/plugins/profile/2026_01_01_00_00_00"
BOUND = 1 << 20


@pytest.mark.wire
def test_a_gs_trace_over_the_bound_is_read_no_further_than_it(emulator, bucket, monkeypatch):
    settings = Settings.from_environ(emulator.env())
    storage.client(settings).bucket(bucket).blob(f"run/{SESSION}/host.xplane.pb").upload_from_string(
        b"\0" * (4 * BOUND)
    )
    monkeypatch.setattr(profile_trace, "MAX_TRACE_BYTES", BOUND)  # the bound scaled down: 4 MiB over 1
    read = storage.read_bytes
    got: list[int] = []

    def counted(*args, **kwargs):  # the real read, its size noted
        data = read(*args, **kwargs)
        got.append(len(data or b""))
        return data

    monkeypatch.setattr(storage, "read_bytes", counted)
    with pytest.raises(UserError) as e:
        api.profile(f"gs://{bucket}/run", settings=settings)
    assert got and max(got) <= BOUND + 1, got  # never the whole object
    assert "is over 1.0 MiB" in e.value.message, e.value.message


@pytest.mark.timeout(60)
def test_a_local_trace_file_that_is_no_regular_file_is_exit_2_naming_it(tmp_path):
    session = tmp_path / "run" / SESSION
    session.mkdir(parents=True)
    os.mkfifo(session / "host.xplane.pb")
    with pytest.raises(UserError) as e:
        api.profile(str(tmp_path / "run"))
    assert e.value.exit_code == 2
    assert f"{session / 'host.xplane.pb'} is not a regular file" in e.value.message


def test_a_local_trace_over_the_bound_is_refused_from_its_size_before_a_copy(tmp_path, monkeypatch):
    session = tmp_path / "run" / SESSION
    session.mkdir(parents=True)
    with open(session / "host.xplane.pb", "wb") as f:
        f.truncate(4 * BOUND)  # sparse
    monkeypatch.setattr(profile_trace, "MAX_TRACE_BYTES", BOUND)
    copied: list[str] = []
    copy = shutil.copyfile
    monkeypatch.setattr(shutil, "copyfile", lambda src, dst: copied.append(src) or copy(src, dst))
    with pytest.raises(UserError) as e:
        api.profile(str(tmp_path / "run"))
    assert copied == []  # its size said it: nothing was copied
    assert "is over 1.0 MiB" in e.value.message
