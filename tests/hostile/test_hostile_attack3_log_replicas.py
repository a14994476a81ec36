"""A job's log lines are shown escaped (test_hostile_attack_log_escapes.py), but the replica name
in front of each was not: on Vertex AI it is the log entry's `resource.labels.task_name`, which
whoever writes the entry sets (a job's code writing to Cloud Logging itself, anyone who may write
the project's logs), and here the name of a log file in a run's records. A name holding ESC ] 52
wrote the terminal's clipboard from `logs`, `submit/status --wait` and the failure's "its last
lines" heading. It is now shown escaped there too; `-o json` keeps it.
"""

from __future__ import annotations

import io
import json

import pytest

from tests.cli_support import edge_env
from tests.shared import IMAGE, server_fixture
from tests.shared import job_body as make_job_body
from vertex_trainer.contract import Failure, LogEntry
from vertex_trainer.emulators.logging import FakeLogging
from vertex_trainer.present import logs

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"
REPLICA = f"workerpool0-0{CLIPBOARD}"
SHOWN = "workerpool0-0\\x1b]52;c;cm0gLXJmIH4K\\x07"

logging_fake = server_fixture("logging_fake", FakeLogging)


@pytest.fixture
def cli_env(fake, logging_fake, tmp_path) -> dict[str, str]:
    return edge_env(
        tmp_path,
        VERTEX_TRAINER_API_ENDPOINT=fake.url,
        VERTEX_TRAINER_LOGGING_ENDPOINT=logging_fake.url,
        VERTEX_TRAINER_RETRY="attempts=5,initial=0.01,maximum=0.05,deadline=10,read_timeout=5",
    )


@pytest.mark.wire
def test_logs_shows_an_entrys_replica_name_escaped(fake, logging_fake, run_cli):
    fake.set_script(["JOB_STATE_SUCCEEDED"])
    job = fake.add_job(make_job_body("k1", "s1", name="logs-job", image=IMAGE, timeout="3600s"))
    logging_fake.add(job["name"].rsplit("/", 1)[1], "epoch 1 done", replica=REPLICA)
    shown = run_cli("logs", job["name"])
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [f"[{SHOWN}] epoch 1 done"]
    as_json = run_cli("logs", job["name"], "-o", "json")
    assert [json.loads(line)["replica"] for line in as_json.stdout.splitlines()] == [REPLICA]


def test_the_wait_view_shows_replica_names_escaped():
    from rich.console import Console

    out = io.StringIO()

    class _Job:
        id = "123"

    view = logs.FollowView(Console(file=out, width=400, force_terminal=False), _Job())
    with view:
        view.show(LogEntry("t", REPLICA, "epoch 1 done"))
        view.failure(Failure("boom", REPLICA, ("Traceback",)))
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text, repr(text)
    assert f"{SHOWN} | epoch 1 done" in text and f"{SHOWN}: its last lines:" in text
