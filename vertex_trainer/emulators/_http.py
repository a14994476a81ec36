"""What the loopback fakes share: the server's lifecycle (a ThreadingHTTPServer on a daemon
thread), who may send a request (`Guard`), the JSON answer and Google's error envelope, offset
pages, routing a request to a service's handler, and a Vertex AI collection's base (`Collection`)."""

from __future__ import annotations

import copy
import hmac
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar
from urllib.parse import parse_qs, urlsplit

# HTTP status -> the google.rpc code name the error envelope carries (grpc.StatusCode's names too:
# the sandbox's gRPC face answers with them).
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def envelope(code: int, message: str) -> dict[str, Any]:
    """Google's error body for HTTP status `code` with `message`: {"error": {code, message, status}}."""
    return {"error": {"code": code, "message": message, "status": STATUS_NAMES.get(code, "UNKNOWN")}}


def query_of(path: str) -> dict[str, str]:
    """The query parameters of a request path, the last value of each."""
    return {k: v[-1] for k, v in parse_qs(urlsplit(path).query).items()}


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
# Hosts a stand-in is also reached as: the sandbox's own TLS proxies (the Cloud Storage route,
# the pipelines' gateway) hand it the requests clients address to Google's hosts. A web page
# cannot make a browser send them to this machine (it does not own their names).
_GOOGLE_HOST = re.compile(r"^([a-z0-9-]+\.)*googleapis\.com$")
JSON_METHODS = ("POST", "PUT", "PATCH")
_MISSING = (
    "Request is missing required authentication credential. Expected OAuth 2 access token, login "
    "cookie or other valid authentication credential."
)
_INVALID = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
    "or other valid authentication credential."
)
SANDBOX_HINT = (
    "the sandbox's token is VERTEX_TRAINER_EMULATOR_TOKEN in the lines it printed (docs/sandbox.md)"
)


def _hostname(authority: str) -> str:
    """'127.0.0.1:8080', '[::1]:80', 'localhost' -> the host name, lower case, no port."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority[1:].split("]", 1)[0]
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


def local_host(host: str | None) -> bool:
    """Is a Host header this machine's loopback (any port), or a Google host the sandbox's own
    proxies forward? A missing one is refused too (HTTP/1.1 requires it; every client sends it)."""
    if not host:
        return False
    name = _hostname(host)
    return name in LOOPBACK_NAMES or bool(_GOOGLE_HOST.match(name))


def local_origin(origin: str | None) -> bool:
    """Is an Origin header absent (clients that are not browsers send none) or a page of this
    machine's loopback?"""
    if origin is None:
        return True
    parts = urlsplit(origin.strip().lower())
    return parts.scheme in ("http", "https") and (parts.hostname or "") in LOOPBACK_NAMES


class HeaderLookup(Protocol):
    """A request's headers, looked up case-insensitively (http.server's, Flask's)."""

    def get(self, name: str, /) -> str | None: ...


@dataclass(frozen=True)
class Guard:
    """Who may send a stand-in a request (docs/security-notes/listening.md).

    Always: the Host must be loopback (or a Google host the sandbox's proxies forward: no DNS
    rebinding) and an Origin, when present, a loopback page (no web page elsewhere). With
    `token` (a sandbox's), `Authorization: Bearer <token>`, as Google's clients send their
    credential. With `json_only`, a POST, PUT or PATCH with a body must be application/json, as
    every client of a JSON API sends it (a form or text/plain is what a page can send without
    asking)."""

    token: str | None = None
    json_only: bool = True

    def refusal(self, method: str, headers: HeaderLookup) -> tuple[int, str] | None:
        """(HTTP status, message) when the request must be refused; None when it may go on.
        `headers` is case-insensitive (http.client's HTTPMessage)."""
        host, origin = headers.get("Host"), headers.get("Origin")
        if not local_host(host):
            return 403, f"Host {host!r} is not this machine's loopback; refused (DNS rebinding)."
        if not local_origin(origin):
            return 403, f"Origin {origin!r} is not a page of this machine's loopback; refused."
        if self.token is not None:
            given = headers.get("Authorization") or ""
            if not given:
                return 401, f"{_MISSING} ({SANDBOX_HINT})"
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                return 401, f"{_INVALID} ({SANDBOX_HINT})"
        if self.json_only and method.upper() in JSON_METHODS and _has_body(headers):
            kind = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
            if kind != "application/json":
                return 400, (
                    f"Invalid JSON payload received. Content-Type {kind or 'none'!r} is not "
                    "application/json; refused."
                )
        return None


