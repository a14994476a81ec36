"""Requests held against Google's API definitions: the discovery documents shipped in
google-api-python-client (googleapiclient/discovery_cache/documents, installed in .venv/discovery by
the Makefile: `documents_folder()`). A request is valid when a
method of the documents has its HTTP method and path, takes each of its query parameters, and its
request schema has each top-level field of its body. `record_requests` records the requests a
test sends (on their way out, through requests; nothing is faked: the call goes on to the
server)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import requests


def _methods(resource: dict, base: str):
    for method in resource.get("methods", {}).values():
        yield base, method
    for sub in resource.get("resources", {}).values():
        yield from _methods(sub, base)


def documents_folder() -> Path:
    """The folder of Google's discovery documents: google-api-python-client's, which the Makefile
    installs beside the venv (.venv/discovery), out of TensorFlow's reach (Makefile, DISCOVERY)."""
    root = Path(sys.prefix) / "discovery" / "googleapiclient" / "discovery_cache" / "documents"
    assert root.is_dir(), f"{root}: not there; `make install` puts google-api-python-client there"
    return root


def discovery_methods(documents) -> list[tuple[str, re.Pattern[str], dict, dict, set[str]]]:
    """(document, path pattern, method, schemas, the query parameters every method takes: fields,
    alt, ...) of every method of `documents` (names such as "aiplatform.v1")."""
    root = documents_folder()
    out = []
    for name in documents:
        doc = json.loads((root / f"{name}.json").read_text())
        for base, method in _methods(doc, doc.get("servicePath", "")):
            flat = base + method.get("flatPath", method["path"])
            pattern = re.compile("^/" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(flat)) + "$")
            out.append((name, pattern, method, doc.get("schemas", {}), set(doc.get("parameters", {}))))
    return out


def conforms(method: str, url: str, body: object, found: list) -> str | None:
    """The discovery method `method url body` is valid for ("doc: id"), or None."""
    parts = urlsplit(url)
    for name, pattern, spec, schemas, common in found:
        if spec["httpMethod"] != method or not pattern.match(parts.path):
            continue
        params = spec.get("parameters", {})
        query = set(parse_qs(parts.query))
        if not query <= {p for p, v in params.items() if v.get("location") == "query"} | common:
            continue
        ref = spec.get("request", {}).get("$ref")
        if body is not None and body != {}:
            if ref is None:
                continue
            fields = set(schemas[ref].get("properties", {}))
            if not set(body) <= fields:
                continue
            if ref.endswith("SetIamPolicyRequest"):
                policy = schemas["Policy"]["properties"]
                if not set(body["policy"]) <= set(policy):
                    continue
        return f"{name}: {spec['id']}"
    return None


def url_of(request: dict) -> str:
    """The full URL of a dry run's request ({"method", "url", "params"?})."""
    return requests.Request(request["method"], request["url"], params=request.get("params")).prepare().url


def record_requests(monkeypatch) -> list[tuple[str, str, object]]:
    """Every request sent through requests from now on (the test's `monkeypatch` undoes it),
    recorded on its way out, then sent: (method, full URL, JSON body)."""
    seen: list[tuple[str, str, object]] = []
    through = requests.Session.request

    def record(self, method, url, *args, **kwargs):
        prepared = requests.Request(method, url, params=kwargs.get("params")).prepare()
        seen.append((method.upper(), prepared.url, kwargs.get("json")))
        return through(self, method, url, *args, **kwargs)

    monkeypatch.setattr(requests.Session, "request", record)
    return seen
