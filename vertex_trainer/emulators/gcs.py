"""Cloud Storage on loopback: `gcp-storage-emulator` plus a TLS-terminating proxy for TensorFlow.

Two kinds of client need to reach the emulator, and they need different routes:

* google-cloud-storage (staging uploads, reading metrics.json) has its own switch,
  `STORAGE_EMULATOR_HOST=http://127.0.0.1:PORT`, and talks plain HTTP to the emulator.
* TensorFlow's built-in `gs://` filesystem has no emulator switch: the endpoints
  (https://www.googleapis.com, https://storage.googleapis.com) are compiled in. It does honour
  `https_proxy`/`http_proxy` and `CURL_CA_BUNDLE` (it uses libcurl), so the route is a loopback
  proxy that accepts `CONNECT storage.googleapis.com:443`, terminates TLS with a certificate from
  a throwaway CA made at start time, and forwards each request to the emulator.

What the proxy fixes on the way (docs/facts.md, "TensorFlow and Cloud Storage"):

* TF uploads with chunked transfer framing *and* a Content-Length header; the emulator believes
  the Content-Length and would store the framing. The proxy de-chunks and sends a plain body.
* The emulator answers resumable uploads with an `http://` Location. The proxy rewrites it to
  `https://` so TF stays on the TLS route; plain `http://` proxy requests are served too, so a
  client that kept the http:// URL (with `http_proxy` set) works as well.
* curl sends `Expect: 100-continue` before large bodies and would wait a second for the answer;
  the proxy answers it at once.

The emulator serves one request at a time (a plain `http.server.HTTPServer`); the proxy serves
many connections in threads and forwards each request on a fresh connection.

Nothing here talks to the network beyond 127.0.0.1. The CA is valid for this process's lifetime
only and its key never leaves the temporary directory, which is removed on stop().
"""

from __future__ import annotations

import http.client
import http.server
import io
import json
import logging
import shutil
import socket
import socketserver
import ssl
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vertex_trainer.emulators._http import Guard, admit, refuse
from vertex_trainer.emulators.tls import make_ca_and_leaf

# The hosts TensorFlow (and the JSON API in general) uses for Cloud Storage.
INTERCEPTED_HOSTS = ("storage.googleapis.com", "www.googleapis.com")

# Hop-by-hop headers (RFC 9110 section 7.6.1) and those the proxy recomputes.
_HOP_BY_HOP = {
    "connection",
    "proxy-connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
    "content-length",
    "expect",
}

log = logging.getLogger(__name__)


class _BadRequest(Exception):
    pass


def _read_headers(rfile: io.BufferedIOBase) -> tuple[str, list[tuple[str, str]]] | None:
    """Read a request line and headers; None at a clean end of stream."""
    line = rfile.readline(65537)
    while line in (b"\r\n", b"\n"):  # tolerate stray CRLF between keep-alive requests
        line = rfile.readline(65537)
    if not line:
        return None
    headers: list[tuple[str, str]] = []
    while True:
        h = rfile.readline(65537)
        if not h:
            raise _BadRequest("connection closed inside the headers")
        if h in (b"\r\n", b"\n"):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    return line.decode("latin-1").rstrip("\r\n"), headers


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    name = name.lower()
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def _read_body(rfile: io.BufferedIOBase, headers: list[tuple[str, str]]) -> bytes:
    """The request body with any chunked framing removed (chunked wins over Content-Length,
    RFC 9112 section 6.3, which is exactly what the emulator gets wrong)."""
    te = (_header(headers, "Transfer-Encoding") or "").lower()
    if "chunked" in te:
        parts = []
        while True:
            size_line = rfile.readline(65537)
            if not size_line:
                raise _BadRequest("connection closed inside a chunked body")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while rfile.readline(65537) not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                break
            parts.append(rfile.read(size))
            rfile.readline(65537)  # the CRLF after each chunk
        return b"".join(parts)
    length = _header(headers, "Content-Length")
    return rfile.read(int(length)) if length else b""


