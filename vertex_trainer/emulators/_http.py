"""What the loopback fakes share: the server's lifecycle (a ThreadingHTTPServer on a daemon
thread), the JSON answer and Google's error envelope, offset pages, and routing a request to a
service's handler."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qs, urlsplit

# HTTP status -> the google.rpc code name the error envelope carries.
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
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


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that answers JSON and keeps test output quiet."""

    content_type = "application/json; charset=UTF-8"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

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


_Fake = TypeVar("_Fake", bound="LoopbackServer")


class LoopbackServer:
    """Mixin: `_serve(Handler)` starts the server; `url`, `stop()` and `with` come for free.

    The class using it sets `host`, `port` (0 = any free port) and `self._server = None`; for
    fault injection also `faults` (a list) and `_lock` (a threading.Lock).
    """

    host: str
    port: int
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

    def _serve(self: _Fake, handler: type[BaseHTTPRequestHandler]) -> _Fake:
        self._server = ThreadingHTTPServer((self.host, self.port), handler)
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