def _has_body(headers: HeaderLookup) -> bool:
    length = (headers.get("Content-Length") or "").strip()
    return bool(headers.get("Transfer-Encoding")) or (length not in ("", "0"))


class GuardedHandler(BaseHTTPRequestHandler):
    """A handler whose requests pass the server's `guard` (a `Guard`; none set: Host and Origin
    only, JSON bodies) before any method runs: a refused request is answered with Google's error
    envelope and the connection closed, its body unread, nothing done."""

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        return admit(self, getattr(self.server, "guard", None) or Guard())


def admit(handler: BaseHTTPRequestHandler, guard: Guard) -> bool:
    """Does the request `handler` has just parsed pass `guard`? A refused one is answered here
    (`refuse`)."""
    refused = guard.refusal(handler.command, handler.headers)
    if refused is not None:
        refuse(handler, *refused)
    return refused is None


def refuse(handler: BaseHTTPRequestHandler, status: int, message: str) -> None:
    """Answer a refused request with Google's error envelope and close the connection (its body,
    unread, goes with it)."""
    data = json.dumps(envelope(status, message)).encode()
    handler.close_connection = True
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json; charset=UTF-8")
    handler.send_header("Content-Length", str(len(data)))
    handler.send_header("Connection", "close")
    if status == 401:
        handler.send_header("WWW-Authenticate", 'Bearer realm="https://accounts.google.com/"')
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)


class JsonHandler(GuardedHandler):
    """A request handler that answers JSON and keeps test output quiet."""

    content_type = "application/json; charset=UTF-8"

    def send_json(self, status: int, payload: Any) -> None:
        """Answer `status` with `payload` as the JSON body."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_envelope(self, status: int, message: str) -> None:
        """Answer `status` with Google's error envelope around `message`."""
        self.send_json(status, envelope(status, message))

    def send_fault(self, fake: Any, denied: str) -> bool:
        """Answer with the next fault a test queued (`fake.failures` of (status, message or
        None), taken under `fake._lock`; a 403 without a message says `denied`). True when one
        was sent."""
        with fake._lock:
            fault = fake.failures.pop(0) if fake.failures else None
        if not fault:
            return False
        status, message = fault
        self.send_envelope(status, message or (denied if status == 403 else "Fault injected."))
        return True

    def json_body(self) -> Any:
        """The request's JSON body: None when there is none, the class ValueError when it is not JSON
        (for the caller's 400)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return ValueError


def offset_page(
    items: list[Any],
    query: dict[str, str],
    key: str,
    *,
    size: int,
    cap: int | None = None,
    omit_empty: bool = False,
) -> dict[str, Any]:
    """One page of a list answer, the page token being the offset of its first item.

    `items` is the whole listing, `query` the request's parameters (pageToken, pageSize), `key`
    the answer's field for the items, `size` the page size when the request names none, `cap`
    the most a page holds whatever it asks (None: no bound), `omit_empty` leaves `key` out of an
    empty page (as Vertex AI does). Returns {key: [...], "nextPageToken": "N" while more remain};
    raises ValueError("Invalid page token or page size.") on a token or size that is no number.
    """
    try:
        start = int(query.get("pageToken") or 0)
        size = int(query.get("pageSize") or size)
    except ValueError:
        raise ValueError("Invalid page token or page size.") from None
    if cap is not None:
        size = min(size, cap)
    page = items[start : start + size]
    answer: dict[str, Any] = {} if omit_empty and not page else {key: page}
    if start + size < len(items):
        answer["nextPageToken"] = str(start + size)
    return answer


Route = tuple[str, "re.Pattern[str]", str]  # (HTTP method, path pattern with the target as group 1, op)


_PARENT = r"projects/[^/]+/locations/[^/]+"


def collection_routes(collection: str, kind: str, *, end: str = "cancel") -> list[Route]:
    """The routes of a Vertex AI collection under projects/P/locations/L: create (POST), list and
    get (GET), and `end`: "cancel" (POST .../ID:cancel) or "delete" (DELETE .../ID).

    `collection` is the path segment ("pipelineJobs"), `kind` the ops' prefix ("pipeline" ->
    "pipeline-create", "pipeline-list", "pipeline-get", "pipeline-cancel"). Returns them for
    `route`, the parent (create, list) or the resource's name (get, the end) as group 1."""
    one = rf"^/v1/({_PARENT}/{collection}/[^/:]+)"
    return [
        ("POST", re.compile(rf"^/v1/({_PARENT})/{collection}$"), f"{kind}-create"),
        ("GET", re.compile(rf"^/v1/({_PARENT})/{collection}$"), f"{kind}-list"),
        ("GET", re.compile(one + "$"), f"{kind}-get"),
        ("POST", re.compile(one + ":cancel$"), f"{kind}-cancel")
        if end == "cancel"
        else ("DELETE", re.compile(one + "$"), f"{kind}-delete"),
    ]