class _ProxyHandler(socketserver.StreamRequestHandler):
    """One client connection: either CONNECT (then HTTP inside TLS) or plain proxy requests."""

    server: _ProxyServer
    timeout = 300  # an idle keep-alive connection is dropped after this many seconds

    def setup(self) -> None:
        # Small writes (CONNECT reply, TLS records, headers then body) must not wait for the
        # client's delayed ACK: with Nagle on, every TF request took ~40 ms longer.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    def handle(self) -> None:
        try:
            first = _read_headers(self.rfile)
            if first is None:
                return
            request_line, _headers = first
            method, target, _ = (request_line.split(" ", 2) + ["", ""])[:3]
            if method.upper() == "CONNECT":
                host = target.rsplit(":", 1)[0].lower()
                if host not in INTERCEPTED_HOSTS:
                    self._refuse(f"this proxy only serves {', '.join(INTERCEPTED_HOSTS)}; not {target}")
                    return
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self.wfile.flush()
                tls = self.server.ssl_context.wrap_socket(self.connection, server_side=True)
                rfile, wfile = tls.makefile("rb"), tls.makefile("wb")
                try:
                    self._serve(rfile, wfile, scheme="https", default_host=host, first=None)
                finally:
                    try:
                        tls.unwrap()
                    except (OSError, ValueError):
                        pass
            else:
                self._serve(self.rfile, self.wfile, scheme="http", default_host=None, first=first)
        except (OSError, ssl.SSLError, _BadRequest) as e:
            log.debug("proxy connection ended: %s", e)

    def _refuse(self, message: str) -> None:
        body = message.encode()
        self.wfile.write(
            b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )

    def _serve(
        self,
        rfile: io.BufferedIOBase,
        wfile: io.BufferedIOBase,
        *,
        scheme: str,
        default_host: str | None,
        first: tuple[str, list[tuple[str, str]]] | None,
    ) -> None:
        while True:
            req = first if first is not None else _read_headers(rfile)
            first = None
            if req is None:
                return
            request_line, headers = req
            method, target, version = (request_line.split(" ", 2) + ["", ""])[:3]
            host = default_host
            path = target
            if target.lower().startswith(("http://", "https://")):  # absolute form (http_proxy)
                u = urllib.parse.urlsplit(target)
                host = (u.hostname or "").lower()
                path = urllib.parse.urlunsplit(("", "", u.path or "/", u.query, ""))
            if host is None:
                host = (_header(headers, "Host") or "").split(":")[0].lower()
            if host not in INTERCEPTED_HOSTS:
                self._refuse(f"this proxy only serves {', '.join(INTERCEPTED_HOSTS)}; not {host or target}")
                return
            if (_header(headers, "Expect") or "").lower() == "100-continue":
                wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                wfile.flush()
            body = _read_body(rfile, headers)
            close = (
                (_header(headers, "Connection") or "").lower() == "close"
                or (_header(headers, "Proxy-Connection") or "").lower() == "close"
                or version.upper() == "HTTP/1.0"
            )
            status, reason, resp_headers, resp_body = self.server.forward(
                method, path, headers, body, scheme=scheme
            )
            out = [f"HTTP/1.1 {status} {reason}\r\n".encode("latin-1")]
            for k, v in resp_headers:
                if k.lower() in _HOP_BY_HOP:
                    continue
                if k.lower() == "location":
                    v = _https_location(v)
                out.append(f"{k}: {v}\r\n".encode("latin-1"))
            out.append(f"Content-Length: {len(resp_body)}\r\n".encode())
            out.append(b"Connection: close\r\n\r\n" if close else b"Connection: keep-alive\r\n\r\n")
            wfile.write(b"".join(out))
            if method.upper() != "HEAD":
                wfile.write(resp_body)
            wfile.flush()
            if close:
                return


