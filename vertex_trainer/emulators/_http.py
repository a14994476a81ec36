"""The lifecycle the loopback fakes share: a ThreadingHTTPServer on a daemon thread."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable


class LoopbackServer:
    """Mixin: `_serve(Handler)` starts the server; `url`, `stop()` and `with` come for free.

    The class using it sets `host`, `port` (0 = any free port) and `self._server = None`; for
    fault injection also `faults` (a list) and `_lock` (a threading.Lock).
    """

    host: str
    port: int
    _server: ThreadingHTTPServer | None
    faults: list[tuple[str | None, int]]   # (method or None, status) answered instead, in order
    _lock: threading.Lock

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


def serve_until_interrupted(fake: Any, lines: Iterable[str],
                            echo: Callable[[str], None] | None = None) -> None:
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
