"""Hostile requests to `serve`'s prediction server (trainer/serve.py, trainer/http_body.py): every
body framing is bounded (Content-Length missing, negative, non-numeric, huge or twice; chunked
with negative, huge or malformed sizes, trailing garbage, endless trailers), JSON nesting and size
are bounded, every refusal is the contract's JSON error (never http.server's HTML page), and a bad
--port is exit 2 naming it (issue 41).

The server is the real PredictionServer in its own process (so its memory can be measured) with a
stand-in model: what is under test is the HTTP layer, which needs no TensorFlow. A 200 MiB body
sent behind a negative length is refused while the server's resident memory stays put."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.shared import ROOT, cli_runner
from trainer import serve

# The server under test: the real PredictionServer, default limits, a model that answers at once.
STUB = """
from trainer import serve

class Model:
    description = "stand-in"

    def predict(self, images):
        return [{"class": 0, "probabilities": [1.0]} for _ in images]

server = serve.PredictionServer(("127.0.0.1", 0))
server.model = Model()
server.settled.set()
print(server.port, flush=True)
server.serve_forever(poll_interval=0.05)
"""
MiB = 1 << 20
LIMIT = serve.Limits().max_body_bytes
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
    "0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
)
VALID = json.dumps({"instances": [{"b64": base64.b64encode(PNG).decode()}]}).encode()


class Server:
    def __init__(self, process: subprocess.Popen[str], port: int):
        self.process = process
        self.port = port

    def rss(self) -> int:
        """The server process's resident memory, in bytes (/proc/PID/status VmRSS)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    proc = subprocess.Popen(
        [sys.executable, "-c", STUB], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield Server(proc, port)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def exchange(
    port: int, head: bytes, body: bytes = b"", *, flood: int = 0, end: bool = False
) -> tuple[int, dict[str, str], dict]:
    """Send `head` (the request line and headers, CRLF-ended) and `body`, then `flood` more bytes
    from another thread (a 1 MiB block sent again and again: the client holds no copy), or with
    `end` nothing more (the sending side shut: a body cut short), and read the one answer:
    (status, headers, JSON)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        sock.sendall(head + body)
        if end:
            sock.shutdown(socket.SHUT_WR)
        if flood:

            def pump() -> None:
                block = b"x" * MiB
                try:
                    for _ in range(flood // MiB):
                        sock.sendall(block)
                    sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass  # the server refused and closed: what is expected

            threading.Thread(target=pump, daemon=True).start()
        response = http.client.HTTPResponse(sock)
        response.begin()
        raw = response.read()
        headers = {k.lower(): v for k, v in response.getheaders()}
        assert headers.get("content-type") == "application/json", (response.status, raw[:200])
        return response.status, headers, json.loads(raw)
    finally:
        sock.close()


def post(*headers: str) -> bytes:
    head = "POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(h + "\r\n" for h in headers)
    return (head + "\r\n").encode()


def test_a_200_mib_body_behind_a_negative_length_is_refused_without_being_read(server):
    before = server.rss()
    status, headers, answer = exchange(server.port, post("Content-Length: -1"), flood=200 * MiB)
    assert status == 400 and "Content-Length '-1'" in answer["error"], answer
    assert headers.get("connection") == "close"
    assert server.rss() - before < 8 * MiB, "the server read the body it refused"
    # and it keeps serving
    assert exchange(server.port, post(f"Content-Length: {len(VALID)}"), VALID)[0] == 200


def test_a_200_mib_chunked_body_behind_a_negative_chunk_size_is_refused(server):
    before = server.rss()
    head = post("Transfer-Encoding: chunked")
    status, _, answer = exchange(server.port, head, b"-1\r\n", flood=200 * MiB)
    assert status == 400 and "chunk size" in answer["error"], answer
    assert server.rss() - before < 8 * MiB, "the server read the body it refused"


@pytest.mark.parametrize(
    "value,status,message",
    [
        ("abc", 400, "Content-Length 'abc' is not a number of bytes"),
        ("1_000", 400, "Content-Length '1_000' is not a number of bytes"),
        ("+5", 400, "Content-Length '+5' is not a number of bytes"),
        ("0x10", 400, "Content-Length '0x10' is not a number of bytes"),
        ("99999999999999999999999", 413, "the request body is 99999999999999999999999 bytes"),
        (str(LIMIT + 1), 413, f"the request body is {LIMIT + 1} bytes; the limit is {LIMIT}"),
    ],
)
def test_content_lengths_that_are_not_a_size_within_the_limit(server, value, status, message):
    got, _, answer = exchange(server.port, post(f"Content-Length: {value}"), flood=4 * MiB)
    assert (got, answer["error"][: len(message)]) == (status, message), answer


def test_framings_that_disagree_or_are_not_supported(server):
    assert exchange(server.port, post())[:1] == (411,)
    status, _, answer = exchange(server.port, post("Content-Length: 5", "Content-Length: 6"), b"{}")
    assert status == 400 and "Content-Length given twice" in answer["error"]
    status, _, answer = exchange(server.port, post("Content-Length: 2", "Transfer-Encoding: chunked"), b"{}")
    assert status == 400 and "both Transfer-Encoding and Content-Length" in answer["error"]
    status, _, answer = exchange(server.port, post("Transfer-Encoding: gzip, chunked"), b"0\r\n\r\n")
    assert status == 501 and "Transfer-Encoding 'gzip, chunked'" in answer["error"]


def test_a_body_shorter_than_its_length_is_400(server):
    status, _, answer = exchange(server.port, post("Content-Length: 100"), b'{"instances": []}', end=True)
    assert status == 400 and answer["error"].startswith("the body ended after 17 of the 100 bytes")


@pytest.mark.parametrize(
    "body,status,message",
    [
        (b"0x10\r\n" + b"x" * 16 + b"\r\n0\r\n\r\n", 400, "bad chunk size line"),
        (b"+10\r\n" + b"x" * 16 + b"\r\n0\r\n\r\n", 400, "bad chunk size line"),
        (b"1_0\r\n" + b"x" * 16 + b"\r\n0\r\n\r\n", 400, "bad chunk size line"),
        (b"10" + b" " * 2000 + b"\r\n", 400, "bad chunk size line"),
        (b"FFFFFFFFFFFFFFFF\r\n", 413, "the request body exceeds the limit"),
        (b"5\r\n{}{}{}{}\r\n0\r\n\r\n", 400, "bad chunked body: no CRLF after a chunk"),
        (b"2\r\n{}\r\n0\r\n" + b"X-Trailer: y\r\n" * 2000, 400, "bad chunked body: trailers longer than"),
    ],
    ids=["0x-prefix", "plus-sign", "underscore", "endless-size-line", "huge-size", "garbage", "trailers"],
)
def test_chunked_bodies_that_are_malformed_or_too_large(server, body, status, message):
    got, headers, answer = exchange(server.port, post("Transfer-Encoding: chunked"), body)
    assert (got, answer["error"][: len(message)]) == (status, message), answer
    assert headers.get("connection") == "close"


def test_a_chunked_body_cut_short_is_400(server):
    status, _, answer = exchange(
        server.port, post("Transfer-Encoding: chunked"), b"100\r\n" + b"x" * 10, end=True
    )
    assert status == 400 and answer["error"].startswith("bad chunked body: it ended inside a chunk")


def test_trailing_garbage_after_a_request_is_answered_in_json(server):
    status, _, _ = exchange(server.port, post(f"Content-Length: {len(VALID)}"), VALID)
    assert status == 200
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        sock.sendall(post(f"Content-Length: {len(VALID)}") + VALID + b"\x00\xffgarbage\r\n\r\n")
        received = b""
        while data := sock.recv(65536):  # both answers, then the close the refusal asks for
            received += data
    finally:
        sock.close()
    answers = []
    while received:
        head, _, rest = received.partition(b"\r\n\r\n")
        length = int(re.search(rb"Content-Length: (\d+)", head)[1])
        is_json = b"Content-Type: application/json" in head
        answers.append((head.split()[1], is_json, json.loads(rest[:length])))
        received = rest[length:]
    assert [(status, is_json) for status, is_json, _ in answers] == [(b"200", True), (b"400", True)]
    assert answers[0][2]["predictions"] and set(answers[1][2]) == {"error"}


def test_deep_or_huge_json_is_400_not_500(server):
    deep = b"[" * 100_000 + b"]" * 100_000
    status, _, answer = exchange(server.port, post(f"Content-Length: {len(deep)}"), deep)
    assert status == 400 and "more than 65536 values" in answer["error"], answer
    nested = b'{"instances": ' + b"[" * 900 + b"]" * 900 + b"}"
    status, _, answer = exchange(server.port, post(f"Content-Length: {len(nested)}"), nested)
    assert status == 400 and "nests more than 32 levels" in answer["error"], answer
    many = b'{"instances": [' + b",".join([b"[]"] * 70_000) + b"]}"
    status, _, answer = exchange(server.port, post(f"Content-Length: {len(many)}"), many)
    assert status == 400 and "more than 65536 values" in answer["error"], answer


@pytest.mark.parametrize(
    "method,path,status,allow",
    [
        ("PUT", "/predict", 405, "POST"),
        ("DELETE", "/predict", 405, "POST"),
        ("PATCH", "/health", 405, "GET"),
        ("OPTIONS", "/health", 405, "GET"),
        ("BREW", "/predict", 405, "POST"),
        ("PUT", "/elsewhere", 404, None),
    ],
)
def test_other_methods_are_the_contracts_json_never_html(server, method, path, status, allow):
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n".encode()
    got, headers, answer = exchange(server.port, head, b"{}")
    assert got == status and headers.get("allow") == allow and set(answer) == {"error"}, answer


def test_malformed_requests_are_json_too(server):
    for head in (
        b"NONSENSE\r\n\r\n",
        b"GET /health HTTP/9.9\r\n\r\n",
        b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",
    ):
        status, _, answer = exchange(server.port, head)
        assert status in (400, 414, 505) and set(answer) == {"error"}, (head[:20], answer)


def test_head_gets_no_body(server):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        sock.sendall(b"HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        response = http.client.HTTPResponse(sock, method="HEAD")
        response.begin()
        assert response.status == 405 and response.getheader("Allow") == "GET"
        assert response.read() == b""
    finally:
        sock.close()


def test_expect_100_continue_is_refused_before_the_body_is_sent(server):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        sock.sendall(post(f"Content-Length: {LIMIT + 1}", "Expect: 100-continue"))
        response = http.client.HTTPResponse(sock)
        response.begin()  # no "100 Continue" first: the final answer
        assert response.status == 413 and "limit" in json.loads(response.read())["error"]
    finally:
        sock.close()


# -- --port --------------------------------------------------------------------------------------


def test_cli_serve_port_out_of_range_is_exit_2_naming_it(tmp_path):
    run = cli_runner(dict(os.environ))
    proc = run("serve", str(tmp_path), "--port", "99999")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--port" in proc.stderr and "99999" in proc.stderr


def test_api_and_the_container_refuse_a_port_out_of_range():
    from vertex_trainer import api
    from vertex_trainer.errors import UserError
    from vertex_trainer.settings import Settings

    with pytest.raises(UserError, match=r"port 99999 is not a port number \(0 to 65535\)"):
        api.serve_model("/nowhere", port=99999)
    with pytest.raises(UserError, match=r"AIP_HTTP_PORT='-1' is not a port number \(0 to 65535\)"):
        api.serve_model("/nowhere", settings=Settings.from_environ({"AIP_HTTP_PORT": "-1"}))
    with pytest.raises(serve.ServeError, match="port 99999 is not a port number"):
        serve.serve("/nowhere", port=99999)


def test_the_containers_entrypoint_refuses_a_port_out_of_range(capsys):
    with pytest.raises(SystemExit) as exit_:
        serve.main(["/some/model", "--port", "99999"], environ={})
    assert exit_.value.code == 2 and "--port: 99999 is not a port number" in capsys.readouterr().err
    assert serve.main(["/some/model"], environ={"AIP_HTTP_PORT": "70000"}) == 2
    assert capsys.readouterr().err == "error: AIP_HTTP_PORT='70000' is not a port number (0 to 65535)\n"


# -- who may ask (a server on loopback) ----------------------------------------------------------


def _asked(port: int, method: str, path: str, *headers: str) -> tuple[int, dict]:
    body = VALID if method == "POST" else b""
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(h + "\r\n" for h in headers)
    head += f"Content-Length: {len(body)}\r\n\r\n"
    status, _, answer = exchange(port, head.encode(), body)
    return status, answer


@pytest.mark.parametrize(
    "headers",
    [
        ("Host: rebind.attacker.example:8080",),  # DNS rebinding: a page's name now points here
        ("Host: 127.0.0.1.attacker.example",),
        ("Host: 127.attacker.example",),
        ("Host: 127.0.0.1", "Origin: https://attacker.example"),  # another site's page
        ("Host: 127.0.0.1", "Origin: null"),  # a sandboxed frame or a file:// page
    ],
)
def test_a_browser_request_from_elsewhere_is_refused_on_loopback(server, headers):
    for method, path in (("GET", "/health"), ("POST", "/predict")):
        status, answer = _asked(server.port, method, path, *headers)
        assert status == 403, (method, headers, answer)
        assert "answers only on 127.0.0.1" in answer["error"] and "predictions" not in answer


@pytest.mark.parametrize(
    "headers",
    [
        ("Host: 127.0.0.1",),
        (f"Host: localhost:{LIMIT % 1000}",),
        ("Host: [::1]:8080",),
        ("Host: 127.0.0.2",),
        ("Host: 127.0.0.1", "Origin: http://localhost:6006"),  # a page served on this machine
        (),  # no Host at all: not a browser (HTTP/1.0 clients, probes)
    ],
)
def test_this_machines_clients_are_answered(server, headers):
    assert _asked(server.port, "GET", "/health", *headers) == (200, {"status": "ready"})
    status, answer = _asked(server.port, "POST", "/predict", *headers)
    assert status == 200 and answer["predictions"], answer


def test_only_a_loopback_server_checks_who_asks():
    """In the container Vertex AI's front end is the client, whatever Host it names."""
    assert serve._loopback("127.0.0.1") and serve._loopback("::1") and serve._loopback("localhost")
    assert not serve._loopback("0.0.0.0") and not serve._loopback("") and not serve._loopback("10.0.0.2")