def _empty_media_upload_as_multipart(
    method: str, path: str, body: bytes, headers: dict[str, str]
) -> tuple[str, bytes]:
    """TF creates "directories" as empty objects with uploadType=media; the emulator cannot
    read an empty media body (it crashes on None). The same object as a multipart upload works.
    """
    u = urllib.parse.urlsplit(path)
    q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
    if (
        body
        or method.upper() != "POST"
        or not u.path.startswith("/upload/storage/v1/b/")
        or q.get("uploadType") != ["media"]
        or "name" not in q
    ):
        return path, body
    q["uploadType"] = ["multipart"]
    boundary = "vertex-trainer-empty-object"
    meta = json.dumps({"name": q["name"][0]})
    content_type = headers.pop("Content-Type", None) or "application/octet-stream"
    for k in [k for k in headers if k.lower() == "content-type"]:
        headers.pop(k)
    headers["Content-Type"] = f"multipart/related; boundary={boundary}"
    body = (
        f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{meta}\r\n"
        f"--{boundary}\r\nContent-Type: {content_type}\r\n\r\n\r\n"
        f"--{boundary}--\r\n"
    ).encode()
    return urllib.parse.urlunsplit(("", "", u.path, urllib.parse.urlencode(q, doseq=True), "")), body


def _https_location(url: str) -> str:
    """Keep redirects to the intercepted hosts on the TLS route."""
    u = urllib.parse.urlsplit(url)
    if u.scheme == "http" and (u.hostname or "").lower() in INTERCEPTED_HOSTS:
        return urllib.parse.urlunsplit(("https", u.hostname, u.path, u.query, u.fragment))
    return url


