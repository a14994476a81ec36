"""Nothing the tool opens listens beyond loopback (issue 41, docs/security-notes/listening.md).

TensorFlow's gRPC server binds `0.0.0.0:PORT` whatever TF_CONFIG says (grpc_server_lib.cc), so a
local run's replicas share a private network (vertex_trainer/local/netns.py): here replicas that
bind exactly so (the wildcard, at their TF_CONFIG port) are looked at from this process's network
(the machine's) and from theirs. Where the machine has no private network, the run says so."""

from __future__ import annotations

import dataclasses
import io
import os
import textwrap
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.local.conftest import custom_job, local_settings, python_command, worker_pool
from tests.process_support import processes_with_env, tcp_listeners
from vertex_trainer.errors import UserError
from vertex_trainer.local import SUCCEEDED, netns, run_local
from vertex_trainer.settings import Settings

# A replica that listens as TensorFlow's worker server does: gRPC's "0.0.0.0:PORT" is the
# dual-stack wildcard [::] (else 0.0.0.0), at the port TF_CONFIG gives it; then it reaches its
# peers (the cluster's own ports).
LISTEN_AS_TF = textwrap.dedent("""
    import json, os, socket, time, urllib.request
    cfg = json.loads(os.environ["TF_CONFIG"])
    me = cfg["cluster"][cfg["task"]["type"]][cfg["task"]["index"]]
    port = int(me.rsplit(":", 1)[1])
    try:
        server = socket.socket(socket.AF_INET6)
        server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        server.bind(("::", port))
    except OSError:
        server = socket.socket(socket.AF_INET)
        server.bind(("0.0.0.0", port))
    server.listen()
    peers = [a for addrs in cfg["cluster"].values() for a in addrs if a != me]
    for peer in peers:
        host, p = peer.rsplit(":", 1)
        for _ in range(500):
            try:
                socket.create_connection((host, int(p)), timeout=5).close()
                break
            except OSError:
                time.sleep(0.01)
        else:
            raise SystemExit("peer unreachable: " + peer)
""")
# Then the service its environment names (VT_SERVICE) and, through https_proxy, a server of
# this machine by CONNECT (VT_OUTSIDE); then it waits for the test's go-ahead (VT_GO).
REPLICA = LISTEN_AS_TF + textwrap.dedent("""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    said = opener.open(os.environ["VT_SERVICE"], timeout=10).read().decode()
    proxy = os.environ.get("https_proxy", "")
    tunnel = "none"
    if proxy.startswith("http://127.0.0.1:"):
        c = socket.create_connection(("127.0.0.1", int(proxy.rsplit(":", 1)[1])), timeout=10)
        c.sendall(("CONNECT 127.0.0.1:%s HTTP/1.1\\r\\n\\r\\n" % os.environ["VT_OUTSIDE"]).encode())
        assert c.recv(4096).startswith(b"HTTP/1.1 200"), "CONNECT refused"
        c.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        answer = b""
        while chunk := c.recv(4096):
            answer += chunk
        tunnel = answer.decode().rsplit("\\n", 1)[-1]
    print("listening", port, "service=" + said, "tunnel=" + tunnel, flush=True)
    while not os.path.exists(os.environ["VT_GO"]):
        time.sleep(0.01)
""")


@pytest.fixture
def marker() -> str:
    """A per-test token in the replicas' environment: finds their processes in /proc."""
    return f"VT_TEST_{uuid.uuid4().hex}"


class _Answer(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        data = self.server.word.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def loopback_server():
    """A server of this machine on 127.0.0.1 answering a word: `(url, port)`."""

    def start(word: str) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
        server.word = word
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server

    servers: list[ThreadingHTTPServer] = []
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def listening(table_dir: str = "/proc/self/net") -> dict[int, set[str]]:
    """port -> the addresses listening on it, in the network namespace `table_dir` belongs to."""
    found: dict[int, set[str]] = {}
    for address, port, _ in tcp_listeners(table_dir):
        found.setdefault(port, set()).add(address)
    return found


def interfaces_of(pid: int) -> list[str]:
    """The network interfaces of `pid`'s network namespace (/proc/PID/net/dev)."""
    return [row.split(":")[0].strip() for row in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]]


LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def _two_replica_run(tmp_path, marker, service, outside, network="private"):
    """Run two REPLICAs; when both listen, look at the sockets; returns (result, what was seen, log)."""
    go = tmp_path / "go"
    job = custom_job(
        str(tmp_path / "out"),
        [worker_pool(command=python_command(REPLICA)), worker_pool(command=python_command(REPLICA))],
    )
    seen: dict = {"lines": []}

    def on_lines(batch):
        seen["lines"] += [line for _, line in batch if line.startswith("listening")]
        if len(seen["lines"]) == 2 and "host" not in seen:
            pids = processes_with_env(marker)
            seen["host"] = listening()
            seen["replicas"] = {pid: listening(f"/proc/{pid}/net") for pid in pids}
            seen["interfaces"] = {pid: interfaces_of(pid) for pid in pids}
            seen["netns"] = {os.readlink(f"/proc/{pid}/ns/net") for pid in pids}
            go.write_text("go")

    from rich.console import Console

    buf = io.StringIO()
    settings = local_settings(VT_GO=str(go), VT_SERVICE=service, VT_OUTSIDE=str(outside), **{marker: "1"})
    settings = dataclasses.replace(settings, replica_network=network)
    result = run_local(job, None, settings=settings, console=Console(file=buf, width=400), on_lines=on_lines)
    return result, seen, buf.getvalue()


