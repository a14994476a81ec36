"""What a task of Vertex AI Pipelines reaches, on loopback: `https://{region}-aiplatform.googleapis.com`
(REST and gRPC) and the metadata server (docs/sandbox.md, "Pipelines that run").

google-cloud-pipeline-components' launchers hard-code the service's address: the custom-job
launcher builds `aiplatform.gapic.JobServiceClient(api_endpoint=f"{location}-aiplatform.googleapis.com")`
(gRPC), the model and endpoint launchers POST to `https://{location}-aiplatform.googleapis.com/v1/...`
with `requests`; both take credentials from `google.auth.default()`. Nothing of theirs is changed:
they are given the environment a Pipelines task container has, pointed here through the
variables those libraries honour:

- `https_proxy` -> `Gateway`'s CONNECT proxy. For `*-aiplatform.googleapis.com:443` it answers
  the TLS handshake itself (a throwaway CA, trusted through `REQUESTS_CA_BUNDLE` and
  `GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`) and, by the protocol the client chose (ALPN), hands the
  plain stream to the fake Vertex AI (`http/1.1`) or to its gRPC face (`h2`, `JobService` over
  the same REST calls). Any other host is tunnelled on to `upstream_proxy` (the Cloud Storage
  route), or refused.
- `GCE_METADATA_HOST` / `GCE_METADATA_IP` -> a metadata server: the project, and an access token
  for the default service account: the sandbox's token, which its stand-ins require. It answers
  only what GCE's own answers (`Metadata-Flavor: Google`, no foreign Host or Origin) and only
  processes of this user (the peer's socket owner, from /proc/net/tcp): the token is not for
  other users of the machine.

The gRPC face runs in a process of its own (`python -m vertex_trainer.sandbox.gateway URL`): a
gRPC server's threads in the sandbox's process would break the processes it forks meanwhile
(gRPC's fork handlers abort a child before its exec: "epoll_wait error: Bad file descriptor").
That process (about 1.5 s of CPU and seconds of start-up) starts when it is first needed: by
`start_grpc()`, which the sandbox's pipeline runner calls as each run begins (the first call
starts it, the others wait for it), or by the first gRPC stream through the proxy; the proxy,
the metadata server and the CA, in this process and cheap, start with `start()`, so `env()`
is the same before and after. `stop()` ends the process if it was started.
"""

from __future__ import annotations

import json
import re
import select
import socket
import socketserver
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from vertex_trainer.emulators._http import STATUS_NAMES, Guard

_VERTEX_HOST = re.compile(r"^[a-z0-9-]+-aiplatform\.googleapis\.com$|^aiplatform\.googleapis\.com$")
_JOB_SERVICE = "google.cloud.aiplatform.v1.JobService"
SERVICE_ACCOUNT = "sandbox-pipelines@sandbox.iam.gserviceaccount.com"
# What a task must not inherit: each makes google.auth.default() skip the metadata server.
_NOT_IN_TASKS = (
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_CONFIG",
    "NO_GCE_CHECK",
    "GOOGLE_AUTH_TOKEN_FOR_TESTING",
    "GOOGLE_API_KEY",
)


