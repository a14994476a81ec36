"""A web page reads `vertex-trainer tensorboard`'s data through DNS rebinding (issue 42, H2 round 2).

TensorBoard listens on 127.0.0.1 only, but its server answers any Host: a page whose own name an
attacker points at 127.0.0.1 becomes same-origin with it and reads the run's curves, profiles
and file paths (`/data/environment` names the log folder). `serve` and the sandbox refuse a
foreign Host or Origin (round 1); TensorBoard did not. Now the command runs TensorBoard's main
behind the same check (performance/tensorboard_guard.py): 403 for a foreign Host or a foreign
page's Origin, TensorBoard's answer for this machine's clients. Checked against a real
TensorBoard, with raw requests naming the Host a rebinding page's browser sends.
"""

from __future__ import annotations

import http.client

import pytest

from vertex_trainer.performance.tensorboard_guard import refusal
from vertex_trainer.performance.tensorboard_server import start


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    served = start(str(tmp_path_factory.mktemp("logs")), port=0)
    yield served
    served.stop()


def _get(board, headers: dict[str, str]) -> tuple[int, bytes]:
    port = int(board.url.rstrip("/").rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.putrequest("GET", "/data/environment", skip_host=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "rebound.attacker.example:{port}"},
        {"Host": "127.0.0.1:{port}", "Origin": "http://attacker.example"},
        {},  # no Host at all
    ],
)
def test_a_foreign_host_or_page_is_refused(board, headers):
    port = board.url.rstrip("/").rsplit(":", 1)[1]
    status, body = _get(board, {k: v.format(port=port) for k, v in headers.items()})
    assert status == 403, body
    assert board.logdir.encode() not in body and b"refused" in body


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "127.0.0.1:{port}"},
        {"Host": "localhost:{port}"},
        {"Host": "127.0.0.1:{port}", "Origin": "http://127.0.0.1:{port}"},  # TensorBoard's own page
    ],
)
def test_this_machines_clients_get_tensorboards_answer(board, headers):
    port = board.url.rstrip("/").rsplit(":", 1)[1]
    status, body = _get(board, {k: v.format(port=port) for k, v in headers.items()})
    assert status == 200 and board.logdir.encode() in body


def test_the_check_itself():
    assert refusal("[::1]:6006", None) is None and refusal("127.0.0.2", "https://localhost:1") is None
    assert "DNS rebinding" in str(refusal("localhost.attacker.example:6006", None))
    assert "Origin" in str(refusal("localhost:6006", "null"))
