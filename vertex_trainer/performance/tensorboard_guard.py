"""TensorBoard with a loopback Host and Origin check: what `vertex-trainer tensorboard` runs
(`python -m vertex_trainer.performance.tensorboard_guard ARGS`, TensorBoard's own flags).

TensorBoard's server answers any Host. It listens on 127.0.0.1 only, but a web page open in the
browser can still reach it: a name the page's site controls, pointed at 127.0.0.1 (DNS
rebinding), makes the page same-origin with it, and the page reads the run's curves, profiles
and file paths. So, as `serve` and the sandbox's stand-ins do (docs/security.md), a request
whose Host is not this machine's loopback, or which comes from another site's page (Origin), is
answered 403 before TensorBoard sees it. Everything else is TensorBoard's `main`, unchanged.

Runs in TensorBoard's own process; tensorboard is imported only by `main`.
"""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

__all__ = ["guarded", "main", "refusal"]

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _loopback(name: str) -> bool:
    """localhost, or an address of the loopback network (127.0.0.0/8, ::1); a DNS name is not."""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def refusal(host: str | None, origin: str | None) -> str | None:
    """Why a request with these Host and Origin headers is refused, or None when it may go on:
    Host must name this machine's loopback (any port); an Origin, when sent (a browser's page),
    must be a loopback page too."""
    name = urlsplit(f"//{(host or '').strip()}").hostname or ""
    if not _loopback(name):
        return f"Host {host!r} is not this machine's loopback; refused (DNS rebinding)."
    if origin is not None and not _loopback(urlsplit(origin.strip()).hostname or ""):
        return f"Origin {origin!r} is not a page of this machine's loopback; refused."
    return None


def guarded(app: Wsgi) -> Wsgi:
    """The WSGI app `app` behind `refusal`: 403 with the reason for a refused request."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        why = refusal(environ.get("HTTP_HOST"), environ.get("HTTP_ORIGIN"))
        if why is None:
            return app(environ, start_response)
        body = why.encode()
        start_response(
            "403 Forbidden",
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
        )
        return [body]

    return wsgi


def main(argv: list[str] | None = None) -> int:
    """TensorBoard's `main` (tensorboard.main.run_main) with its server's app `guarded`."""
    from absl import app as absl_app

    from vertex_trainer import lazy

    why = "vertex-trainer tensorboard"
    default = lazy.require("tensorboard.default", why)
    main_lib = lazy.require("tensorboard.main_lib", why)
    program = lazy.require("tensorboard.program", why)
    plugins = lazy.require("tensorboard.plugins.base_plugin", why)

    class LoopbackOnly(program.WerkzeugServer):  # type: ignore[misc,name-defined]
        def __init__(self, wsgi_app: Wsgi, flags: Any) -> None:
            super().__init__(guarded(wsgi_app), flags)

    main_lib.global_init()
    board = program.TensorBoard(plugins=default.get_plugins(), server_class=LoopbackOnly)
    try:
        absl_app.run(board.main, argv=argv or sys.argv, flags_parser=board.configure)
    except plugins.FlagsError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