class Gateway:
    """The proxy, the gRPC face and the metadata server; `env()` is what a task process gets.

    `vertex_url`: the fake Vertex AI's http://127.0.0.1:PORT; `project`: what the metadata
    server answers; `upstream_proxy`: host:port of the proxy other hosts are tunnelled to;
    `environ`: the environment the gRPC face's process starts from; `token`: the sandbox's, the
    access token the metadata server hands out."""

    def __init__(
        self,
        vertex_url: str,
        *,
        project: str,
        upstream_proxy: str | None = None,
        host: str = "127.0.0.1",
        environ: Mapping[str, str] | None = None,
        token: str | None = None,
    ):
        self.token = token
        self.vertex_url = vertex_url.rstrip("/")
        self.environ = dict(environ or {})  # the gRPC face's process starts from it
        self.project, self.host = project, host
        self.upstream = _host_port(upstream_proxy) if upstream_proxy else None
        self._dir = tempfile.TemporaryDirectory(prefix="vertex-trainer-gateway-")
        self._grpc_lock = threading.Lock()  # one gRPC face, started by the first caller
        self._grpc_port: int | None = None
        self._grpc_stop: threading.Event | None = None  # set: its owner thread ends its process
        self._grpc_thread: threading.Thread | None = None
        self._stopped = False
        self._proxy: _Proxy | None = None
        self._metadata: ThreadingHTTPServer | None = None
        self.ca_path = ""

    def start(self) -> Gateway:
        """The CA, the proxy and the metadata server; the gRPC face waits for `start_grpc()`."""
        from vertex_trainer.emulators.tls import make_ca_and_leaf

        self.ca_path, leaf, key = make_ca_and_leaf(
            self._dir.name, ("*.googleapis.com", "aiplatform.googleapis.com")
        )
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(leaf, key)
        tls.set_alpn_protocols(["h2", "http/1.1"])
        self._proxy = _Proxy((self.host, 0), tls=tls, route=self._route, upstream=self.upstream)
        threading.Thread(
            target=self._proxy.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True, name="gateway-proxy"
        ).start()
        self._metadata = ThreadingHTTPServer((self.host, 0), _Metadata)
        self._metadata.daemon_threads = True
        self._metadata.project = self.project  # type: ignore[attr-defined]
        self._metadata.token = self.token or "sandbox-token"  # type: ignore[attr-defined]
        threading.Thread(
            target=self._metadata.serve_forever,
            kwargs={"poll_interval": 0.1},
            daemon=True,
            name="gateway-metadata",
        ).start()
        return self

    def env(self) -> dict[str, str]:
        """The variables that send GCPC's launchers (google-auth, requests, gRPC) here."""
        if self._proxy is None or self._metadata is None:
            raise RuntimeError("start() first")
        proxy = f"http://{self.host}:{self._proxy.server_address[1]}"
        metadata = f"{self.host}:{self._metadata.server_address[1]}"
        no_proxy = "localhost,127.0.0.1,::1"
        return {
            "https_proxy": proxy,
            "HTTPS_PROXY": proxy,
            "no_proxy": no_proxy,
            "NO_PROXY": no_proxy,
            "REQUESTS_CA_BUNDLE": self.ca_path,
            "CURL_CA_BUNDLE": self.ca_path,
            "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": self.ca_path,
            "GCE_METADATA_HOST": metadata,
            "GCE_METADATA_IP": metadata,
            "GOOGLE_CLOUD_PROJECT": self.project,
        }

    def task_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """A task process's environment: `base` with the gateway's variables, and without what
        would make google-auth look elsewhere than the metadata server, as in a Pipelines task
        container (a key file, a gcloud config with its credentials, TensorFlow's NO_GCE_CHECK)."""
        kept = {k: v for k, v in base.items() if k not in _NOT_IN_TASKS}
        gcloud = f"{self._dir.name}/gcloud"  # an empty gcloud config: no user credentials in it
        return {**kept, **self.env(), "CLOUDSDK_CONFIG": gcloud}

    def stop(self) -> None:
        """Close the proxy and the metadata server, end the gRPC face's process if it was
        started (one being started is waited for, then ended), drop the CA."""
        if self._proxy is not None:
            self._proxy.shutdown()
            self._proxy.server_close()
        if self._metadata is not None:
            self._metadata.shutdown()
            self._metadata.server_close()
        with self._grpc_lock:
            self._stopped = True  # no gRPC face starts from now on
            stop, owner = self._grpc_stop, self._grpc_thread
            self._grpc_port = self._grpc_stop = self._grpc_thread = None
        if stop is not None and owner is not None:
            stop.set()
            owner.join(timeout=30)
        self._proxy = self._metadata = None
        self._dir.cleanup()

    # -- the gRPC face, in a process of its own --------------------------------------------
    def start_grpc(self) -> int:
        """The gRPC face's port; the first call starts its process and waits until it serves,
        a call meanwhile waits for that one, later calls return at once. RuntimeError when it
        cannot start (a later call tries again) or the gateway is stopped."""
        with self._grpc_lock:
            if self._stopped:
                raise RuntimeError("the sandbox's gateway is stopped")
            if self._grpc_port is None:
                self._grpc_port = self._start_grpc()
            return self._grpc_port

    def _route(self, protocol: str) -> tuple[str, int] | None:
        """Where the proxy hands a Vertex AI stream that chose `protocol` (ALPN)."""
        if protocol == "h2":
            return self.host, self.start_grpc()
        if protocol == "http/1.1":
            return _host_port(self.vertex_url.split("://", 1)[1])
        return None

    def _start_grpc(self) -> int:
        import sys

        from vertex_trainer.local import Replica, Supervisor

        argv = (sys.executable, "-m", "vertex_trainer.sandbox.gateway", self.vertex_url, self.host)
        grpc = Supervisor(
            [Replica(pool=0, index=0, address="", argv=argv, env={**self.environ, "PYTHONUNBUFFERED": "1"})]
        )
        started, stop = threading.Event(), threading.Event()

        def own() -> None:
            # Started by the thread that lives as long as it (PR_SET_PDEATHSIG follows the thread
            # that forked it), as the model servers are.
            try:
                grpc.start()
            finally:
                started.set()
            stop.wait()
            grpc.stop(grace_s=2)

        owner = threading.Thread(target=own, daemon=True, name="gateway-grpc")
        owner.start()
        started.wait(60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for _, line in grpc.lines(timeout=0.5):
                if line.startswith("port "):
                    self._grpc_stop, self._grpc_thread = stop, owner
                    return int(line.split()[1])
            if grpc.all_ended():
                break
        tail = " | ".join(grpc.processes[0].tail) if grpc.processes else ""
        stop.set()
        owner.join(timeout=30)
        raise RuntimeError(f"the sandbox's gRPC face did not start: {tail}")


class _RestBridge:
    """The fake Vertex AI's REST routes, called over loopback (never through a proxy)."""

    def __init__(self, vertex_url: str):
        self.vertex_url = vertex_url.rstrip("/")

    def rest(self, method: str, path: str, body: Any, auth: str) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.vertex_url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **({"Authorization": auth} if auth else {})},
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=60) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.loads(exc.read() or b"{}")
            except ValueError:
                return exc.code, {}


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


