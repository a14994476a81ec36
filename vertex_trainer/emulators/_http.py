"""The lifecycle the loopback fakes share: a ThreadingHTTPServer on a daemon thread."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    """Mixin: `_serve(Handler)` starts the server; `url`, `stop()` and `with` come for free.

    The class using it sets `host`, `port` (0 = any free port) and `self._server = None`.
    """

    host: str
    port: int
    _server: ThreadingHTTPServer | None

    def _serve(self, handler: type[BaseHTTPRequestHandler]):
        self._server = ThreadingHTTPServer((self.host, self.port), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
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

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
