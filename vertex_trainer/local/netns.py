"""One private network for the replicas of a local run: loopback only, shared by them (issue 41).

Why: TensorFlow's worker servers listen on every interface. Its gRPC server builds the listening
address as `"0.0.0.0:" + port` (tensorflow/core/distributed_runtime/rpc/grpc_server_lib.cc,
`GrpcServer::Init`), whatever host TF_CONFIG names; no ServerDef, RPCOptions or environment
variable changes it (only the port, and TF_GRPC_REUSE_PORT). Unauthenticated, anyone on the
network could reach two replicas training here.

How: the replicas of a run with more than one replica run in one network namespace of their own,
in which only `lo` exists and is up: their servers listen there, and nothing outside the
namespace can connect to them. A small holder process makes the namespace (util-linux's
`unshare --net`; without root, inside a user namespace of its own: `--user --map-current-user
--keep-caps`) and each replica enters it (`nsenter --target HOLDER --net`). What the replicas need beyond each
other goes through this process, which stays outside:

* every loopback service their environment names (`STORAGE_EMULATOR_HOST`, the Cloud Storage
  emulator's TLS proxy in `https_proxy`, a stand-in's endpoint, ...) is relayed: the holder binds
  the same address and port inside the namespace and hands the listening sockets over (SCM_RIGHTS);
  this process accepts on them and connects to the real service;
* HTTPS to anywhere else: when the environment names no proxy, `https_proxy` is set to a CONNECT
  proxy relayed the same way (the connection is made here), so Cloud Storage with your
  credentials, token refreshes and `https://` downloads work; plain DNS, `http://` and other
  protocols do not leave the namespace.

Where the machine offers no namespace (no util-linux, no user namespaces) or the user asked for
this machine's network (`VERTEX_TRAINER_REPLICA_NETWORK=host`), the replicas run as before and
the run starts with one line saying their servers are reachable from the network, and why.
"""

from __future__ import annotations

import functools
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vertex_trainer.local.cluster import LOOPBACK, Replica, free_ports, keep_loopback_off_proxies
from vertex_trainer.local.supervisor import die_with_parent

PRIVATE, HOST = "private", "host"
# Keys whose loopback addresses are the cluster's own (the replicas' servers), not services.
_CLUSTER_KEYS = ("CLUSTER_SPEC", "TF_CONFIG")
_PROXY_KEYS = (
    "https_proxy",
    "HTTPS_PROXY",
    "http_proxy",
    "HTTP_PROXY",
    "grpc_proxy",
    "all_proxy",
    "ALL_PROXY",
)
_LOOPBACK_ADDRESS = re.compile(r"(?:^|[/@,=\s])(127\.0\.0\.1|localhost|\[::1\]):(\d{1,5})(?![\d])")
_ANY_HOST = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?(?:[^@/]*@)?(\[[^\]]*\]|[^:/]+)", re.IGNORECASE)
_CONNECT_TIMEOUT_S = 30.0
_HOLDER_START_S = 30.0

# Run inside the new namespace: `lo` up, a listening socket per ADDRESS:PORT argument handed to
# the runner through the inherited Unix socket (fd in argv[1]), then wait until the runner closes
# its end (it ended, or was killed): the namespace lives as long as this process or a replica.
_HOLDER = r"""
import fcntl, socket, struct, sys
channel = socket.socket(fileno=int(sys.argv[1]))
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
request = struct.pack("16sH14x", b"lo", 0)
flags = struct.unpack("16sH14x", fcntl.ioctl(probe, 0x8913, request))[1]  # SIOCGIFFLAGS
fcntl.ioctl(probe, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))  # SIOCSIFFLAGS: IFF_UP
listeners, bound = [], []
for i, arg in enumerate(sys.argv[2:]):
    host, port = arg.rsplit(":", 1)
    host = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, int(port)))
    except OSError:  # ::1 where the namespace has no IPv6: that address is not relayed
        sock.close()
        continue
    sock.listen(128)
    listeners.append(sock)
    bound.append(str(i))
socket.send_fds(channel, [("ready " + ",".join(bound)).encode()], [s.fileno() for s in listeners])
channel.recv(1)
"""


@functools.cache
def unavailable() -> str | None:
    """Why this machine cannot give replicas a private network (None: it can). Probed once."""
    return _probe()[1]