class _ProxyServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(
        self, address: tuple[str, int], ssl_context: ssl.SSLContext, upstream: tuple[str, int]
    ) -> None:
        self.ssl_context = ssl_context
        self.upstream = upstream
        # The emulator handles one request at a time; serialising here as well keeps a slow
        # upload from timing out other connections' forwards in the emulator's accept queue.
        self._upstream_lock = threading.Lock()
        # (method, path, status, seconds) of recent forwards: for tests and debugging.
        self.history: deque[Any] = deque(maxlen=2000)
        super().__init__(address, _ProxyHandler)

    def forward(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes, *, scheme: str
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        out_headers = {}
        for k, v in headers:
            if k.lower() in _HOP_BY_HOP:
                continue
            out_headers[k] = v
        # The emulator builds resumable-upload Locations from Host: keep the real service name.
        out_headers["Connection"] = "close"
        path, body = _empty_media_upload_as_multipart(method, path, body, out_headers)
        with self._upstream_lock:
            conn = http.client.HTTPConnection(*self.upstream, timeout=120)
            try:
                conn.request(
                    method,
                    path,
                    body=body if body or method.upper() in ("POST", "PUT", "PATCH") else None,
                    headers=out_headers,
                )
                started = time.monotonic()
                resp = conn.getresponse()
                data = resp.read()
                self.history.append((method, path, resp.status, round(time.monotonic() - started, 4)))
                return resp.status, resp.reason, resp.getheaders(), data
            finally:
                conn.close()


@dataclass
class GcsEmulator:
    """`gcp-storage-emulator` (in-memory) plus the TLS proxy, both on 127.0.0.1.

    Use as a context manager, or call start()/stop(). `env()` gives the variables a process
    needs so that both google-cloud-storage and TensorFlow's `gs://` filesystem reach it.
    """

    host: str = "127.0.0.1"
    port: int = 0
    proxy_port: int = 0
    project: str = "local-emulator"
    # A sandbox's token: every request must carry it as its Bearer credential (None: none needed);
    # Host and Origin are checked whatever it is (emulators/_http.py `Guard`).
    token: str | None = field(default=None, repr=False)
    _server: Any = field(default=None, init=False, repr=False)  # the emulator's HTTPServer
    _proxy: _ProxyServer | None = field(default=None, init=False, repr=False)
    _proxy_thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _tmp: str | None = field(default=None, init=False, repr=False)
    ca_path: str | None = field(default=None, init=False)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> GcsEmulator:
        # The emulator logs every request at INFO; keep a user's terminal readable.
        logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)
        self._tmp = tempfile.mkdtemp(prefix="vertex-trainer-gcs-")
        self.ca_path, leaf, key = make_ca_and_leaf(self._tmp, INTERCEPTED_HOSTS)
        try:
            self._server = _emulator_server(self.host, self.port, Guard(self.token, json_only=False))
            self.port = self._server.server_address[1]
            threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.2},
                name="gcs-emulator",
                daemon=True,
            ).start()

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(leaf, key)
            ctx.num_tickets = 0  # no TLS 1.3 session tickets: nothing to resume, fewer writes
            self._proxy = _ProxyServer((self.host, self.proxy_port), ctx, (self.host, self.port))
            self.proxy_port = self._proxy.server_address[1]
            self._proxy_thread = threading.Thread(
                target=self._proxy.serve_forever,
                kwargs={"poll_interval": 0.2},
                name="gcs-tls-proxy",
                daemon=True,
            )
            self._proxy_thread.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._proxy is not None:
            self._proxy.shutdown()
            self._proxy.server_close()
            self._proxy = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> GcsEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what clients need -----------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """The emulator's own URL (the value of STORAGE_EMULATOR_HOST)."""
        return f"http://{self.host}:{self.port}"

    @property
    def requests(self) -> list[tuple[str, str, int, float]]:
        """(method, path, status, seconds) of the requests the TLS proxy forwarded recently."""
        return list(self._proxy.history) if self._proxy is not None else []

    @property
    def proxy_url(self) -> str:
        return f"http://{self.host}:{self.proxy_port}"

    def env(self) -> dict[str, str]:
        """Environment for a process that should see this emulator as Cloud Storage."""
        return emulator_env(self.endpoint, self.proxy_url, self.ca_path or "", self.project, self.token)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    # -- conveniences for tests and `dev gcs-emulator` -------------------------------------
    def create_bucket(self, name: str) -> None:
        """Create a bucket through the JSON API (no google-cloud-storage import needed)."""
        req = urllib.request.Request(
            f"{self.endpoint}/storage/v1/b?project={urllib.parse.quote(self.project)}",
            data=json.dumps({"name": name}).encode(),
            method="POST",
            headers={"Content-Type": "application/json", **self._headers()},
        )
        with _no_proxy_opener().open(req, timeout=30) as resp:
            resp.read()

    def list_objects(self, bucket: str, prefix: str = "") -> list[str]:
        names, token = [], None
        while True:
            q = {"prefix": prefix}
            if token:
                q["pageToken"] = token
            url = (
                f"{self.endpoint}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o?"
                + urllib.parse.urlencode(q)
            )
            request = urllib.request.Request(url, headers=self._headers())
            with _no_proxy_opener().open(request, timeout=30) as resp:
                data = json.loads(resp.read() or b"{}")
            names += [item["name"] for item in data.get("items", [])]
            token = data.get("nextPageToken")
            if not token:
                return names

    def read_object(self, bucket: str, name: str) -> bytes:
        url = (
            f"{self.endpoint}/download/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o/"
            f"{urllib.parse.quote(name, safe='')}?alt=media"
        )
        with _no_proxy_opener().open(
            urllib.request.Request(url, headers=self._headers()), timeout=30
        ) as resp:
            data: bytes = resp.read()
            return data


# The emulator's own endpoints that are no Cloud Storage API: `GET /wipe` deletes every bucket,
# and a GET is what any web page can send to loopback without an Origin (an <img>): no client of
# ours calls it, so no one may.
_NOT_SERVED = frozenset({"/wipe"})


def _emulator_server(host: str, port: int, guard: Guard) -> http.server.HTTPServer:
    """gcp-storage-emulator's own request handler (in memory, unchanged), served by a server whose
    every request first passes `guard`: the emulator has no check of its own, and its port is
    the only one it listens on, so nothing reaches it around the guard."""
    from functools import partial

    from gcp_storage_emulator.server import RequestHandler

    class Guarded(RequestHandler):  # type: ignore[misc]
        def parse_request(self) -> bool:
            if not super().parse_request():
                return False
            if not admit(self, guard):
                return False
            # the path as the emulator routes it (urlparse: `/wipe;x` is /wipe)
            if urllib.parse.urlparse(f"http://host{self.path}").path.rstrip("/") in _NOT_SERVED:
                refuse(self, 404, f"{self.path.split('?')[0]} is not a Cloud Storage API; refused.")
                return False
            return True

    return http.server.HTTPServer((host, port), partial(Guarded, _storage(use_memory_fs=True)))


