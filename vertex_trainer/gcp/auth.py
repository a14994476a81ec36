"""Credentials and HTTP sessions for every Google API the tool calls (Vertex AI, Cloud Build,
Artifact Registry, Cloud Storage, Cloud Logging).

One rule everywhere: an `http://` endpoint is a local emulator and gets a plain session, which
carries `Authorization: Bearer <token>` when the settings hold a sandbox's token
(`Settings.emulator_token`, `emulator_headers`; the storage client's `emulator_credentials`), as
Google's clients send their credential; anything else gets Application Default Credentials, or a
clear exit-2 message saying how to log in (nothing is sent). google-auth and requests are imported
only when a session is made.

Impersonation (issue 33): the edge calls `use(settings)` once; with
`settings.impersonate_service_account` set, `credentials()` (and so every session, the storage
client and `access_token()`) is google-auth's impersonated credentials for that account, the ADC
being the source (they need roles/iam.serviceAccountTokenCreator on it).
"""

from __future__ import annotations

import json
import os
import traceback
from importlib.metadata import version
from typing import TYPE_CHECKING

from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.settings import Settings, is_emulator

if TYPE_CHECKING:
    import requests
    from google.auth.credentials import Credentials

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
USER_AGENT = "vertex-trainer"

__all__ = [
    "SCOPES",
    "access_token",
    "credentials",
    "emulator_credentials",
    "emulator_headers",
    "impersonating",
    "is_emulator",
    "plain_session",
    "session",
    "use",
]

# What the edge set with use(): the service account every request goes as, and where its tokens
# come from (None: iamcredentials.googleapis.com).
_IMPERSONATE: dict[str, str | None] = {"target": None, "token_url": None}


def use(settings: Settings) -> None:
    """Take this invocation's identity from `settings` (the edge calls it once per command)."""
    target = settings.impersonate_service_account
    _IMPERSONATE["target"] = target
    _IMPERSONATE["token_url"] = (
        f"{settings.iam_url('iamcredentials')}/v1/projects/-/serviceAccounts/{target}:generateAccessToken"
        if target and settings.iam_endpoint
        else None
    )


def impersonating() -> str | None:
    """The service account requests go as, when impersonating."""
    return _IMPERSONATE["target"]