def route(
    service: Any,
    routes: list[Route],
    method: str,
    path: str,
    handler_of: Callable[[str], str] = lambda op: "_" + op.split("-", 1)[1],
) -> tuple[str, Callable[[dict[str, Any], Any], Any]] | None:
    """The first of `routes` that `method` and `path` match, as (op, call).

    `service` owns the handlers, `handler_of(op)` names its method ("resource-get" -> "_get" by
    default); `call(query, body)` runs that method on (the match's group 1, query, body).
    Returns None when no route matches."""
    for verb, pattern, op in routes:
        m = pattern.match(path) if verb == method else None
        if m:
            handler = getattr(service, handler_of(op))
            return op, lambda query, body, _t=m[1], _h=handler: _h(_t, query, body)
    return None


class Collection:
    """A Vertex AI collection's service: `route()` over its class's `ROUTES` (`collection_routes`).

    `runner` is the sandbox's hook when one is plugged in: a created resource is handed to it
    (`_claim` under the lock, then `_hand_over`), it moves the resource along itself, and the
    service leaves the resources it took (`_run_by_runner`) to it."""

    ROUTES: ClassVar[list[Route]] = []

    def __init__(self, lock: Any):
        self._lock = lock
        self.runner: Any = None
        self._run_by_runner: set[str] = set()

    def route(
        self, method: str, path: str
    ) -> tuple[str, Callable[[dict[str, Any], Any], dict[str, Any]]] | None:
        """(op, call(query, body)) for a request to one of the collection's routes, else None."""
        return route(self, self.ROUTES, method, path)

    def _claim(self, name: str) -> Any:
        """Under the lock, as `name` is created: the runner that takes it over, or None."""
        runner = self.runner
        if runner is not None:
            self._run_by_runner.add(name)
        return runner

    @staticmethod
    def _hand_over(runner: Any, answer: dict[str, Any]) -> dict[str, Any]:
        """Out of the lock: `answer` (the create's) handed to `runner` (a copy), then returned."""
        if runner is not None:
            runner.start(copy.deepcopy(answer))
        return answer


_Fake = TypeVar("_Fake", bound="LoopbackServer")


class LoopbackServer:
    """Mixin: `_serve(Handler)` starts the server; `url`, `stop()` and `with` come for free.

    The class using it sets `host`, `port` (0 = any free port) and `self._server = None`; for
    fault injection also `faults` (a list) and `_lock` (a threading.Lock). `require(token)`
    before `start()` makes every request carry `Authorization: Bearer <token>` (the sandbox).
    """

    host: str
    port: int
    sandbox_token: str | None = None  # what requests must carry as their Bearer token (None: nothing)
    _server: ThreadingHTTPServer | None
    faults: list[tuple[str | None, int]]  # (method or None, status) answered instead, in order
    _lock: threading.Lock | threading.Condition

    if TYPE_CHECKING:  # each fake's own: serves its handler, returns the fake

        def start(self) -> Any: ...

    def inject(self, status: int, *, times: int = 1, method: str | None = None) -> None:
        """Answer the next `times` requests (of `method`, or any) with `status` instead."""
        with self._lock:
            self.faults.extend([(method, status)] * times)

    def _take_fault(self, method: str) -> int | None:
        with self._lock:
            for i, (want, status) in enumerate(self.faults):
                if want in (None, method):
                    del self.faults[i]
                    return status
        return None

    def require(self: _Fake, token: str | None) -> _Fake:
        """Refuse (401) every request without `Authorization: Bearer <token>`; call before start()."""
        self.sandbox_token = token
        return self

    def _serve(self: _Fake, handler: type[BaseHTTPRequestHandler]) -> _Fake:
        self._server = ThreadingHTTPServer((self.host, self.port), handler)
        self._server.guard = Guard(self.sandbox_token)  # type: ignore[attr-defined]
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://{self.host}:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_until_interrupted(
    fake: Any, lines: Iterable[str], echo: Callable[[str], None] | None = None
) -> None:
    """For the `vertex-trainer dev` commands: print `lines` (URL, exports) and keep the started
    `fake` running until Ctrl-C, then stop it."""
    echo = echo or (lambda text: print(text, flush=True))
    for line in lines:
        echo(line)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()