def _storage(**options: Any) -> Any:
    """gcp-storage-emulator's `Storage(**options)`, but in memory without the copy of its table.

    After every write (an object, a bucket, a resumable chunk's session, a delete) the library
    serialises its whole table, the metadata of every bucket and object, as indented JSON into a
    `.meta` file of its store, so each write costs more than the one before. Only a new Storage
    over the same files ever reads that copy back: in memory (`use_memory_fs`) none can, and the
    table itself (`buckets`, `objects`, ...) is what every request reads, so the copy is skipped;
    a Storage in files (`data_dir`) still writes it, as the library does."""
    from gcp_storage_emulator.storage import Storage

    class Table(Storage):  # type: ignore[misc]
        def _write_config_to_file(self) -> None:
            if not self._use_memory_fs:
                super()._write_config_to_file()

    return Table(**options)


def _no_proxy_opener() -> urllib.request.OpenerDirector:
    # The emulator is on loopback; never send these through a proxy from the environment.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def emulator_env(
    endpoint: str, proxy_url: str, ca_path: str, project: str = "local-emulator", token: str | None = None
) -> dict[str, str]:
    """The variables that route google-cloud-storage and TensorFlow's gs:// to an emulator.

    Both spellings of the proxy variables are set (curl reads lower case, many Python tools
    either). no_proxy keeps loopback traffic (the emulator itself, TF's gRPC collectives between
    local replicas) off the proxy. `token`: the Bearer token TensorFlow sends (a sandbox's, which
    its emulator requires; else any word).
    """
    no_proxy = "localhost,127.0.0.1,::1"
    return {
        "STORAGE_EMULATOR_HOST": endpoint,
        "https_proxy": proxy_url,
        "HTTPS_PROXY": proxy_url,
        "http_proxy": proxy_url,
        "HTTP_PROXY": proxy_url,
        "no_proxy": no_proxy,
        "NO_PROXY": no_proxy,
        "CURL_CA_BUNDLE": ca_path,
        # TF: skip the GCE metadata probe and use this bearer token instead of looking for
        # credentials (the emulator accepts any token).
        "NO_GCE_CHECK": "true",
        "GOOGLE_AUTH_TOKEN_FOR_TESTING": token or "emulator-token",
        # TF: without this, a failing gs:// request is retried for minutes.
        "GCS_RETRY_CONFIG_MAX_RETRIES": "2",
        # TF buffers this much per open gs:// file (default 64 MB).
        "GCS_READ_CACHE_BLOCK_SIZE_MB": "4",
        "GOOGLE_CLOUD_PROJECT": project,
    }


TF_ROUTE_VARS = ("https_proxy", "CURL_CA_BUNDLE", "GOOGLE_AUTH_TOKEN_FOR_TESTING")


def shell_exports(env: dict[str, str]) -> str:
    """`export K=V` lines (shell-quoted) for `vertex-trainer dev gcs-emulator`."""
    import shlex

    return "\n".join(f"export {k}={shlex.quote(v)}" for k, v in env.items())


def serve_forever(
    host: str = "127.0.0.1",
    port: int = 9023,
    proxy_port: int = 9024,
    buckets: tuple[str, ...] = (),
    print_fn: Callable[[str], None] = print,
) -> None:
    """Run the emulator and proxy in the foreground until interrupted (`dev gcs-emulator`)."""
    import signal
    import time

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # clean stop (the CA's temporary directory is removed)

    signal.signal(signal.SIGTERM, on_term)
    with GcsEmulator(host=host, port=port, proxy_port=proxy_port) as emu:
        for b in buckets:
            emu.create_bucket(b)
        print_fn(shell_exports(emu.env()))
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


__all__ = ["INTERCEPTED_HOSTS", "GcsEmulator", "emulator_env", "serve_forever", "shell_exports"]