def credentials() -> Credentials:
    """Application Default Credentials, or UserError (exit 2) telling the user how to log in."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        creds, _ = google.auth.default(scopes=list(SCOPES))
    except (DefaultCredentialsError, OSError, ValueError, AttributeError, TypeError) as exc:
        bad = _bad_file(exc)
        if bad is not None:
            raise bad from exc
        if not isinstance(exc, DefaultCredentialsError):
            raise
        raise UserError(
            "no Google Cloud credentials found (Application Default Credentials); nothing was sent",
            hint="run `gcloud auth application-default login` on a workstation; in CI use Workload "
            "Identity Federation (google-github-actions/auth) or the build's service account; "
            "or set GOOGLE_APPLICATION_CREDENTIALS",
        ) from exc
    target = _IMPERSONATE["target"]
    if target:
        from google.auth import impersonated_credentials

        return impersonated_credentials.Credentials(
            source_credentials=creds,
            target_principal=target,
            target_scopes=list(SCOPES),
            iam_endpoint_override=_IMPERSONATE["token_url"],
        )
    return creds


# google-auth's loaders of a credentials file, by the source they read it for.
_SOURCES = {
    "_get_explicit_environ_credentials": "GOOGLE_APPLICATION_CREDENTIALS",
    "_get_gcloud_sdk_credentials": "gcloud",
}


def _bad_file(exc: BaseException) -> UserError | None:
    """The exit-2 message for a credentials file that google-auth found but could not load: its
    source (GOOGLE_APPLICATION_CREDENTIALS or gcloud's ADC file), its path and what is wrong with
    it; None when no file was at fault (nothing found at all). google-auth names the file only in
    its message's words, so the path is read from its loader's frame (`filename`), which the
    traceback keeps."""
    source = path = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        if not str(frame.f_globals.get("__name__", "")).startswith("google.auth"):
            continue
        source = _SOURCES.get(frame.f_code.co_name, source)
        filename = frame.f_locals.get("filename")
        if isinstance(filename, str) and path is None:
            path = filename
    if path is None:
        return None
    wrong = _what_is_wrong(path, exc)
    if source == "gcloud":
        return UserError(
            f"gcloud's Application Default Credentials file {path}: {wrong}; nothing was sent",
            hint="run `gcloud auth application-default login` to write it again",
        )
    return UserError(
        f"GOOGLE_APPLICATION_CREDENTIALS={path}: {wrong}; nothing was sent",
        hint="run `gcloud auth application-default login` and unset GOOGLE_APPLICATION_CREDENTIALS, "
        "or point it at a credentials file (a service account key, or a Workload Identity "
        "Federation configuration in CI)",
    )


def _what_is_wrong(path: str, exc: BaseException) -> str:
    """What keeps the credentials file at `path` from loading, in a few words."""
    if not os.path.lexists(path):
        return "no such file"
    if os.path.isdir(path):
        return "is a directory, not a credentials file"
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    except ValueError:  # (UnicodeDecodeError too)
        return "is not JSON (a credentials file is a JSON object with a \"type\")"
    if not isinstance(info, dict):
        return f"holds a JSON {_json_kind(info)}, not a credentials object"
    kind = info.get("type")
    if kind is None:
        return 'has no "type" (a service account key has "type": "service_account")'
    cause = exc.__cause__ or exc.__context__
    if "does not have a valid type" in str(exc):
        return f"\"type\": {json.dumps(kind)} is not a kind of credentials google-auth knows"
    detail = str(cause) if cause is not None else str(exc.args[0] if exc.args else exc)
    return f"is not valid {kind} credentials: {detail.rstrip('.')}"


def _json_kind(value: object) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def emulator_headers(token: str | None) -> dict[str, str]:
    """The headers a request to an emulator carries: a sandbox's token as its Bearer credential
    (docs/sandbox.md), or none."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def emulator_credentials(token: str | None) -> Credentials:
    """google-auth credentials for an emulator: a static token credential carrying a sandbox's
    token (it never expires, and has nothing to refresh), else anonymous ones."""
    from google.auth.credentials import AnonymousCredentials, Credentials

    if not token:
        return AnonymousCredentials()

    class _Static(Credentials):
        def __init__(self) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self.token = token

        def refresh(self, request: object) -> None:  # a sandbox's token is the same all its life
            pass

    return _Static()


def plain_session() -> requests.Session:
    """A requests session with our User-Agent and no credentials."""
    import requests  # ~0.1 s: loaded by the first request, never by --help, validate or a dry run

    s = requests.Session()
    s.headers["User-Agent"] = f"{USER_AGENT}/{_version()}"
    return s


def session(endpoint: str) -> requests.Session:
    """A requests session for `endpoint`: anonymous for emulators, Google-authorized otherwise."""
    if is_emulator(endpoint):
        return plain_session()
    from google.auth.transport.requests import AuthorizedSession

    s = AuthorizedSession(credentials())
    s.headers["User-Agent"] = f"{USER_AGENT}/{_version()}"
    return s


def access_token() -> str:
    """A fresh OAuth access token from ADC (for APIs that take a bare Bearer token)."""
    from google.auth.transport.requests import Request

    creds = credentials()
    try:
        creds.refresh(Request())
    except Exception as exc:
        raise ServiceError(
            f"could not get an access token: {exc}", hint="run `gcloud auth application-default login`"
        ) from None
    token = creds.token
    if not token:
        raise ServiceError(
            "could not get an access token: the credentials gave none",
            hint="run `gcloud auth application-default login`",
        )
    return str(token)


def _version() -> str:
    try:
        return version("vertex-trainer")
    except Exception:
        return "dev"