class _Proxy(socketserver.ThreadingTCPServer):
    """`route(protocol)`: where a Vertex AI stream goes by its ALPN protocol (None: nowhere)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        tls: ssl.SSLContext,
        route: Callable[[str], tuple[str, int] | None],
        upstream: tuple[str, int] | None,
    ) -> None:
        self.tls, self.route, self.upstream = tls, route, upstream
        super().__init__(address, _Tunnel)


class _Tunnel(socketserver.BaseRequestHandler):
    """One CONNECT: terminate TLS for Vertex AI's hosts, else tunnel to the upstream proxy."""

    server: _Proxy

    def handle(self) -> None:
        client: socket.socket = self.request
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = client.recv(4096)
            if not chunk:
                return
            head += chunk
        line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(line) < 2 or line[0] != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        host = line[1].rsplit(":", 1)[0]
        if not _VERTEX_HOST.match(host):
            return self._onward(client, head)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        try:
            tls = self.server.tls.wrap_socket(client, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            target = self.server.route(tls.selected_alpn_protocol() or "http/1.1")
        except RuntimeError:  # the gRPC face cannot start, or the sandbox is stopping
            target = None
        if target is None:
            return
        with socket.create_connection(target, timeout=30) as upstream:
            _pipe(tls, upstream)

    def _onward(self, client: socket.socket, head: bytes) -> None:
        if self.server.upstream is None:
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        with socket.create_connection(self.server.upstream, timeout=30) as upstream:
            upstream.sendall(head)
            _pipe(client, upstream)


def _pipe(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes (one thread: an SSL socket must not be read
    and written from two threads at once)."""
    a.settimeout(None)
    b.settimeout(None)
    while True:
        ready: list[socket.socket] = [a] if isinstance(a, ssl.SSLSocket) and a.pending() else []
        if not ready:
            ready, _, _ = select.select([a, b], [], [], 30)
        for src in ready:
            dst = b if src is a else a
            try:
                data = src.recv(65536)
                while isinstance(src, ssl.SSLSocket) and src.pending():
                    data += src.recv(65536)
                if not data:
                    return
                dst.sendall(data)
            except (OSError, ssl.SSLError):
                return


class _Metadata(BaseHTTPRequestHandler):
    """The GCE metadata server's answers google-auth asks for (project, token, account)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        refused = Guard(json_only=False).refusal(self.command, self.headers)
        if refused is None and self.headers.get("Metadata-Flavor") != "Google":
            refused = 403, "Missing Metadata-Flavor:Google header."
        if refused is None and not same_user(self.client_address, self.server.server_address):
            refused = 403, "Not a process of the sandbox's user."
        if refused is not None:
            return self._send(refused[0], "text/plain", refused[1].encode())
        path = self.path.split("?", 1)[0].rstrip("/")
        account = "/computeMetadata/v1/instance/service-accounts/default"
        answers: dict[str, Any] = {
            "": "",
            "/computeMetadata/v1": "",
            "/computeMetadata/v1/project/project-id": self.server.project,  # type: ignore[attr-defined]
            "/computeMetadata/v1/project/numeric-project-id": "123456789012",
            "/computeMetadata/v1/universe/universe-domain": "googleapis.com",
            f"{account}/token": {
                "access_token": self.server.token,  # type: ignore[attr-defined]
                "expires_in": 3600,
                "token_type": "Bearer",
            },
            f"{account}/email": SERVICE_ACCOUNT,
            account: {
                "aliases": ["default"],
                "email": SERVICE_ACCOUNT,
                "scopes": ["https://www.googleapis.com/auth/cloud-platform"],
            },
            f"{account}/scopes": "https://www.googleapis.com/auth/cloud-platform",
        }
        if path not in answers:
            return self._send(404, "text/plain", b"not found")
        value = answers[path]
        if isinstance(value, str):
            return self._send(200, "application/text", value.encode())
        return self._send(200, "application/json", json.dumps(value).encode())

    def _send(self, code: int, kind: str, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Metadata-Flavor", "Google")
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def same_user(peer: Any, ours: Any) -> bool:
    """Is the loopback TCP connection from `peer` (address, port) to `ours` a process of this
    process's user? The peer's socket is the row of /proc/net/tcp{,6} whose local end is `peer`
    and remote end `ours`; its owner is that row's uid. Without /proc (not Linux): True."""
    import os

    want = {(peer[0], int(peer[1])), (f"::ffff:{peer[0]}", int(peer[1]))}
    found = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        found = True
        for row in rows:
            cols = row.split()
            if _endpoint(cols[1]) in want and _endpoint(cols[2])[1] == int(ours[1]):
                return int(cols[7]) == os.geteuid()
    return not found


def _endpoint(hex_address: str) -> tuple[str, int]:
    """/proc/net/tcp's 0100007F:1F90 -> ('127.0.0.1', 8080) (tcp6's 32 hex digits too)."""
    address, port = hex_address.rsplit(":", 1)
    raw = bytes.fromhex(address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1]), int(port, 16)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words), int(port, 16)


def serve_grpc(vertex_url: str, host: str = "127.0.0.1") -> tuple[Any, int]:
    """Vertex AI's JobService over gRPC, each call made as the REST call to `vertex_url`
    (create, get, cancel, list of CustomJobs: what GCPC's custom-job launcher uses). Returns
    the started server and its port."""
    from concurrent import futures

    import grpc
    from google.cloud import aiplatform_v1 as v1
    from google.protobuf import empty_pb2, json_format

    bridge = _RestBridge(vertex_url)

    def custom_job(answer: dict[str, Any]) -> bytes:
        pb = v1.CustomJob.pb(v1.CustomJob())
        json_format.ParseDict(answer, pb, ignore_unknown_fields=True)
        data: bytes = pb.SerializeToString()
        return data

    # grpc and the generated messages are untyped here: requests and contexts are Any.
    def call(context: Any, method: str, path: str, body: Any = None) -> dict[str, Any]:
        auth = dict(context.invocation_metadata()).get("authorization", "")
        status, answer = bridge.rest(method, path, body, auth)
        if status != 200:
            message = (answer.get("error") or {}).get("message", "") if isinstance(answer, dict) else ""
            context.abort(
                getattr(grpc.StatusCode, STATUS_NAMES.get(status, "UNKNOWN")), message or f"HTTP {status}"
            )
        out: dict[str, Any] = answer
        return out

    def create(request: Any, context: Any) -> bytes:
        body = json_format.MessageToDict(v1.CustomJob.pb(request.custom_job))
        return custom_job(call(context, "POST", f"/v1/{request.parent}/customJobs", body))

    def get(request: Any, context: Any) -> bytes:
        return custom_job(call(context, "GET", f"/v1/{request.name}"))

    def cancel(request: Any, context: Any) -> bytes:
        call(context, "POST", f"/v1/{request.name}:cancel", {})
        empty: bytes = empty_pb2.Empty().SerializeToString()
        return empty

    def listing(request: Any, context: Any) -> bytes:
        query = urllib.parse.urlencode(
            {
                k: v
                for k, v in (
                    ("filter", request.filter),
                    ("pageSize", request.page_size),
                    ("pageToken", request.page_token),
                )
                if v
            }
        )
        answer = call(context, "GET", f"/v1/{request.parent}/customJobs" + (f"?{query}" if query else ""))
        pb = v1.ListCustomJobsResponse.pb(v1.ListCustomJobsResponse())
        json_format.ParseDict(answer, pb, ignore_unknown_fields=True)
        listed: bytes = pb.SerializeToString()
        return listed

    def handler(fn: Callable[[Any, Any], bytes], request_type: Any) -> Any:
        return grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=request_type.deserialize, response_serializer=lambda data: data
        )

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                _JOB_SERVICE,
                {
                    "CreateCustomJob": handler(create, v1.CreateCustomJobRequest),
                    "GetCustomJob": handler(get, v1.GetCustomJobRequest),
                    "CancelCustomJob": handler(cancel, v1.CancelCustomJobRequest),
                    "ListCustomJobs": handler(listing, v1.ListCustomJobsRequest),
                },
            )
        ]
    )
    port = server.add_insecure_port(f"{host}:0")
    server.start()
    return server, port


if __name__ == "__main__":  # the gRPC face's process: `python -m vertex_trainer.sandbox.gateway URL [HOST]`
    import sys

    grpc_server, grpc_port = serve_grpc(sys.argv[1], *(sys.argv[2:3] or ["127.0.0.1"]))
    print(f"port {grpc_port}", flush=True)
    grpc_server.wait_for_termination()