@functools.cache
def _probe() -> tuple[tuple[str, ...], str | None]:
    """(the `unshare` options that work here, why none does)."""
    if not sys.platform.startswith("linux"):
        return (), "network namespaces are Linux's"
    for tool in ("unshare", "nsenter"):
        if shutil.which(tool) is None:
            return (), f"util-linux's {tool} is not installed"
    choices: list[tuple[str, ...]] = [("--net",)] if os.geteuid() == 0 else []
    # Without root: a user namespace of its own, in which the holder keeps the capabilities that
    # bring lo up (--keep-caps; the replicas keep your uid), else (older util-linux) maps you to
    # root there (the replicas then see uid 0).
    choices += [
        ("--user", "--map-current-user", "--keep-caps", "--net"),
        ("--user", "--map-root-user", "--net"),
    ]
    said = ""
    for options in choices:
        try:
            done = subprocess.run(
                ["unshare", *options, "--", "true"], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            said = str(exc)
            continue
        if done.returncode == 0:
            return options, None
        said = done.stderr.strip()[:200] or f"exit {done.returncode}"
    return (), f"unshare --net is not allowed here ({said}); user namespaces may be disabled"


def services(replicas: Sequence[Replica]) -> list[tuple[str, int]]:
    """The loopback services the replicas' environment names (address, port), in order, without
    the cluster's own ports: what a private network must relay."""
    own = {int(r.address.rsplit(":", 1)[1]) for r in replicas if ":" in r.address}
    found: dict[tuple[str, int], None] = {}
    for rep in replicas:
        for key, value in rep.env.items():
            if key in _CLUSTER_KEYS:
                continue
            for m in _LOOPBACK_ADDRESS.finditer(value):
                port = int(m[2])
                if 0 < port < 65536 and port not in own:
                    hosts = ("127.0.0.1", "::1") if m[1] == "localhost" else (m[1].strip("[]"),)
                    for host in hosts:
                        found[(host, port)] = None
    return list(found)


def _foreign_proxy(env: Mapping[str, str]) -> str | None:
    """A proxy the environment names beyond loopback (which the namespace could not reach)."""
    for key in _PROXY_KEYS:
        value = (env.get(key) or "").strip()
        m = _ANY_HOST.match(value) if value else None
        if m and m[1].strip("[]").lower() not in LOOPBACK:
            return f"{key}={value}"
    return None


@dataclass(frozen=True)
class Choice:
    """How a run's replicas are networked: `private` (a namespace of their own) or `host`, with
    the line to show at start (None: nothing to say)."""

    mode: str
    line: str | None = None


def choose(replicas: Sequence[Replica], requested: str = PRIVATE) -> Choice:
    """The network for `replicas`: private when they are more than one (a cluster: their servers
    listen) and the machine allows it; otherwise this machine's, with the warning line when they
    are a cluster. `requested` is the user's setting (Settings.replica_network)."""
    if len(replicas) < 2:
        return Choice(HOST)  # one replica runs no cluster server (docs/local.md)
    ports = ", ".join(r.address for r in replicas)
    why = None
    if requested == HOST:
        why = "VERTEX_TRAINER_REPLICA_NETWORK=host gives them this machine's network"
    elif (proxy := _foreign_proxy(replicas[0].env)) is not None:
        why = f"they need the proxy of their environment ({proxy}), which a private network cannot reach"
    elif (reason := unavailable()) is not None:
        why = f"this machine offers no private network namespace: {reason}"
    if why is None:
        return Choice(PRIVATE)
    return Choice(
        HOST,
        f"warning: the replicas' TensorFlow servers ({ports}) listen on every network interface of "
        f"this machine, unauthenticated, so the network can reach them: {why} "
        "(docs/local.md, Loopback-only workers)",
    )


@dataclass
class Network:
    """The private network of one run: `start()` makes it, `wrap(argv)` runs a replica in it,
    `stop()` ends the relays and the holder (the namespace goes with its last process).

    `relayed`: the loopback services (address, port) the replicas reach through it; `connect`:
    the port of the CONNECT proxy inside (None: none, the environment names its own proxy)."""

    relayed: Sequence[tuple[str, int]] = ()
    connect: int | None = None
    _holder: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _channel: socket.socket | None = field(default=None, init=False, repr=False)
    _listeners: list[socket.socket] = field(default_factory=list, init=False, repr=False)
    _open: set[socket.socket] = field(default_factory=set, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def pid(self) -> int:
        assert self._holder is not None, "start() first"
        return self._holder.pid

    def start(self) -> Network:
        """Make the namespace and the relays; RuntimeError when the holder cannot start."""
        options, why = _probe()
        if why is not None:
            raise RuntimeError(why)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        wanted = list(self.relayed)
        if self.connect is not None:
            wanted.append(("127.0.0.1", self.connect))
        argv = [
            "unshare",
            *options,
            "--",
            sys.executable,
            "-c",
            _HOLDER,
            str(theirs.fileno()),
            *(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in wanted),
        ]
        try:
            self._holder = subprocess.Popen(
                argv,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                preexec_fn=die_with_parent(os.getpid()),
            )
        finally:
            theirs.close()
        self._channel = ours
        ours.settimeout(_HOLDER_START_S)
        try:
            message, fds, _, _ = socket.recv_fds(ours, 4096, max(1, len(wanted)))
        except OSError as exc:
            message, fds = b"", []
            error = str(exc)
        else:
            error = ""
        # "ready I,J,...": the indexes of `wanted` bound (an IPv6 one may be missing: no IPv6).
        word, _, indexes = message.decode("ascii", "replace").partition(" ")
        bound = [wanted[int(i)] for i in indexes.split(",") if i.isdigit() and int(i) < len(wanted)]
        required = {w for w in wanted if w[0] != "::1"}
        if word != "ready" or len(fds) != len(bound) or not required <= set(bound):
            for fd in fds:
                os.close(fd)
            said = self._end_holder()
            raise RuntimeError(f"the replicas' private network did not start: {said or error or 'no answer'}")
        for (host, port), fd in zip(bound, fds, strict=True):
            listener = socket.socket(fileno=fd)
            self._listeners.append(listener)
            target = None if (host, port) == ("127.0.0.1", self.connect) else (host, port)
            threading.Thread(
                target=self._accept, args=(listener, target), daemon=True, name=f"relay-{port}"
            ).start()
        return self

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the namespace (nsenter execs it: the process is the replica's)."""
        user = ["--user", "--preserve-credentials"] if "--user" in _probe()[0] else []
        return ["nsenter", f"--target={self.pid}", *user, "--net", "--", *argv]

    def stop(self) -> None:
        """Close the relays (open connections included) and end the holder."""
        for listener in self._listeners:
            _close(listener)
        with self._lock:
            for sock in list(self._open):
                _close(sock)
            self._open.clear()
        self._listeners.clear()
        self._end_holder()

    def __enter__(self) -> Network:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the relays ------------------------------------------------------------------------
    def _end_holder(self) -> str:
        """Close the channel (the holder's signal to exit), reap it; its last error line."""
        if self._channel is not None:
            _close(self._channel)
            self._channel = None
        err = b""
        if self._holder is not None:
            try:
                _, err = self._holder.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self._holder.kill()
                _, err = self._holder.communicate()
            self._holder = None
        lines = (err or b"").decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""

    def _accept(self, listener: socket.socket, target: tuple[str, int] | None) -> None:
        """Relay each connection to `target`; None: the CONNECT proxy (the target is asked). Ends
        when stop() closes `listener` (accept() then raises)."""
        while True:
            try:
                inside, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(inside, target), daemon=True).start()

    def _relay(self, inside: socket.socket, target: tuple[str, int] | None) -> None:
        proxy = target is None
        outside = None
        self._track(inside)
        try:
            target = _read_connect(inside) if target is None else target
            if target is None:
                return
            try:
                outside = socket.create_connection(target, timeout=_CONNECT_TIMEOUT_S)
            except OSError as exc:
                if proxy:
                    _answer(inside, 502, f"cannot connect to {target[0]}:{target[1]}: {exc}")
                return
            outside.settimeout(None)
            self._track(outside)
            if proxy:
                inside.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _pump(inside, outside)
        except OSError:
            pass
        finally:
            for sock in (inside, outside):
                if sock is not None:
                    self._untrack(sock)
                    _close(sock)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)


def _read_connect(sock: socket.socket) -> tuple[str, int] | None:
    """`CONNECT host:port HTTP/1.1` and its headers, read to the blank line: (host, port); any
    other request is answered 405 (None)."""
    data = b""
    sock.settimeout(_CONNECT_TIMEOUT_S)
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    sock.settimeout(None)
    parts = data.split(b"\r\n", 1)[0].decode("latin-1").split()
    if len(parts) == 3 and parts[0].upper() == "CONNECT" and ":" in parts[1]:
        host, _, port = parts[1].rpartition(":")
        if port.isdigit():
            return host.strip("[]"), int(port)
    _answer(sock, 405, "only CONNECT (https_proxy) leaves the replicas' private network")
    return None


def _answer(sock: socket.socket, status: int, text: str) -> None:
    """A proxy's own short answer, then the connection closes."""
    reason = {405: "Method Not Allowed", 502: "Bad Gateway"}[status]
    body = text.encode() + b"\n"
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    try:
        sock.sendall(head.encode() + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    except OSError:
        pass


def _pump(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until both sides have closed (a half-close is passed on)."""
    open_ends = {a: b, b: a}
    while open_ends:
        ready, _, _ = select.select(list(open_ends), [], [])
        for src in ready:
            dst = open_ends[src]
            data = src.recv(65536)
            if data:
                dst.sendall(data)
                continue
            del open_ends[src]
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept() or recv()
    except OSError:
        pass
    sock.close()


def prepare(
    replicas: Sequence[Replica], requested: str = PRIVATE
) -> tuple[list[Replica], Network | None, Choice]:
    """The replicas as they will run, their private network (not started; None: this machine's),
    and the choice made (its line is shown at start).

    In a private network a replica's environment gets `https_proxy` (the CONNECT relay) when it
    names no proxy of its own; `no_proxy` already keeps loopback direct (cluster.build_replicas)."""
    choice = choose(replicas, requested)
    if choice.mode != PRIVATE:
        return list(replicas), None, choice
    relayed = services(replicas)
    connect = None
    if not any((replicas[0].env.get(k) or "").strip() for k in _PROXY_KEYS):
        taken = {p for _, p in relayed}
        connect = next(p for p in free_ports(len(taken) + 1) if p not in taken)
    network = Network(relayed=relayed, connect=connect)
    out = []
    for rep in replicas:
        env: dict[str, Any] = dict(rep.env)
        if connect is not None:
            env["https_proxy"] = env["HTTPS_PROXY"] = f"http://127.0.0.1:{connect}"
            keep_loopback_off_proxies(env)
        out.append(replace(rep, env=env))
    return out, network, choice
