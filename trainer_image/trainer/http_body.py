"""One HTTP request's body, read under a byte limit whatever its framing, and its JSON under bounds
(docs/serving.md "Limits"; the prediction server, trainer/serve.py, is the one user).

What is read from the socket for one body is at most `limit` bytes, decided before reading:
- Content-Length: digits only (no sign, no `0x`, no `_`), one value, at most `limit`; a body
  shorter than it declares is refused. Missing: 411.
- Transfer-Encoding: `chunked` alone (another coding: 501), never with Content-Length; each
  chunk-size line hex digits (an optional `;extension`) in at most CHUNK_LINE_MAX bytes, each chunk
  followed by CRLF, trailers at most TRAILERS_MAX bytes; the sizes, the chunks and the framing
  together at most `limit`.
JSON: at most `max_values` commas, `[` and `{` in the body (counted over the bytes, strings
included: a request within the contract has a few per instance), nesting at most `max_depth`.
Anything else is a BadRequest (400, 411, 413 or 501) and no more of the body is read.
"""

from __future__ import annotations

import json
import re
from email.message import Message
from io import BufferedIOBase
from typing import Any

CHUNK_LINE_MAX = 1024  # a chunk-size line with its extensions, CRLF included
TRAILERS_MAX = 8192  # all the trailer lines after the last chunk
_LENGTH = re.compile(r"[0-9]{1,30}")
_CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?\r?\n")


class BadRequest(Exception):
    """The client's fault: answered with this status and {"error": message}."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def declared_length(headers: Message, limit: int) -> int | None:
    """The body's length from its headers (None: chunked), checked against `limit` before any of
    it is read; BadRequest for a framing that is malformed, ambiguous or too large."""
    codings = headers.get_all("Transfer-Encoding") or []
    lengths = [v.strip() for v in headers.get_all("Content-Length") or []]
    if codings:
        if lengths:
            raise BadRequest("both Transfer-Encoding and Content-Length: send one of them")
        names = [c.strip().lower() for v in codings for c in v.split(",")]
        if names != ["chunked"]:
            raise BadRequest(
                f"Transfer-Encoding {', '.join(codings)!r} is not supported; "
                "send Content-Length, or Transfer-Encoding: chunked alone",
                status=501,
            )
        return None
    if not lengths:
        raise BadRequest("a Content-Length header is required", status=411)
    if len(set(lengths)) > 1:
        raise BadRequest(f"Content-Length given twice with different values ({', '.join(lengths)})")
    if not _LENGTH.fullmatch(lengths[0]):
        raise BadRequest(f"Content-Length {lengths[0][:40]!r} is not a number of bytes")
    size = int(lengths[0])
    if size > limit:
        raise BadRequest(f"the request body is {size} bytes; the limit is {limit}", status=413)
    return size


def read_body(rfile: BufferedIOBase, headers: Message, limit: int) -> bytes | bytearray:
    """The request's body (declared_length's checks first), at most `limit` bytes read."""
    size = declared_length(headers, limit)
    if size is None:
        return read_chunked(rfile, limit)
    data = rfile.read(size)
    if len(data) < size:
        raise BadRequest(f"the body ended after {len(data)} of the {size} bytes its Content-Length declares")
    return data


def read_chunked(rfile: BufferedIOBase, limit: int) -> bytearray:
    """A chunked body (RFC 9112 section 7.1), its framing counted in `limit`."""
    body = bytearray()
    wire = 0
    while True:
        line = rfile.readline(CHUNK_LINE_MAX + 1)
        wire += len(line)
        if not line:
            raise BadRequest("bad chunked body: it ended before its last chunk (a 0 size line)")
        found = _CHUNK_LINE.fullmatch(line)
        if found is None:
            raise BadRequest(
                f"bad chunk size line {line[:40]!r}: hex digits (an optional ;extension), then CRLF, "
                f"in at most {CHUNK_LINE_MAX} bytes"
            )
        size = int(found[1], 16)
        if size == 0:
            break
        if wire + size + 2 > limit:
            raise BadRequest(f"the request body exceeds the limit of {limit} bytes", status=413)
        data = rfile.read(size)
        if len(data) < size:
            raise BadRequest(f"bad chunked body: it ended inside a chunk ({len(data)} of {size} bytes)")
        body += data
        end = rfile.readline(3)
        wire += size + len(end)
        if end not in (b"\r\n", b"\n"):
            raise BadRequest("bad chunked body: no CRLF after a chunk (more data than its size says)")
    trailers = 0
    while True:
        line = rfile.readline(CHUNK_LINE_MAX + 1)
        trailers += len(line)
        if line in (b"\r\n", b"\n"):
            return body
        if not line.endswith(b"\n") or trailers > TRAILERS_MAX:
            raise BadRequest(
                f"bad chunked body: trailers longer than {TRAILERS_MAX} bytes, or not ended by an empty line"
            )


def parse_json(body: bytes | bytearray, *, max_depth: int, max_values: int) -> Any:
    """The JSON value of `body`, its size and nesting bounded before and while it is parsed."""
    values = body.count(b",") + body.count(b"[") + body.count(b"{")
    if values > max_values:
        raise BadRequest(
            f"the JSON holds more than {max_values} values (counted as its commas, [ and {{); "
            "a request holds a few per instance"
        )
    too_deep = BadRequest(f"the JSON nests more than {max_depth} levels; a request nests 4")
    try:
        value = json.loads(body)
    except RecursionError:
        raise too_deep from None
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"the request body is not JSON ({e})") from None
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise too_deep
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return value
