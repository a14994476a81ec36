"""Credentials and HTTP sessions for every Google API the tool calls (Vertex AI, Cloud Build,
Artifact Registry, Cloud Storage, Cloud Logging).

One rule everywhere: an `http://` endpoint is a local emulator and gets an anonymous plain
session; anything else gets Application Default Credentials, or a clear exit-2 message saying how
to log in (nothing is sent). google-auth and requests are imported only when a session is made.
"""

from __future__ import annotations

from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.settings import is_emulator

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
USER_AGENT = "vertex-trainer"

__all__ = ["SCOPES", "access_token", "credentials", "is_emulator", "plain_session", "session"]


def credentials():
    """Application Default Credentials, or UserError (exit 2) telling the user how to log in."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        creds, _ = google.auth.default(scopes=list(SCOPES))
    except DefaultCredentialsError as exc:
        raise UserError(
            "no Google Cloud credentials found (Application Default Credentials); nothing was sent",
            hint="run `gcloud auth application-default login` on a workstation; in CI use Workload "
            "Identity Federation (google-github-actions/auth) or the build's service account; "
            "or set GOOGLE_APPLICATION_CREDENTIALS",
        ) from exc
    return creds


def plain_session():
    """A requests session with our User-Agent and no credentials."""
    import requests

    s = requests.Session()
    s.headers["User-Agent"] = f"{USER_AGENT}/{_version()}"
    return s


def session(endpoint: str):
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
    return creds.token


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("vertex-trainer")
    except Exception:
        return "dev"