@pytest.mark.wire
@pytest.mark.skipif(netns.unavailable() is not None, reason=f"no private network here: {netns.unavailable()}")
def test_two_replicas_listening_on_every_interface_are_reachable_only_from_each_other(
    tmp_path, marker, loopback_server
):
    service = loopback_server("emulator")
    outside = loopback_server("outside")
    url = f"http://127.0.0.1:{service.server_address[1]}/"
    result, seen, log = _two_replica_run(tmp_path, marker, url, outside.server_address[1])
    assert result.state == SUCCEEDED, log
    ports = sorted(int(line.split()[1]) for line in seen["lines"])
    # This machine's network: nothing listens on the replicas' ports (nor anywhere but loopback
    # for them); theirs: the wildcard they bound, in a namespace whose only interface is lo.
    assert not [p for p in ports if p in seen["host"]], seen["host"]
    for pid, table in seen["replicas"].items():
        assert {p for p in ports if p in table}, table
        assert seen["interfaces"][pid] == ["lo"], seen["interfaces"]
    assert len(seen["netns"]) == 1 and os.readlink("/proc/self/ns/net") not in seen["netns"]
    # What they need still works: each other, the service their environment names (relayed),
    # and a CONNECT through the run's proxy to this machine's server.
    assert all("service=emulator" in line and "tunnel=outside" in line for line in seen["lines"]), seen
    assert "warning" not in log
    assert processes_with_env(marker) == []


@pytest.mark.wire
def test_on_this_machines_network_the_run_says_the_servers_are_reachable(tmp_path, marker, loopback_server):
    """VERTEX_TRAINER_REPLICA_NETWORK=host (or no namespace on the machine): the wildcard is this
    machine's, and the run's first line says so, naming the ports and why."""
    service = loopback_server("emulator")
    url = f"http://127.0.0.1:{service.server_address[1]}/"
    result, seen, log = _two_replica_run(tmp_path, marker, url, 1, network="host")
    assert result.state == SUCCEEDED, log
    ports = sorted(int(line.split()[1]) for line in seen["lines"])
    assert all(seen["host"][p] - LOOPBACK for p in ports), seen["host"]  # the machine's wildcard
    first = log.splitlines()[0]
    assert first.startswith("warning: the replicas' TensorFlow servers (127.0.0.1:")
    assert "listen on every network interface" in first and "VERTEX_TRAINER_REPLICA_NETWORK=host" in first
    assert processes_with_env(marker) == []


def test_the_replica_network_setting_is_read_at_the_edge_and_checked():
    assert Settings.from_environ({}).replica_network == "private"
    assert Settings.from_environ({"VERTEX_TRAINER_REPLICA_NETWORK": "host"}).replica_network == "host"
    with pytest.raises(UserError) as refused:
        Settings.from_environ({"VERTEX_TRAINER_REPLICA_NETWORK": "public"})
    assert "VERTEX_TRAINER_REPLICA_NETWORK='public'" in str(refused.value)
    assert "private, host" in refused.value.hint


@pytest.mark.parametrize("command", ["fake-vertex", "fake-logging"])
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
def test_a_stand_in_is_never_started_beyond_loopback(command, host):
    """`dev fake-vertex --host 0.0.0.0`: exit 2 naming the flag, nothing started (a stand-in runs
    what it is sent, without credentials)."""
    from tests.shared import cli_runner

    run = cli_runner(dict(os.environ))
    done = run("dev", command, "--host", host, "--port", "0")
    assert done.returncode == 2, done.stderr
    assert f"--host {host}: a stand-in listens on this machine's loopback only" in done.stderr
    assert "--host 127.0.0.1" in done.stderr


def test_the_services_relayed_into_the_network_are_the_loopback_ones_the_environment_names():
    from vertex_trainer.local.cluster import Replica

    env = {
        "STORAGE_EMULATOR_HOST": "http://127.0.0.1:9023",
        "https_proxy": "http://127.0.0.1:9024",
        "VERTEX_TRAINER_API_ENDPOINT": "http://localhost:8765/",
        "OTHER": "user@[::1]:7000,gs://bucket/x,127.0.0.10:80,example.com:443",
        "TF_CONFIG": '{"cluster": {"chief": ["127.0.0.1:5000"]}}',
    }
    replicas = [
        Replica(0, 0, "127.0.0.1:5000", ("python",), env),
        Replica(1, 0, "127.0.0.1:5001", ("python",), {**env, "PEER": "127.0.0.1:5001"}),
    ]
    assert netns.services(replicas) == [
        ("127.0.0.1", 9023),
        ("127.0.0.1", 9024),
        ("127.0.0.1", 8765),
        ("::1", 8765),  # localhost may resolve to either
        ("::1", 7000),
    ]  # never the cluster's own ports, nor another host
    one = netns.choose(replicas[:1])
    assert one.mode == netns.HOST and one.line is None  # one replica: no cluster server, nothing to say
    behind = [
        Replica(r.pool, r.index, r.address, r.argv, {"https_proxy": "http://proxy.corp:3128"})
        for r in replicas
    ]
    chosen = netns.choose(behind)
    assert chosen.mode == netns.HOST and "https_proxy=http://proxy.corp:3128" in (chosen.line or "")
